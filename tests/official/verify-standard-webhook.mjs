// Verifies one delivery with the official `standardwebhooks` library, as a
// receiver of idemgate's JSON alerts would:
//
//   node tests/official/verify-standard-webhook.mjs DELIVERY.json
//
// DELIVERY.json: { "secret": "whsec_...", "headers": { name: value }, "body": "..." }.
// Prints the verified payload's JSON on stdout; exits non-zero when the
// library refuses it.
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";

const delivery = JSON.parse(readFileSync(process.argv[2], "utf8"));
const payload = new Webhook(delivery.secret).verify(delivery.body, delivery.headers);
process.stdout.write(JSON.stringify(payload) + "\n");
