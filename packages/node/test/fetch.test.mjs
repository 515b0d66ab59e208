// withIdemgate around a Fetch API handler, served on a real port.
import assert from "node:assert/strict";
import { test } from "node:test";
import { withIdemgate } from "../dist/esm/index.js";
import { post, SECRET } from "./helpers.mjs";
import { listenFetch } from "./node-server.mjs";
import { originScenarios, paymentsRoute } from "./origin-scenarios.mjs";

function paymentsHandler(route) {
  return async (request, forwarded) => {
    if (new URL(request.url).pathname !== "/payments") return new Response(null, { status: 404 });
    const body = new Uint8Array(await request.arrayBuffer());
    const answer = await route.handle({ url: request.url, forwarded, body });
    return new Response(JSON.stringify(answer.json), {
      status: answer.status,
      headers: { "content-type": "application/json", "set-cookie": "session=caller-1" },
    });
  };
}

originScenarios("fetch handler", (options, route) => listenFetch(withIdemgate(paymentsHandler(route), options)));

test("fetch handler: options from the handler's arguments, as a Worker reads its env", async () => {
  const route = paymentsRoute();
  const handler = withIdemgate(
    async (request, forwarded, env) => {
      assert.equal(env.FORWARD_SECRET, SECRET);
      return paymentsHandler(route)(request, forwarded);
    },
    (_request, env) => ({ secret: env.FORWARD_SECRET }),
  );
  const origin = await listenFetch((request) => handler(request, { FORWARD_SECRET: SECRET }));
  try {
    assert.equal((await post(origin.base)).status, 201);
  } finally {
    await origin.close();
  }
});

test("fetch handler: behind a proxy that strips a prefix, pathAndQuery says what idemgate sent", async () => {
  const route = paymentsRoute();
  const handler = withIdemgate(paymentsHandler(route), {
    secret: SECRET,
    pathAndQuery: (request) => {
      const url = new URL(request.url);
      return "/api" + url.pathname + url.search;
    },
  });
  const origin = await listenFetch(handler);
  try {
    const answer = await post(origin.base, { pathAndQuery: "/payments", signedPathAndQuery: "/api/payments" });
    assert.equal(answer.status, 201, answer.text);
    const signedAsReceived = await post(origin.base, { pathAndQuery: "/payments" });
    assert.equal(signedAsReceived.status, 401);
  } finally {
    await origin.close();
  }
});
