// The operator's page in a real browser: Debian's chromium, headless,
// driven by Playwright, against a gateway under `wrangler dev` that
// tests/e2e/ui.rs started with dead letters of a failing origin:
//
//   node tests/ui/operator-page.mjs <gateway url> <admin token> <control url>
//
// The control url makes the origin recover (`POST /origin?...`). Every step
// is saved as a screenshot under target/ui-screenshots/; with
// IDEMGATE_UPDATE_SCREENSHOT=1 the overview also goes to
// docs/images/operator-page.png. Fails (exit 1) on any failed expectation,
// any Content-Security-Policy violation, any console error or uncaught
// exception, and any serious or critical axe violation.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright";
import { AxeBuilder } from "@axe-core/playwright";

const [base, token, control] = process.argv.slice(2);
if (!base || !token || !control) {
  console.error("usage: node operator-page.mjs <gateway url> <admin token> <control url>");
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const shots = path.join(root, "target/ui-screenshots");
fs.rmSync(shots, { recursive: true, force: true });
fs.mkdirSync(shots, { recursive: true });
const executablePath =
  process.env.CHROMIUM ||
  ["/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser"].find((file) => fs.existsSync(file));
const PAGE = `${base}/__idemgate/ui`;

// A hung browser must not hang the test run.
const deadline = setTimeout(() => {
  console.error("operator-page.mjs: over 5 minutes, giving up");
  process.exit(1);
}, 300_000);

// ---- watching the browser -------------------------------------------------

const problems = [];

// Chrome logs a failed fetch as a console error ("Failed to load resource:
// the server responded with a status of 401"). The scenario makes the API
// answer 401 (a wrong token) and 409 (a pending delivery) on purpose:
// those, from the API alone, are expected; any other error is not.
const EXPECTED_API_STATUSES = [401, 404, 409];

function watch(page, label) {
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    const text = message.text();
    const where = message.location().url || "";
    const status = /status of (\d{3})/.exec(text);
    if (
      status &&
      EXPECTED_API_STATUSES.includes(Number(status[1])) &&
      new URL(where, base).pathname.startsWith("/__idemgate/") &&
      !new URL(where, base).pathname.startsWith("/__idemgate/ui")
    ) {
      return;
    }
    problems.push(`${label}: console error: ${text} (${where})`);
  });
  page.on("pageerror", (error) => problems.push(`${label}: uncaught exception: ${error.message}`));
  page.on("requestfailed", (request) => {
    problems.push(`${label}: request failed: ${request.method()} ${request.url()} ${request.failure()?.errorText}`);
  });
  page.on("response", (response) => {
    const url = new URL(response.url());
    if (url.origin !== new URL(base).origin) problems.push(`${label}: a request left the gateway: ${url}`);
    if (url.pathname.startsWith("/__idemgate/ui") && response.status() >= 400) {
      problems.push(`${label}: the page's own file failed: ${response.status()} ${url.pathname}`);
    }
  });
}

async function newContext(browser, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
  // Violations are reported as they happen, from any page of the context.
  await context.exposeBinding("__cspViolation", (source, text) => problems.push(`CSP violation: ${text}`));
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (event) => {
      window.__cspViolation(`${event.violatedDirective} blocked ${event.blockedURI || "(inline)"} at ${event.sourceFile}:${event.lineNumber}`);
    });
  });
  return context;
}

function fail(message) {
  throw new Error(message);
}

function assertClean(where) {
  if (problems.length) fail(`${where}:\n  ${problems.join("\n  ")}`);
}

// ---- steps ------------------------------------------------------------------

let stepNumber = 0;

async function step(page, name, body) {
  stepNumber += 1;
  const started = Date.now();
  process.stdout.write(`  ${String(stepNumber).padStart(2)}. ${name}`);
  const file = `${String(stepNumber).padStart(2, "0")}-${name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "")}`;
  try {
    await body();
  } catch (error) {
    await page.screenshot({ path: path.join(shots, `${file}-FAILED.png`), fullPage: true }).catch(() => {});
    throw new Error(`step ${stepNumber} (${name}): ${error.message}${problems.length ? `\n  ${problems.join("\n  ")}` : ""}`);
  }
  await page.screenshot({ path: path.join(shots, `${file}.png`), fullPage: true });
  assertClean(`step ${stepNumber} (${name})`);
  console.log(` (${Date.now() - started} ms)`);
}

/** Polls `check` until it holds. */
async function until(what, check, timeout = 15_000) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last === true) return;
    } catch (error) {
      last = error.message;
    }
    if (Date.now() > end) fail(`not within ${timeout} ms: ${what} (last: ${last})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function textOf(locator) {
  return ((await locator.innerText({ timeout: 2_000 })) || "").replace(/\s+/g, " ").trim();
}

async function expectText(locator, expected, what, timeout) {
  await until(
    what || `text ${expected}`,
    async () => {
      const text = await textOf(locator);
      return (expected instanceof RegExp ? expected.test(text) : text.includes(expected)) || text;
    },
    timeout,
  );
}

const heading = (page) => page.locator("#app-view h1");
const notice = (page) => page.locator("#notice");
const count = (page, route, state) => page.locator(`a[data-route="${route}"][data-state="${state}"] .n`);

/** axe: no serious or critical violation on what the page shows now. */
async function accessible(page, where) {
  const results = await new AxeBuilder({ page }).analyze();
  const bad = results.violations.filter((violation) => ["serious", "critical"].includes(violation.impact));
  if (bad.length) {
    fail(
      `axe on ${where}:\n${bad
        .map((violation) => `  ${violation.impact} ${violation.id}: ${violation.help}\n    ${violation.nodes.map((node) => node.target.join(" ")).join("\n    ")}`)
        .join("\n")}`,
    );
  }
}

async function signIn(page, value) {
  await page.getByLabel("Admin token").fill(value);
  await page.getByRole("button", { name: "Sign in" }).click();
}

async function fixOrigin() {
  const response = await fetch(`${control}/origin?prefix=/ui/&failing=false`, { method: "POST" });
  if (!response.ok) fail(`the control socket answered ${response.status}`);
}

// ---- the scenario with a pointer ------------------------------------------

async function withPointer(browser) {
  console.log("operator page, with a pointer:");
  const context = await newContext(browser);
  const page = await context.newPage();
  watch(page, "pointer");

  await step(page, "a wrong token is refused", async () => {
    const response = await page.goto(PAGE);
    const csp = response.headers()["content-security-policy"] || "";
    if (!csp.includes("frame-ancestors 'none'")) fail(`no strict CSP: ${csp}`);
    await accessible(page, "the token prompt");
    await signIn(page, "not-the-admin-token");
    await expectText(page.locator("#token-error"), "refused the token", "the refusal");
    await expectText(page.locator("#token-error"), "Unauthorized", "the problem's title");
    if (!(await page.locator("#token-view").isVisible())) fail("not at the prompt");
    const stored = await page.evaluate(() => sessionStorage.getItem("idemgate.adminToken"));
    if (stored !== null) fail("a refused token was kept");
  });

  await step(page, "the token shows the counts", async () => {
    await signIn(page, token);
    await expectText(heading(page), "Overview");
    await expectText(count(page, "payments", "dead"), "32", "32 dead on payments");
    await expectText(count(page, "refunds", "dead"), "1");
    await expectText(count(page, "ordered", "superseded"), "1", "1 superseded on the ordered route");
    await expectText(count(page, "held", "failed"), "1");
    await expectText(page.locator('article[data-route="held"]'), /Oldest pending\s*\d/, "the oldest pending age");
    await expectText(page.locator('article[data-route="payments"]'), /Alerts\s*dead firing since/, "the dead alert firing");
    await expectText(page.locator('article[data-route="limited"]'), "Alerts", "a quiet route's alerts line");
    await expectText(page.locator('article[data-route="limited"]'), "none firing");
    await expectText(page.locator('article[data-route="limited"]'), "Flow control", "the flow line");
    await expectText(page.locator('article[data-route="limited"]'), "at most 4 at once");
    const stripe = page.locator('article[data-route="stripe"]');
    await expectText(stripe, "Last reconciliation", "the last run");
    await expectText(stripe, "1 listed, 0 already received, 1 filled, 0 failed", "the last run's counts");
    await expectText(stripe, "1 run: 1 filled, 0 failed", "the last day");
    const where = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.getItem("idemgate.adminToken") }));
    if (where.local !== 0 || !where.session) fail(`the token is not in sessionStorage alone: ${JSON.stringify(where)}`);
    await accessible(page, "the overview");
    await page.screenshot({ path: path.join(shots, "overview.png") });
    if (process.env.IDEMGATE_UPDATE_SCREENSHOT) {
      await page.screenshot({ path: path.join(root, "docs/images/operator-page.png") });
    }
  });

  await step(page, "a reconciliation run now", async () => {
    await page.locator('article[data-route="stripe"] button', { hasText: "Reconcile now" }).click();
    await expectText(notice(page), "Reconciled stripe", "the run's notice");
    await expectText(page.locator('article[data-route="stripe"]'), "1 listed, 1 already received, 0 filled", "the new last run");
  });

  await step(page, "the dead letters of a route", async () => {
    await page.locator('a[data-route="payments"][data-state="dead"]').click();
    await expectText(heading(page), "Dead · payments");
    await until("32 rows", async () => (await page.locator("#app-view tbody tr").count()) === 32 || (await page.locator("#app-view tbody tr").count()));
    await expectText(page.locator("#app-view table"), "ui-dead-1");
    await accessible(page, "a list");
  });

  await step(page, "a dead letter found by its key", async () => {
    await page.getByRole("textbox", { name: "Key", exact: true }).fill("ui-dead-1");
    await page.getByRole("textbox", { name: /^Path/ }).fill("/ui/pay/one");
    await page.getByRole("button", { name: "Open receipt" }).click();
    await expectText(heading(page), "Receipt ui-dead-1");
    await expectText(page.locator(".badge"), "dead");
    const attempts = page.locator(".timeline li", { hasText: /Attempt \d/ });
    await until("three attempts", async () => (await attempts.count()) === 3 || (await attempts.count()));
    await expectText(attempts.first(), "status 503");
    await expectText(attempts.first(), "epoch");
    await expectText(page.locator(".timeline"), "Dead: no retry left");
    const request = page.locator('section[aria-labelledby="request-title"]');
    await expectText(request, "authorization [masked]", "the credential masked");
    await expectText(request, "x-trace-id trace-42", "a plain header shown");
    if ((await textOf(request)).includes("sender-credential")) fail("the credential is shown");
    await accessible(page, "a receipt");
  });

  await step(page, "fixed and re-driven it completes", async () => {
    await fixOrigin();
    await page.getByRole("button", { name: "Re-drive" }).click();
    await expectText(notice(page), "Re-driven", "the re-drive's result");
    await expectText(page.locator(".badge"), "completed", "completed", 30_000);
    await expectText(page.locator('section[aria-labelledby="response-title"]'), /Status\s*201/, "the stored response");
    const attempts = page.locator(".timeline li", { hasText: /Attempt \d/ });
    await expectText(attempts.last(), "status 201");
  });

  await step(page, "a dead letter purged", async () => {
    await page.locator(".crumbs").getByRole("link", { name: "payments" }).click();
    await expectText(heading(page), "Dead · payments");
    await page.getByRole("link", { name: "ui-purge-1" }).click();
    await expectText(heading(page), "Receipt ui-purge-1");
    await page.getByRole("button", { name: "Purge" }).click();
    const dialog = page.getByRole("dialog");
    await expectText(dialog, "Purge ui-purge-1?");
    await accessible(page, "the purge dialog");
    await dialog.getByRole("button", { name: "Purge" }).click();
    await expectText(notice(page), "Purged ui-purge-1 on payments");
    await expectText(heading(page), "Dead · payments");
    if ((await textOf(page.locator("#app-view"))).includes("ui-purge-1")) fail("still listed");
  });

  await step(page, "thirty dead letters re-driven in bulk", async () => {
    await page.getByRole("navigation", { name: "Operator" }).getByRole("link", { name: "Overview" }).click();
    await expectText(count(page, "payments", "dead"), "30");
    await page.getByRole("button", { name: "Re-drive all 30 dead of payments" }).click();
    const dialog = page.getByRole("dialog");
    await expectText(dialog, "Re-drive every dead letter of payments?");
    // The count comes from a dry run, before anything is changed.
    await expectText(dialog, "A dry run counts 30 dead deliveries");
    const progress = page.waitForSelector("#bulk-progress", { state: "attached", timeout: 10_000 });
    await dialog.getByRole("button", { name: "Re-drive all" }).click();
    await progress;
    await expectText(notice(page), "Done: 30 dead letters of payments re-driven, 0 failed", "the bulk result", 60_000);
    // They were queued again and are delivered now: refreshing shows them
    // leave the queue.
    await until(
      "no dead, queued or in-flight receipt left on payments",
      async () => {
        await page.getByRole("button", { name: "Refresh" }).click();
        await expectText(notice(page), "Refreshed");
        const counts = await Promise.all(["dead", "queued", "in_flight", "failed"].map((state) => textOf(count(page, "payments", state))));
        return counts.every((value) => value === "0") || counts.join(",");
      },
      30_000,
    );
  });

  await step(page, "a pending delivery purged by force after a second warning", async () => {
    await page.locator('a[data-route="held"][data-state="failed"]').click();
    await expectText(heading(page), "Failed · held");
    await page.getByRole("link", { name: "ui-held-1" }).click();
    await expectText(heading(page), "Receipt ui-held-1");
    await expectText(page.locator(".timeline"), "Next attempt");
    await page.getByRole("button", { name: "Purge" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByRole("button", { name: "Purge" }).click();
    await expectText(dialog, "ui-held-1 is still being delivered", "the second warning");
    await expectText(dialog, "Delivery pending", "the 409 problem's title");
    await page.screenshot({ path: path.join(shots, `${String(stepNumber).padStart(2, "0")}-second-warning.png`) });
    await accessible(page, "the second warning");
    await dialog.getByRole("button", { name: "Force purge" }).click();
    await expectText(notice(page), "Force purged ui-held-1 on held");
  });

  await step(page, "the audit log shows each act, newest first", async () => {
    await page.getByRole("navigation", { name: "Operator" }).getByRole("link", { name: "Audit log" }).click();
    await expectText(heading(page), "Audit log");
    // The purge refused with 409 (pending) was an act too, on record; the
    // first run of reconciliation is the Rust side's, before the browser.
    await expectText(page.locator("#audit-head"), "Latest entry #7");
    const rows = page.locator("#app-view tbody tr");
    await until("seven entries", async () => (await rows.count()) === 7 || String(await rows.count()));
    const actions = [];
    for (let at = 0; at < 7; at++) actions.push((await textOf(rows.nth(at).locator('td[data-label="Action"]'))).trim());
    const expected = ["force-purge", "purge", "bulk-redrive", "purge", "redrive", "reconcile-now", "reconcile-now"];
    if (actions.join(",") !== expected.join(",")) fail(`the audit log's actions: ${actions.join(",")}`);
    if ((await textOf(page.locator("#app-view"))).includes("ui-held-1")) fail("a key shown in the audit log");
    await accessible(page, "the audit log");
  });

  await step(page, "an expired token goes back to the prompt", async () => {
    await page.evaluate(() => sessionStorage.setItem("idemgate.adminToken", "an-expired-token"));
    await page.getByRole("button", { name: "Refresh" }).click();
    await expectText(page.locator("#token-error"), "refused the token");
    if (!(await page.locator("#token-view").isVisible())) fail("not at the prompt");
    if ((await page.evaluate(() => document.activeElement?.id)) !== "token") fail("the prompt has no focus");
  });

  await context.close();
}

// ---- a phone ---------------------------------------------------------------

async function onAPhone(browser) {
  console.log("operator page, on a phone:");
  const context = await newContext(browser, { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  watch(page, "phone");
  const noSideways = async (where) => {
    const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (widths[0] > widths[1]) fail(`${where} scrolls sideways on a phone: ${widths[0]} > ${widths[1]}`);
  };
  await step(page, "phone overview", async () => {
    await page.goto(PAGE);
    await signIn(page, token);
    await expectText(heading(page), "Overview");
    await expectText(count(page, "refunds", "dead"), "1");
    await noSideways("the overview");
    await accessible(page, "the overview on a phone");
  });
  await step(page, "phone receipt", async () => {
    await page.locator('a[data-route="refunds"][data-state="dead"]').click();
    await expectText(heading(page), "Dead · refunds");
    await noSideways("a list");
    await page.getByRole("link", { name: "ui-kbd-1" }).click();
    await expectText(heading(page), "Receipt ui-kbd-1");
    await noSideways("a receipt");
  });
  await context.close();
}

// ---- the keyboard alone ----------------------------------------------------

async function withTheKeyboard(browser) {
  console.log("operator page, with the keyboard alone:");
  const context = await newContext(browser);
  const page = await context.newPage();
  watch(page, "keyboard");
  const focused = (selector) => page.locator(selector).first().evaluate((element) => element === document.activeElement);
  /** Tabs until `selector` has the focus, and checks that it shows. */
  const tabTo = async (selector, what) => {
    for (let presses = 0; presses < 80; presses += 1) {
      if (await focused(selector).catch(() => false)) {
        const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
        if (outline === "none") fail(`${what} has the focus but shows no outline`);
        return;
      }
      await page.keyboard.press("Tab");
    }
    fail(`Tab never reached ${what}`);
  };

  await step(page, "keyboard sign in", async () => {
    await page.goto(PAGE);
    await until("the token field has the focus", () => focused("#token"));
    await page.keyboard.type(token);
    await page.keyboard.press("Enter");
    await expectText(heading(page), "Overview");
    await until("the view's title has the focus", () => focused("#app-view h1"));
  });
  await step(page, "keyboard list", async () => {
    await tabTo('a[data-route="refunds"][data-state="dead"]', "the dead count of refunds");
    await page.keyboard.press("Enter");
    await expectText(heading(page), "Dead · refunds");
    await tabTo('a.key:text-is("ui-kbd-1")', "the receipt's key");
    await page.keyboard.press("Enter");
    await expectText(heading(page), "Receipt ui-kbd-1");
  });
  await step(page, "keyboard purge", async () => {
    await tabTo('#app-view button:text-is("Purge")', "Purge");
    await page.keyboard.press("Enter");
    await until("the dialog is open, on Cancel", () => focused("#confirm-cancel"));
    await page.keyboard.press("Escape");
    await until("Escape closes it and gives the focus back", () => focused('#app-view button:text-is("Purge")'));
    await expectText(heading(page), "Receipt ui-kbd-1", "nothing purged");
    await page.keyboard.press("Enter");
    await until("the dialog again", () => focused("#confirm-cancel"));
    await page.keyboard.press("Tab");
    await until("Tab reaches Purge in the dialog", () => focused("#confirm-ok"));
    await page.keyboard.press("Enter");
    await expectText(notice(page), "Purged ui-kbd-1 on refunds");
    await expectText(heading(page), "Dead · refunds");
  });
  await step(page, "keyboard sign out", async () => {
    await tabTo("#sign-out", "Sign out");
    await page.keyboard.press("Enter");
    await until("back at the prompt", () => focused("#token"));
    const stored = await page.evaluate(() => sessionStorage.getItem("idemgate.adminToken"));
    if (stored !== null) fail("signed out with the token still stored");
  });
  await context.close();
}

// ---- run ---------------------------------------------------------------------

const browser = await chromium.launch({ executablePath, headless: true });
let failed = false;
try {
  await withPointer(browser);
  await onAPhone(browser);
  await withTheKeyboard(browser);
} catch (error) {
  failed = true;
  console.log("");
  console.error(`operator-page.mjs: ${error.message}`);
} finally {
  await browser.close();
  clearTimeout(deadline);
}
console.log(`screenshots in ${path.relative(root, shots)}/`);
process.exit(failed ? 1 : 0);
