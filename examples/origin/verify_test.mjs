// Runs the README's Node.js snippet against the test vector (node:test).
import assert from "node:assert/strict";
import { test } from "node:test";
import { verifyIdemgate } from "./verify.mjs";

const secret = "whsec_test";
const body = Buffer.from('{"amount":1000}');
const scope = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd";
const headers = {
  "idempotency-key": '"order-42"',
  "idempotency-scope": scope,
  "idempotency-epoch": "1700000000000000",
  "idempotency-signature":
    "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53",
};
const T = 1700000000;
const verify = (h = headers, b = body, s = secret, now = T, method = "POST", path = "/payments?currency=eur") =>
  verifyIdemgate(h, method, path, b, s, now);

test("accepts the test vector", () => {
  assert.deepEqual(verify(), {
    scope,
    key: "order-42",
    epoch: 1700000000000000,
    bodySha256: "612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc",
  });
});

test("rejects a wrong secret, and a modified body, key, scope, epoch, method or path", () => {
  assert.throws(() => verify(headers, body, "whsec_other"), /bad/);
  assert.throws(() => verify(headers, Buffer.from('{"amount":1001}')), /bad/);
  assert.throws(() => verify({ ...headers, "idempotency-key": '"order-43"' }), /bad/);
  assert.throws(() => verify({ ...headers, "idempotency-scope": "b".repeat(64) }), /bad/);
  assert.throws(() => verify({ ...headers, "idempotency-epoch": "1700000000000001" }), /bad/);
  assert.throws(() => verify(headers, body, secret, T, "PUT"), /bad/);
  assert.throws(() => verify(headers, body, secret, T, "POST", "/payments?currency=usd"), /bad/);
});

test("rejects stale, future and malformed headers", () => {
  assert.throws(() => verify(headers, body, secret, T + 301), /stale/);
  assert.throws(() => verify(headers, body, secret, T - 301), /stale/);
  assert.throws(() => verify({ ...headers, "idempotency-epoch": "0" }), /malformed/);
  assert.throws(() => verify({ ...headers, "idempotency-key": "order-42" }), /malformed/);
  assert.throws(() => verify({ ...headers, "idempotency-scope": "ABC" }), /malformed/);
  assert.throws(() => verify({ ...headers, "idempotency-signature": "v1=00" }), /malformed/);
  // Forms idemgate never writes: a leading zero in the epoch or in t, uppercase hex.
  const signature = headers["idempotency-signature"];
  assert.throws(() => verify({ ...headers, "idempotency-epoch": `0${headers["idempotency-epoch"]}` }), /malformed/);
  assert.throws(() => verify({ ...headers, "idempotency-signature": signature.replace("t=", "t=0") }), /malformed/);
  assert.throws(() => verify({ ...headers, "idempotency-signature": signature.toUpperCase().replace("T=", "t=").replace("V1=", "v1=") }), /malformed/);
});
