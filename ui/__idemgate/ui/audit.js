// The audit panel (#/audit): the audit log's chain, newest first, a page at
// a time, with its head (the latest seq and hash). Every entry is an
// operator act; keys appear only as their SHA-256.

import { api } from "./api.js";
import { h, table, when } from "./dom.js";
import { link, refreshButton } from "./page.js";

export async function audit(params) {
  const cursor = params.get("cursor") || undefined;
  const page = await api("GET", "/audit", { cursor });
  const entries = page.entries || [];
  const rows = entries.map((entry) => [
    String(entry.seq),
    when(entry.at, true),
    entry.actor,
    entry.action,
    entry.route,
    h("code", { class: "wrap" }, entry.target),
    entry.result,
    h("code", { title: entry.hash }, `${entry.hash.slice(0, 12)}…`),
  ]);
  const head = page.head || { seq: 0, hash: "" };
  return [
    h(
      "div",
      { class: "heading" },
      h("h1", { tabindex: "-1" }, "Audit log"),
      h("div", { class: "toolbar" }, refreshButton()),
    ),
    h(
      "p",
      { id: "audit-head" },
      head.seq
        ? ["Latest entry ", h("strong", {}, `#${head.seq}`), ", hash ", h("code", { class: "wrap" }, head.hash), "."]
        : "No operator act is on record yet.",
    ),
    h(
      "p",
      { class: "muted" },
      "Every purge, re-drive and reconciliation run is recorded before its answer. Export the chain with ",
      h("code", {}, "GET /__idemgate/audit?order=oldest"),
      " and check it with verify-audit.",
    ),
    entries.length
      ? table("Audit entries, newest first", ["Seq", "When", "Actor", "Action", "Route", "Target", "Result", "Hash"], rows, {
          rowHeader: true,
          cards: true,
        })
      : null,
    h(
      "p",
      { class: "actions" },
      cursor ? h("a", { href: link("audit") }, "Newest") : null,
      page.cursor ? h("a", { href: link("audit", { cursor: page.cursor }), id: "audit-older" }, "Older entries") : null,
    ),
  ];
}
