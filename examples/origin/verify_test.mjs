// Runs the README's Node.js snippet against the test vector (node:test).
import assert from "node:assert/strict";
import { test } from "node:test";
import { verifyIdemgate } from "./verify.mjs";

const secret = "whsec_test";
const body = Buffer.from('{"amount":1000}');
const headers = {
  "idempotency-key": '"order-42"',
  "idempotency-epoch": "1",
  "idempotency-signature":
    "t=1700000000,v1=c46fbc568198cf52410b61e17ba4499119045ceefb61c910d5906e4c50549f96",
};

test("accepts the test vector", () => {
  assert.deepEqual(verifyIdemgate(headers, body, secret, 1700000000), { key: "order-42", epoch: 1 });
});

test("rejects a wrong secret, a modified body, key or epoch", () => {
  assert.throws(() => verifyIdemgate(headers, body, "whsec_other", 1700000000), /bad/);
  assert.throws(() => verifyIdemgate(headers, Buffer.from('{"amount":1001}'), secret, 1700000000), /bad/);
  assert.throws(() => verifyIdemgate({ ...headers, "idempotency-key": '"order-43"' }, body, secret, 1700000000), /bad/);
  assert.throws(() => verifyIdemgate({ ...headers, "idempotency-epoch": "2" }, body, secret, 1700000000), /bad/);
});

test("rejects stale, future and malformed headers", () => {
  assert.throws(() => verifyIdemgate(headers, body, secret, 1700000301), /stale/);
  assert.throws(() => verifyIdemgate(headers, body, secret, 1699999699), /stale/);
  assert.throws(() => verifyIdemgate({ ...headers, "idempotency-epoch": "0" }, body, secret, 1700000000), /malformed/);
  assert.throws(() => verifyIdemgate({ ...headers, "idempotency-key": "order-42" }, body, secret, 1700000000), /malformed/);
  assert.throws(() => verifyIdemgate({ ...headers, "idempotency-signature": "v1=00" }, body, secret, 1700000000), /malformed/);
});
