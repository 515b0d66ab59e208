/**
 * Verify an audit chain exported from idemgate (`GET /__idemgate/audit?order=oldest`):
 * each entry's `hash` is the hex SHA-256 of its `prev_hash`, a newline and
 * the RFC 8785 canonical JSON of the entry without `hash`; each
 * `prev_hash` is the previous entry's `hash` (64 zeros for the first);
 * `seq` counts up from 1 by one. The first entry that breaks any of these
 * is named, so an edited, deleted or reordered entry shows. Pass `head`
 * (the summary's `audit.hash` when the export was taken) so that entries
 * cut from the end show too.
 *
 * Exports are read strictly, as the Rust and Python verifiers read them:
 * an entry with a member named twice, a lone surrogate (`"\ud800"`), or a
 * `seq` or `at` not written as a plain integer (`1.0`, `1e0`, `-0`) or
 * beyond 2^53 - 1 is malformed; a page naming a member twice, and nesting
 * deeper than 64 levels, make the export unreadable. JSON.parse forgets
 * all but the last of a repeated member and how a number was written, so
 * a small scanner reads the text again (it is valid JSON by then).
 */
import { bytesOf, sha256Hex } from "./crypto.js";

export const AUDIT_GENESIS = "0".repeat(64);

const FIELDS = ["seq", "at", "actor", "action", "route", "target", "result", "prev_hash", "hash"] as const;

/**
 * The largest integer `seq` and `at` may hold: 2^53 - 1, the largest a
 * double holds exactly (Number.MAX_SAFE_INTEGER). Beyond it (|n| > 2^53 - 1)
 * an entry is malformed, in the Rust and Python verifiers too.
 */
export const AUDIT_MAX_INTEGER = Number.MAX_SAFE_INTEGER;

/** No export nests deeper than 3 levels (a page, its entries, an entry); one nesting deeper than this is unreadable, in all three verifiers. */
export const AUDIT_MAX_DEPTH = 64;

/**
 * An entry of an export that is malformed however its members are read: it
 * names a member twice, holds a lone surrogate (in a name or a string, at
 * any depth), or writes `seq` or `at` otherwise than as a plain integer.
 * `seq` is the one it claims (its `seq` member, named once, an integer from
 * 0 to 2^53 - 1), else null. `readAuditExport` returns it in the entry's place.
 */
export class MalformedAuditEntry {
  constructor(readonly seq: number | null) {}
}

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
  // Number.isSafeInteger: at most AUDIT_MAX_INTEGER.
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
    if (entry instanceof MalformedAuditEntry) return { valid: false, index, seq: entry.seq, fault: "malformed" };
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

// With the u flag a pair is one code point: only a lone surrogate matches.
const LONE_SURROGATE = /[\ud800-\udfff]/u;
const PLAIN_INTEGER = /^(?:0|[1-9][0-9]*)$/;
const NUMBER_OR_LITERAL = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null/y;
const STRING_OR_BRACKET = /"(?:[^"\\]|\\.)*"|[[\]{}]/g;

/** One JSON value of a text already known to be JSON: where it lies, what it holds. */
interface Scan {
  start: number;
  end: number;
  /** A member named twice, or a lone surrogate, anywhere in it. */
  hostile: boolean;
  /** A number's or a literal's text. */
  token?: string;
  items?: Scan[];
  members?: Array<[name: string, value: Scan]>;
}

function space(text: string, at: number): number {
  while (at < text.length && " \t\n\r".includes(text[at] as string)) at++;
  return at;
}

function scanString(text: string, start: number): Scan & { decoded: string } {
  let end = start + 1;
  while (text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
  end++;
  const raw = text.slice(start + 1, end - 1);
  const decoded = raw.includes("\\") ? (JSON.parse(text.slice(start, end)) as string) : raw;
  return { start, end, hostile: LONE_SURROGATE.test(decoded), decoded };
}

function scan(text: string, from: number): Scan {
  const start = space(text, from);
  const first = text[start];
  if (first === '"') return scanString(text, start);
  if (first === "[" || first === "{") {
    const items: Scan[] = [];
    const members: Array<[string, Scan]> = [];
    const names = new Set<string>();
    let hostile = false;
    let at = space(text, start + 1);
    while (text[at] !== "]" && text[at] !== "}") {
      if (first === "{") {
        const name = scanString(text, at);
        hostile ||= name.hostile || names.has(name.decoded);
        names.add(name.decoded);
        const value = scan(text, space(text, name.end) + 1);
        hostile ||= value.hostile;
        members.push([name.decoded, value]);
        at = value.end;
      } else {
        const item = scan(text, at);
        hostile ||= item.hostile;
        items.push(item);
        at = item.end;
      }
      at = space(text, at);
      if (text[at] === ",") at = space(text, at + 1);
    }
    return first === "{" ? { start, end: at + 1, hostile, members } : { start, end: at + 1, hostile, items };
  }
  NUMBER_OR_LITERAL.lastIndex = start;
  const token = NUMBER_OR_LITERAL.exec(text)?.[0] ?? "";
  return { start, end: start + token.length, hostile: false, token };
}

/** The entry a scanned value is: its value, or a MalformedAuditEntry. */
function entryOf(text: string, scanned: Scan): unknown {
  const members = scanned.members ?? [];
  const integers = members.filter(([name]) => name === "seq" || name === "at");
  const plain = integers.every(([, value]) => value.token === undefined || PLAIN_INTEGER.test(value.token));
  if (!scanned.hostile && plain) return JSON.parse(text.slice(scanned.start, scanned.end));
  const seqs = members.filter(([name]) => name === "seq");
  const token = seqs.length === 1 ? seqs[0]?.[1].token : undefined;
  const seq = token !== undefined && PLAIN_INTEGER.test(token) ? Number(token) : NaN;
  return new MalformedAuditEntry(Number.isSafeInteger(seq) ? seq : null);
}

function depthOf(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (const [match] of text.matchAll(STRING_OR_BRACKET)) {
    if (match === "[" || match === "{") deepest = Math.max(deepest, ++depth);
    else if (match === "]" || match === "}") depth--;
  }
  return deepest;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Reads an export: a JSON array, a page's `{"entries": [...]}`, or JSON
 * Lines (split at LF; lines of only spaces, tabs and CR are skipped). An
 * entry read strictly as malformed is returned as a MalformedAuditEntry;
 * throws when the export cannot be read.
 */
export function readAuditExport(text: string): unknown[] {
  if (depthOf(text) > AUDIT_MAX_DEPTH) throw new TypeError(`nested deeper than ${AUDIT_MAX_DEPTH} levels`);
  if (!isJson(text)) {
    return text
      .split("\n")
      .filter((line) => !/^[ \t\r]*$/.test(line))
      .map((line) => {
        JSON.parse(line);
        return entryOf(line, scan(line, 0));
      });
  }
  const top = scan(text, 0);
  if (top.items) return top.items.map((item) => entryOf(text, item));
  const names = (top.members ?? []).map(([name]) => name);
  const entries = top.members?.filter(([name]) => name === "entries").at(-1)?.[1];
  if (entries?.items) {
    // The page around the entries: its names only (its other members are no part of the chain).
    if (new Set(names).size !== names.length || names.some((name) => LONE_SURROGATE.test(name))) {
      throw new TypeError("a page that names a member twice or holds a lone surrogate in a name");
    }
    return entries.items.map((item) => entryOf(text, item));
  }
  throw new TypeError("neither an array of entries nor a page of them");
}
