// The benchmark's reference: an idempotency middleware written the way a
// JavaScript team would write one with Durable Objects, to measure
// idemgate against (issue 16). One Durable Object per key, called over
// RPC; the body's SHA-256 with WebCrypto; a first delivery locks the key
// in its object, forwards, and stores the response; a replay is one RPC
// call that returns the stored response; a concurrent duplicate gets 409.
// It has no routes, signatures, scopes, epochs, retention or logs: it is
// the floor of what a deduplicating gateway must do.
import { DurableObject } from "cloudflare:workers";

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer"]);

function hex(buffer) {
  return [...new Uint8Array(buffer)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

function forwardable(headers) {
  const out = new Headers();
  for (const [name, value] of headers) {
    if (!HOP_BY_HOP.has(name) && name !== "content-length" && name !== "host") out.append(name, value);
  }
  return out;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/__idemgate/health") return Response.json({ status: "ok", service: "reference" });
    if (url.pathname === "/__idemgate/stats") return Response.json({});
    // The floor: an operator path that does not exist, answered by the
    // worker alone, as idemgate answers it.
    if (url.pathname.startsWith("/__idemgate/")) {
      return Response.json({ status: 404, detail: "no such resource" }, { status: 404 });
    }
    const target = env.ORIGIN_URL + url.pathname + url.search;
    if (request.method === "GET" || request.method === "HEAD") {
      return fetch(target, { method: request.method, headers: forwardable(request.headers) });
    }
    const key = request.headers.get("idempotency-key");
    if (!key) return Response.json({ error: "missing idempotency-key" }, { status: 400 });
    const body = await request.arrayBuffer();
    const hash = hex(await crypto.subtle.digest("SHA-256", body));
    const object = env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(key));
    const begun = await object.begin(hash);
    if (begun.state === "completed") {
      const headers = new Headers(begun.headers);
      headers.set("idempotent-replayed", "true");
      return new Response(begun.body, { status: begun.status, headers });
    }
    if (begun.state === "mismatch") return Response.json({ error: "fingerprint mismatch" }, { status: 422 });
    if (begun.state === "in_flight") return Response.json({ error: "in flight" }, { status: 409 });
    let response;
    try {
      response = await fetch(target, { method: request.method, headers: forwardable(request.headers), body });
    } catch (error) {
      await object.release();
      return Response.json({ error: String(error) }, { status: 502 });
    }
    const responseBody = await response.arrayBuffer();
    if (response.status >= 500) {
      await object.release();
    } else {
      await object.complete(response.status, [...response.headers], responseBody);
    }
    return new Response(responseBody, { status: response.status, headers: response.headers });
  },
};

export class IdempotencyObject extends DurableObject {
  #record;

  async #load() {
    if (this.#record === undefined) this.#record = (await this.ctx.storage.get("record")) ?? null;
    return this.#record;
  }

  async begin(hash) {
    const record = await this.#load();
    if (record === null) {
      this.#record = { state: "in_flight", hash };
      await this.ctx.storage.put("record", this.#record);
      return { state: "locked" };
    }
    if (record.hash !== hash) return { state: "mismatch" };
    return record;
  }

  async complete(status, headers, body) {
    this.#record = { state: "completed", hash: this.#record.hash, status, headers, body };
    await this.ctx.storage.put("record", this.#record);
  }

  async release() {
    this.#record = null;
    await this.ctx.storage.delete("record");
  }
}
