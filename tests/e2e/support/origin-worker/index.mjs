// The end-to-end tests' origin Worker (SPEC §5, v5): a payments API on
// Workers that idemgate reaches through a service binding, with no public
// URL. It checks idemgate's signed headers with the project's own Node
// verifier (packages/node, bundled from its source), charges each
// (scope, key) once, and records what it got, which the tests read at
// `GET /__records`.
//
// Paths: `/flaky/...` answers 503 to a key's first forward (the async
// route's retry then succeeds); anything else is charged at once.
import { verify } from "../../../../packages/node/src/verify.ts";

const records = { calls: 0, verified: 0, refused: [], charged: {}, attempts: {} };

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/__records") {
      return Response.json(records);
    }
    if (request.method === "GET" && url.pathname === "/__idemgate/health") {
      return Response.json({ status: "ok", service: "origin worker" });
    }
    records.calls += 1;
    const body = new Uint8Array(await request.arrayBuffer());
    let forwarded;
    try {
      forwarded = await verify({
        method: request.method,
        pathAndQuery: url.pathname + url.search,
        headers: request.headers,
        body,
        secret: env.FORWARD_SECRET,
      });
    } catch (error) {
      records.refused.push(String(error && error.code ? error.code : error));
      return Response.json({ refused: String(error) }, { status: 401 });
    }
    records.verified += 1;
    const id = `${forwarded.scope}|${forwarded.key}`;
    records.attempts[id] = (records.attempts[id] || 0) + 1;
    if (url.pathname.startsWith("/flaky/") && records.attempts[id] === 1) {
      return Response.json({ busy: true }, { status: 503 });
    }
    records.charged[id] = (records.charged[id] || 0) + 1;
    return Response.json(
      { charged: forwarded.key, epoch: forwarded.epoch, host: url.host },
      { status: 201 },
    );
  },
};
