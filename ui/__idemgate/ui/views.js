// The overview, the lookup form, the bulk re-drive and the lists by state.

import { capital, definitions, duration, h, hidden, LABEL, STATES, table, view, when } from "./dom.js";
import { api, Problem } from "./api.js";
import { clearMessages, confirmDialog, link, notify, refreshButton, route, showError } from "./page.js";

// ---- the lookup form ---------------------------------------------------

export function lookupForm(routes, fixedRoute) {
  const id = (name) => `lookup-${name}`;
  const routeField = fixedRoute
    ? h("input", { type: "hidden", name: "route", value: fixedRoute })
    : h(
        "div",
        { class: "field" },
        h("label", { for: id("route") }, "Route"),
        h("select", { id: id("route"), name: "route" }, routes.map((name) => h("option", { value: name }, name))),
      );
  const form = h(
    "form",
    {
      class: "lookup",
      "aria-labelledby": id("title"),
      novalidate: true,
      onsubmit: (event) => {
        event.preventDefault();
        const data = new FormData(form);
        const key = String(data.get("key") || "");
        if (!key) {
          form.querySelector("input[name=key]").focus();
          showError(new Problem(0, "Enter a key", "the Idempotency-Key (or the key the route takes from the delivery)"));
          return;
        }
        location.hash = link("receipt", {
          route: String(data.get("route") || ""),
          key,
          path: String(data.get("path") || "").trim(),
          tenant_sha256: String(data.get("tenant_sha256") || "").trim(),
        });
      },
    },
    h("h2", { id: id("title") }, "Find a receipt by key"),
    h(
      "div",
      { class: "fields" },
      routeField,
      h(
        "div",
        { class: "field" },
        h("label", { for: id("key") }, "Key"),
        h("input", { id: id("key"), name: "key", required: true, autocomplete: "off", spellcheck: "false" }),
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: id("path") }, "Path ", h("span", { class: "muted" }, "(on a path-scoped route)")),
        h("input", { id: id("path"), name: "path", placeholder: "/webhooks/pay", autocomplete: "off", spellcheck: "false" }),
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: id("tenant") }, "Tenant SHA-256 ", h("span", { class: "muted" }, "(with a tenant header)")),
        h("input", { id: id("tenant"), name: "tenant_sha256", autocomplete: "off", spellcheck: "false", pattern: "[0-9a-f]{64}" }),
      ),
      h("div", { class: "field submit" }, h("button", { type: "submit", class: "primary" }, "Open receipt")),
    ),
  );
  return form;
}

// ---- overview ----------------------------------------------------------

export async function overview() {
  const summary = await api("GET", "/summary");
  const routes = summary.routes || [];
  const cards = routes.map((entry, index) => {
    const title = `route-${index}`;
    const counts = h(
      "ul",
      { class: "counts" },
      STATES.map((state) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              class: `count state-${state}${entry[state] ? "" : " zero"}`,
              href: link("list", { route: entry.route, state }),
              "data-route": entry.route,
              "data-state": state,
            },
            h("span", { class: "n" }, String(entry[state] ?? 0)),
            h("span", { class: "label" }, LABEL[state]),
            hidden(` on ${entry.route}`),
          ),
        ),
      ),
    );
    const facts = [["Oldest pending", entry.oldest_pending_age_ms === null ? "none" : duration(entry.oldest_pending_age_ms)]];
    if (entry.flow) facts.push(["Flow control", flowText(entry.flow)]);
    // With ALERTS set, the route's conditions (SPEC §13): the firing ones.
    if (entry.alerts) facts.push(["Alerts", alertsText(entry.alerts)]);
    if (entry.reconcile) {
      facts.push(["Last reconciliation", lastRunText(entry.reconcile.last_run, entry.reconcile.error)]);
      if (entry.reconcile.last_day) facts.push(["Reconciled, 24 h", dayText(entry.reconcile.last_day)]);
    }
    const actions = h("div", { class: "actions" });
    if (entry.reconcile && !entry.reconcile.error) {
      actions.append(
        h(
          "button",
          { type: "button", onclick: (event) => reconcileNow(entry.route, event.currentTarget) },
          "Reconcile now",
          hidden(` ${entry.route}`),
        ),
      );
    }
    if (entry.dead > 0) {
      actions.append(
        h(
          "button",
          { type: "button", onclick: (event) => bulkRedrive(entry.route, event.currentTarget) },
          entry.dead === 1 ? "Re-drive the dead letter" : `Re-drive all ${entry.dead} dead`,
          hidden(` of ${entry.route}`),
        ),
      );
    }
    return h(
      "article",
      { class: "card", "aria-labelledby": title, "data-route": entry.route },
      h("h2", { id: title }, entry.route),
      counts,
      definitions(facts),
      actions.childElementCount ? actions : null,
      h("div", { class: "progress-slot" }),
    );
  });
  return [
    h(
      "div",
      { class: "heading" },
      h("h1", { tabindex: "-1" }, "Overview"),
      h("div", { class: "toolbar" }, h("span", { class: "muted" }, "As of ", when(summary.at)), refreshButton()),
    ),
    routes.length
      ? h("div", { class: "grid" }, cards)
      : h("p", {}, "This token sees no route."),
    routes.length ? lookupForm(routes.map((entry) => entry.route)) : null,
  ];
}

/** A route's last reconciliation run, in a line (docs/reconciliation.md). */
export function lastRunText(run, error) {
  if (error) return error;
  if (!run) return "no run yet";
  const counts = `${run.listed} listed, ${run.already_received} already received, ${run.filled} filled, ${run.failed} failed`;
  const failed = run.error ? `; the API answered ${run.error.status}: ${run.error.problem}` : "";
  const unfinished = !run.error && !run.complete ? "; goes on from its cursor" : "";
  return `${when(run.started_at)}: ${counts}${failed}${unfinished}`;
}

export function dayText(day) {
  const failedRuns = day.failed_runs ? `, ${day.failed_runs} failed run${day.failed_runs === 1 ? "" : "s"}` : "";
  return `${day.runs} run${day.runs === 1 ? "" : "s"}: ${day.filled} filled, ${day.failed} failed${failedRuns}`;
}

/** Starts a run now; its record comes back when it ends. */
async function reconcileNow(routeName, button) {
  button.disabled = true;
  try {
    const run = await api("POST", "/reconcile", { route: routeName });
    notify(`Reconciled ${routeName}: ${lastRunText(run)}`);
    route(false);
  } catch (error) {
    showError(error);
  } finally {
    button.disabled = false;
  }
}

function alertsText(conditions) {
  const firing = conditions.filter((condition) => condition.firing);
  if (firing.length === 0) return "none firing";
  return firing
    .map((condition) => {
      const since = new Date(condition.firing_since).toISOString().slice(11, 19);
      return `${condition.condition} firing since ${since} UTC (${condition.count} since the last alert)`;
    })
    .join("; ");
}

export function flowText(flow) {
  const limits = [];
  if (flow.max_in_flight !== null && flow.max_in_flight !== undefined) limits.push(`at most ${flow.max_in_flight} at once`);
  if (flow.rate_per_second !== null && flow.rate_per_second !== undefined) limits.push(`${flow.rate_per_second}/s`);
  if (flow.unreachable) return `${limits.join(", ")}; the coordinator did not answer`;
  const parts = [`${flow.permits_in_use ?? 0} in flight`, `${flow.waiting ?? 0} waiting`];
  if (flow.waiting && flow.oldest_wait_ms !== null && flow.oldest_wait_ms !== undefined) {
    parts.push(`oldest waiting ${duration(flow.oldest_wait_ms)}`);
  }
  return `${parts.join(", ")} (${limits.join(", ")})`;
}

// ---- bulk re-drive -----------------------------------------------------

export let bulkRunning = false;

export async function bulkRedrive(routeName, opener) {
  if (bulkRunning) return;
  let expected;
  try {
    // A dry run: the count the re-drive would take, nothing changed.
    const dry = await api("POST", "/receipts/redrive", { route: routeName, state: "dead", dry_run: "true" });
    expected = dry.count ?? 0;
  } catch (error) {
    showError(error);
    return;
  }
  if (!expected) {
    notify(`No dead letter on ${routeName} to re-drive.`);
    return;
  }
  const sure = await confirmDialog({
    title: `Re-drive every dead letter of ${routeName}?`,
    text: [
      `A dry run counts ${expected} dead ${expected === 1 ? "delivery" : "deliveries"}: ${expected === 1 ? "it goes" : "they go"} back to the queue, each with a new epoch, and will be sent to the origin again at the route's pace.`,
      "The gateway works through them a page at a time; this page shows its progress.",
    ],
    confirm: "Re-drive all",
    danger: false,
  });
  if (!sure) return;
  clearMessages();
  bulkRunning = true;
  const slot = opener?.closest("article, section")?.querySelector(".progress-slot") || view;
  const bar = h("progress", { max: String(Math.max(expected, 1)), value: "0", id: "bulk-progress" });
  const text = h("p", { id: "bulk-text", "aria-live": "polite" }, `Re-driving dead letters of ${routeName}…`);
  let stopped = false;
  const stop = h("button", { type: "button", onclick: () => { stopped = true; } }, "Stop after this page");
  const panel = h(
    "div",
    { class: "progress" },
    h("label", { for: "bulk-progress" }, `Bulk re-drive of ${routeName}`),
    bar,
    text,
    stop,
  );
  slot.replaceChildren(panel);
  if (opener) opener.disabled = true;
  stop.focus();
  let redriven = 0;
  let failed = 0;
  let pages = 0;
  let cursor = null;
  try {
    do {
      const page = await api("POST", "/receipts/redrive", { route: routeName, state: "dead", cursor });
      pages += 1;
      redriven += page.redriven;
      failed += page.failed;
      cursor = page.cursor;
      bar.max = Math.max(Number(bar.max), redriven + failed);
      bar.value = redriven + failed;
      text.textContent = `${redriven} re-driven, ${failed} failed (${pages} ${pages === 1 ? "page" : "pages"})${cursor ? "…" : "."}`;
    } while (cursor && !stopped);
    bulkRunning = false;
    await route();
    notify(
      `${stopped && cursor ? "Stopped: " : "Done: "}${redriven} dead ${redriven === 1 ? "letter" : "letters"} of ${routeName} re-driven, ${failed} failed, in ${pages} ${pages === 1 ? "page" : "pages"}.`,
    );
  } catch (error) {
    bulkRunning = false;
    text.textContent = `Stopped after ${redriven} re-driven and ${failed} failed.`;
    stop.remove();
    if (opener) opener.disabled = false;
    showError(error);
  }
}

// ---- lists -------------------------------------------------------------

export async function list(params) {
  const routeName = params.get("route") || "";
  const state = STATES.includes(params.get("state")) ? params.get("state") : "dead";
  const cursor = params.get("cursor");
  const page = await api("GET", "/receipts", { route: routeName, state, cursor });
  const rows = (page.receipts || []).map((row) => [
    h(
      "a",
      {
        href: link("receipt", { route: row.route, key: row.key, path: row.path, tenant_sha256: row.tenant_sha256 }),
        class: "key",
      },
      row.key,
    ),
    row.path || h("span", { class: "muted" }, "—"),
    String(row.attempts),
    row.last_status === null || row.last_status === undefined ? h("span", { class: "muted" }, "—") : String(row.last_status),
    when(row.accepted_at),
    when(row.updated_at),
    row.next_wake_at ? when(row.next_wake_at) : h("span", { class: "muted" }, "—"),
  ]);
  const tabs = h(
    "nav",
    { class: "tabs", "aria-label": `States of ${routeName}` },
    h(
      "ul",
      {},
      STATES.map((other) =>
        h(
          "li",
          {},
          h("a", { href: link("list", { route: routeName, state: other }), "aria-current": other === state ? "page" : null }, LABEL[other]),
        ),
      ),
    ),
  );
  const paging = h(
    "div",
    { class: "paging" },
    cursor ? h("a", { href: link("list", { route: routeName, state }), class: "button" }, "First page") : null,
    page.cursor ? h("a", { href: link("list", { route: routeName, state, cursor: page.cursor }), class: "button" }, "Next page") : null,
  );
  const actions = h("div", { class: "toolbar" }, refreshButton());
  if (state === "dead" && rows.length) {
    actions.prepend(
      h(
        "button",
        { type: "button", onclick: (event) => bulkRedrive(routeName, event.currentTarget) },
        "Re-drive all dead",
      ),
    );
  }
  const section = h(
    "section",
    { "aria-labelledby": "list-title" },
    h("div", { class: "progress-slot" }),
    rows.length
      ? table(
          `${LABEL[state]} receipts of ${routeName}, newest first${cursor ? " (a later page)" : ""}`,
          ["Key", "Path", "Attempts", "Last status", "Accepted", "Updated", "Next wake"],
          rows,
          { cards: true, rowHeader: true },
        )
      : h("p", { class: "empty" }, `No ${LABEL[state]} receipt on ${routeName}${cursor ? " on this page" : ""}.`),
    paging.childElementCount ? paging : null,
  );
  return [
    h(
      "p",
      { class: "crumbs" },
      h("a", { href: link("overview") }, "Overview"),
      " / ",
      routeName,
    ),
    h(
      "div",
      { class: "heading" },
      h("h1", { tabindex: "-1", id: "list-title" }, `${capital(LABEL[state])} · ${routeName}`),
      actions,
    ),
    tabs,
    section,
    lookupForm([routeName], routeName),
  ];
}
