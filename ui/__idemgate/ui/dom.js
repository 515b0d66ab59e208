// The page's building blocks: DOM nodes from data (never HTML from
// strings), the page's fixed elements, and how times read.
export const STATES = ["queued", "in_flight", "failed", "dead", "superseded"];
export const LABEL = {
  queued: "queued",
  in_flight: "in flight",
  failed: "failed",
  dead: "dead",
  // Older than an event of its entity already delivered, on a route that
  // skips those (on_stale = "skip"): kept and re-drivable as a dead letter.
  superseded: "superseded",
  completed: "completed",
};
// A receipt in these states is still being delivered: after a re-drive
// the page watches it until it settles.
export const MOVING = ["queued", "in_flight"];
export const WATCH_MS = 60_000;

export const $ = (id) => document.getElementById(id);
export const view = $("app-view");
export const tokenView = $("token-view");
export const nav = $("nav");


// ---- DOM ---------------------------------------------------------------

export function h(tag, props, ...children) {
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
export const hidden = (text) => h("span", { class: "vh" }, text);

export function table(caption, headings, rows, options = {}) {
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

export function definitions(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs
      .filter(([, value]) => value !== undefined && value !== null && value !== "")
      .map(([term, value]) => h("div", {}, h("dt", {}, term), h("dd", {}, value))),
  );
}

export const badge = (state) => h("span", { class: `badge state-${state}` }, LABEL[state] || state);

// ---- time --------------------------------------------------------------

export function duration(ms) {
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

export function when(ms, precise = false) {
  if (ms === null || ms === undefined) return null;
  const date = new Date(ms);
  const shown = precise
    ? `${date.toLocaleDateString()} ${date.toLocaleTimeString(undefined, { hour12: false })}.${String(date.getMilliseconds()).padStart(3, "0")}`
    : date.toLocaleString(undefined, { hour12: false });
  const delta = ms - Date.now();
  const relative = Math.abs(delta) < 1000 ? "now" : delta < 0 ? `${duration(-delta)} ago` : `in ${duration(delta)}`;
  return h("time", { datetime: date.toISOString(), title: date.toISOString() }, shown, " ", h("span", { class: "muted" }, `(${relative})`));
}


export const capital = (text) => text.charAt(0).toUpperCase() + text.slice(1);
