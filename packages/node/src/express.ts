import { IdemgateVerifyError } from "./errors.js";
import type { StoredResult } from "./fence.js";
import { unverified, type Problem } from "./problem.js";
import { runFenced } from "./run-fenced.js";
import type { IdemgateOptions } from "./fetch.js";
import { verify, type Forwarded } from "./verify.js";

/** The part of Express's (and Node's) request the middleware uses. */
export interface ExpressRequestLike extends AsyncIterable<Uint8Array | string> {
  method: string;
  /** The path and query of the request line, also under a mounted router. */
  originalUrl: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  readableEnded?: boolean;
  /** Set by the middleware for the routes after it. */
  idemgate?: Forwarded;
}

type WriteCallback = (error?: Error | null) => void;

/** The part of Express's (and Node's) response the middleware uses. */
export interface ExpressResponseLike {
  statusCode: number;
  locals?: Record<string, unknown>;
  setHeader(name: string, value: string | number | readonly string[]): unknown;
  getHeaders(): Record<string, string | number | string[] | undefined>;
  write(chunk: unknown, encoding?: unknown, callback?: unknown): boolean;
  end(chunk?: unknown, encoding?: unknown, callback?: unknown): unknown;
  once(event: "close", listener: () => void): unknown;
  writableEnded?: boolean;
}

export interface ExpressOptions extends IdemgateOptions {
  /** The path and query idemgate sent, if not `req.originalUrl` (a proxy that strips a prefix). */
  pathAndQuery?: (req: ExpressRequestLike) => string;
}

/**
 * The raw body: what `express.raw({ type: "*\/*" })` left in `req.body`, or
 * read here from the stream if no body parser ran (then `req.body` is that
 * Buffer for the routes after). A body a parser already turned into an
 * object cannot be verified: its bytes are gone.
 */
async function rawBody(req: ExpressRequestLike): Promise<Uint8Array> {
  if (req.body instanceof Uint8Array) return req.body;
  if (req.body === undefined && !req.readableEnded) {
    const chunks: Uint8Array[] = [];
    for await (const chunk of req) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
    const body = Buffer.concat(chunks);
    req.body = body;
    return body;
  }
  throw new Error(
    "idemgate-verify needs the raw body: use express.raw({ type: \"*/*\" }) before it (or no body parser), not express.json()",
  );
}

function send(res: ExpressResponseLike, answer: Problem | StoredResult): void {
  res.statusCode = answer.status;
  const byName = new Map<string, string[]>();
  for (const [name, value] of answer.headers) byName.set(name, [...(byName.get(name) ?? []), value]);
  for (const [name, values] of byName) res.setHeader(name, values.length === 1 ? values[0]! : values);
  res.end(typeof answer.body === "string" ? answer.body : Buffer.from(answer.body));
}

function chunkBytes(chunk: unknown, encoding: unknown): Buffer {
  if (typeof chunk === "string") return Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
  if (chunk instanceof Uint8Array) return Buffer.from(chunk);
  return Buffer.alloc(0);
}

function headerPairs(res: ExpressResponseLike): [string, string][] {
  const pairs: [string, string][] = [];
  for (const [name, value] of Object.entries(res.getHeaders())) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) pairs.push([name, String(one)]);
  }
  return pairs;
}

/**
 * Runs the routes after the middleware with the response held back:
 * `write` and `end` are collected until the handler ends the response,
 * so that its result is stored before it is sent. `flush` sends it.
 */
function holdResponse(
  res: ExpressResponseLike,
  next: () => void,
): { run: () => Promise<StoredResult>; flush: (result: StoredResult) => void } {
  const write = res.write;
  const end = res.end;
  const chunks: Buffer[] = [];
  const run = () =>
    new Promise<StoredResult>((resolve, reject) => {
      res.write = (chunk: unknown, encoding?: unknown, callback?: unknown) => {
        chunks.push(chunkBytes(chunk, encoding));
        const done = typeof encoding === "function" ? encoding : callback;
        if (typeof done === "function") queueMicrotask(() => (done as WriteCallback)());
        return true;
      };
      res.end = (chunk?: unknown, encoding?: unknown) => {
        if (typeof chunk !== "function") chunks.push(chunkBytes(chunk, encoding));
        resolve({ status: res.statusCode, headers: headerPairs(res), body: Buffer.concat(chunks) });
        return res;
      };
      res.once("close", () => reject(new Error("idemgate-verify: the connection closed before the response ended")));
      next();
    });
  const flush = (stored: StoredResult) => {
    res.write = write;
    res.end = end;
    res.end(Buffer.from(stored.body));
  };
  return { run, flush };
}

/**
 * Express middleware: only verified forwards reach the routes after it,
 * with `req.idemgate` (and `res.locals.idemgate`) holding what they say.
 * Needs the raw body; see rawBody.
 */
export function idemgateExpress(
  options: ExpressOptions,
): (req: ExpressRequestLike, res: ExpressResponseLike, next: (error?: unknown) => void) => void {
  return (req, res, next) => {
    const guarded = async () => {
      let forwarded: Forwarded;
      try {
        forwarded = await verify({
          method: req.method,
          pathAndQuery: options.pathAndQuery?.(req) ?? req.originalUrl,
          headers: req.headers,
          body: await rawBody(req),
          secret: options.secret,
          now: options.now?.(),
          toleranceSeconds: options.toleranceSeconds,
        });
      } catch (error) {
        if (error instanceof IdemgateVerifyError) return send(res, unverified(error));
        throw error;
      }
      req.idemgate = forwarded;
      if (res.locals) res.locals.idemgate = forwarded;
      if (!options.store) return next();
      const held = holdResponse(res, next);
      const answer = await runFenced(options.store, forwarded, held.run, options);
      if (answer.kind === "refused") return send(res, answer.problem);
      if (answer.kind === "replayed") return send(res, answer.result);
      held.flush(answer.result);
    };
    guarded().catch(next);
  };
}

declare global {
  // Express's own extension point: routes after the middleware read req.idemgate.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      idemgate?: Forwarded;
    }
  }
}
