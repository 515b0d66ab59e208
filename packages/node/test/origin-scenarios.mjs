// The same scenarios for each framework: a real HTTP server running an
// origin app behind the framework's middleware, driven over loopback.
//
// `start(options)` starts the framework's app with the middleware
// configured by `options` (secret, store) and the payments route below,
// and resolves to { base, close }. The route answers 201 with a charge
// number, sets the cookie session=caller-1, waits `?delay_ms=`, and fails with 500 on `?fail=1`.
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { test } from "node:test";
import Database from "better-sqlite3";
import { SqliteFenceStore } from "../dist/esm/index.js";
import { forwardHeaders, post, SECRET, sleep } from "./helpers.mjs";

/** What the route does, shared by every framework's app. */
export function paymentsRoute() {
  const charges = [];
  /** Every verified forward the route was handed, as handed. */
  const forwards = [];
  async function handle({ url, forwarded, body }) {
    forwards.push(forwarded);
    const params = new URL(url, "http://origin").searchParams;
    await sleep(Number(params.get("delay_ms") ?? 0));
    if (params.get("fail") === "1") return { status: 500, json: { error: "boom" } };
    charges.push({ key: forwarded.key, epoch: forwarded.epoch, body: Buffer.from(body).toString() });
    return { status: 201, json: { charge: charges.length, key: forwarded.key, epoch: forwarded.epoch } };
  }
  return { charges, forwards, handle };
}

/** Sends the forward with each idempotency header given as two header lines. */
function postWithHeaderTwice(base, headers, name, body) {
  return new Promise((resolve, reject) => {
    const url = new URL(base + "/payments");
    const request = httpRequest(
      url,
      { method: "POST", headers: { ...headers, [name]: [headers[name], headers[name]] } },
      (response) => {
        let text = "";
        response.on("data", (chunk) => (text += chunk));
        response.on("end", () => resolve({ status: response.statusCode, json: JSON.parse(text) }));
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

export function originScenarios(framework, start) {
  async function withOrigin(options, run) {
    const route = paymentsRoute();
    const origin = await start({ secret: SECRET, ...options }, route);
    try {
      await run(origin.base, route);
    } finally {
      await origin.close();
    }
  }

  const withStore = (run) =>
    withOrigin({ store: new SqliteFenceStore(new Database(":memory:")) }, run);

  test(`${framework}: a signed forward reaches the route with what it says`, () =>
    withOrigin({}, async (base, route) => {
      const answer = await post(base, { key: "order-1", epoch: 7, pathAndQuery: "/payments?currency=eur" });
      assert.equal(answer.status, 201, answer.text);
      assert.deepEqual(answer.json, { charge: 1, key: "order-1", epoch: 7 });
      assert.deepEqual(route.charges, [{ key: "order-1", epoch: 7, body: '{"amount":1000}' }]);
    }));

  test(`${framework}: a reconciled, stale forward reaches the route with its source and staleness`, () =>
    withOrigin({}, async (base, route) => {
      const live = await post(base, { epoch: 7 });
      assert.equal(live.status, 201, live.text);
      const late = await post(base, { epoch: 8, source: "reconciliation", stale: true });
      assert.equal(late.status, 201, late.text);
      assert.deepEqual(
        route.forwards.map(({ epoch, source, stale }) => ({ epoch, source, stale })),
        [
          { epoch: 7, source: null, stale: false },
          { epoch: 8, source: "reconciliation", stale: true },
        ],
      );
      // Signed by v2: not to be removed or added on the way.
      const stripped = await post(base, { source: "reconciliation", stale: true, headers: { "idempotency-source": undefined } });
      assert.equal(stripped.json.code, "bad-signature");
      const added = await post(base, { headers: { "idempotency-stale": "true" } });
      assert.equal(added.json.code, "bad-signature");
      const withoutV2 = await post(base, { headers: { "idempotency-signature-v2": undefined } });
      assert.equal(withoutV2.json.code, "missing-header");
      assert.equal(route.forwards.length, 2);
    }));

  test(`${framework}: an async route's retry with an hours-old sender signature passes`, () =>
    withOrigin({}, async (base) => {
      const stale = Math.floor(Date.now() / 1000) - 5 * 3600;
      const answer = await post(base, { headers: { "stripe-signature": `t=${stale},v1=${"5".repeat(64)}` } });
      assert.equal(answer.status, 201, answer.text);
    }));

  test(`${framework}: unsigned, tampered and stale forwards get 401 problem+json`, () =>
    withOrigin({}, async (base, route) => {
      const unsigned = await fetch(base + "/payments", { method: "POST", body: "{}" });
      assert.equal(unsigned.status, 401);
      assert.equal(unsigned.headers.get("content-type"), "application/problem+json");
      assert.equal((await unsigned.json()).code, "missing-header");
      const tampered = await post(base, { headers: { "idempotency-epoch": "8" }, epoch: 7 });
      assert.equal(tampered.status, 401);
      assert.equal(tampered.json.code, "bad-signature");
      const wrongSecret = await post(base, { secret: "whsec_other" });
      assert.equal(wrongSecret.json.code, "bad-signature");
      const stale = await post(base, { signedAt: Math.floor(Date.now() / 1000) - 3600 });
      assert.equal(stale.json.code, "stale");
      assert.equal(stale.json.status, 401);
      assert.deepEqual(route.charges, []);
    }));

  test(`${framework}: an idempotency header sent twice is refused`, () =>
    withOrigin({}, async (base, route) => {
      const body = '{"amount":1000}';
      const headers = await forwardHeaders({ body, source: "reconciliation", stale: true });
      const names = ["idempotency-key", "idempotency-signature", "idempotency-signature-v2", "idempotency-source", "idempotency-stale"];
      for (const name of names) {
        const answer = await postWithHeaderTwice(base, headers, name, body);
        assert.equal(answer.status, 401, name);
        assert.equal(answer.json.code, "malformed-header", name);
      }
      assert.deepEqual(route.charges, []);
    }));

  test(`${framework} with a store: a repeated key gets the first result, without its cookie`, () =>
    withStore(async (base, route) => {
      const first = await post(base, { epoch: 1 });
      const again = await post(base, { epoch: 2 });
      assert.equal(first.status, 201);
      assert.match(first.headers.get("set-cookie"), /^session=caller-1/);
      assert.equal(again.status, 201);
      assert.deepEqual(again.json, first.json);
      assert.equal(again.headers.get("set-cookie"), null);
      assert.equal(again.headers.get("content-length"), String(Buffer.byteLength(again.text)));
      assert.equal(route.charges.length, 1);
    }));

  test(`${framework} with a store: a lower epoch gets 409, another body 422`, () =>
    withStore(async (base, route) => {
      assert.equal((await post(base, { epoch: 5 })).status, 201);
      const stale = await post(base, { epoch: 4 });
      assert.equal(stale.status, 409);
      assert.equal(stale.headers.get("content-type"), "application/problem+json");
      assert.equal(stale.json.highest_epoch, 5);
      const changed = await post(base, { epoch: 6, body: '{"amount":1001}' });
      assert.equal(changed.status, 422);
      assert.equal(route.charges.length, 1);
    }));

  test(`${framework} with a store: concurrent forwards of a key charge once`, () =>
    withStore(async (base, route) => {
      const pathAndQuery = "/payments?delay_ms=200";
      const answers = await Promise.all([1, 2, 3, 4].map((epoch) => post(base, { epoch, pathAndQuery })));
      const statuses = answers.map((answer) => answer.status);
      assert.equal(statuses.filter((status) => status === 201).length, 1, String(statuses));
      // The others came while it ran: lower epochs than the first to run
      // are refused, higher ones are told to retry.
      for (const answer of answers.filter((answer) => answer.status !== 201)) {
        assert.ok([409, 503].includes(answer.status), String(statuses));
        if (answer.status === 503) assert.ok(Number(answer.headers.get("retry-after")) >= 1);
      }
      const retry = await post(base, { epoch: 9, pathAndQuery });
      assert.equal(retry.status, 201);
      assert.equal(retry.json.charge, 1);
      assert.equal(route.charges.length, 1);
    }));

  test(`${framework} with a store: a failed forward is not kept, and its retry runs`, () =>
    withStore(async (base, route) => {
      const failed = await post(base, { epoch: 1, pathAndQuery: "/payments?fail=1" });
      assert.equal(failed.status, 500);
      const retried = await post(base, { epoch: 2 });
      assert.equal(retried.status, 201, "a 500 is not replayed: idemgate retries it");
      assert.equal(retried.json.charge, 1);
    }));
}
