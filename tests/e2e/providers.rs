//! Every sender scheme of SPEC §4 behind one gateway with `ROUTES`: each
//! provider's genuine delivery is forwarded once and its duplicate
//! replayed; a tampered body, a wrong secret, a missing signature and
//! (where the provider signs a time) a stale one are 401 and reach nothing.
//! The public-key schemes (Standard Webhooks `v1a`, PayPal) are signed here
//! with their private keys, which no route holds; every other scheme with
//! the core's own `sign`.

use idemgate_core::time::rfc3339;
use std::sync::LazyLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use idemgate_core::signature::{Message, SchemeSettings, SignatureScheme};

use crate::senders::now;
use crate::support::{client, operator, Reply};
use crate::{Profile, World, ADMIN_TOKEN, FORWARD_SECRET};

const STRIPE: &str = "whsec_route_stripe";
const STANDARD_SECRET: &str = "whsec_cm91dGUtc3RhbmRhcmQtd2ViaG9va3M=";
const GITHUB: &str = "github-route-secret";
const SHOPIFY: &str = "shpss_route_secret";
const PADDLE: &str = "pdl_ntfset_route_secret";
const SQUARE: &str = "square-route-key";
const SQUARE_URL: &str = "https://hooks.example.com/square";
const CHECKOUT: &str = "cko-route-secret";
const RAZORPAY: &str = "razorpay-route-secret";
pub const ADYEN: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
const GENERIC: &str = "generic-route-secret";
const ADYEN_PLATFORM: &str = "5B6B4A4C3A2E1F0D9C8B7A6F5E4D3C2B1A0F9E8D7C6B5A4F3E2D1C0B9A8F7E6D";
const SLACK: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TWILIO: &str = "twilio-route-auth-token";
const TWILIO_URL: &str = "https://hooks.example.com/twilio/sms";
const BRAINTREE: &str = "route_public_key:route_private_key";
const PAYPAL_WEBHOOK_ID: &str = "1JE4291016473214C";
pub const GOCARDLESS: &str = "gocardless-route-endpoint-secret";
/// The GitHub route's secrets while it rotates: the new one first.
const GITHUB_NEXT: &str = "github-route-secret-2026";

/// The Ed25519 key pair of the `v1a` route's sender: the route holds only
/// its public half.
pub static V1A_SIGNER: LazyLock<ed25519_dalek::SigningKey> =
    LazyLock::new(|| ed25519_dalek::SigningKey::from_bytes(&[7; 32]));
static V1A_PUBLIC: LazyLock<String> = LazyLock::new(|| {
    format!(
        "whpk_{}",
        BASE64.encode(V1A_SIGNER.verifying_key().as_bytes())
    )
});
/// The test certificate's key, as PayPal's signing key; the test origin
/// serves the certificate under PayPal's path, `/v1/notifications/certs/`.
static PAYPAL_SIGNER: LazyLock<rsa::RsaPrivateKey> = LazyLock::new(|| {
    use rsa::pkcs8::DecodePrivateKey;
    rsa::RsaPrivateKey::from_pkcs8_pem(include_str!(
        "../../crates/idemgate-core/tests/fixtures/test-certificate.key"
    ))
    .unwrap()
});

/// Where the routes profile's Plaid route asks for keys: a free local
/// port that `scripts/send plaid` serves its test key on while it sends
/// (send.rs); Plaid's own end to end tests are in plaid.rs.
pub static PLAID_KEY_PORT: LazyLock<u16> = LazyLock::new(crate::support::gateway::free_port);

/// `ROUTES` as JSON: one route per provider, plus an API route.
pub fn routes_json(origin: &str) -> String {
    // Routes take the top-level ORIGIN_URL; PayPal's certificates come
    // from the test origin too.
    serde_json::json!({
        "stripe": {"path": "/p/stripe", "signature": "stripe", "signing_secret": "STRIPE_ROUTE_SECRET"},
        "standard": {"path": "/p/standard", "signature": "standard-webhooks", "signing_secret": "STANDARD_ROUTE_SECRET"},
        "github": {"path": "/p/github", "signature": "github", "signing_secret": "GITHUB_ROUTE_SECRET"},
        "shopify": {"path": "/p/shopify", "signature": "shopify", "signing_secret": "SHOPIFY_ROUTE_SECRET"},
        "paddle": {"path": "/p/paddle", "signature": "paddle", "signing_secret": "PADDLE_ROUTE_SECRET"},
        "square": {"path": "/p/square", "signature": "square", "signing_secret": "SQUARE_ROUTE_KEY", "signature_url": SQUARE_URL},
        "checkout": {"path": "/p/checkout", "signature": "checkout", "signing_secret": "CHECKOUT_ROUTE_SECRET"},
        "razorpay": {"path": "/p/razorpay", "signature": "razorpay", "signing_secret": "RAZORPAY_ROUTE_SECRET"},
        "adyen": {"path": "/p/adyen", "signature": "adyen", "signing_secret": "ADYEN_ROUTE_KEY"},
        "generic": {"path": "/p/generic", "signature": "hmac", "signing_secret": "GENERIC_ROUTE_SECRET",
                    "signature_header": "X-Signature", "signature_encoding": "base64", "signature_prefix": "sha256="},
        "v1a": {"path": "/p/v1a", "signature": "standard-webhooks", "signing_secret": "V1A_ROUTE_KEY"},
        "adyen-platform": {"path": "/p/adyen-platform", "signature": "adyen-platform", "signing_secret": "ADYEN_PLATFORM_ROUTE_KEY"},
        "slack": {"path": "/p/slack", "signature": "slack", "signing_secret": "SLACK_ROUTE_SECRET"},
        "twilio": {"path": "/p/twilio", "signature": "twilio", "signing_secret": "TWILIO_ROUTE_TOKEN", "signature_url": TWILIO_URL},
        "braintree": {"path": "/p/braintree", "signature": "braintree", "signing_secret": "BRAINTREE_ROUTE_KEYS"},
        "paypal": {"path": "/p/paypal", "signature": "paypal", "signing_secret": "PAYPAL_ROUTE_WEBHOOK_ID",
                   "signature_cert_hosts": origin},
        "gocardless": {"path": "/p/gocardless", "signature": "gocardless", "signing_secret": "GOCARDLESS_ROUTE_SECRET",
                       "max_batch_events": 5},
        "gocardless-async": {"path": "/p/gocardless-async", "signature": "gocardless", "signing_secret": "GOCARDLESS_ROUTE_SECRET",
                             "delivery": "async", "retry_schedule": "1s,2s"},
        "plaid": {"path": "/p/plaid", "signature": "plaid", "signing_secret": "PLAID_ROUTE_SECRET",
                  "plaid_client_id": "PLAID_ROUTE_CLIENT_ID",
                  "signature_api_base": format!("http://127.0.0.1:{}", *PLAID_KEY_PORT)},
        "rotating": {"path": "/p/rotating", "signature": "github", "signing_secret": ["GITHUB_ROUTE_SECRET_NEXT", "GITHUB_ROUTE_SECRET"]},
        "api": {"path": "/v1", "mode": "api", "tenant_header": "Authorization"}
    })
    .to_string()
}

/// The variables of the routes profile.
pub fn route_vars<'a>(routes: &'a str, origin: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("ROUTES", routes),
        ("ORIGIN_URL", origin),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("STRIPE_ROUTE_SECRET", STRIPE),
        ("STANDARD_ROUTE_SECRET", STANDARD_SECRET),
        ("GITHUB_ROUTE_SECRET", GITHUB),
        ("SHOPIFY_ROUTE_SECRET", SHOPIFY),
        ("PADDLE_ROUTE_SECRET", PADDLE),
        ("SQUARE_ROUTE_KEY", SQUARE),
        ("CHECKOUT_ROUTE_SECRET", CHECKOUT),
        ("RAZORPAY_ROUTE_SECRET", RAZORPAY),
        ("ADYEN_ROUTE_KEY", ADYEN),
        ("GENERIC_ROUTE_SECRET", GENERIC),
        ("V1A_ROUTE_KEY", &V1A_PUBLIC),
        ("ADYEN_PLATFORM_ROUTE_KEY", ADYEN_PLATFORM),
        ("SLACK_ROUTE_SECRET", SLACK),
        ("TWILIO_ROUTE_TOKEN", TWILIO),
        ("BRAINTREE_ROUTE_KEYS", BRAINTREE),
        ("PAYPAL_ROUTE_WEBHOOK_ID", PAYPAL_WEBHOOK_ID),
        ("GITHUB_ROUTE_SECRET_NEXT", GITHUB_NEXT),
        ("GOCARDLESS_ROUTE_SECRET", GOCARDLESS),
        ("PLAID_ROUTE_SECRET", "plaid-route-secret"),
        ("PLAID_ROUTE_CLIENT_ID", "plaid-route-client-id"),
    ]
}

/// One provider's route: its body, and the key the route derives from it.
struct Provider {
    route: &'static str,
    /// Who signs: the route's name, or a variant of its sender (`svix`
    /// sends Standard Webhooks under its own header names).
    sender: &'static str,
    /// The media type the sender posts.
    content_type: &'static str,
    secret: &'static str,
    /// Whether the provider signs a time (then a stale one is refused).
    signs_time: bool,
    /// The idempotency key the route derives from the signed delivery of
    /// an event.
    key: fn(&str, &Message) -> String,
    body: fn(&str) -> String,
}

/// The route's sender, as idemgate's core signs for it: the same scheme
/// and settings the route verifies with, and `secret`.
fn signer(route: &str, secret: &str) -> SignatureScheme {
    let routes: serde_json::Value = serde_json::from_str(&routes_json("")).unwrap();
    let table = &routes[route];
    let setting = |name: &str| table[name].as_str().map(str::to_string);
    SignatureScheme::configure(
        table["signature"].as_str().unwrap(),
        &SchemeSettings {
            secret: Some(secret.to_string()),
            header: setting("signature_header"),
            encoding: setting("signature_encoding"),
            prefix: setting("signature_prefix"),
            url: setting("signature_url"),
            cert_hosts: setting("signature_cert_hosts"),
            ..SchemeSettings::default()
        },
    )
    .unwrap()
}

/// `body` as the route's sender signs it with `secret` at `t`; a PayPal
/// certificate is on `origin`.
pub fn signed(origin: &str, route: &str, secret: &str, body: &str, t: u64) -> Message {
    let mut message = Message {
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    };
    match route {
        "v1a" => sign_v1a(&mut message, secret, t),
        "paypal" => sign_paypal(&mut message, origin, secret, t),
        "svix" => {
            signer("standard", secret).sign(&mut message, t);
            for (name, _) in &mut message.headers {
                *name = name.replace("webhook-", "svix-");
            }
        }
        _ => signer(route, secret).sign(&mut message, t),
    }
    message
}

/// Standard Webhooks `v1a`: Ed25519 over `id.timestamp.body`. `secret`
/// names the key pair: the route's sender's, or another.
fn sign_v1a(message: &mut Message, secret: &str, t: u64) {
    use ed25519_dalek::Signer;
    let other = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let key = if secret == V1A_PUBLIC.as_str() {
        &*V1A_SIGNER
    } else {
        &other
    };
    let id = format!("msg_{}", &sha256_hex(&message.body)[..20]);
    let content = idemgate_core::signature::standard_webhooks::signed_content(
        &id,
        &t.to_string(),
        &message.body,
    );
    let signature = BASE64.encode(key.sign(&content).to_bytes());
    message.headers.extend([
        ("webhook-id".to_string(), id),
        ("webhook-timestamp".to_string(), t.to_string()),
        ("webhook-signature".to_string(), format!("v1a,{signature}")),
    ]);
}

/// PayPal: RSA-SHA256 over `id|time|webhook id|crc32(body)`, by the key of
/// the certificate the test origin serves. `secret` is the webhook id
/// signed.
pub fn sign_paypal(message: &mut Message, origin: &str, webhook_id: &str, t: u64) {
    let id = format!("tx-{}", &sha256_hex(&message.body)[..16]);
    sign_paypal_transmission(message, origin, webhook_id, t, id);
}

/// [`sign_paypal`] under a transmission id the test chooses.
fn sign_paypal_transmission(
    message: &mut Message,
    origin: &str,
    webhook_id: &str,
    t: u64,
    id: String,
) {
    use idemgate_core::signature::paypal::signed_string;
    use sha2::Digest;
    let time = rfc3339(t);
    let signed = signed_string(&id, &time, webhook_id, &message.body);
    let signature = PAYPAL_SIGNER
        .sign(
            rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
            &sha2::Sha256::digest(signed.as_bytes()),
        )
        .unwrap();
    let certificate = format!("{origin}/v1/notifications/certs/paypal-test.pem");
    message.headers.extend([
        ("PAYPAL-TRANSMISSION-ID".to_string(), id),
        ("PAYPAL-TRANSMISSION-TIME".to_string(), time),
        (
            "PAYPAL-TRANSMISSION-SIG".to_string(),
            BASE64.encode(signature),
        ),
        ("PAYPAL-CERT-URL".to_string(), certificate),
        ("PAYPAL-AUTH-ALGO".to_string(), "SHA256withRSA".to_string()),
    ]);
}

/// Points a signed PayPal delivery at another certificate (the URL is not
/// signed, so the signature still holds).
fn name_certificate(delivery: &mut Message, url: &str) {
    for (name, value) in &mut delivery.headers {
        if name == "PAYPAL-CERT-URL" {
            *value = url.to_string();
        }
    }
}

fn sha256_hex(body: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(body))
}

/// An unsigned Adyen item: `sign` fills in its `hmacSignature`.
pub fn adyen_item(event: &str, value: u64) -> String {
    format!(
        r#"{{"NotificationRequestItem":{{"amount":{{"currency":"EUR","value":{value}}},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"ref-{event}","pspReference":"psp{event}","success":"true"}}}}"#
    )
}

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

/// The key a form route derives: the hash of the form's signed content.
fn signed_form_sha256(route: &str, secret: &str, signed: &Message) -> String {
    let mut headers = signed.headers.clone();
    headers.push(("content-type".into(), FORM.into()));
    let request = idemgate_core::signature::SignedRequest {
        headers: &headers,
        body: &signed.body,
        query: None,
    };
    sha256_hex(&signer(route, secret).body_for_key(&request).unwrap())
}

fn providers() -> Vec<Provider> {
    vec![
        Provider {
            route: "stripe",
            sender: "stripe",
            content_type: JSON,
            secret: STRIPE,
            signs_time: true,
            key: |event, _| event.to_string(),
            body: |event| {
                format!(r#"{{"id":"{event}","type":"payment_intent.succeeded","amount":1000}}"#)
            },
        },
        Provider {
            route: "standard",
            sender: "standard",
            content_type: JSON,
            secret: STANDARD_SECRET,
            signs_time: true,
            key: |_, signed| {
                idemgate_core::headers::get(&signed.headers, "webhook-id")
                    .unwrap()
                    .to_string()
            },
            body: |event| format!(r#"{{"type":"invoice.paid","event":"{event}"}}"#),
        },
        Provider {
            route: "github",
            sender: "github",
            content_type: JSON,
            secret: GITHUB,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"action":"completed","delivery":"{event}"}}"#),
        },
        Provider {
            route: "shopify",
            sender: "shopify",
            content_type: JSON,
            secret: SHOPIFY,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"id":"{event}","total_price":"10.00"}}"#),
        },
        Provider {
            route: "paddle",
            sender: "paddle",
            content_type: JSON,
            secret: PADDLE,
            signs_time: true,
            key: |event, _| event.to_string(),
            body: |event| {
                format!(r#"{{"event_id":"{event}","event_type":"transaction.completed"}}"#)
            },
        },
        Provider {
            route: "square",
            sender: "square",
            content_type: JSON,
            secret: SQUARE,
            signs_time: false,
            key: |event, _| event.to_string(),
            body: |event| format!(r#"{{"event_id":"{event}","type":"payment.updated"}}"#),
        },
        Provider {
            route: "checkout",
            sender: "checkout",
            content_type: JSON,
            secret: CHECKOUT,
            signs_time: false,
            key: |event, _| event.to_string(),
            body: |event| format!(r#"{{"id":"{event}","type":"payment_approved"}}"#),
        },
        Provider {
            route: "razorpay",
            sender: "razorpay",
            content_type: JSON,
            secret: RAZORPAY,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| {
                format!(r#"{{"entity":"event","event":"payment.captured","note":"{event}"}}"#)
            },
        },
        Provider {
            route: "adyen",
            sender: "adyen",
            content_type: JSON,
            secret: ADYEN,
            signs_time: false,
            key: |event, _| format!("psp{event}:AUTHORISATION:true"),
            // Signed inside the body: the item's signature is filled in.
            // A notification of several items is a batch (`batches.rs`).
            body: |event| {
                format!(
                    r#"{{"live":"false","notificationItems":[{}]}}"#,
                    adyen_item(event, 1000)
                )
            },
        },
        Provider {
            route: "generic",
            sender: "generic",
            content_type: JSON,
            secret: GENERIC,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"event":"{event}"}}"#),
        },
        Provider {
            route: "standard",
            sender: "svix",
            content_type: JSON,
            secret: STANDARD_SECRET,
            signs_time: true,
            key: |_, signed| {
                idemgate_core::headers::get(&signed.headers, "svix-id")
                    .unwrap()
                    .to_string()
            },
            body: |event| format!(r#"{{"type":"user.created","data":{{"id":"{event}"}}}}"#),
        },
        Provider {
            route: "v1a",
            sender: "v1a",
            content_type: JSON,
            secret: V1A_PUBLIC.as_str(),
            signs_time: true,
            key: |_, signed| {
                idemgate_core::headers::get(&signed.headers, "webhook-id")
                    .unwrap()
                    .to_string()
            },
            body: |event| format!(r#"{{"type":"payment.succeeded","data":{{"id":"{event}"}}}}"#),
        },
        Provider {
            route: "adyen-platform",
            sender: "adyen-platform",
            content_type: JSON,
            secret: ADYEN_PLATFORM,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| {
                format!(
                    r#"{{"data":{{"balancePlatform":"YourBalancePlatform","id":"{event}","status":"completed"}},"environment":"test","type":"balancePlatform.transfer.updated"}}"#
                )
            },
        },
        Provider {
            route: "slack",
            sender: "slack",
            content_type: JSON,
            secret: SLACK,
            signs_time: true,
            key: |event, _| event.to_string(),
            body: |event| {
                format!(
                    r#"{{"token":"t","team_id":"T1","api_app_id":"A1","event":{{"type":"app_mention","text":"refund order 42"}},"type":"event_callback","event_id":"{event}","event_time":1767225600}}"#
                )
            },
        },
        Provider {
            route: "twilio",
            sender: "twilio",
            content_type: FORM,
            secret: TWILIO,
            signs_time: false,
            key: |_, signed| signed_form_sha256("twilio", TWILIO, signed),
            body: |event| {
                format!("MessageSid=SM{event}&AccountSid=AC1&From=%2B14155550100&To=%2B14155550199&Body=Paid+order+{event}")
            },
        },
        Provider {
            route: "braintree",
            sender: "braintree",
            content_type: FORM,
            secret: BRAINTREE,
            signs_time: false,
            key: |_, signed| signed_form_sha256("braintree", BRAINTREE, signed),
            // The notification's XML: `sign` makes the form Braintree posts.
            body: |event| {
                format!("<notification><kind>subscription_charged_successfully</kind><subject><subscription><id>{event}</id></subscription></subject></notification>")
            },
        },
        Provider {
            route: "paypal",
            sender: "paypal",
            content_type: JSON,
            secret: PAYPAL_WEBHOOK_ID,
            signs_time: true,
            key: |event, _| event.to_string(),
            body: |event| {
                format!(
                    r#"{{"id":"{event}","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{{"amount":{{"currency_code":"USD","value":"10.00"}}}}}}"#
                )
            },
        },
        Provider {
            route: "rotating",
            sender: "rotating",
            content_type: JSON,
            secret: GITHUB_NEXT,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"action":"completed","delivery":"{event}"}}"#),
        },
    ]
}

pub async fn send(
    url: &str,
    content_type: &str,
    headers: &[(String, String)],
    body: &str,
) -> Reply {
    let mut request = client()
        .post(url)
        .header("content-type", content_type)
        .body(body.to_string());
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("content-type") {
            request = request.header(name, value);
        }
    }
    Reply::read(request.send().await.unwrap()).await
}

/// Every provider behind one deployment: valid, duplicate, forgeries.
pub async fn every_provider_is_verified_forwarded_once_and_replayed(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = now();
    for provider in providers() {
        let (route, sender, content_type) =
            (provider.route, provider.sender, provider.content_type);
        let prefix = format!("/p/{route}/{sender}/");
        let url = gateway.url(&format!("{prefix}events"));
        let event = format!("evt_{}_{run}", sender.replace('-', "_"));
        let t = now();
        let genuine = signed(
            &origin,
            sender,
            provider.secret,
            &(provider.body)(&event),
            t,
        );
        let (headers, body) = (&genuine.headers, text(&genuine.body));

        let first = send(&url, content_type, headers, &body).await;
        assert_eq!(
            first.status,
            201,
            "{sender}: {}",
            String::from_utf8_lossy(&first.body)
        );
        assert!(!first.replayed(), "{sender}");
        let again = send(&url, content_type, headers, &body).await;
        assert_eq!(again.status, 201, "{sender}");
        assert!(again.replayed(), "{sender}: the duplicate is replayed");
        assert_eq!(again.body, first.body, "{sender}");
        let received = world.origin.received(&prefix);
        assert_eq!(received.len(), 1, "{sender}: forwarded once");
        assert_eq!(received[0].body, body.as_bytes(), "{sender}: the raw body");
        for (name, value) in headers {
            assert_eq!(
                received[0].header(name),
                Some(value.as_str()),
                "{sender}: {name} reaches the origin"
            );
        }
        let expected_key = (provider.key)(&event, &genuine);
        assert_eq!(
            received[0].header("idempotency-key"),
            Some(format!("\"{expected_key}\"").as_str()),
            "{sender}: the default key comes from signed content"
        );
        received[0].verify(FORWARD_SECRET).unwrap();

        // Forgeries: each is 401 and reaches nothing.
        let wrong = signed(
            &origin,
            sender,
            &wrong_secret(sender),
            &(provider.body)(&event),
            t,
        );
        let mut cases = vec![
            (
                "tampered body",
                headers.clone(),
                tampered(sender, &body),
                "mismatch",
            ),
            (
                "wrong secret",
                wrong.headers.clone(),
                text(&wrong.body),
                "mismatch",
            ),
        ];
        match sender {
            // The signature is in the body: a missing one is a malformed
            // item (Adyen) or a missing form field (Braintree).
            "adyen" => cases.push((
                "missing signature",
                Vec::new(),
                body.replace("hmacSignature", "signature"),
                "malformed",
            )),
            "braintree" => cases.push((
                "missing signature",
                Vec::new(),
                body.replace("bt_signature=", "signature="),
                "missing",
            )),
            _ => cases.push(("missing header", Vec::new(), body.clone(), "missing header")),
        }
        if provider.signs_time {
            for (what, at) in [("10 minutes old", t - 600), ("10 minutes ahead", t + 600)] {
                let stale = signed(
                    &origin,
                    sender,
                    provider.secret,
                    &(provider.body)(&event),
                    at,
                );
                cases.push((what, stale.headers, text(&stale.body), "stale"));
            }
        }
        for (what, headers, body, reason) in cases {
            let reply = send(&url, content_type, &headers, &body).await;
            reply.assert_problem(401, "bad-signature");
            let detail = reply.json()["detail"].as_str().unwrap().to_string();
            assert!(detail.starts_with(reason), "{sender}, {what}: {detail}");
        }
        assert_eq!(
            world.origin.count(&prefix),
            1,
            "{sender}: no forgery was forwarded"
        );
    }
    // PayPal's certificate was fetched once, then kept.
    assert_eq!(
        world.origin.count("/v1/notifications/certs/"),
        1,
        "one certificate fetch"
    );
}

/// `body` with a signed byte changed.
fn tampered(sender: &str, body: &str) -> String {
    match sender {
        "adyen" => body.replacen("\"value\":1000", "\"value\":1001", 1),
        // The event is inside the base64 payload: change a payload byte.
        "braintree" => {
            let at = body.find("bt_payload=").unwrap() + "bt_payload=".len();
            let mut bytes = body.as_bytes().to_vec();
            bytes[at] = if bytes[at] == b'P' { b'Q' } else { b'P' };
            text(&bytes)
        }
        _ => body.replace("evt_", "evx_"),
    }
}

fn text(body: &[u8]) -> String {
    String::from_utf8(body.to_vec()).unwrap()
}

fn wrong_secret(sender: &str) -> String {
    match sender {
        "standard" | "svix" => "whsec_b3RoZXItc2VjcmV0".into(),
        "adyen" | "adyen-platform" => "11".repeat(32),
        "braintree" => "route_public_key:another_private_key".into(),
        // Another key pair (v1a), another webhook id (PayPal).
        _ => "another-secret".into(),
    }
}

/// A route that names several secrets takes a delivery signed with any one
/// of them, and no other (SPEC §4: rotation).
pub async fn a_rotating_route_takes_each_of_its_secrets(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let url = gateway.url("/p/rotating/old/events");
    let run = now();
    for (secret, expected) in [
        (GITHUB, 201),
        (GITHUB_NEXT, 201),
        ("github-route-secret-2024", 401),
    ] {
        let body = format!(r#"{{"action":"completed","delivery":"evt_{secret}_{run}"}}"#);
        let delivery = signed(&origin, "rotating", secret, &body, now());
        let reply = send(&url, JSON, &delivery.headers, &body).await;
        assert_eq!(reply.status, expected, "signed with {secret}");
    }
    assert_eq!(world.origin.count("/p/rotating/old/"), 2);
}

/// PayPal's certificate comes only from `SIGNATURE_CERT_HOSTS`: a delivery
/// naming another host is refused, and that host is never asked.
pub async fn a_paypal_certificate_is_fetched_only_from_an_allowed_host(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let body = format!(
        r#"{{"id":"WH-cert-{}","event_type":"PAYMENT.CAPTURE.COMPLETED"}}"#,
        now()
    );
    let mut delivery = signed(&origin, "paypal", PAYPAL_WEBHOOK_ID, &body, now());
    // The same test origin under another name: not an allowed origin.
    let elsewhere = origin.replace("127.0.0.1", "localhost") + "/elsewhere/paypal-test.pem";
    name_certificate(&mut delivery, &elsewhere);
    let reply = send(
        &gateway.url("/p/paypal/elsewhere"),
        JSON,
        &delivery.headers,
        &body,
    )
    .await;
    reply.assert_problem(401, "bad-signature");
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("SIGNATURE_CERT_HOSTS"), "{detail}");
    assert_eq!(world.origin.count("/elsewhere/"), 0, "nothing fetched");
    assert_eq!(
        world.origin.count("/p/paypal/elsewhere"),
        0,
        "nothing forwarded"
    );
}

/// A genuine PayPal delivery whose certificate cannot be fetched yet is
/// answered 503, not refused as forged: nothing is forwarded or stored, and
/// the sender's retry, once the host answers, is forwarded once.
pub async fn a_paypal_certificate_that_cannot_be_fetched_yet_is_retried(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = now();
    let body = format!(r#"{{"id":"WH-down-{run}","event_type":"PAYMENT.CAPTURE.COMPLETED"}}"#);
    let mut delivery = signed(&origin, "paypal", PAYPAL_WEBHOOK_ID, &body, now());
    let certificate = format!("/v1/notifications/certs/fail-first-1-paypal-{run}.pem");
    name_certificate(&mut delivery, &format!("{origin}{certificate}"));
    let url = gateway.url("/p/paypal/certificate-down");
    let first = send(&url, JSON, &delivery.headers, &body).await;
    first.assert_problem(503, "signing-key-unavailable");
    assert_eq!(world.origin.count(&certificate), 1, "the host was asked");
    assert_eq!(
        world.origin.count("/p/paypal/certificate-down"),
        0,
        "nothing forwarded"
    );
    let retry = send(&url, JSON, &delivery.headers, &body).await;
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.body)
    );
    assert!(!retry.replayed(), "nothing was stored the first time");
    assert_eq!(world.origin.count("/p/paypal/certificate-down"), 1);
}

/// A signed delivery is one key per route (the path is not signed): the
/// same genuine event sent to other spellings or sub-paths of the route is
/// a replay, never a new forward.
pub async fn a_signed_delivery_is_one_key_however_its_path_is_spelt(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let event = format!("evt_spelling_{}", now());
    let body = format!(r#"{{"id":"{event}","type":"charge.succeeded"}}"#);
    let t = now();
    let headers = signed(&world.origin.url(), "stripe", STRIPE, &body, t).headers;
    let first = send(&gateway.url("/p/stripe"), JSON, &headers, &body).await;
    assert_eq!(first.status, 201);
    for spelling in [
        "/p/stripe/",
        "//p/stripe",
        "/p/%73tripe",
        "/p/stripe/other",
        "/p/./stripe",
    ] {
        let reply = send(&gateway.url(spelling), JSON, &headers, &body).await;
        assert_eq!(reply.status, 201, "{spelling}");
        assert!(reply.replayed(), "{spelling}: the same key");
        assert_eq!(reply.body, first.body, "{spelling}");
    }
    let forwards: usize = ["/p/stripe"]
        .iter()
        .map(|prefix| {
            world
                .origin
                .received(prefix)
                .iter()
                .filter(|r| r.body == body.as_bytes())
                .count()
        })
        .sum();
    assert_eq!(forwards, 1);
    // Route scope: the receipt is found by route and key, without a path.
    let receipt = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("route", "stripe"), ("key", &event)],
    )
    .await;
    assert_eq!(
        receipt.status,
        200,
        "{}",
        String::from_utf8_lossy(&receipt.body)
    );
    assert_eq!(receipt.json()["state"], "completed");
    assert_eq!(receipt.json()["duplicates"], 5);
}

/// The review's case (round 4, item 12): PayPal signs only a CRC32 of the
/// body, so within the time window a captured transmission verifies with
/// any body of the same CRC32, and so under any event id a forger writes.
/// Each transmission id is forwarded under one key at most: the same
/// transmission with another body is 401 and forwarded nowhere, and the
/// same body again is its own event's replay. (The test signs the second
/// body itself, which is what a matching CRC32 gives a forger.)
pub async fn a_paypal_transmission_is_forwarded_under_one_event_at_most(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = now();
    let transmission = format!("tx-once-{run}");
    let url = gateway.url("/p/paypal/once");
    let delivery = |event: &str| {
        let body = format!(r#"{{"id":"{event}","event_type":"PAYMENT.CAPTURE.COMPLETED"}}"#);
        let mut message = Message {
            headers: Vec::new(),
            body: body.clone().into_bytes(),
        };
        sign_paypal_transmission(
            &mut message,
            &origin,
            PAYPAL_WEBHOOK_ID,
            now(),
            transmission.clone(),
        );
        (message, body)
    };
    let (genuine, genuine_body) = delivery(&format!("WH-once-{run}"));
    let first = send(&url, JSON, &genuine.headers, &genuine_body).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let (forged, forged_body) = delivery(&format!("WH-forged-{run}"));
    let refused = send(&url, JSON, &forged.headers, &forged_body).await;
    refused.assert_problem(401, "bad-signature");
    let detail = refused.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("replayed"), "{detail}");
    let again = send(&url, JSON, &genuine.headers, &genuine_body).await;
    assert!(again.replayed(), "the same event again is its replay");
    assert_eq!(
        world.origin.count("/p/paypal/once"),
        1,
        "one forward for the one transmission"
    );
}
