// Plaid's webhook JWT through `jose` (the library Plaid's documentation
// uses), offline, both ways:
//
//   node tests/official/plaid.mjs INPUT.json
//
// INPUT.json (written by crates/idemgate-core/tests/official_libraries.rs):
//   { "now": <unix seconds>, "kid", "body", "core": { "token", "jwk" } }
// Prints one JSON object on stdout:
//   "jose":    the library's version;
//   "signed":  { "token", "jwk" }: `body` as Plaid signs it, by jose, with a
//              fresh P-256 key pair (ES256, header kid, claims iat and
//              request_body_sha256), and the key's public JWK;
//   "checked": { "ok", "claims", "error" }: the core's own token, verified
//              by jose with the core's JWK, as Plaid's docs verify one.

import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { SignJWT, exportJWK, generateKeyPair, importJWK, jwtVerify } from "jose";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const version = JSON.parse(
  readFileSync(new URL("./node_modules/jose/package.json", import.meta.url)),
).version;
const sha256 = (text) => createHash("sha256").update(text, "utf8").digest("hex");

const { publicKey, privateKey } = await generateKeyPair("ES256");
const token = await new SignJWT({ request_body_sha256: sha256(input.body) })
  .setProtectedHeader({ alg: "ES256", kid: input.kid, typ: "JWT" })
  .setIssuedAt(input.now)
  .sign(privateKey);
const jwk = await exportJWK(publicKey);

let checked;
try {
  const key = await importJWK(input.core.jwk, "ES256");
  const { payload, protectedHeader } = await jwtVerify(input.core.token, key, {
    algorithms: ["ES256"],
    currentDate: new Date(input.now * 1000),
    maxTokenAge: "5 min",
  });
  const ok = protectedHeader.kid === input.kid && payload.request_body_sha256 === sha256(input.body);
  checked = { ok, claims: payload };
} catch (error) {
  checked = { ok: false, error: String(error) };
}

process.stdout.write(JSON.stringify({ jose: version, signed: { token, jwk }, checked }) + "\n");
