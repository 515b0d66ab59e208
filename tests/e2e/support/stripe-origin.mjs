// A payments origin behind an async Stripe route, as a real one is written:
// it checks Stripe's own signature with the official `stripe` library, and
// idemgate's `Idempotency-Signature` with the README's verifier.
// `node stripe-origin.mjs <port> <stripe secret> <forward secret> <stripe tolerance s>`
//
// - `POST /down` and `POST /up` take it down (503 to everything) and back;
// - `GET /log` lists every delivery it received with both verdicts;
// - `POST /trust-idemgate/...` accepts a delivery that idemgate signed,
//   whatever Stripe's signature says (what origins behind async routes do);
// - `POST /trust-stripe/...` accepts only a fresh Stripe signature and
//   answers 400 otherwise (what an origin written for direct delivery does).
import { createServer } from "node:http";
import Stripe from "stripe";
import { verifyIdemgate } from "../../../examples/origin/verify.mjs";

const [port, stripeSecret, forwardSecret, tolerance] = process.argv.slice(2);
const stripe = new Stripe("sk_test_unused");
const log = [];
let down = false;

function stripeVerdict(body, header) {
  try {
    stripe.webhooks.constructEvent(body, header ?? "", stripeSecret, Number(tolerance));
    return "valid";
  } catch (error) {
    return error.message;
  }
}

function idemgateVerdict(request, body) {
  try {
    const headers = Object.fromEntries(
      Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
    );
    verifyIdemgate(headers, request.method, request.url, body, forwardSecret, Math.floor(Date.now() / 1000));
    return "valid";
  } catch (error) {
    return error.message;
  }
}

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const body = Buffer.concat(chunks);
    const reply = (status, value) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(value));
    };
    if (request.url === "/down" || request.url === "/up") {
      down = request.url === "/down";
      return reply(200, { down });
    }
    if (request.url === "/log") return reply(200, log);
    if (down) {
      log.push({ path: request.url, status: 503 });
      return reply(503, { error: "down for maintenance" });
    }
    const entry = {
      path: request.url,
      stripe: stripeVerdict(body, request.headers["stripe-signature"]),
      idemgate: idemgateVerdict(request, body),
    };
    const trusted = request.url.startsWith("/trust-stripe/") ? entry.stripe : entry.idemgate;
    entry.status = trusted === "valid" ? 201 : 400;
    log.push(entry);
    reply(entry.status, { received: entry.status === 201 });
  });
});
server.listen(Number(port), "127.0.0.1", () => console.log(`stripe origin on ${port}`));
