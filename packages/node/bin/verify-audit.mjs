#!/usr/bin/env node
// verify-audit FILE|- [--head HEAD]: checks an audit chain exported from
// idemgate; prints "ok: ..." and exits 0, or names the first broken entry
// and exits 1; 2 when the file or the head cannot be read. HEAD is a hash
// (64 lowercase hex: the export must end at it), SEQ:HASH (a checkpoint:
// the entry at SEQ must carry HASH, the chain may have grown since), or a
// file holding a checkpoint as a json alert sink received it
// ({"type":"idemgate.audit_head","seq":..,"hash":..,"at":..}).
import { readFileSync } from "node:fs";
import { isAuditHash, parseAuditCheckpoint, readAuditCheckpoint, readAuditExport, verifyAuditChain } from "../dist/esm/index.js";

const USAGE = "usage: verify-audit FILE|- [--head HASH|SEQ:HASH|CHECKPOINT_FILE]";
const args = process.argv.slice(2);
let file;
let headArg;
for (let at = 0; at < args.length; at++) {
  if (args[at] === "--head") {
    if (at + 1 >= args.length) {
      console.error(USAGE);
      process.exit(2);
    }
    headArg = args[++at];
  } else file = args[at];
}
if (!file) {
  console.error(USAGE);
  process.exit(2);
}

// Strictly UTF-8, a BOM kept (so not JSON), as the Rust and Python verifiers read a file.
const readText = (path) => new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(readFileSync(path));

/** A hash, SEQ:HASH, or else a checkpoint file: { head } or { checkpoint }. */
function readHead(arg) {
  if (isAuditHash(arg)) return { head: arg };
  try {
    return { checkpoint: parseAuditCheckpoint(arg) };
  } catch {
    // Not SEQ:HASH: a file.
  }
  let text;
  try {
    text = readText(arg);
  } catch (error) {
    throw new Error(`neither a hash, SEQ:HASH nor a readable checkpoint file: ${error.message}`);
  }
  try {
    return { checkpoint: readAuditCheckpoint(text) };
  } catch (error) {
    throw new Error(`not a checkpoint: ${error.message}`);
  }
}

let options = {};
if (headArg !== undefined) {
  try {
    options = readHead(headArg);
  } catch (error) {
    console.error(`verify-audit: --head ${headArg}: ${error.message}`);
    process.exit(2);
  }
}
let entries;
try {
  entries = readAuditExport(readText(file === "-" ? 0 : file));
} catch (error) {
  console.error(`verify-audit: ${file}: ${error.message}`);
  process.exit(2);
}
const verdict = await verifyAuditChain(entries, options);
if (verdict.valid) {
  console.log(`ok: ${verdict.entries} entries, head ${verdict.headSeq} ${verdict.headHash}`);
} else {
  let why = "";
  if (verdict.fault === "truncated") {
    why = ` (the export ends at seq ${verdict.index}, before the checkpoint's seq ${options.checkpoint.seq})`;
  } else if (verdict.fault === "checkpoint") {
    why = " (its hash disagrees with the checkpoint's)";
  }
  console.log(`broken: entry ${verdict.index} (seq ${verdict.seq}) breaks the chain: ${verdict.fault}${why}`);
  process.exit(1);
}
