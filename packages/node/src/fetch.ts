import { IdemgateVerifyError } from "./errors.js";
import type { FenceStore, StoredResult } from "./fence.js";
import { unverified, type Problem } from "./problem.js";
import { runFenced, type RunFencedOptions } from "./run-fenced.js";
import { verify, type Forwarded } from "./verify.js";

/** What every middleware is configured with. */
export interface IdemgateOptions extends RunFencedOptions {
  /** The gateway's FORWARD_SECRET. */
  secret: string | Uint8Array;
  /** Allowed distance between the signature's t and now, past or future; 300 s by default. */
  toleranceSeconds?: number;
  /** Unix seconds; the system clock by default. */
  now?: () => number;
  /** With a store, repeated keys get their first result and stale epochs are refused. */
  store?: FenceStore;
}

export interface FetchOptions extends IdemgateOptions {
  /**
   * The path and query idemgate sent, if the origin sees another one (a
   * proxy in between that strips a prefix); the request URL's by default.
   */
  pathAndQuery?: (request: Request) => string;
}

/** Statuses whose responses have no body in the Fetch API. */
const NULL_BODY = new Set([101, 204, 205, 304]);

export function problemResponse(problem: Problem): Response {
  return new Response(problem.body, { status: problem.status, headers: problem.headers });
}

export function storedResponse(result: StoredResult): Response {
  const body = NULL_BODY.has(result.status) ? null : result.body;
  return new Response(body, { status: result.status, headers: result.headers });
}

export async function resultOf(response: Response): Promise<StoredResult> {
  return {
    status: response.status,
    headers: [...response.headers],
    body: new Uint8Array(await response.arrayBuffer()),
  };
}

/**
 * Verifies the request, then runs what it protects: the handler (under the
 * store's fence, with a store), or answers 401 application/problem+json.
 */
export async function guard(
  request: Request,
  options: IdemgateOptions,
  pathAndQuery: string,
  handle: (forwarded: Forwarded) => Promise<Response>,
): Promise<Response> {
  let forwarded: Forwarded;
  try {
    forwarded = await verify({
      method: request.method,
      pathAndQuery,
      headers: request.headers,
      // A clone: the handler reads the body again.
      body: new Uint8Array(await request.clone().arrayBuffer()),
      secret: options.secret,
      now: options.now?.(),
      toleranceSeconds: options.toleranceSeconds,
    });
  } catch (error) {
    if (error instanceof IdemgateVerifyError) return problemResponse(unverified(error));
    throw error;
  }
  const store = options.store;
  if (!store) return handle(forwarded);
  const answer = await runFenced(store, forwarded, async () => resultOf(await handle(forwarded)), options);
  if (answer.kind === "refused") return problemResponse(answer.problem);
  return storedResponse(answer.result);
}

function urlPathAndQuery(request: Request): string {
  const url = new URL(request.url);
  return url.pathname + url.search;
}

/**
 * Wraps a Fetch API handler (Workers, Deno, Bun, Next.js route handlers):
 * the handler runs only for verified forwards and gets what they say.
 * `options` may be a function of the handler's arguments, e.g. to read the
 * secret from a Worker's `env`.
 */
export function withIdemgate<Rest extends unknown[]>(
  handler: (request: Request, forwarded: Forwarded, ...rest: Rest) => Response | Promise<Response>,
  options: FetchOptions | ((request: Request, ...rest: Rest) => FetchOptions),
): (request: Request, ...rest: Rest) => Promise<Response> {
  return async (request, ...rest) => {
    const resolved = typeof options === "function" ? options(request, ...rest) : options;
    const pathAndQuery = (resolved.pathAndQuery ?? urlPathAndQuery)(request);
    return guard(request, resolved, pathAndQuery, async (forwarded) => handler(request, forwarded, ...rest));
  };
}
