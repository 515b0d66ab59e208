// verifyAuditChain() and the verify-audit CLI against every case of
// tests/vectors/audit.json: the good chain verifies, each broken variant
// names its first broken entry; and readAuditExport() with the CLI against
// every hostile export of tests/vectors/audit-hostile.json; and every
// export checked against a checkpoint in tests/vectors/audit-checkpoints.json.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  isAuditHash,
  parseAuditCheckpoint,
  readAuditCheckpoint,
  readAuditExport,
  verifyAuditChain,
} from "../dist/esm/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../tests/vectors/audit.json", import.meta.url), "utf8"));
const hostile = JSON.parse(readFileSync(new URL("../../../tests/vectors/audit-hostile.json", import.meta.url), "utf8"));
const checkpoints = JSON.parse(readFileSync(new URL("../../../tests/vectors/audit-checkpoints.json", import.meta.url), "utf8"));
const cli = fileURLToPath(new URL("../bin/verify-audit.mjs", import.meta.url));

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
    assert.deepEqual(await readAndVerify(JSON.stringify(vector.chain)), vector.expected);
  });
}

async function readAndVerify(text) {
  let entries;
  try {
    entries = readAuditExport(text);
  } catch {
    return { valid: false, error: "unreadable" };
  }
  return asExpected(await verifyAuditChain(entries));
}

const hostileDir = mkdtempSync(join(tmpdir(), "verify-audit-hostile-"));
for (const vector of hostile) {
  test(`hostile audit vector ${vector.name}`, async () => {
    const { expected } = vector;
    if (vector.export !== undefined) {
      assert.deepEqual(await readAndVerify(vector.export), expected, vector.description);
    }
    const file = join(hostileDir, `${vector.name}.json`);
    writeFileSync(file, vector.export !== undefined ? Buffer.from(vector.export, "utf8") : Buffer.from(vector.export_base64, "base64"));
    const run = spawnSync(process.execPath, [cli, file], { encoding: "utf8" });
    if (expected.valid) {
      assert.equal(run.status, 0, run.stderr);
      assert.ok(run.stdout.startsWith(`ok: ${expected.entries} entries, head `), run.stdout);
    } else if (expected.error !== undefined) {
      assert.deepEqual([run.status, run.stdout], [2, ""]);
      assert.ok(run.stderr.startsWith("verify-audit: "), run.stderr);
    } else {
      const line = `broken: entry ${expected.index} (seq ${expected.seq}) breaks the chain: ${expected.fault}\n`;
      assert.deepEqual([run.status, run.stdout], [1, line], run.stderr);
    }
  });
}

test("the verify-audit CLI says ok or names the broken entry", () => {
  const dir = mkdtempSync(join(tmpdir(), "verify-audit-"));
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

// What --head names, read by the library as the command reads it: a hash,
// SEQ:HASH, or a checkpoint file's text; null when it cannot be read.
function optionsOf(checkpoint) {
  try {
    if (checkpoint.file !== undefined) return { checkpoint: readAuditCheckpoint(checkpoint.file) };
    return isAuditHash(checkpoint.arg) ? { head: checkpoint.arg } : { checkpoint: parseAuditCheckpoint(checkpoint.arg) };
  } catch {
    return null;
  }
}

const checkpointDir = mkdtempSync(join(tmpdir(), "verify-audit-checkpoints-"));
test("the checkpoint vectors are many", () => assert.ok(checkpoints.cases.length > 40));
for (const vector of checkpoints.cases) {
  test(`audit checkpoint vector ${vector.name}`, async () => {
    const { expected } = vector;
    const chain = checkpoints.chains[vector.export.chain].slice(0, vector.export.length);
    assert.equal(chain.length, vector.export.length);
    const text = JSON.stringify(chain);
    assert.deepEqual(asExpected(await verifyAuditChain(chain)), vector.expected_without_checkpoint);
    const options = optionsOf(vector.checkpoint);
    if (options === null) {
      assert.deepEqual({ valid: false, error: "unreadable" }, expected, vector.description);
    } else {
      assert.deepEqual(asExpected(await verifyAuditChain(chain, options)), expected, vector.description);
      assert.deepEqual(asExpected(await verifyAuditChain(readAuditExport(text), options)), expected);
    }
    const exported = join(checkpointDir, `${vector.name}.export.json`);
    writeFileSync(exported, text);
    let head = vector.checkpoint.arg;
    if (vector.checkpoint.file !== undefined) {
      head = join(checkpointDir, `${vector.name}.checkpoint.json`);
      writeFileSync(head, vector.checkpoint.file, "utf8");
    }
    const run = spawnSync(process.execPath, [cli, exported, "--head", head], { encoding: "utf8" });
    if (vector.output !== undefined) {
      assert.deepEqual([run.status, run.stdout], [expected.valid ? 0 : 1, `${vector.output}\n`], run.stderr);
    } else {
      assert.deepEqual([run.status, run.stdout], [2, ""]);
      assert.ok(run.stderr.startsWith("verify-audit: --head "), run.stderr);
    }
  });
}

test("--head without its value is a usage error", () => {
  const run = spawnSync(process.execPath, [cli, "-", "--head"], { encoding: "utf8", input: "[]" });
  assert.equal(run.status, 2);
  assert.ok(run.stderr.startsWith("usage: verify-audit"), run.stderr);
});
