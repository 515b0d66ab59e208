// The router: renders the view the address's hash names, and the token
// prompt the page starts from and falls back to when the API refuses the
// token. It registers both where the views and the API client call them
// (page.js, api.js).

import { $, h, nav, tokenView, view } from "./dom.js";
import { api, Problem, SignedOut, TOKEN_KEY, whenSignedOut } from "./api.js";
import { backToOverview, clearMessages, current, focusLabel, notify, rendersWith, restoreFocus, showError } from "./page.js";
import { list, overview } from "./views.js";
import { receipt, stopWatching } from "./receipt.js";
import { audit } from "./audit.js";

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
  render();
});

$("sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  clearMessages();
  notify("Signed out: the token was removed from this tab.");
  showTokenView("");
});

let generation = 0;

/** Renders the view the address names; `focus` moves focus to its title. */
async function render(focus = true) {
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
  const render = { overview, list, receipt, audit }[name] || overview;
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

window.addEventListener("hashchange", () => {
  clearMessages();
  render();
});

rendersWith(render);
whenSignedOut(showTokenView);
