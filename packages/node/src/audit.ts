/**
 * Verify an audit chain exported from idemgate (`GET /__idemgate/audit?order=oldest`):
 * each entry's `hash` is the hex SHA-256 of its `prev_hash`, a newline and
 * the RFC 8785 canonical JSON of the entry without `hash`; each
 * `prev_hash` is the previous entry's `hash` (64 zeros for the first);
 * `seq` counts up from 1 by one. The first entry that breaks any of these
 * is named, so an edited, deleted or reordered entry shows. Pass `head`
 * (the summary's `audit.hash` when the export was taken) so that entries
 * cut from the end show too.
 */
import { bytesOf, sha256Hex } from "./crypto.js";

export const AUDIT_GENESIS = "0".repeat(64);

const FIELDS = ["seq", "at", "actor", "action", "route", "target", "result", "prev_hash", "hash"] as const;

/** Why an entry breaks the chain. */
export type AuditFault = "malformed" | "seq" | "prev_hash" | "hash" | "head";

export type AuditVerdict =
  | { valid: true; entries: number; headSeq: number; headHash: string }
  | { valid: false; index: number; seq: number | null; fault: AuditFault };

/** RFC 8785 canonical JSON of what an entry holds (strings and integers). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("not a JSON number");
    return JSON.stringify(value);
  }
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    // Default sort compares UTF-16 code units, as RFC 8785 orders names.
    const names = Object.keys(value as object).sort();
    const record = value as Record<string, unknown>;
    return `{${names.map((name) => `${JSON.stringify(name)}:${canonicalJson(record[name])}`).join(",")}}`;
  }
  throw new TypeError("not a JSON value");
}

/** The hash an entry should carry. */
export async function auditEntryHash(entry: Record<string, unknown>): Promise<string> {
  const { hash: _hash, ...unhashed } = entry;
  return sha256Hex(bytesOf(`${String(entry.prev_hash)}\n${canonicalJson(unhashed)}`));
}

const HASH = /^[0-9a-f]{64}$/;

function wellFormed(entry: unknown): entry is Record<string, unknown> {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return false;
  const record = entry as Record<string, unknown>;
  const names = Object.keys(record);
  if (names.length !== FIELDS.length || !FIELDS.every((name) => name in record)) return false;
  const counts = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0;
  if (!counts(record.seq) || !counts(record.at)) return false;
  if (!["actor", "action", "route", "target", "result"].every((name) => typeof record[name] === "string")) return false;
  return [record.prev_hash, record.hash].every((hash) => typeof hash === "string" && HASH.test(hash));
}

/** Checks a chain exported oldest first; names the first broken entry. */
export async function verifyAuditChain(entries: readonly unknown[], options: { head?: string } = {}): Promise<AuditVerdict> {
  let previousHash = AUDIT_GENESIS;
  let previousSeq = 0;
  for (const [index, entry] of entries.entries()) {
    const claimed = (entry as { seq?: unknown } | null)?.seq;
    const seq = Number.isSafeInteger(claimed) && (claimed as number) >= 0 ? (claimed as number) : null;
    const broken = (fault: AuditFault): AuditVerdict => ({ valid: false, index, seq, fault });
    if (!wellFormed(entry)) return broken("malformed");
    if (seq !== previousSeq + 1) return broken("seq");
    if (entry.prev_hash !== previousHash) return broken("prev_hash");
    if ((await auditEntryHash(entry)) !== entry.hash) return broken("hash");
    previousHash = entry.hash as string;
    previousSeq = seq;
  }
  if (options.head !== undefined && options.head !== previousHash) {
    return { valid: false, index: entries.length, seq: null, fault: "head" };
  }
  return { valid: true, entries: entries.length, headSeq: previousSeq, headHash: previousHash };
}

/** Reads an export: a JSON array, a page's `{"entries": [...]}`, or JSON Lines. */
export function readAuditExport(text: string): unknown[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as unknown);
  }
  if (Array.isArray(parsed)) return parsed;
  const entries = (parsed as { entries?: unknown } | null)?.entries;
  if (Array.isArray(entries)) return entries;
  throw new TypeError("neither an array of entries nor a page of them");
}
