// The operator's page (/__idemgate/ui): a client of the operator API under
// /__idemgate/, with the admin token the operator enters, kept in this
// tab's sessionStorage. It has no power of its own: every action is an API
// call with `Authorization: Bearer <token>`, and every answer is shown as
// the API gave it (a problem as its title and detail). It builds the page
// with DOM nodes and text only (never HTML from strings): keys, paths,
// headers and bodies come from senders.
"use strict";

(() => {
  const API = "/__idemgate";
  const TOKEN_KEY = "idemgate.adminToken";
  const STATES = ["queued", "in_flight", "failed", "dead"];
  const LABEL = {
    queued: "queued",
    in_flight: "in flight",
    failed: "failed",
    dead: "dead",
    completed: "completed",
  };
  // A receipt in these states is still being delivered: after a re-drive
  // the page watches it until it settles.
  const MOVING = ["queued", "in_flight"];
  const WATCH_MS = 60_000;

  const $ = (id) => document.getElementById(id);
  const view = $("app-view");
  const tokenView = $("token-view");
  const nav = $("nav");

  // ---- DOM ---------------------------------------------------------------

  function h(tag, props, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") element.className = value;
      else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
      else element.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      element.append(child instanceof Node ? child : String(child));
    }
    return element;
  }

  /** Text for screen readers only. */
  const hidden = (text) => h("span", { class: "vh" }, text);

  function table(caption, headings, rows, options = {}) {
    return h(
      "div",
      { class: "scroll", role: "region", "aria-label": caption, tabindex: "0" },
      h(
        "table",
        { class: options.cards ? "cards" : "" },
        h("caption", { class: options.showCaption ? "" : "vh" }, caption),
        h("thead", {}, h("tr", {}, headings.map((heading) => h("th", { scope: "col" }, heading)))),
        h(
          "tbody",
          {},
          rows.map((cells) =>
            h(
              "tr",
              {},
              cells.map((cell, index) =>
                index === 0 && options.rowHeader
                  ? h("th", { scope: "row", "data-label": headings[index] }, cell)
                  : h("td", { "data-label": headings[index] }, cell),
              ),
            ),
          ),
        ),
      ),
    );
  }

  function definitions(pairs) {
    return h(
      "dl",
      { class: "facts" },
      pairs
        .filter(([, value]) => value !== undefined && value !== null && value !== "")
        .map(([term, value]) => h("div", {}, h("dt", {}, term), h("dd", {}, value))),
    );
  }

  const badge = (state) => h("span", { class: `badge state-${state}` }, LABEL[state] || state);

  // ---- time --------------------------------------------------------------

  function duration(ms) {
    if (ms === null || ms === undefined) return "—";
    const abs = Math.abs(ms);
    if (abs < 1000) return `${Math.round(abs)} ms`;
    if (abs < 60_000) return `${(abs / 1000).toFixed(abs < 10_000 ? 1 : 0)} s`;
    const minutes = Math.floor(abs / 60_000);
    if (minutes < 60) return `${minutes} min ${Math.floor((abs % 60_000) / 1000)} s`;
    const hours = Math.floor(minutes / 60);
    if (hours < 48) return `${hours} h ${minutes % 60} min`;
    return `${Math.floor(hours / 24)} d ${hours % 24} h`;
  }

  function when(ms, precise = false) {
    if (ms === null || ms === undefined) return null;
    const date = new Date(ms);
    const shown = precise
      ? `${date.toLocaleDateString()} ${date.toLocaleTimeString(undefined, { hour12: false })}.${String(date.getMilliseconds()).padStart(3, "0")}`
      : date.toLocaleString(undefined, { hour12: false });
    const delta = ms - Date.now();
    const relative = Math.abs(delta) < 1000 ? "now" : delta < 0 ? `${duration(-delta)} ago` : `in ${duration(delta)}`;
    return h("time", { datetime: date.toISOString(), title: date.toISOString() }, shown, " ", h("span", { class: "muted" }, `(${relative})`));
  }

  // ---- the API -----------------------------------------------------------

  class Problem extends Error {
    constructor(status, title, detail, type) {
      super(title);
      this.status = status;
      this.title = title;
      this.detail = detail || "";
      this.type = type || "";
    }
    is(name) {
      return this.type === `urn:idemgate:problem:${name}`;
    }
  }

  /** The token was refused: the page is back at the prompt. */
  class SignedOut extends Error {}

  async function api(method, path, params = {}) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) {
      showTokenView("");
      throw new SignedOut();
    }
    const url = new URL(API + path, location.origin);
    for (const [name, value] of Object.entries(params)) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
    }
    let response;
    try {
      response = await fetch(url, {
        method,
        headers: { Authorization: `Bearer ${token}`, Accept: "application/json, application/problem+json" },
        cache: "no-store",
        // Same-origin cookies go along: behind Cloudflare Access, its
        // session cookie is what lets the call through.
        credentials: "same-origin",
        redirect: "manual",
      });
    } catch (error) {
      throw new Problem(0, "The gateway did not answer", String(error && error.message ? error.message : error));
    }
    if (response.type === "opaqueredirect") {
      // The API never redirects; a proxy in front of it does (Cloudflare
      // Access, when its session has ended).
      throw new Problem(0, "Redirected to a sign-in", "something in front of the gateway (Cloudflare Access?) wants a new sign-in: reload this page");
    }
    const text = await response.text();
    let body = null;
    if (text && (response.headers.get("content-type") || "").includes("json")) {
      try {
        body = JSON.parse(text);
      } catch {
        body = null;
      }
    }
    if (response.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      const problem = body && body.title ? `${body.title}: ${body.detail || ""}` : "401";
      showTokenView(`The gateway refused the token (${problem}). Enter it again.`);
      throw new SignedOut();
    }
    if (!response.ok) {
      if (body && body.title) throw new Problem(response.status, body.title, body.detail, body.type);
      throw new Problem(response.status, `${response.status} ${response.statusText}`.trim(), text.slice(0, 300));
    }
    return body;
  }

  // ---- notices -----------------------------------------------------------

  function notify(message) {
    $("notice").textContent = message;
  }

  function showError(error) {
    if (error instanceof SignedOut) return;
    const box = $("error");
    box.replaceChildren();
    if (error instanceof Problem) {
      box.append(
        h("strong", {}, error.title),
        error.status ? h("span", { class: "muted" }, ` (${error.status})`) : null,
        error.detail ? h("span", {}, `: ${error.detail}`) : null,
      );
    } else {
      box.append(h("strong", {}, "Something went wrong on this page"), `: ${error && error.message ? error.message : error}`);
      console.warn(error);
    }
    box.hidden = false;
  }

  function clearMessages() {
    $("error").hidden = true;
    $("error").replaceChildren();
    notify("");
  }

  // ---- the token ---------------------------------------------------------

  function showTokenView(message) {
    stopWatching();
    view.hidden = true;
    view.replaceChildren();
    nav.hidden = true;
    tokenView.hidden = false;
    $("error").hidden = true;
    $("token-error").textContent = message || "";
    const input = $("token");
    input.value = "";
    input.setAttribute("aria-invalid", message ? "true" : "false");
    if (message) input.setAttribute("aria-describedby", "token-error");
    else input.removeAttribute("aria-describedby");
    input.focus();
  }

  $("token-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) {
      $("token-error").textContent = "Enter the admin token.";
      $("token").setAttribute("aria-invalid", "true");
      $("token").setAttribute("aria-describedby", "token-error");
      $("token").focus();
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token-error").textContent = "";
    try {
      // The token is tried once here, so a wrong one is refused at once.
      await api("GET", "/summary");
    } catch (error) {
      if (!(error instanceof SignedOut)) {
        sessionStorage.removeItem(TOKEN_KEY);
        $("token-error").textContent =
          error instanceof Problem ? `${error.title}${error.detail ? `: ${error.detail}` : ""}` : String(error);
        $("token").focus();
      }
      return;
    }
    tokenView.hidden = true;
    if (!location.hash.startsWith("#/")) history.replaceState(null, "", "#/overview");
    route();
  });

  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    clearMessages();
    notify("Signed out: the token was removed from this tab.");
    showTokenView("");
  });

  // ---- navigation --------------------------------------------------------

  function link(name, params = {}) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) {
      if (value !== undefined && value !== null && value !== "") query.set(key, value);
    }
    const text = query.toString();
    return `#/${name}${text ? `?${text}` : ""}`;
  }

  function current() {
    const hash = location.hash.slice(1);
    if (!hash.startsWith("/")) return { name: "overview", params: new URLSearchParams() };
    const at = hash.indexOf("?");
    const name = (at < 0 ? hash.slice(1) : hash.slice(1, at)) || "overview";
    return { name, params: new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)) };
  }

  let generation = 0;

  /** Renders the view the address names; `focus` moves focus to its title. */
  async function route(focus = true) {
    if (!sessionStorage.getItem(TOKEN_KEY)) {
      showTokenView("");
      return;
    }
    stopWatching();
    tokenView.hidden = true;
    nav.hidden = false;
    view.hidden = false;
    const mine = ++generation;
    const focused = focusLabel(document.activeElement);
    const { name, params } = current();
    const render = { overview, list, receipt }[name] || overview;
    view.setAttribute("aria-busy", "true");
    try {
      const content = await render(params);
      if (mine !== generation) return;
      view.replaceChildren(...content);
      document.title = `${view.querySelector("h1")?.textContent || "Operator"} · idemgate`;
      if (focus) view.querySelector("h1")?.focus();
      else restoreFocus(focused);
    } catch (error) {
      if (mine !== generation) return;
      if (error instanceof SignedOut) return;
      view.replaceChildren(h("h1", { tabindex: "-1" }, "Could not load this view"), backToOverview());
      showError(error);
      if (focus) view.querySelector("h1").focus();
    } finally {
      view.removeAttribute("aria-busy");
    }
  }

  /** What names a control, so that a re-rendered view can focus its twin. */
  function focusLabel(element) {
    if (!element || !view.contains(element) || !element.matches("a, button")) return null;
    return element.textContent;
  }

  function restoreFocus(label) {
    if (!label) return;
    [...view.querySelectorAll("a, button")].find((element) => element.textContent === label)?.focus();
  }

  window.addEventListener("hashchange", () => {
    clearMessages();
    route();
  });

  const backToOverview = () => h("p", {}, h("a", { href: link("overview") }, "Back to the overview"));

  function refreshButton(label = "Refresh") {
    return h(
      "button",
      {
        type: "button",
        onclick: async () => {
          clearMessages();
          await route(false);
          notify(`Refreshed at ${new Date().toLocaleTimeString(undefined, { hour12: false })}.`);
        },
      },
      label,
    );
  }

  // ---- confirmation ------------------------------------------------------

  /** A modal question; resolves true when the operator confirms. */
  function confirmDialog({ title, text, confirm, danger = true }) {
    const dialog = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").replaceChildren(...(Array.isArray(text) ? text : [text]).map((part) => h("p", {}, part)));
    const ok = $("confirm-ok");
    ok.textContent = confirm;
    ok.className = danger ? "danger" : "primary";
    const opener = document.activeElement;
    return new Promise((resolve) => {
      const done = (answer) => {
        ok.removeEventListener("click", yes);
        $("confirm-cancel").removeEventListener("click", no);
        dialog.removeEventListener("cancel", no);
        if (dialog.open) dialog.close();
        if (opener && opener.isConnected) opener.focus();
        resolve(answer);
      };
      const yes = () => done(true);
      const no = (event) => {
        if (event) event.preventDefault();
        done(false);
      };
      ok.addEventListener("click", yes);
      $("confirm-cancel").addEventListener("click", no);
      dialog.addEventListener("cancel", no);
      dialog.showModal();
      // The safe answer has the focus: Enter alone never destroys.
      $("confirm-cancel").focus();
    });
  }

  // ---- the lookup form ---------------------------------------------------

  function lookupForm(routes, fixedRoute) {
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

  async function overview() {
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
      const actions = h("div", { class: "actions" });
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

  function flowText(flow) {
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

  let bulkRunning = false;

  async function bulkRedrive(routeName, opener) {
    if (bulkRunning) return;
    let expected;
    try {
      const summary = await api("GET", "/summary");
      expected = (summary.routes || []).find((entry) => entry.route === routeName)?.dead ?? 0;
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
        `About ${expected} dead ${expected === 1 ? "delivery goes" : "deliveries go"} back to the queue, each with a new epoch, and will be sent to the origin again.`,
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

  async function list(params) {
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

  const capital = (text) => text.charAt(0).toUpperCase() + text.slice(1);

  // ---- one receipt -------------------------------------------------------

  function addressOf(params) {
    return {
      route: params.get("route") || "",
      key: params.get("key") || "",
      path: params.get("path") || "",
      tenant_sha256: params.get("tenant_sha256") || "",
    };
  }

  async function receipt(params) {
    const address = addressOf(params);
    const crumbs = h(
      "p",
      { class: "crumbs" },
      h("a", { href: link("overview") }, "Overview"),
      " / ",
      h("a", { href: link("list", { route: address.route, state: "dead" }) }, address.route),
      " / ",
      address.key,
    );
    let shown;
    try {
      shown = await api("GET", "/receipts", address);
    } catch (error) {
      if (error instanceof Problem && error.status === 404) {
        return [
          crumbs,
          h("h1", { tabindex: "-1" }, `No receipt for ${address.key}`),
          h("p", {}, `${error.title}: ${error.detail}`),
          h(
            "p",
            {},
            "A receipt leaves once it expires or is purged; on a path-scoped route the key is found with its path.",
          ),
        ];
      }
      throw error;
    }
    return receiptView(shown, address, crumbs);
  }

  function receiptView(receipt, address, crumbs) {
    const actions = h("div", { class: "actions" });
    // The acts name the life of the key shown here: if the key has begun
    // another since, the answer is 409 receipt-changed and nothing is done.
    const life = { ...address, receipt_id: receipt.receipt_id };
    if (receipt.state !== "completed") {
      actions.append(h("button", { type: "button", class: "primary", onclick: () => redriveOne(life) }, "Re-drive"));
    }
    actions.append(
      h("button", { type: "button", class: "danger", onclick: () => purge(life, receipt.state) }, "Purge"),
      refreshButton(),
    );
    const facts = definitions([
      ["State", badge(receipt.state)],
      ["Receipt id", h("code", {}, receipt.receipt_id)],
      ["Route", receipt.route],
      ["Key", h("code", {}, receipt.key)],
      ["Path", receipt.path ? h("code", {}, receipt.path) : null],
      ["Tenant SHA-256", receipt.tenant_sha256 ? h("code", {}, receipt.tenant_sha256) : null],
      ["Delivery", receipt.delivery],
      ["Epoch", String(receipt.epoch)],
      ["Duplicates", String(receipt.duplicates)],
      ["First seen", when(receipt.first_seen_at)],
      ["Updated", when(receipt.updated_at)],
      ["Next attempt", when(receipt.next_attempt_at)],
      ["Lease expires", when(receipt.lease_expires_at)],
      ["Expires", when(receipt.expires_at)],
      ["Fingerprint", h("code", { class: "wrap" }, receipt.fingerprint)],
    ]);
    return [
      crumbs,
      h("div", { class: "heading" }, h("h1", { tabindex: "-1" }, "Receipt ", h("code", {}, receipt.key)), actions),
      h("div", { class: "progress-slot" }),
      facts,
      h("section", { "aria-labelledby": "timeline-title" }, h("h2", { id: "timeline-title" }, "Timeline"), timeline(receipt)),
      h("section", { "aria-labelledby": "response-title" }, h("h2", { id: "response-title" }, "Stored response"), storedResponse(receipt)),
      h("section", { "aria-labelledby": "request-title" }, h("h2", { id: "request-title" }, "Stored request"), storedRequest(receipt)),
    ];
  }

  function timeline(receipt) {
    const events = [];
    events.push({ at: receipt.first_seen_at, order: 0, node: [h("strong", {}, "Accepted"), " ", when(receipt.first_seen_at, true)] });
    (receipt.attempts || []).forEach((attempt, index) => {
      const outcome = attempt.error
        ? h("span", { class: "bad" }, `error: ${attempt.error}`)
        : attempt.status !== null && attempt.status !== undefined
          ? h("span", { class: attempt.status < 300 ? "good" : attempt.status < 500 ? "warn" : "bad" }, `status ${attempt.status}`)
          : h("span", { class: "muted" }, "no answer yet");
      events.push({
        at: attempt.started_at,
        order: 1,
        node: [
          h("strong", {}, `Attempt ${index + 1}`),
          " ",
          h("span", { class: "epoch" }, `epoch ${attempt.epoch}`),
          h(
            "dl",
            { class: "inline" },
            h("div", {}, h("dt", {}, "Started"), h("dd", {}, when(attempt.started_at, true))),
            h("div", {}, h("dt", {}, "Ended"), h("dd", {}, attempt.ended_at ? when(attempt.ended_at, true) : "not yet")),
            attempt.ended_at
              ? h("div", {}, h("dt", {}, "Took"), h("dd", {}, duration(attempt.ended_at - attempt.started_at)))
              : null,
            h("div", {}, h("dt", {}, "Outcome"), h("dd", {}, outcome)),
          ),
        ],
      });
    });
    for (const [field, text] of [
      ["completed_at", "Completed"],
      ["failed_at", "Failed"],
      ["dead_at", "Dead: no retry left"],
    ]) {
      if (receipt[field]) {
        events.push({ at: receipt[field], order: 2, node: [h("strong", {}, text), " ", when(receipt[field], true)] });
      }
    }
    if (receipt.next_attempt_at) {
      events.push({ at: receipt.next_attempt_at, order: 3, node: [h("strong", {}, "Next attempt"), " ", when(receipt.next_attempt_at, true)] });
    }
    events.sort((a, b) => a.at - b.at || a.order - b.order);
    return h("ol", { class: "timeline" }, events.map((event) => h("li", {}, event.node)));
  }

  function headerTable(caption, headers) {
    if (!headers || !headers.length) return h("p", { class: "muted" }, "No headers.");
    return table(
      caption,
      ["Header", "Value"],
      headers.map(([name, value]) => [h("code", {}, name), h("code", { class: "wrap" }, value)]),
      { rowHeader: true },
    );
  }

  function storedResponse(receipt) {
    const response = receipt.response;
    if (!response) {
      const why = {
        completed: "None stored.",
        dead: "None: no attempt succeeded. Re-drive it once the origin is fixed.",
      };
      return h("p", { class: "muted" }, why[receipt.state] || "None yet: a response is stored when the delivery completes.");
    }
    let body;
    if (!response.body_stored) body = h("p", { class: "muted" }, `The body (${response.body_bytes} bytes) was over the stored limit: not kept.`);
    else if (response.body !== undefined) body = h("pre", { tabindex: "0", "aria-label": "Response body" }, response.body || "(empty)");
    else body = [h("p", { class: "muted" }, "Not UTF-8; shown as base64:"), h("pre", { tabindex: "0", "aria-label": "Response body, base64" }, response.body_base64)];
    return h(
      "div",
      {},
      definitions([
        ["Status", String(response.status)],
        ["Body", `${response.body_bytes} bytes`],
      ]),
      headerTable("Stored response headers", response.headers),
      body,
    );
  }

  function storedRequest(receipt) {
    const request = receipt.request;
    if (!request) {
      return h("p", { class: "muted" }, "Not kept: an async delivery's request is kept until it completes.");
    }
    return h(
      "div",
      {},
      definitions([
        ["Method", request.method],
        ["URL", h("code", { class: "wrap" }, request.url)],
        ["Body", `${request.body_bytes} bytes`],
      ]),
      h("p", { class: "muted" }, "Credentials and signatures are masked by the gateway."),
      headerTable("Stored request headers", request.headers),
    );
  }

  // ---- actions on one receipt --------------------------------------------

  let watching = null;

  function stopWatching() {
    if (watching) clearTimeout(watching);
    watching = null;
  }

  /** Re-reads the receipt in view until it leaves queued and in flight. */
  function watch(address, until) {
    stopWatching();
    watching = setTimeout(async () => {
      watching = null;
      const { name, params } = current();
      if (name !== "receipt" || params.get("key") !== address.key) return;
      let shown;
      try {
        shown = await api("GET", "/receipts", address);
      } catch (error) {
        showError(error);
        return;
      }
      const { name: nowName, params: nowParams } = current();
      if (nowName !== "receipt" || nowParams.get("key") !== address.key) return;
      const focused = focusLabel(document.activeElement);
      const crumbs = view.querySelector(".crumbs");
      view.replaceChildren(...receiptView(shown, address, crumbs));
      // Keeps the keyboard where it was across the re-render.
      restoreFocus(focused);
      if (MOVING.includes(shown.state) && Date.now() < until) {
        watch(address, until);
      } else {
        notify(`Receipt ${address.key} is ${LABEL[shown.state] || shown.state} (epoch ${shown.epoch}).`);
      }
    }, 700);
  }

  async function redriveOne(address) {
    clearMessages();
    try {
      const shown = await api("POST", "/receipts/redrive", address);
      const crumbs = view.querySelector(".crumbs");
      view.replaceChildren(...receiptView(shown, address, crumbs));
      view.querySelector("h1").focus();
      notify(`Re-driven: ${address.key} is ${LABEL[shown.state] || shown.state} with epoch ${shown.epoch}; watching it.`);
      watch(address, Date.now() + WATCH_MS);
    } catch (error) {
      showError(error);
    }
  }

  async function purge(address, state) {
    const sure = await confirmDialog({
      title: `Purge ${address.key}?`,
      text: [
        `The receipt of ${address.key} on ${address.route} is deleted: its stored response and its attempts are gone.`,
        "A later delivery with this key is then new, and is forwarded to the origin again.",
      ],
      confirm: "Purge",
    });
    if (!sure) return;
    clearMessages();
    try {
      await api("DELETE", "/receipts", address);
      purged(address, state, false);
    } catch (error) {
      if (error instanceof Problem && error.is("pending-delivery")) {
        const forced = await confirmDialog({
          title: `${address.key} is still being delivered`,
          text: [
            `${error.title}: ${error.detail}`,
            "Its sender was told it was accepted. Purged now, it is never delivered: nothing retries it, and the sender will not send it again.",
            "Purge it anyway?",
          ],
          confirm: "Force purge",
        });
        if (!forced) {
          notify(`Kept ${address.key}: not purged.`);
          return;
        }
        try {
          await api("DELETE", "/receipts", { ...address, force: "true" });
          purged(address, state, true);
        } catch (again) {
          showError(again);
        }
        return;
      }
      showError(error);
    }
  }

  function purged(address, state, forced) {
    const back = link("list", { route: address.route, state: STATES.includes(state) ? state : "dead" });
    history.replaceState(null, "", back);
    route().then(() => notify(`${forced ? "Force purged" : "Purged"} ${address.key} on ${address.route}.`));
  }

  // ---- start -------------------------------------------------------------

  if (sessionStorage.getItem(TOKEN_KEY)) route();
  else showTokenView("");
})();
