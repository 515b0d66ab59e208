// The operator API, called with the admin token kept in this tab's
// sessionStorage; a problem comes back as a `Problem`.

export const API = "/__idemgate";
export const TOKEN_KEY = "idemgate.adminToken";

// ---- the API -----------------------------------------------------------

/** What the page does when the token is missing or refused: the router
 * registers its token prompt (router.js). */
let onSignedOut = () => {};

export function whenSignedOut(handler) {
  onSignedOut = handler;
}

export class Problem extends Error {
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
export class SignedOut extends Error {}

export async function api(method, path, params = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    onSignedOut("");
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
    onSignedOut(`The gateway refused the token (${problem}). Enter it again.`);
    throw new SignedOut();
  }
  if (!response.ok) {
    if (body && body.title) throw new Problem(response.status, body.title, body.detail, body.type);
    throw new Problem(response.status, `${response.status} ${response.statusText}`.trim(), text.slice(0, 300));
  }
  return body;
}
