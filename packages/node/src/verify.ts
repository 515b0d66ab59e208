import { bytesOf, hmacSha256Hex, hmacSha256Matches, sha256Hex } from "./crypto.js";
import { IdemgateVerifyError } from "./errors.js";
import type { HeadersInput } from "./headers.js";
import { parseEpoch, parseKey, parseScope, parseSignature } from "./parse.js";

export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyInput {
  /** The request method as received, e.g. "POST". */
  method: string;
  /** The path and query of the request line as received, e.g. "/payments?currency=eur". */
  pathAndQuery: string;
  headers: HeadersInput;
  /** The raw body bytes; a string is taken as its UTF-8 bytes. */
  body: Uint8Array | ArrayBuffer | string;
  /** The gateway's FORWARD_SECRET. */
  secret: string | Uint8Array;
  /** Unix seconds; the system clock by default. */
  now?: number;
  /** Allowed distance between the signature's t and now, past or future. */
  toleranceSeconds?: number;
}

/** A forward idemgate signed. */
export interface Forwarded {
  /** Idempotency-Scope: 64 lowercase hex digits. */
  scope: string;
  /** The idempotency key, without its quotes. */
  key: string;
  /** The fencing epoch: higher than every earlier forward of (scope, key). */
  epoch: number;
  /** Hex SHA-256 of the raw body: keep the first one per (scope, key). */
  bodySha256: string;
  /** The signature's t, Unix seconds. */
  signedAt: number;
}

/** The seven signed lines, joined by "\n". */
export function signedContent(
  signedAt: bigint | number,
  method: string,
  pathAndQuery: string,
  scope: string,
  key: string,
  epoch: number,
  bodySha256: string,
): string {
  return [signedAt, method, pathAndQuery, scope, key, epoch, bodySha256].join("\n");
}

/**
 * Verifies idemgate's Idempotency-* headers against the request as
 * received. Resolves to what they say, or rejects with an
 * `IdemgateVerifyError` whose `code` says why.
 */
export async function verify(input: VerifyInput): Promise<Forwarded> {
  // WebCrypto refuses an empty HMAC key; an unset secret is a deployment
  // mistake that must not look like a forged request.
  if (input.secret.length === 0) throw new TypeError("idemgate-verify: the secret is empty");
  const key = parseKey(input.headers);
  const scope = parseScope(input.headers);
  const epoch = parseEpoch(input.headers);
  const { signedAt, mac } = parseSignature(input.headers);
  const now = BigInt(Math.floor(input.now ?? Date.now() / 1000));
  const tolerance = BigInt(input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS);
  const skew = signedAt > now ? signedAt - now : now - signedAt;
  if (skew > tolerance) {
    throw new IdemgateVerifyError(
      "stale",
      `stale signature: signed ${skew} s from now, tolerance ${tolerance} s`,
    );
  }
  const bodySha256 = await sha256Hex(bytesOf(input.body));
  const content = signedContent(signedAt, input.method, input.pathAndQuery, scope, key, epoch, bodySha256);
  if (!(await hmacSha256Matches(input.secret, content, mac))) {
    throw new IdemgateVerifyError(
      "bad-signature",
      "the signature does not match the request, scope, key, epoch and body",
    );
  }
  return { scope, key, epoch, bodySha256, signedAt: Number(signedAt) };
}

export interface SignInput {
  method: string;
  pathAndQuery: string;
  body: Uint8Array | ArrayBuffer | string;
  secret: string | Uint8Array;
  scope: string;
  key: string;
  epoch: number;
  /** Unix seconds. */
  signedAt: number;
}

/** For tests of origin code: the Idempotency-Signature idemgate would send. */
export async function sign(input: SignInput): Promise<string> {
  const bodySha256 = await sha256Hex(bytesOf(input.body));
  const content = signedContent(
    input.signedAt,
    input.method,
    input.pathAndQuery,
    input.scope,
    input.key,
    input.epoch,
    bodySha256,
  );
  return `t=${input.signedAt},v1=${await hmacSha256Hex(input.secret, content)}`;
}
