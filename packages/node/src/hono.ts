import { guard, type FetchOptions } from "./fetch.js";
import type { Forwarded } from "./verify.js";

/** The part of Hono's `Context` the middleware uses (no dependency on hono). */
export interface HonoContextLike {
  req: { raw: Request };
  res: Response | undefined;
  set(key: "idemgate", value: Forwarded): void;
}

/**
 * Hono middleware: only verified forwards reach the routes after it, with
 * `c.get("idemgate")` holding what they say. `options` may be a function
 * of the context, e.g. to read the secret from `c.env`.
 */
export function idemgateHono<Context extends HonoContextLike = HonoContextLike>(
  options: FetchOptions | ((c: Context) => FetchOptions),
): (c: Context, next: () => Promise<void>) => Promise<void> {
  return async (c, next) => {
    const resolved = typeof options === "function" ? options(c) : options;
    const request = c.req.raw;
    const url = new URL(request.url);
    const pathAndQuery = resolved.pathAndQuery?.(request) ?? url.pathname + url.search;
    const response = await guard(request, resolved, pathAndQuery, async (forwarded) => {
      c.set("idemgate", forwarded);
      await next();
      return c.res ?? new Response(null, { status: 404 });
    });
    if (response !== c.res) {
      // Hono copies the headers of the response it replaces into the new
      // one; the answer here is whole already (Set-Cookie would double).
      c.res = undefined;
      c.res = response;
    }
  };
}
