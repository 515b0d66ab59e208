// What every view shares: notices, the token prompt, navigation between
// views by the address's hash, and the confirmation dialog.

import { $, h, nav, tokenView, view, when } from "./dom.js";
import { api, Problem, SignedOut, TOKEN_KEY } from "./api.js";
import { list, overview } from "./views.js";
import { receipt, stopWatching } from "./receipt.js";
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

// ---- the token ---------------------------------------------------------

export function showTokenView(message) {
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

export let generation = 0;

/** Renders the view the address names; `focus` moves focus to its title. */
export async function route(focus = true) {
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
export function focusLabel(element) {
  if (!element || !view.contains(element) || !element.matches("a, button")) return null;
  return element.textContent;
}

export function restoreFocus(label) {
  if (!label) return;
  [...view.querySelectorAll("a, button")].find((element) => element.textContent === label)?.focus();
}

window.addEventListener("hashchange", () => {
  clearMessages();
  route();
});

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
