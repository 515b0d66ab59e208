// verifyAuditChain() and the verify-audit CLI against every case of
// tests/vectors/audit.json: the good chain verifies, each broken variant
// names its first broken entry.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { verifyAuditChain } from "../dist/esm/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/audit.json", import.meta.url), "utf8"));

function asExpected(verdict) {
  return verdict.valid
    ? { valid: true, entries: verdict.entries }
    : { valid: false, index: verdict.index, seq: verdict.seq, fault: verdict.fault };
}

for (const vector of vectors) {
  test(`audit vector ${vector.name}`, async () => {
    assert.deepEqual(asExpected(await verifyAuditChain(vector.chain)), vector.expected, vector.description);
    if (vector.head !== undefined) {
      assert.deepEqual(asExpected(await verifyAuditChain(vector.chain, { head: vector.head })), vector.expected_with_head);
    }
  });
}

test("the verify-audit CLI says ok or names the broken entry", () => {
  const dir = mkdtempSync(join(tmpdir(), "verify-audit-"));
  const cli = fileURLToPath(new URL("../bin/verify-audit.mjs", import.meta.url));
  const run = (name) => {
    const vector = vectors.find((candidate) => candidate.name === name);
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(vector.chain));
    return spawnSync(process.execPath, [cli, file], { encoding: "utf8" });
  };
  const good = run("good");
  assert.equal(good.status, 0, good.stderr);
  assert.match(good.stdout, /^ok: 5 entries, head 5 /);
  const deleted = run("deleted");
  assert.equal(deleted.status, 1);
  assert.match(deleted.stdout, /entry 2 \(seq 4\) breaks the chain: seq/);
});
