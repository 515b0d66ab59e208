// The examples of docs/origin.md marked `<!-- doc-test: packages/node NAME -->`,
// run as the page shows them: each is written to a module inside this
// package (where `import ... from "idemgate-verify"` resolves to the package
// itself, by its name) and driven with forwards signed as idemgate signs
// them. The documentation's own test (crates/idemgate-core/tests/docs.rs)
// checks that every such block names an example this file runs.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { forwardHeaders, post, SECRET } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const PAGE = path.join(here, "..", "..", "..", "docs", "origin.md");
const EXAMPLES = ["verify", "express", "hono", "fetch"];

/** The page's examples for this package, by name. */
function examples() {
  const lines = readFileSync(PAGE, "utf8").split("\n");
  const found = new Map();
  for (let at = 0; at < lines.length; at++) {
    const marker = /^\s*<!-- doc-test: packages\/node (\S+) -->\s*$/.exec(lines[at]);
    if (!marker) continue;
    const open = lines.findIndex((line, index) => index > at && line.trim() !== "");
    assert.match(lines[open], /^\s*```js\s*$/, `${PAGE}:${open + 1}: a js block after the marker`);
    const close = lines.findIndex((line, index) => index > open && line.trim() === "```");
    found.set(marker[1], lines.slice(open + 1, close).join("\n") + "\n");
  }
  return found;
}

// Inside the package (so that it imports itself by name), outside test/
// (so that the test runner never takes an example for a test file).
const dir = path.join(here, "..", ".docs-examples");
const scratch = mkdtempSync(path.join(tmpdir(), "idemgate-docs-"));
const cwd = process.cwd();

before(() => {
  mkdirSync(dir, { recursive: true });
  // The examples open "fences.db" where they run, and read the secret from the environment.
  process.chdir(scratch);
  process.env.FORWARD_SECRET = SECRET;
});

after(() => {
  process.chdir(cwd);
  rmSync(dir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

/** Imports the example `name` as the module the page shows. */
async function load(name) {
  const code = examples().get(name);
  assert.ok(code, `docs/origin.md has no example ${name}`);
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(file, code);
  return import(pathToFileURL(file).href);
}

const BODY = '{"amount":1000}';

test("docs/origin.md shows exactly the examples this file runs", () => {
  assert.deepEqual([...examples().keys()].sort(), [...EXAMPLES].sort());
});

test("verify: the test vector verifies, as the comment says", async () => {
  const printed = [];
  const log = console.log;
  // As console.log shows them (join would print null as nothing).
  console.log = (...args) => printed.push(args.map(String).join(" "));
  try {
    await load("verify");
  } finally {
    console.log = log;
  }
  assert.deepEqual(printed, ["order-42 1700000000000000 null false"]);
});

test("express: verifies, charges once, replays, and fences", async () => {
  const { app } = await load("express");
  const server = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    const epoch = 1_700_000_000_000_000;
    const first = await post(base, { body: BODY, epoch });
    assert.equal(first.status, 201);
    assert.deepEqual(first.json, { charged: 1000, key: "order-42", epoch });
    // A retry with a higher epoch: the first result, the handler not run
    // again (the epoch in the answer is the first one's).
    const retry = await post(base, { body: BODY, epoch: epoch + 1 });
    assert.equal(retry.status, 201);
    assert.deepEqual(retry.json, first.json);
    // The superseded forward, arriving late; another body under the key.
    assert.equal((await post(base, { body: BODY, epoch: epoch - 1 })).status, 409);
    assert.equal((await post(base, { body: '{"amount":9999}', epoch: epoch + 2 })).status, 422);
    // Not signed by idemgate.
    assert.equal((await post(base, { body: BODY, key: "order-43", secret: "whsec_other" })).status, 401);
  } finally {
    server.close();
  }
});

test("hono: verifies with the secret from c.env", async () => {
  const { app } = await load("hono");
  const env = { FORWARD_SECRET: SECRET };
  const signed = await app.request("/payments", { method: "POST", headers: await forwardHeaders({ body: BODY }), body: BODY }, env);
  assert.equal(signed.status, 201);
  assert.deepEqual(await signed.json(), { charged: 1000, key: "order-42" });
  const forged = await app.request(
    "/payments",
    { method: "POST", headers: await forwardHeaders({ body: BODY, secret: "whsec_other" }), body: BODY },
    env,
  );
  assert.equal(forged.status, 401);
  assert.equal(forged.headers.get("content-type"), "application/problem+json");
});

test("fetch: a Worker's handler gets the verified forward", async () => {
  const worker = (await load("fetch")).default;
  const env = { FORWARD_SECRET: SECRET };
  const request = async (secret) =>
    new Request("https://origin.example/payments", {
      method: "POST",
      headers: await forwardHeaders({ body: BODY, secret }),
      body: BODY,
    });
  const signed = await worker.fetch(await request(SECRET), env);
  assert.equal(signed.status, 201);
  assert.deepEqual(await signed.json(), { charged: 1000, key: "order-42" });
  assert.equal((await worker.fetch(await request("whsec_other"), env)).status, 401);
});
