// What every view shares: notices, addresses (the hash names a view and
// its parameters), focus across a re-render, the refresh button and the
// confirmation dialog. Rendering itself is the router's (router.js), which
// registers it here, so that a view can re-render the page without
// importing the router that imports it.

import { $, h, view } from "./dom.js";
import { Problem, SignedOut } from "./api.js";

let render = async () => {};

/** The router's renderer, registered once at start. */
export function rendersWith(renderer) {
  render = renderer;
}

/** Renders the view the address names; `focus` moves focus to its title. */
export function route(focus = true) {
  return render(focus);
}

// ---- notices -----------------------------------------------------------

export function notify(message) {
  $("notice").textContent = message;
}

export function showError(error) {
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

export function clearMessages() {
  $("error").hidden = true;
  $("error").replaceChildren();
  notify("");
}

// ---- navigation --------------------------------------------------------

export function link(name, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const text = query.toString();
  return `#/${name}${text ? `?${text}` : ""}`;
}

export function current() {
  const hash = location.hash.slice(1);
  if (!hash.startsWith("/")) return { name: "overview", params: new URLSearchParams() };
  const at = hash.indexOf("?");
  const name = (at < 0 ? hash.slice(1) : hash.slice(1, at)) || "overview";
  return { name, params: new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)) };
}

/** What names a control, so that a re-rendered view can focus its twin. */
export function focusLabel(element) {
  if (!element || !view.contains(element) || !element.matches("a, button")) return null;
  return element.textContent;
}

export function restoreFocus(label) {
  if (!label) return;
  [...view.querySelectorAll("a, button")].find((element) => element.textContent === label)?.focus();
}

export const backToOverview = () => h("p", {}, h("a", { href: link("overview") }, "Back to the overview"));

export function refreshButton(label = "Refresh") {
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
export function confirmDialog({ title, text, confirm, danger = true }) {
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
