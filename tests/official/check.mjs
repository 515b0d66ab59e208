// Runs the senders' own webhook libraries against idemgate's core, offline.
//
//   node tests/official/check.mjs CASES.json
//
// CASES.json (written by crates/idemgate-core/tests/official_libraries.rs):
//   { "now": <unix seconds>, "cases": [ { "label", "scheme", "secret",
//     "url", "headers": [[name, value]...], "body", "query", "unsigned_body",
//     "expect" } ] }
// Each case is a delivery the core signed (or a tampered copy of one,
// "expect": false). Prints one JSON object on stdout:
//   "libraries": { package: version },
//   "verified":  [ { "label", "expect", "ok", "by", "error" } ]: each case
//                as the library's verify function judged it;
//   "signed":    [ { "case", "variant", "by", "headers", "body", "query" } ]:
//                deliveries the library's own sign/generate function made,
//                with the secret and URL of the genuine case "case".
// The clock is frozen at "now" so that every library checks times against
// it and signs at it; nothing here touches the network.

import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import net from "node:net";

import Stripe from "stripe";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { sign as githubSign, verify as githubVerify } from "@octokit/webhooks-methods";
import { Paddle } from "@paddle/paddle-node-sdk";
import { WebhooksHelper as SquareWebhooks } from "square";
import adyen from "@adyen/api-library";
import braintree from "braintree";
import Razorpay from "razorpay";
import twilio from "twilio";
import { verifySlackRequest } from "@slack/bolt";
import { parse as gocardlessParse } from "gocardless-nodejs/webhooks";
import "@shopify/shopify-api/adapters/node";
import { shopifyApi, ApiVersion, LogSeverity } from "@shopify/shopify-api";
import { getHmac as shopifyHmac } from "@shopify/shopify-api/test-helpers";

// Offline: a library that opened a connection would fail the run.
net.Socket.prototype.connect = function () {
  throw new Error("check.mjs runs offline, but a library tried to open a connection");
};

// Whatever a library logs goes to stderr: stdout is the report.
console.log = console.error;
console.info = console.error;
console.warn = console.error;

const PACKAGES = [
  "stripe",
  "standardwebhooks",
  "svix",
  "@octokit/webhooks-methods",
  "@shopify/shopify-api",
  "@paddle/paddle-node-sdk",
  "square",
  "square-legacy",
  "@adyen/api-library",
  "braintree",
  "razorpay",
  "twilio",
  "@slack/bolt",
  "gocardless-nodejs",
];

const versions = Object.fromEntries(
  PACKAGES.map((name) => [
    name,
    JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url)))
      .version,
  ]),
);

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const NOW = input.now;
const NOW_MS = NOW * 1000;

// Freezes the clock: Date.now() and new Date() read NOW.
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(NOW_MS);
    else super(...args);
  }
  static now() {
    return NOW_MS;
  }
};

const header = (c, name) => {
  const found = c.headers.find(([key]) => key.toLowerCase() === name.toLowerCase());
  return found ? found[1] : undefined;
};
const headerObject = (c) => Object.fromEntries(c.headers.map(([k, v]) => [k.toLowerCase(), v]));

// A form body as Express's urlencoded parser gives it to Twilio's helper: a
// repeated name becomes an array.
const formParams = (body) => {
  const params = {};
  for (const [name, value] of new URLSearchParams(body)) {
    if (Object.hasOwn(params, name)) {
      params[name] = [].concat(params[name], value);
    } else {
      params[name] = value;
    }
  }
  return params;
};

const HmacValidator = adyen.hmacValidator;
const braintreeGateway = (secret) => {
  // The route's secret is "<public key>:<private key>".
  const at = secret.indexOf(":");
  const [publicKey, privateKey] = [secret.slice(0, at), secret.slice(at + 1)];
  return new braintree.BraintreeGateway({
    environment: braintree.Environment.Sandbox,
    merchantId: "idemgate_test_merchant",
    publicKey,
    privateKey,
  });
};
const shopify = (secret) =>
  shopifyApi({
    apiKey: "idemgate-offline-app",
    apiSecretKey: secret,
    scopes: [],
    hostName: "hooks.example.com",
    apiVersion: ApiVersion.October24,
    isEmbeddedApp: false,
    logger: { level: LogSeverity.Error, log: async (_severity, message) => console.error(message) },
  });
const stripe = new Stripe("sk_test_offline_no_network_call_is_made");
const paddle = new Paddle("pdl_sdbx_apikey_offline_no_network_call_is_made");

// label -> async (case) => true | false (or throws), with the function's name.
const VERIFIERS = {
  stripe: [
    "stripe.webhooks.constructEvent",
    (c) => {
      stripe.webhooks.constructEvent(c.body, header(c, "stripe-signature"), c.secret, 300, undefined, NOW_MS);
      return true;
    },
  ],
  // Thin events (event destinations): the parser for them verifies the same
  // Stripe-Signature, then refuses anything but a "v2.core.event".
  "stripe-thin": [
    "stripe.parseEventNotification",
    (c) => {
      const notification = stripe.parseEventNotification(c.body, header(c, "stripe-signature"), c.secret, 300, undefined, NOW_MS);
      const sent = JSON.parse(c.body);
      return (
        notification.object === "v2.core.event" &&
        notification.id === sent.id &&
        notification.created === sent.created &&
        notification.related_object.id === sent.related_object.id
      );
    },
  ],
  "standard-webhooks": [
    "standardwebhooks Webhook.verify",
    (c) => {
      new StandardWebhook(c.secret).verify(c.body, headerObject(c));
      return true;
    },
  ],
  svix: [
    "svix Webhook.verify",
    (c) => {
      new SvixWebhook(c.secret).verify(c.body, headerObject(c));
      return true;
    },
  ],
  github: [
    "@octokit/webhooks-methods verify",
    (c) => githubVerify(c.secret, c.body, header(c, "x-hub-signature-256")),
  ],
  shopify: [
    "shopifyApi().webhooks.validate",
    async (c) => {
      const rawRequest = { method: "POST", url: "/webhooks/shopify", headers: headerObject(c), body: c.body };
      const result = await shopify(c.secret).webhooks.validate({ rawBody: c.body, rawRequest, rawResponse: {} });
      if (!result.valid) throw new Error(`invalid: ${result.reason} ${result.missingHeaders ?? ""}`);
      return true;
    },
  ],
  paddle: [
    "Paddle.webhooks.isSignatureValid",
    (c) => paddle.webhooks.isSignatureValid(c.body, c.secret, header(c, "paddle-signature")),
  ],
  square: [
    "WebhooksHelper.verifySignature",
    (c) =>
      SquareWebhooks.verifySignature({
        requestBody: c.body,
        signatureHeader: header(c, "x-square-hmacsha256-signature"),
        signatureKey: c.secret,
        notificationUrl: c.url,
      }),
  ],
  gocardless: [
    "gocardless-nodejs webhooks.parse",
    (c) => {
      const events = gocardlessParse(c.body, c.secret, header(c, "webhook-signature"));
      return Array.isArray(events) && events.length > 0;
    },
  ],
  razorpay: [
    "Razorpay.validateWebhookSignature",
    (c) => Razorpay.validateWebhookSignature(c.body, header(c, "x-razorpay-signature"), c.secret),
  ],
  adyen: [
    "HmacValidator.validateHMAC (every item)",
    (c) => {
      const validator = new HmacValidator();
      const items = JSON.parse(c.body).notificationItems;
      return items.length > 0 && items.every((entry) => validator.validateHMAC(entry.NotificationRequestItem, c.secret));
    },
  ],
  "adyen-platform": [
    "HmacValidator.validateHMACSignature",
    (c) => new HmacValidator().validateHMACSignature(c.secret, header(c, "hmacsignature"), c.body),
  ],
  slack: [
    "@slack/bolt verifySlackRequest",
    (c) => {
      verifySlackRequest({
        signingSecret: c.secret,
        body: c.body,
        headers: {
          "x-slack-signature": header(c, "x-slack-signature"),
          "x-slack-request-timestamp": Number(header(c, "x-slack-request-timestamp")),
        },
        nowMilliseconds: NOW_MS,
      });
      return true;
    },
  ],
  twilio: [
    "twilio.validateRequest",
    (c) => {
      const url = c.query ? `${c.url}?${c.query}` : c.url;
      return twilio.validateRequest(c.secret, header(c, "x-twilio-signature"), url, formParams(c.body));
    },
  ],
  braintree: [
    "BraintreeGateway.webhookNotification.parse",
    async (c) => {
      const form = new URLSearchParams(c.body);
      const notification = await braintreeGateway(c.secret).webhookNotification.parse(
        form.get("bt_signature"),
        form.get("bt_payload"),
      );
      return typeof notification.kind === "string";
    },
  ],
};

// label -> (case) => [ { variant, by, headers, body, query } ]: deliveries the
// library signs itself, under the genuine case's secret and URL.
const SIGNERS = {
  stripe: (c) => [
    {
      variant: "generateTestHeaderString",
      by: "Stripe.webhooks.generateTestHeaderString",
      headers: [
        ["Content-Type", "application/json; charset=utf-8"],
        ["Stripe-Signature", Stripe.webhooks.generateTestHeaderString({ payload: c.unsigned_body, secret: c.secret, timestamp: NOW })],
      ],
      body: c.unsigned_body,
    },
  ],
  "stripe-thin": (c) => [
    {
      variant: "generateTestHeaderString",
      by: "Stripe.webhooks.generateTestHeaderString",
      headers: [
        ["Content-Type", "application/json; charset=utf-8"],
        ["Stripe-Signature", Stripe.webhooks.generateTestHeaderString({ payload: c.unsigned_body, secret: c.secret, timestamp: NOW })],
      ],
      body: c.unsigned_body,
      // The library's own parser takes what it signed.
      self_check: (() => {
        try {
          const header = Stripe.webhooks.generateTestHeaderString({ payload: c.unsigned_body, secret: c.secret, timestamp: NOW });
          return stripe.parseEventNotification(c.unsigned_body, header, c.secret, 300, undefined, NOW_MS).object === "v2.core.event";
        } catch {
          return false;
        }
      })(),
    },
  ],
  "standard-webhooks": (c) => {
    const id = "msg_2b5AqY8tvX1vP0AyVLhRaFQr3cM";
    return [
      {
        variant: "sign",
        by: "standardwebhooks Webhook.sign",
        headers: [
          ["content-type", "application/json"],
          ["webhook-id", id],
          ["webhook-timestamp", String(NOW)],
          ["webhook-signature", new StandardWebhook(c.secret).sign(id, new Date(NOW_MS), c.unsigned_body)],
        ],
        body: c.unsigned_body,
      },
    ];
  },
  svix: (c) => {
    const id = "msg_2b5AqbAbP7cQ1FQy2kAJjJkNn9X";
    return [
      {
        variant: "sign",
        by: "svix Webhook.sign",
        headers: [
          ["content-type", "application/json"],
          ["svix-id", id],
          ["svix-timestamp", String(NOW)],
          ["svix-signature", new SvixWebhook(c.secret).sign(id, new Date(NOW_MS), c.unsigned_body)],
        ],
        body: c.unsigned_body,
      },
    ];
  },
  github: async (c) => [
    {
      variant: "sign",
      by: "@octokit/webhooks-methods sign",
      headers: [
        ["content-type", "application/json"],
        ["x-github-event", "ping"],
        ["x-hub-signature-256", await githubSign(c.secret, c.unsigned_body)],
      ],
      body: c.unsigned_body,
    },
  ],
  shopify: (c) => [
    {
      variant: "getHmac",
      by: "@shopify/shopify-api/test-helpers getHmac",
      headers: [...c.headers.filter(([name]) => name.toLowerCase() !== "x-shopify-hmac-sha256"), ["X-Shopify-Hmac-Sha256", shopifyHmac(c.unsigned_body, c.secret)]],
      body: c.unsigned_body,
    },
    {
      // Shopify's event webhooks: the header without its `X-`.
      variant: "event webhook headers",
      by: "@shopify/shopify-api/test-helpers getHmac",
      headers: [
        ["content-type", "application/json"],
        ["shopify-hmac-sha256", shopifyHmac(c.unsigned_body, c.secret)],
        ["shopify-topic", "orders/create"],
        ["shopify-shop-domain", "idemgate-test.myshopify.com"],
        ["shopify-api-version", "2024-10"],
        ["shopify-event-id", "e4c1f3a2-6b7d-4e8f-9a0b-1c2d3e4f5a6b"],
      ],
      body: c.unsigned_body,
    },
  ],
  adyen: (c) => {
    const validator = new HmacValidator();
    const notification = JSON.parse(c.unsigned_body);
    for (const entry of notification.notificationItems) {
      const item = entry.NotificationRequestItem;
      item.additionalData = { ...item.additionalData, hmacSignature: validator.calculateHmac(item, c.secret) };
    }
    return [
      {
        variant: "calculateHmac",
        by: "HmacValidator.calculateHmac (each item)",
        headers: [["content-type", "application/json"]],
        body: JSON.stringify(notification),
      },
    ];
  },
  "adyen-platform": (c) => [
    {
      variant: "calculateHmac",
      by: "HmacValidator.calculateHmac (payload string)",
      headers: [
        ["content-type", "application/json"],
        ["HmacSignature", new HmacValidator().calculateHmac(c.unsigned_body, c.secret)],
      ],
      body: c.unsigned_body,
    },
  ],
  twilio: (c) => {
    const form = "application/x-www-form-urlencoded";
    const json = '{"event_type":"com.twilio.messaging.message.delivered","data":{"messageSid":"SM0a1b2c3d4e5f60718293a4b5c6d7e8f9","to":"+15558675310"}}';
    const query = "channel=sms&retry=0";
    const jsonQuery = `bodySHA256=${createHash("sha256").update(json).digest("hex")}`;
    return [
      {
        variant: "form",
        by: "twilio.getExpectedTwilioSignature",
        headers: [["content-type", form], ["X-Twilio-Signature", twilio.getExpectedTwilioSignature(c.secret, c.url, formParams(c.unsigned_body))]],
        body: c.unsigned_body,
      },
      {
        // Twilio signs some requests with the default port in the URL.
        variant: "form signed with :443",
        by: "twilio.getExpectedTwilioSignature",
        headers: [["content-type", form], ["X-Twilio-Signature", twilio.getExpectedTwilioSignature(c.secret, c.url.replace(/^(https:\/\/[^/]+)/, "$1:443"), formParams(c.unsigned_body))]],
        body: c.unsigned_body,
      },
      {
        variant: "form with a query",
        by: "twilio.getExpectedTwilioSignature",
        headers: [["content-type", form], ["X-Twilio-Signature", twilio.getExpectedTwilioSignature(c.secret, `${c.url}?${query}`, formParams(c.unsigned_body))]],
        body: c.unsigned_body,
        query,
      },
      {
        variant: "json (bodySHA256)",
        by: "twilio.getExpectedTwilioSignature + getExpectedBodyHash",
        headers: [["content-type", "application/json"], ["X-Twilio-Signature", twilio.getExpectedTwilioSignature(c.secret, `${c.url}?${jsonQuery}`, {})]],
        body: json,
        query: jsonQuery,
        // The library's own check of what it signed, so that a disagreement
        // is the core's alone.
        self_check: twilio.validateRequestWithBody(
          c.secret,
          twilio.getExpectedTwilioSignature(c.secret, `${c.url}?${jsonQuery}`, {}),
          `${c.url}?${jsonQuery}`,
          json,
        ),
      },
    ];
  },
  braintree: (c) => {
    const sample = braintreeGateway(c.secret).webhookTesting.sampleNotification(
      braintree.WebhookNotification.Kind.SubscriptionChargedSuccessfully,
      "sub_8kq2r7",
    );
    return [
      {
        variant: "sampleNotification",
        by: "BraintreeGateway.webhookTesting.sampleNotification",
        headers: [["content-type", "application/x-www-form-urlencoded"]],
        body: new URLSearchParams(sample).toString(),
      },
    ];
  },
};

const verified = [];
for (const c of input.cases) {
  const entry = VERIFIERS[c.label.split("/")[0]];
  if (!entry) {
    verified.push({ label: c.label, expect: c.expect, ok: false, by: null, error: "no verifier for this label" });
    continue;
  }
  const [by, verify] = entry;
  let ok = false;
  let error = null;
  try {
    ok = (await verify(c)) === true;
  } catch (e) {
    error = String(e && e.message ? e.message : e).split("\n")[0];
  }
  verified.push({ label: c.label, expect: c.expect, ok, by, error });
}

const signed = [];
for (const c of input.cases.filter((c) => c.expect && !c.label.includes("/"))) {
  const sign = SIGNERS[c.label];
  if (!sign) continue;
  for (const delivery of await sign(c)) {
    signed.push({ case: c.label, query: null, self_check: true, ...delivery });
  }
}

process.stdout.write(JSON.stringify({ libraries: versions, verified, signed }, null, 1) + "\n");
