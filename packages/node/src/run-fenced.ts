import { isRetryableStatus, refusal, storedHeaders, type FenceKey, type FenceStore, type StoredResult } from "./fence.js";
import type { Problem } from "./problem.js";

export interface RunFencedOptions {
  /** Answers idemgate retries rather than keeps; the origin releases the key for them. */
  isRetryableStatus?: (status: number) => boolean;
  /**
   * A result could not be stored after the handler ran. The handler's
   * answer is still sent (its side effect happened, and idemgate keeps it);
   * by default the error is logged.
   */
  onStoreError?: (error: unknown) => void;
}

export type FencedAnswer =
  | { kind: "refused"; problem: Problem }
  | { kind: "replayed"; result: StoredResult }
  | { kind: "handled"; result: StoredResult };

/**
 * One forward under the store's fence: refused, answered with the key's
 * first result, or handled, its result kept unless idemgate would retry it.
 * `handle` resolves to the handler's whole response.
 */
export async function runFenced(
  store: FenceStore,
  forward: FenceKey,
  handle: () => Promise<StoredResult>,
  options: RunFencedOptions = {},
): Promise<FencedAnswer> {
  const fence = await store.begin(forward);
  const problem = refusal(fence);
  if (problem) return { kind: "refused", problem };
  if (fence.outcome === "completed") return { kind: "replayed", result: fence.result };
  let result: StoredResult;
  try {
    result = await handle();
  } catch (error) {
    await Promise.resolve(store.release(forward)).catch(options.onStoreError ?? logStoreError);
    throw error;
  }
  const retryable = options.isRetryableStatus ?? isRetryableStatus;
  try {
    if (retryable(result.status)) await store.release(forward);
    else await store.complete(forward, { ...result, headers: storedHeaders(result.headers) });
  } catch (error) {
    (options.onStoreError ?? logStoreError)(error);
  }
  return { kind: "handled", result };
}

function logStoreError(error: unknown): void {
  console.error("idemgate-verify: the fence store failed", error);
}
