import { bodyMismatch, inProgress, staleEpoch, type Problem } from "./problem.js";
import type { Forwarded } from "./verify.js";

/** What a fence is kept by: a verified forward's scope, key, epoch and body hash. */
export type FenceKey = Pick<Forwarded, "scope" | "key" | "epoch" | "bodySha256">;

/** A response as stored, to answer a repeated key with. */
export interface StoredResult {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

/** What `FenceStore.begin` decided. */
export type Fence =
  /** Run the handler, then `complete` (or `release` if it failed). */
  | { outcome: "proceed" }
  /** The key was completed: answer with its first result, run nothing. */
  | { outcome: "completed"; result: StoredResult }
  /** A higher epoch of the key was accepted: 409. */
  | { outcome: "stale-epoch"; highestEpoch: number }
  /** The key's first request had another body: 422. */
  | { outcome: "body-mismatch" }
  /** Another forward of the key is running: 503, retried by idemgate. */
  | { outcome: "in-progress"; retryAfterSeconds: number };

/**
 * Per (scope, key): the highest epoch accepted, the first body hash, the
 * forward running, and the first completed result. `begin` decides in one
 * transaction; see SqliteFenceStore for the reference semantics.
 */
export interface FenceStore {
  begin(forward: FenceKey): Fence | Promise<Fence>;
  /** Keeps `result` as the key's answer, unless one was kept already. */
  complete(forward: FenceKey, result: StoredResult): void | Promise<void>;
  /** The handler failed: a later forward of the key may run it again. */
  release(forward: FenceKey): void | Promise<void>;
}

/**
 * idemgate's default RETRYABLE_STATUSES (408, 425, 429, 500-599): answers
 * it retries rather than keeps, so the origin must not keep them either.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || (status >= 500 && status <= 599);
}

/**
 * For origins behind an async route: idemgate retries every answer but a
 * 2xx there (GIVE_UP_STATUSES aside), so only a 2xx is kept.
 */
export function isAsyncRetryableStatus(status: number): boolean {
  return status < 200 || status > 299;
}

/** The answer to a fence that does not let the handler run, if any. */
export function refusal(fence: Fence): Problem | undefined {
  switch (fence.outcome) {
    case "stale-epoch":
      return staleEpoch(fence.highestEpoch);
    case "body-mismatch":
      return bodyMismatch();
    case "in-progress":
      return inProgress(fence.retryAfterSeconds);
    default:
      return undefined;
  }
}

/**
 * Response headers that describe one connection or one caller, never kept
 * for a replay (idemgate does not replay Set-Cookie either).
 */
const NOT_STORED = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "date",
  "set-cookie",
  "upgrade",
  "trailer",
  "proxy-connection",
]);

export function storedHeaders(headers: Iterable<readonly [string, string]>): [string, string][] {
  const kept: [string, string][] = [];
  for (const [name, value] of headers) {
    if (!NOT_STORED.has(name.toLowerCase())) kept.push([name.toLowerCase(), value]);
  }
  return kept;
}
