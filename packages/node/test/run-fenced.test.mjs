// runFenced's rules, with an in-memory store: what is kept, what is
// released, and what happens when the store fails after the handler ran.
import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import { isAsyncRetryableStatus, runFenced, SqliteFenceStore } from "../dist/esm/index.js";

const forward = (epoch) => ({ scope: "s", key: "k", epoch, bodySha256: "a".repeat(64) });
const answer = (status) => async () => ({ status, headers: [["set-cookie", "c=1"], ["x-charge", "1"]], body: new Uint8Array([1]) });

test("a kept result loses Set-Cookie; the handler's own answer keeps it", async () => {
  const store = new SqliteFenceStore(new Database(":memory:"));
  const handled = await runFenced(store, forward(1), answer(201));
  assert.equal(handled.kind, "handled");
  assert.deepEqual(handled.result.headers, [["set-cookie", "c=1"], ["x-charge", "1"]]);
  const replayed = await runFenced(store, forward(2), answer(201));
  assert.equal(replayed.kind, "replayed");
  assert.deepEqual(replayed.result.headers, [["x-charge", "1"]]);
});

test("a 4xx is kept by default (sync routes), released with isAsyncRetryableStatus", async () => {
  const sync = new SqliteFenceStore(new Database(":memory:"));
  await runFenced(sync, forward(1), answer(400));
  assert.equal((await runFenced(sync, forward(2), answer(201))).result.status, 400);
  const asyncStore = new SqliteFenceStore(new Database(":memory:"));
  const options = { isRetryableStatus: isAsyncRetryableStatus };
  await runFenced(asyncStore, forward(1), answer(400), options);
  const retried = await runFenced(asyncStore, forward(2), answer(201), options);
  assert.deepEqual([retried.kind, retried.result.status], ["handled", 201]);
});

test("a handler that throws releases the key, and the error goes on", async () => {
  const store = new SqliteFenceStore(new Database(":memory:"));
  await assert.rejects(
    runFenced(store, forward(1), async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal((await runFenced(store, forward(2), answer(201))).kind, "handled");
});

test("a store that fails after the handler ran: the answer is still given, the error reported", async () => {
  const reported = [];
  const failing = {
    begin: () => ({ outcome: "proceed" }),
    complete: () => {
      throw new Error("disk full");
    },
    release: () => {},
  };
  const handled = await runFenced(failing, forward(1), answer(201), { onStoreError: (error) => reported.push(error.message) });
  assert.deepEqual([handled.kind, handled.result.status], ["handled", 201]);
  assert.deepEqual(reported, ["disk full"]);
});
