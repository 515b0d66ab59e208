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
 * A chain rewritten inside the deployment (an entry edited and every hash
 * after it recomputed) still verifies as a chain, so idemgate anchors it
 * outside: after each act (at most once a minute) and daily it sends the
 * head to its `json` alert sinks as a signed `idemgate.audit_head`
 * checkpoint. Pass `checkpoint` (one a sink received, read with
 * `readAuditCheckpoint`) so that the chain must reach its `seq`
 * (`truncated`) and agree with its `hash` there (`checkpoint`).
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

/**
 * Why an entry breaks the chain. `truncated`: the export ends before the
 * checkpoint's `seq` (named at the position after the last entry, with no
 * `seq`, as `head` is); `checkpoint`: the entry at the checkpoint's `seq`
 * carries another hash (the chain was rewritten since the sinks got it).
 */
export type AuditFault = "malformed" | "seq" | "prev_hash" | "hash" | "head" | "truncated" | "checkpoint";

/** What a checkpoint's `type` is. */
export const AUDIT_CHECKPOINT_TYPE = "idemgate.audit_head";

/**
 * The head of the chain as idemgate sent it to its `json` alert sinks: a
 * `seq` from 1 to 2^53 - 1 and the `hash` of the entry at that `seq`; `at`
 * (RFC 3339, UTC) when read from a sink's body.
 */
export interface AuditCheckpoint {
  seq: number;
  hash: string;
  at?: string;
}

export interface VerifyAuditChainOptions {
  /** The chain must end at this hash (the summary's head when the export was taken). */
  head?: string;
  /** The chain must reach this checkpoint's `seq` and carry its `hash` there; it may have grown since. */
  checkpoint?: { seq: number; hash: string };
}

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
export async function verifyAuditChain(entries: readonly unknown[], options: VerifyAuditChainOptions = {}): Promise<AuditVerdict> {
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
  const { checkpoint } = options;
  if (checkpoint !== undefined) {
    if (checkpoint.seq > previousSeq) return { valid: false, index: entries.length, seq: null, fault: "truncated" };
    // Verified: the entry at position i has seq i + 1; seq 0 is the empty chain's head.
    const at = checkpoint.seq - 1;
    const hash = at < 0 ? AUDIT_GENESIS : (entries[at] as { hash: string }).hash;
    if (hash !== checkpoint.hash) {
      return { valid: false, index: Math.max(at, 0), seq: at < 0 ? null : checkpoint.seq, fault: "checkpoint" };
    }
  }
  return { valid: true, entries: entries.length, headSeq: previousSeq, headHash: previousHash };
}

const UTC_TIME = /^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?Z$/;
const SEQ_HASH = /^([1-9][0-9]{0,15}):([0-9a-f]{64})$/;

/** Whether `text` is a hash as idemgate writes one: 64 lowercase hex digits. */
export function isAuditHash(text: string): boolean {
  return HASH.test(text);
}

/**
 * Reads `SEQ:HASH`, as `verify-audit --head` takes a checkpoint written
 * out: `SEQ` a plain integer from 1 to 2^53 - 1, `HASH` 64 lowercase hex
 * digits. Throws a TypeError otherwise.
 */
export function parseAuditCheckpoint(text: string): AuditCheckpoint {
  const match = SEQ_HASH.exec(text);
  const seq = Number(match?.[1]);
  if (!match || !Number.isSafeInteger(seq)) throw new TypeError(`${JSON.stringify(text)} is not SEQ:HASH`);
  return { seq, hash: match[2] as string };
}

/** Whether every number in a scanned value is within a double's range. */
function finite(scanned: Scan): boolean {
  if (scanned.token !== undefined && /^-?[0-9]/.test(scanned.token) && !Number.isFinite(Number(scanned.token))) return false;
  return (scanned.items ?? []).every(finite) && (scanned.members ?? []).every(([, value]) => finite(value));
}

/**
 * Reads a checkpoint as a `json` sink receives it (the body, its signature
 * already checked by the receiver):
 * `{"type":"idemgate.audit_head","seq":42,"hash":"<64 hex>","at":"2026-12-05T16:00:00Z"}`,
 * members in any order, other members ignored. As strictly as an export:
 * a member named twice or a lone surrogate anywhere, a number out of a
 * double's range, or nesting deeper than 64 levels make it unreadable; so
 * do a `type` other than `idemgate.audit_head`, a `seq` not a plain integer
 * from 1 to 2^53 - 1, a `hash` not 64 lowercase hex digits, and an `at` not
 * `YYYY-MM-DDTHH:MM:SS[.F]Z`. Throws a TypeError (or JSON.parse's
 * SyntaxError) when it cannot be read.
 */
export function readAuditCheckpoint(text: string): AuditCheckpoint {
  if (depthOf(text) > AUDIT_MAX_DEPTH) throw new TypeError(`nested deeper than ${AUDIT_MAX_DEPTH} levels`);
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new TypeError("not a JSON object");
  const top = scan(text, 0);
  if (top.hostile) throw new TypeError("names a member twice or holds a lone surrogate");
  if (!finite(top)) throw new TypeError("holds a number beyond a double's range");
  const record = parsed as Record<string, unknown>;
  if (record.type !== AUDIT_CHECKPOINT_TYPE) throw new TypeError(`its \`type\` is not \`${AUDIT_CHECKPOINT_TYPE}\``);
  const seqToken = top.members?.find(([name]) => name === "seq")?.[1].token;
  const seq = record.seq;
  if (seqToken === undefined || !PLAIN_INTEGER.test(seqToken) || !Number.isSafeInteger(seq) || (seq as number) < 1) {
    throw new TypeError("its `seq` is not an integer from 1 to 2^53 - 1");
  }
  if (typeof record.hash !== "string" || !HASH.test(record.hash)) throw new TypeError("its `hash` is not 64 lowercase hex digits");
  if (typeof record.at !== "string" || !UTC_TIME.test(record.at)) {
    throw new TypeError("its `at` is not an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SSZ)");
  }
  return { seq: seq as number, hash: record.hash, at: record.at };
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
