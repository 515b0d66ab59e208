// What the vectors cannot say: JavaScript's number limit, the README's
// vector, the secret's forms, sign(), and the CommonJS build.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";
import { IdemgateVerifyError, sign, verify } from "../dist/esm/index.js";

// The README's test vector, computed independently with Python's hmac.
const README = {
  method: "POST",
  pathAndQuery: "/payments?currency=eur",
  body: '{"amount":1000}',
  secret: "whsec_test",
  now: 1700000000,
  headers: {
    "idempotency-key": '"order-42"',
    "idempotency-scope": "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd",
    "idempotency-epoch": "1700000000000000",
    "idempotency-signature": "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53",
  },
};

test("the README's vector verifies, and sign() writes its signature", async () => {
  assert.deepEqual(await verify(README), {
    scope: README.headers["idempotency-scope"],
    key: "order-42",
    epoch: 1700000000000000,
    bodySha256: "612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc",
    signedAt: 1700000000,
  });
  const signature = await sign({
    ...README,
    scope: README.headers["idempotency-scope"],
    key: "order-42",
    epoch: 1700000000000000,
    signedAt: 1700000000,
  });
  assert.equal(signature, README.headers["idempotency-signature"]);
});

test("the secret may be bytes and the body a string, a Uint8Array or an ArrayBuffer", async () => {
  const bytes = new TextEncoder().encode(README.body);
  for (const body of [README.body, bytes, bytes.buffer, Buffer.from(bytes)]) {
    const forwarded = await verify({ ...README, body, secret: new TextEncoder().encode("whsec_test") });
    assert.equal(forwarded.key, "order-42");
  }
});

test("an epoch above 2^53 - 1 is refused rather than rounded", async () => {
  const epoch = 2 ** 53;
  const headers = {
    ...README.headers,
    "idempotency-epoch": String(epoch),
    "idempotency-signature": await sign({ ...README, scope: README.headers["idempotency-scope"], key: "order-42", epoch, signedAt: 1700000000 }),
  };
  await assert.rejects(verify({ ...README, headers }), (error) => {
    assert.ok(error instanceof IdemgateVerifyError);
    assert.equal(error.code, "malformed-header");
    assert.equal(error.header, "Idempotency-Epoch");
    assert.match(error.message, /2\^53/);
    return true;
  });
});

test("a t far beyond any clock is stale, not malformed, as in the Rust crate", async () => {
  const headers = { ...README.headers, "idempotency-signature": `t=18446744073709551615,v1=${"0".repeat(64)}` };
  await assert.rejects(verify({ ...README, headers }), { code: "stale" });
  const beyond = { ...README.headers, "idempotency-signature": `t=18446744073709551616,v1=${"0".repeat(64)}` };
  await assert.rejects(verify({ ...README, headers: beyond }), { code: "malformed-header" });
});

test("the clock defaults to the system's", async () => {
  await assert.rejects(verify({ ...README, now: undefined }), { code: "stale" });
});

test("an empty secret is a configuration error, not a verdict on the request", async () => {
  await assert.rejects(verify({ ...README, secret: "" }), TypeError);
});

test("the CommonJS build exports the same API", async () => {
  const require = createRequire(import.meta.url);
  const commonjs = require("idemgate-verify");
  assert.equal(typeof commonjs.verify, "function");
  assert.equal(typeof commonjs.withIdemgate, "function");
  assert.equal((await commonjs.verify(README)).key, "order-42");
  assert.ok(new commonjs.IdemgateVerifyError("stale", "x") instanceof Error);
});
