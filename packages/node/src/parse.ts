import { IdemgateVerifyError } from "./errors.js";
import { headerValues, type HeadersInput } from "./headers.js";

export const KEY_HEADER = "Idempotency-Key";
export const SCOPE_HEADER = "Idempotency-Scope";
export const EPOCH_HEADER = "Idempotency-Epoch";
export const SIGNATURE_HEADER = "Idempotency-Signature";
export const SIGNATURE_V2_HEADER = "Idempotency-Signature-V2";
export const SOURCE_HEADER = "Idempotency-Source";
export const STALE_HEADER = "Idempotency-Stale";

const U64_MAX = 18446744073709551615n;

/** RFC 8941 string of idemgate's key characters: visible ASCII but `"` and `\`. */
const KEY = /^"([!#-[\]-~]{1,255})"$/;
const SCOPE = /^[0-9a-f]{64}$/;
/** Decimal as idemgate writes numbers: no sign, no leading zero. */
const DECIMAL = /^(?:0|[1-9][0-9]*)$/;
const SIGNATURE = /^t=(0|[1-9][0-9]*),v1=([0-9a-f]{64})$/;
const SIGNATURE_V2 = /^t=(0|[1-9][0-9]*),v2=([0-9a-f]{64})$/;
/**
 * An RFC 9110 token, never empty (an empty value would sign as an absent
 * header). Any token verifies, so that a source idemgate adds later needs
 * no new verifier; what it means is the origin's to decide.
 */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** The only value of Idempotency-Stale. */
export const STALE_VALUE = "true";

function malformed(header: string, reason: string): IdemgateVerifyError {
  return new IdemgateVerifyError("malformed-header", `malformed header ${header}: ${reason}`, header);
}

/**
 * The header's one value without HTTP's optional whitespace around it.
 * A header sent twice is refused: a verifier that read one occurrence and
 * application code that read another would disagree on the key.
 */
function single(headers: HeadersInput, header: string): string {
  const value = optional(headers, header);
  if (value === undefined) {
    throw new IdemgateVerifyError("missing-header", `missing header ${header}`, header);
  }
  return value;
}

/** As `single`, for a header that may be absent. */
function optional(headers: HeadersInput, header: string): string | undefined {
  const values = headerValues(headers, header);
  if (values.length === 0) return undefined;
  if (values.length > 1) throw malformed(header, "sent more than once");
  return values[0]!.replace(/^[ \t]+|[ \t]+$/g, "");
}

export function parseKey(headers: HeadersInput): string {
  const match = KEY.exec(single(headers, KEY_HEADER));
  if (!match) throw malformed(KEY_HEADER, "not a quoted idempotency key");
  return match[1]!;
}

export function parseScope(headers: HeadersInput): string {
  const scope = single(headers, SCOPE_HEADER);
  if (!SCOPE.test(scope)) throw malformed(SCOPE_HEADER, "not 64 lowercase hex digits");
  return scope;
}

/**
 * idemgate's epochs stay below 2^53 until the year 2255; a larger one is
 * refused rather than rounded, since a rounded epoch could fence wrongly.
 */
export function parseEpoch(headers: HeadersInput): number {
  const text = single(headers, EPOCH_HEADER);
  if (!DECIMAL.test(text) || text === "0") throw malformed(EPOCH_HEADER, "not a positive integer");
  const epoch = Number(text);
  if (!Number.isSafeInteger(epoch)) {
    throw malformed(EPOCH_HEADER, "above 2^53 - 1, which a JavaScript number cannot hold exactly");
  }
  return epoch;
}

export interface ParsedSignature {
  /** `t`, exact: a value past 2^53 is far from any clock, and stale. */
  signedAt: bigint;
  /** The 32 bytes of `v1`. */
  mac: Uint8Array;
}

function signatureIn(headers: HeadersInput, header: string, form: RegExp, label: string): ParsedSignature {
  const match = form.exec(single(headers, header));
  if (!match) throw malformed(header, `expected t=<unix seconds>,${label}=<64 lowercase hex digits>`);
  const signedAt = BigInt(match[1]!);
  if (signedAt > U64_MAX) throw malformed(header, "t is not a Unix time");
  const mac = new Uint8Array(32);
  for (let at = 0; at < 32; at++) mac[at] = parseInt(match[2]!.slice(2 * at, 2 * at + 2), 16);
  return { signedAt, mac };
}

/** `Idempotency-Signature`: `t=<unix seconds>,v1=<64 lowercase hex digits>`. */
export function parseSignature(headers: HeadersInput): ParsedSignature {
  return signatureIn(headers, SIGNATURE_HEADER, SIGNATURE, "v1");
}

/** `Idempotency-Signature-V2`: `t=<unix seconds>,v2=<64 lowercase hex digits>`. */
export function parseSignatureV2(headers: HeadersInput): ParsedSignature {
  return signatureIn(headers, SIGNATURE_V2_HEADER, SIGNATURE_V2, "v2");
}

/** `Idempotency-Source`, or null when absent (a live delivery). */
export function parseSource(headers: HeadersInput): string | null {
  const source = optional(headers, SOURCE_HEADER);
  if (source === undefined) return null;
  if (!TOKEN.test(source)) throw malformed(SOURCE_HEADER, "not a token");
  return source;
}

/** Whether `Idempotency-Stale: true` came; any other value is refused. */
export function parseStale(headers: HeadersInput): boolean {
  const stale = optional(headers, STALE_HEADER);
  if (stale === undefined) return false;
  if (stale !== STALE_VALUE) throw malformed(STALE_HEADER, "not `true`");
  return true;
}
