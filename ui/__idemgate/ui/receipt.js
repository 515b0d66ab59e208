// One receipt: its view, its timeline and stored request and response,
// and what an operator can do to it (re-drive, purge).

import { badge, definitions, duration, h, LABEL, MOVING, STATES, table, view, WATCH_MS, when } from "./dom.js";
import { api, Problem } from "./api.js";
import { clearMessages, confirmDialog, current, focusLabel, link, notify, refreshButton, restoreFocus, route, showError } from "./page.js";

// ---- one receipt -------------------------------------------------------

export function addressOf(params) {
  return {
    route: params.get("route") || "",
    key: params.get("key") || "",
    path: params.get("path") || "",
    tenant_sha256: params.get("tenant_sha256") || "",
  };
}

export async function receipt(params) {
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

export function receiptView(receipt, address, crumbs) {
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
    // The request this event came in, for an event of a sender's batch.
    ["Batch", receipt.batch ? h("code", {}, receipt.batch) : null],
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

export function timeline(receipt) {
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
      const said = receipt.state === "superseded" && field === "dead_at"
        ? "Superseded: older than an event of its entity already delivered, not forwarded"
        : text;
      events.push({ at: receipt[field], order: 2, node: [h("strong", {}, said), " ", when(receipt[field], true)] });
    }
  }
  if (receipt.next_attempt_at) {
    events.push({ at: receipt.next_attempt_at, order: 3, node: [h("strong", {}, "Next attempt"), " ", when(receipt.next_attempt_at, true)] });
  }
  events.sort((a, b) => a.at - b.at || a.order - b.order);
  return h("ol", { class: "timeline" }, events.map((event) => h("li", {}, event.node)));
}

export function headerTable(caption, headers) {
  if (!headers || !headers.length) return h("p", { class: "muted" }, "No headers.");
  return table(
    caption,
    ["Header", "Value"],
    headers.map(([name, value]) => [h("code", {}, name), h("code", { class: "wrap" }, value)]),
    { rowHeader: true },
  );
}

export function storedResponse(receipt) {
  const response = receipt.response;
  if (!response) {
    const why = {
      completed: "None stored.",
      dead: "None: no attempt succeeded. Re-drive it once the origin is fixed.",
      superseded: "None: it was not forwarded. A re-drive forwards it marked Idempotency-Stale: true.",
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

export function storedRequest(receipt) {
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

export let watching = null;

export function stopWatching() {
  if (watching) clearTimeout(watching);
  watching = null;
}

/** Re-reads the receipt in view until it leaves queued and in flight. */
export function watch(address, until) {
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

export async function redriveOne(address) {
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

export async function purge(address, state) {
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

export function purged(address, state, forced) {
  const back = link("list", { route: address.route, state: STATES.includes(state) ? state : "dead" });
  history.replaceState(null, "", back);
  route().then(() => notify(`${forced ? "Force purged" : "Purged"} ${address.key} on ${address.route}.`));
}
