import type { IdemgateVerifyError } from "./errors.js";

/** An RFC 9457 problem answer, framework-neutral. */
export interface Problem {
  status: number;
  headers: [string, string][];
  body: string;
}

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

function problem(
  status: number,
  name: string,
  title: string,
  detail: string,
  extra: Record<string, unknown> = {},
  headers: [string, string][] = [],
): Problem {
  const body = JSON.stringify({ type: `urn:idemgate-verify:problem:${name}`, title, status, detail, ...extra });
  return { status, headers: [["content-type", PROBLEM_CONTENT_TYPE], ...headers], body };
}

/** 401: the request is not a forward idemgate signed (or not as received). */
export function unverified(error: IdemgateVerifyError): Problem {
  return problem(401, "unverified", "The request is not a forward signed by idemgate", error.message, {
    code: error.code,
  });
}

/** 409: a later forward of the key was accepted; this one was superseded. */
export function staleEpoch(highestEpoch: number): Problem {
  return problem(
    409,
    "stale-epoch",
    "A later forward of this key was already accepted",
    `the highest epoch accepted for this key is ${highestEpoch}`,
    { highest_epoch: highestEpoch },
  );
}

/** 422: the key was first used with another body. */
export function bodyMismatch(): Problem {
  return problem(422, "body-mismatch", "The key was first used with another body", "the body's SHA-256 differs from the first request's");
}

/**
 * 503 with Retry-After: the key's handler is running. idemgate treats 503
 * as a failure and retries with a higher epoch, by when the first run has
 * stored its result.
 */
export function inProgress(retryAfterSeconds: number): Problem {
  const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
  return problem(
    503,
    "in-progress",
    "A forward of this key is being processed",
    `retry in ${seconds} s`,
    {},
    [["retry-after", String(seconds)]],
  );
}
