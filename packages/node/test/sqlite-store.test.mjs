// SqliteFenceStore on better-sqlite3: the ledger's rules of
// crates/demo-origin/src/ledger.rs, plus a running forward's lease.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { SqliteFenceStore } from "../dist/esm/index.js";

const HASH = "a".repeat(64);
const OTHER_HASH = "b".repeat(64);
const forward = (epoch, bodySha256 = HASH, key = "k", scope = "s") => ({ scope, key, epoch, bodySha256 });
const result = (text) => ({ status: 201, headers: [["content-type", "text/plain"]], body: new TextEncoder().encode(text) });

function memoryStore(options = {}) {
  return new SqliteFenceStore(new Database(":memory:"), options);
}

test("a completed key answers every later forward with its first result", () => {
  const store = memoryStore();
  assert.deepEqual(store.begin(forward(1)), { outcome: "proceed" });
  store.complete(forward(1), result("first"));
  for (const epoch of [1, 2]) {
    const fence = store.begin(forward(epoch));
    assert.equal(fence.outcome, "completed");
    assert.equal(fence.result.status, 201);
    assert.deepEqual(fence.result.headers, [["content-type", "text/plain"]]);
    assert.equal(new TextDecoder().decode(fence.result.body), "first");
  }
  // The repeat at epoch 2 raised the fence, as the ledger does.
  assert.deepEqual(store.begin(forward(1)), { outcome: "stale-epoch", highestEpoch: 2 });
});

test("a lower epoch than one accepted is refused, and does not lower the fence", () => {
  const store = memoryStore();
  assert.equal(store.begin(forward(3)).outcome, "proceed");
  assert.deepEqual(store.begin(forward(1)), { outcome: "stale-epoch", highestEpoch: 3 });
  assert.deepEqual(store.begin(forward(2)), { outcome: "stale-epoch", highestEpoch: 3 });
});

test("another body under the key is refused", () => {
  const store = memoryStore();
  store.begin(forward(1));
  store.complete(forward(1), result("first"));
  assert.deepEqual(store.begin(forward(2, OTHER_HASH)), { outcome: "body-mismatch" });
});

test("keys are per scope: the same key in another scope is its own", () => {
  const store = memoryStore();
  store.begin(forward(5));
  store.complete(forward(5), result("first"));
  assert.equal(store.begin(forward(1, OTHER_HASH, "k", "another-scope")).outcome, "proceed");
});

test("a running forward holds its key until its lease ends", () => {
  let now = 1000;
  const store = memoryStore({ leaseSeconds: 60, now: () => now });
  assert.equal(store.begin(forward(1)).outcome, "proceed");
  assert.deepEqual(store.begin(forward(2)), { outcome: "in-progress", retryAfterSeconds: 60 });
  now += 59;
  assert.deepEqual(store.begin(forward(2)), { outcome: "in-progress", retryAfterSeconds: 1 });
  now += 1;
  assert.equal(store.begin(forward(2)).outcome, "proceed", "a later epoch takes over an expired lease");
  assert.deepEqual(store.begin(forward(1)), { outcome: "stale-epoch", highestEpoch: 2 });
});

test("a released key runs again at a later epoch; the first completed result stays", () => {
  const store = memoryStore();
  store.begin(forward(1));
  store.release(forward(1));
  assert.equal(store.begin(forward(2)).outcome, "proceed");
  store.complete(forward(2), result("second"));
  store.complete(forward(2), result("overwritten?"));
  assert.equal(new TextDecoder().decode(store.begin(forward(3)).result.body), "second");
});

test("a release by a superseded forward leaves the later one's claim", () => {
  let now = 0;
  const store = memoryStore({ leaseSeconds: 10, now: () => now });
  store.begin(forward(1));
  now = 10;
  assert.equal(store.begin(forward(2)).outcome, "proceed");
  store.release(forward(1));
  assert.equal(store.begin(forward(3)).outcome, "in-progress");
});

test("processes sharing the database file decide one at a time", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "idemgate-store-")), "fences.db");
  new Database(path).pragma("journal_mode = WAL");
  const distUrl = new URL("../dist/cjs/index.js", import.meta.url);
  const code = `
    const { parentPort, workerData } = require("node:worker_threads");
    const Database = require(${JSON.stringify(new URL("../node_modules/better-sqlite3/lib/index.js", import.meta.url).pathname)});
    const { SqliteFenceStore } = require(${JSON.stringify(distUrl.pathname)});
    const store = new SqliteFenceStore(new Database(workerData.path, { timeout: 10000 }));
    const decided = [];
    for (let round = 0; round < 50; round++) {
      decided.push(store.begin({ scope: "s", key: "k" + round, epoch: workerData.epoch, bodySha256: "${HASH}" }).outcome);
    }
    parentPort.postMessage(decided);
  `;
  const runs = await Promise.all(
    [1, 2, 3, 4].map(
      (epoch) =>
        new Promise((resolve, reject) => {
          const worker = new Worker(code, { eval: true, workerData: { path, epoch } });
          worker.once("message", resolve);
          worker.once("error", reject);
        }),
    ),
  );
  for (let round = 0; round < 50; round++) {
    const outcomes = runs.map((decided) => decided[round]);
    // One runs; a lower epoch than its is refused, a higher one waits for it.
    assert.equal(outcomes.filter((outcome) => outcome === "proceed").length, 1, `round ${round}: ${outcomes}`);
    assert.ok(outcomes.every((outcome) => ["proceed", "stale-epoch", "in-progress"].includes(outcome)));
  }
});
