// verify() against every case of tests/vectors/forwards.json, with the
// headers in each form the package accepts.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { IdemgateVerifyError, verify } from "../dist/esm/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/forwards.json", import.meta.url), "utf8"));

/** How an HTTP library hands headers over: Node's req.headers joins a repeated one with ", ". */
function nodeHeaders(pairs) {
  const joined = {};
  for (const [name, value] of pairs) {
    const lower = name.toLowerCase();
    joined[lower] = lower in joined ? `${joined[lower]}, ${value}` : value;
  }
  return joined;
}

const headerForms = {
  "a list of pairs": (pairs) => pairs,
  "a Fetch Headers": (pairs) => new Headers(pairs),
  "a plain object as Node's req.headers": nodeHeaders,
  "a plain object with arrays": (pairs) => {
    const object = {};
    for (const [name, value] of pairs) (object[name] ??= []).push(value);
    return object;
  },
};

async function answer(vector, headers) {
  try {
    const forwarded = await verify({
      method: vector.request.method,
      pathAndQuery: vector.request.path_and_query,
      headers,
      body: Buffer.from(vector.request.body_base64, "base64"),
      secret: vector.secret,
      now: vector.now,
      toleranceSeconds: vector.tolerance_seconds,
    });
    return {
      valid: true,
      scope: forwarded.scope,
      key: forwarded.key,
      epoch: forwarded.epoch,
      body_sha256: forwarded.bodySha256,
      signed_at: forwarded.signedAt,
      source: forwarded.source,
      stale: forwarded.stale,
    };
  } catch (error) {
    if (!(error instanceof IdemgateVerifyError)) throw error;
    return { valid: false, error: error.code };
  }
}

test("the vectors cover every error category", () => {
  const categories = new Set(vectors.map((vector) => vector.expected.error ?? "valid"));
  assert.deepEqual([...categories].sort(), ["bad-signature", "malformed-header", "missing-header", "stale", "valid"]);
});

for (const vector of vectors) {
  test(`vector ${vector.name}`, async () => {
    for (const [form, make] of Object.entries(headerForms)) {
      assert.deepEqual(await answer(vector, make(vector.request.headers)), vector.expected, `headers as ${form}`);
    }
  });
}
