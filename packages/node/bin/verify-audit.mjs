#!/usr/bin/env node
// verify-audit FILE|- [--head HASH]: checks an audit chain exported from
// idemgate; prints "ok: ..." and exits 0, or names the first broken entry
// and exits 1; 2 when the file cannot be read.
import { readFileSync } from "node:fs";
import { readAuditExport, verifyAuditChain } from "../dist/esm/index.js";

const args = process.argv.slice(2);
let file;
let head;
for (let at = 0; at < args.length; at++) {
  if (args[at] === "--head") head = args[++at];
  else file = args[at];
}
if (!file) {
  console.error("usage: verify-audit FILE|- [--head HASH]");
  process.exit(2);
}
let entries;
try {
  // Strictly UTF-8, a BOM kept (so not JSON), as the Rust and Python verifiers read a file.
  const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(readFileSync(file === "-" ? 0 : file));
  entries = readAuditExport(text);
} catch (error) {
  console.error(`verify-audit: ${file}: ${error.message}`);
  process.exit(2);
}
const verdict = await verifyAuditChain(entries, { head });
if (verdict.valid) {
  console.log(`ok: ${verdict.entries} entries, head ${verdict.headSeq} ${verdict.headHash}`);
} else {
  console.log(`broken: entry ${verdict.index} (seq ${verdict.seq}) breaks the chain: ${verdict.fault}`);
  process.exit(1);
}
