// What the vectors cannot say: JavaScript's number limit, the README's
// vectors, the secret's forms, sign(), and the CommonJS build.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";
import { IdemgateVerifyError, sign, verify } from "../dist/esm/index.js";

// The README's test vectors, computed independently with Python's hmac.
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
    "idempotency-signature-v2": "t=1700000000,v2=97b6ee9585b362364454abe474303feee33744719d8c5cd8c28e0ee5342d8bd1",
  },
};
// The same forward as reconciliation sends it late: v1 is the same.
const RECONCILED_STALE = {
  ...README.headers,
  "idempotency-source": "reconciliation",
  "idempotency-stale": "true",
  "idempotency-signature-v2": "t=1700000000,v2=a33ab68fdcf7820d9d99e1598b334049da0695db6e718e0636ac6ae2698b0e18",
};
const SIGNED = { scope: README.headers["idempotency-scope"], key: "order-42", epoch: 1700000000000000, signedAt: 1700000000 };

test("the README's vectors verify, and sign() writes their headers", async () => {
  const forwarded = {
    scope: README.headers["idempotency-scope"],
    key: "order-42",
    epoch: 1700000000000000,
    bodySha256: "612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc",
    signedAt: 1700000000,
  };
  assert.deepEqual(await verify(README), { ...forwarded, source: null, stale: false });
  assert.deepEqual(await verify({ ...README, headers: RECONCILED_STALE }), {
    ...forwarded,
    source: "reconciliation",
    stale: true,
  });
  const live = await sign({ ...README, ...SIGNED });
  assert.deepEqual(Object.entries(live), [
    ["idempotency-signature", README.headers["idempotency-signature"]],
    ["idempotency-signature-v2", README.headers["idempotency-signature-v2"]],
  ]);
  const late = await sign({ ...README, ...SIGNED, source: "reconciliation", stale: true });
  assert.deepEqual(Object.entries(late), [
    ["idempotency-source", "reconciliation"],
    ["idempotency-stale", "true"],
    ["idempotency-signature", RECONCILED_STALE["idempotency-signature"]],
    ["idempotency-signature-v2", RECONCILED_STALE["idempotency-signature-v2"]],
  ]);
});

test("v2 decides: v1 must be there at v2's t, but its HMAC is not checked", async () => {
  const other = await sign({ ...README, ...SIGNED, secret: "whsec_other" });
  const v1OfAnotherSecret = { ...README.headers, "idempotency-signature": other["idempotency-signature"] };
  assert.equal((await verify({ ...README, headers: v1OfAnotherSecret })).key, "order-42");
  const v2OfAnotherSecret = { ...README.headers, "idempotency-signature-v2": other["idempotency-signature-v2"] };
  await assert.rejects(verify({ ...README, headers: v2OfAnotherSecret }), { code: "bad-signature" });
  const moved = README.headers["idempotency-signature"].replace("t=1700000000", "t=1699999999");
  await assert.rejects(verify({ ...README, headers: { ...README.headers, "idempotency-signature": moved } }), {
    code: "bad-signature",
  });
  const { "idempotency-signature-v2": _, ...withoutV2 } = README.headers;
  await assert.rejects(verify({ ...README, headers: withoutV2 }), (error) => {
    assert.equal(error.code, "missing-header");
    assert.equal(error.header, "Idempotency-Signature-V2");
    return true;
  });
});

test("Idempotency-Source is one token and Idempotency-Stale only true", async () => {
  for (const [name, value] of [
    ["idempotency-source", ""],
    ["idempotency-source", "two words"],
    ["idempotency-source", "reconciliation, reconciliation"],
    ["idempotency-stale", "false"],
    ["idempotency-stale", "1"],
    ["idempotency-stale", "True"],
  ]) {
    await assert.rejects(verify({ ...README, headers: { ...RECONCILED_STALE, [name]: value } }), (error) => {
      assert.equal(error.code, "malformed-header", `${name}: ${value}`);
      assert.equal(error.header.toLowerCase(), name);
      return true;
    });
  }
  const padded = { ...RECONCILED_STALE, "idempotency-source": " reconciliation\t", "idempotency-stale": "\ttrue " };
  assert.equal((await verify({ ...README, headers: padded })).source, "reconciliation");
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
    ...(await sign({ ...README, ...SIGNED, epoch })),
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
  const at = (t) => ({
    ...README.headers,
    "idempotency-signature": `t=${t},v1=${"0".repeat(64)}`,
    "idempotency-signature-v2": `t=${t},v2=${"0".repeat(64)}`,
  });
  await assert.rejects(verify({ ...README, headers: at("18446744073709551615") }), { code: "stale" });
  await assert.rejects(verify({ ...README, headers: at("18446744073709551616") }), { code: "malformed-header" });
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
