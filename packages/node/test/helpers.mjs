// Forwards signed as idemgate signs them, for the middleware tests.
import { sign } from "../dist/esm/index.js";

export const SECRET = "whsec_test";
export const SCOPE = "b7b942db19eccc4aa5b16fe1a5760b699a2b6f9c03d2be9ffa6994ce12e587cd";

/** Headers of a forward of `body` to `pathAndQuery`, signed now. */
export async function forwardHeaders({
  method = "POST",
  pathAndQuery = "/payments",
  body = '{"amount":1000}',
  key = "order-42",
  epoch = 1_700_000_000_000_000,
  secret = SECRET,
  signedAt = Math.floor(Date.now() / 1000),
  source = null,
  stale = false,
} = {}) {
  return {
    "content-type": "application/json",
    "idempotency-key": `"${key}"`,
    "idempotency-scope": SCOPE,
    "idempotency-epoch": String(epoch),
    // Both signatures, and Idempotency-Source and -Stale when given.
    ...(await sign({ method, pathAndQuery, body, secret, scope: SCOPE, key, epoch, signedAt, source, stale })),
  };
}

/** POSTs a signed forward to `base` and returns status, JSON (if any) and headers. */
export async function post(base, options = {}) {
  const { pathAndQuery = "/payments", body = '{"amount":1000}', headers: extra = {} } = options;
  // What idemgate signed, if a proxy in between changes the path.
  const signed = options.signedPathAndQuery ?? pathAndQuery;
  const merged = { ...(await forwardHeaders({ ...options, pathAndQuery: signed, body })), ...extra };
  // An extra header given as undefined is removed from the forward.
  const headers = Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== undefined));
  const response = await fetch(base + pathAndQuery, { method: "POST", headers, body });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    json: text && response.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined,
  };
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
