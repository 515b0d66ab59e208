import { bytesOf, hmacSha256Hex, hmacSha256Matches, sha256Hex } from "./crypto.js";
import { IdemgateVerifyError } from "./errors.js";
import type { HeadersInput } from "./headers.js";
import {
  parseEpoch,
  parseKey,
  parseScope,
  parseSignature,
  parseSignatureV2,
  parseSource,
  parseStale,
  SIGNATURE_HEADER,
  SIGNATURE_V2_HEADER,
  SOURCE_HEADER,
  STALE_HEADER,
  STALE_VALUE,
} from "./parse.js";

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
  /** The signatures' t, Unix seconds. */
  signedAt: number;
  /** Idempotency-Source: "reconciliation" on a forward that idemgate's reconciliation made, null on a live delivery. */
  source: string | null;
  /** Idempotency-Stale: true on a forward older than one already delivered for its entity. */
  stale: boolean;
}

/** The seven lines v1 signs, joined by "\n". */
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
 * The nine lines v2 signs: v1's seven, then the Idempotency-Source value
 * and the Idempotency-Stale value, each empty when the header is absent.
 */
export function signedContentV2(
  signedAt: bigint | number,
  method: string,
  pathAndQuery: string,
  scope: string,
  key: string,
  epoch: number,
  bodySha256: string,
  source: string | null,
  stale: boolean,
): string {
  const v1 = signedContent(signedAt, method, pathAndQuery, scope, key, epoch, bodySha256);
  return [v1, source ?? "", stale ? STALE_VALUE : ""].join("\n");
}

/**
 * Verifies idemgate's Idempotency-* headers against the request as
 * received. Resolves to what they say, or rejects with an
 * `IdemgateVerifyError` whose `code` says why.
 *
 * Both signatures must be there and well-formed, with the same t (two t's
 * were not signed as one forward: bad-signature). Only v2's HMAC is
 * checked: it covers all that v1's does, and Idempotency-Source and
 * Idempotency-Stale besides.
 */
export async function verify(input: VerifyInput): Promise<Forwarded> {
  // WebCrypto refuses an empty HMAC key; an unset secret is a deployment
  // mistake that must not look like a forged request.
  if (input.secret.length === 0) throw new TypeError("idemgate-verify: the secret is empty");
  const key = parseKey(input.headers);
  const scope = parseScope(input.headers);
  const epoch = parseEpoch(input.headers);
  // v1 must be there and well-formed; its HMAC is not computed.
  const { signedAt } = parseSignature(input.headers);
  const { signedAt: signedAtV2, mac } = parseSignatureV2(input.headers);
  const source = parseSource(input.headers);
  const stale = parseStale(input.headers);
  if (signedAt !== signedAtV2) {
    throw new IdemgateVerifyError(
      "bad-signature",
      "Idempotency-Signature and Idempotency-Signature-V2 have different t's: idemgate signs both at once",
    );
  }
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
  const content = signedContentV2(
    signedAt,
    input.method,
    input.pathAndQuery,
    scope,
    key,
    epoch,
    bodySha256,
    source,
    stale,
  );
  if (!(await hmacSha256Matches(input.secret, content, mac))) {
    throw new IdemgateVerifyError(
      "bad-signature",
      "the signature does not match the request, scope, key, epoch, source, staleness and body",
    );
  }
  return { scope, key, epoch, bodySha256, signedAt: Number(signedAt), source, stale };
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
  /** Sent as Idempotency-Source, e.g. "reconciliation"; none by default. */
  source?: string | null;
  /** Whether to send Idempotency-Stale: true; false by default. */
  stale?: boolean;
}

/**
 * For tests of origin code: the headers idemgate would add besides Key,
 * Scope and Epoch, by lowercase name, in its order: idempotency-source and
 * idempotency-stale when the input has them, then idempotency-signature
 * and idempotency-signature-v2, both at `signedAt`.
 */
export async function sign(input: SignInput): Promise<Record<string, string>> {
  const bodySha256 = await sha256Hex(bytesOf(input.body));
  const source = input.source ?? null;
  const stale = input.stale ?? false;
  const fields = [input.signedAt, input.method, input.pathAndQuery, input.scope, input.key, input.epoch, bodySha256] as const;
  const v1 = await hmacSha256Hex(input.secret, signedContent(...fields));
  const v2 = await hmacSha256Hex(input.secret, signedContentV2(...fields, source, stale));
  const headers: Record<string, string> = {};
  if (source !== null) headers[SOURCE_HEADER.toLowerCase()] = source;
  if (stale) headers[STALE_HEADER.toLowerCase()] = STALE_VALUE;
  headers[SIGNATURE_HEADER.toLowerCase()] = `t=${input.signedAt},v1=${v1}`;
  headers[SIGNATURE_V2_HEADER.toLowerCase()] = `t=${input.signedAt},v2=${v2}`;
  return headers;
}
