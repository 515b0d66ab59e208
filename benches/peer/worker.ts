// The benchmark's TypeScript peer: what a Workers team would deploy today
// from a public middleware, to measure idemgate's requests per second
// beside (SPEC §14). hono-idempotency, the middleware, is used as its
// README shows, with its Durable Objects store; the store's storage lives
// in one Durable Object per key, reached over RPC, as idemgate keeps one
// object per key. Everything the middleware does not do (answering the
// bench's `/__idemgate/` paths, forwarding to the origin) is the least a
// gateway needs. Nothing of the middleware is copied here: it is installed
// by `scripts/bench` (benches/peer/package.json pins its version).
import { DurableObject } from "cloudflare:workers";
import { Hono } from "hono";
import { idempotency, type IdempotencyRecord, type IdempotencyStore, type StoredResponse } from "hono-idempotency";
import { durableObjectStore } from "hono-idempotency/stores/durable-objects";

type Env = { ORIGIN_URL: string; PEER_KEYS: DurableObjectNamespace<PeerKeyObject> };

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer", "host", "content-length"]);

/** The middleware's store, each key's calls sent to that key's object. */
function storeOfObjects(env: Env): IdempotencyStore {
  const object = (key: string) => env.PEER_KEYS.get(env.PEER_KEYS.idFromName(key));
  return {
    get: (key) => object(key).get(key),
    lock: (key, record) => object(key).lock(key, record),
    complete: (key, response) => object(key).complete(key, response),
    delete: (key) => object(key).delete(key),
    // Expired records are removed as each key's object reads them.
    purge: async () => 0,
  };
}

const app = new Hono<{ Bindings: Env }>();

app.get("/__idemgate/health", (c) => c.json({ status: "ok", service: "peer" }));
app.get("/__idemgate/stats", (c) => c.json({}));
// The floor: an operator path that does not exist, answered by the worker
// alone, as idemgate and the reference answer it.
app.all("/__idemgate/*", (c) => c.json({ status: 404, detail: "no such resource" }, 404));

// Made once per isolate, as a deployment would make it at module scope
// (the store needs the bindings, which the first request brings).
let middleware: ReturnType<typeof idempotency> | undefined;
app.use("*", (c, next) => {
  middleware ??= idempotency({ store: storeOfObjects(c.env), dangerouslyAllowGlobalKeys: true });
  return middleware(c, next);
});

app.all("*", async (c) => {
  const url = new URL(c.req.url);
  const headers = new Headers();
  for (const [name, value] of c.req.raw.headers) if (!HOP_BY_HOP.has(name)) headers.append(name, value);
  const method = c.req.method;
  const body = method === "GET" || method === "HEAD" ? undefined : await c.req.arrayBuffer();
  return fetch(c.env.ORIGIN_URL + url.pathname + url.search, { method, headers, body });
});

export default app;

/** One key's records, in the middleware's own Durable Objects store. */
export class PeerKeyObject extends DurableObject<Env> {
  store = durableObjectStore({ storage: this.ctx.storage });

  get(key: string): Promise<IdempotencyRecord | undefined> {
    return this.store.get(key);
  }

  lock(key: string, record: IdempotencyRecord): Promise<boolean> {
    return this.store.lock(key, record);
  }

  complete(key: string, response: StoredResponse): Promise<void> {
    return this.store.complete(key, response);
  }

  delete(key: string): Promise<void> {
    return this.store.delete(key);
  }
}
