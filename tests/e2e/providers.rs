//! Every sender scheme of SPEC §4 behind one gateway with `ROUTES`: each
//! provider's genuine delivery is forwarded once and its duplicate
//! replayed; a tampered body, a wrong secret, a missing signature and
//! (where the provider signs a time) a stale one are 401 and reach nothing.

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
const ADYEN: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
const GENERIC: &str = "generic-route-secret";

/// `ROUTES` as JSON: one route per provider, plus an API route.
pub fn routes_json(origin: &str) -> String {
    let _ = origin; // routes take the top-level ORIGIN_URL
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
    ]
}

/// One provider's route: its body, and the key the route derives from it.
struct Provider {
    route: &'static str,
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
        },
    )
    .unwrap()
}

/// `body` as the route's sender signs it with `secret` at `t`.
fn signed(route: &str, secret: &str, body: &str, t: u64) -> Message {
    let mut message = Message {
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    };
    signer(route, secret).sign(&mut message, t);
    message
}

fn sha256_hex(body: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(body))
}

/// An unsigned Adyen item: `sign` fills in its `hmacSignature`.
fn adyen_item(event: &str, value: u64) -> String {
    format!(
        r#"{{"NotificationRequestItem":{{"amount":{{"currency":"EUR","value":{value}}},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"ref-{event}","pspReference":"psp{event}","success":"true"}}}}"#
    )
}

fn providers() -> Vec<Provider> {
    vec![
        Provider {
            route: "stripe",
            secret: STRIPE,
            signs_time: true,
            key: |event, _| event.to_string(),
            body: |event| {
                format!(r#"{{"id":"{event}","type":"payment_intent.succeeded","amount":1000}}"#)
            },
        },
        Provider {
            route: "standard",
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
            secret: GITHUB,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"action":"completed","delivery":"{event}"}}"#),
        },
        Provider {
            route: "shopify",
            secret: SHOPIFY,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"id":"{event}","total_price":"10.00"}}"#),
        },
        Provider {
            route: "paddle",
            secret: PADDLE,
            signs_time: true,
            key: |event, _| event.to_string(),
            body: |event| {
                format!(r#"{{"event_id":"{event}","event_type":"transaction.completed"}}"#)
            },
        },
        Provider {
            route: "square",
            secret: SQUARE,
            signs_time: false,
            key: |event, _| event.to_string(),
            body: |event| format!(r#"{{"event_id":"{event}","type":"payment.updated"}}"#),
        },
        Provider {
            route: "checkout",
            secret: CHECKOUT,
            signs_time: false,
            key: |event, _| event.to_string(),
            body: |event| format!(r#"{{"id":"{event}","type":"payment_approved"}}"#),
        },
        Provider {
            route: "razorpay",
            secret: RAZORPAY,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| {
                format!(r#"{{"entity":"event","event":"payment.captured","note":"{event}"}}"#)
            },
        },
        Provider {
            route: "adyen",
            secret: ADYEN,
            signs_time: false,
            key: |event, _| format!("psp{event}:AUTHORISATION:true,psp{event}b:AUTHORISATION:true"),
            // Signed inside the body: each item's signature is filled in.
            body: |event| {
                format!(
                    r#"{{"live":"false","notificationItems":[{},{}]}}"#,
                    adyen_item(event, 1000),
                    adyen_item(&format!("{event}b"), 5)
                )
            },
        },
        Provider {
            route: "generic",
            secret: GENERIC,
            signs_time: false,
            key: |_, signed| sha256_hex(&signed.body),
            body: |event| format!(r#"{{"event":"{event}"}}"#),
        },
    ]
}

async fn send(url: &str, headers: &[(String, String)], body: &str) -> Reply {
    let mut request = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    Reply::read(request.send().await.unwrap()).await
}

/// Every provider behind one deployment: valid, duplicate, forgeries.
pub async fn every_provider_is_verified_forwarded_once_and_replayed(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let run = now();
    for provider in providers() {
        let route = provider.route;
        let url = gateway.url(&format!("/p/{route}/events"));
        let prefix = format!("/p/{route}/");
        let event = format!("evt_{route}_{run}");
        let t = now();
        let genuine = signed(route, provider.secret, &(provider.body)(&event), t);
        let (headers, body) = (&genuine.headers, text(&genuine.body));

        let first = send(&url, headers, &body).await;
        assert_eq!(
            first.status,
            201,
            "{route}: {}",
            String::from_utf8_lossy(&first.body)
        );
        assert!(!first.replayed(), "{route}");
        let again = send(&url, headers, &body).await;
        assert_eq!(again.status, 201, "{route}");
        assert!(again.replayed(), "{route}: the duplicate is replayed");
        assert_eq!(again.body, first.body, "{route}");
        let received = world.origin.received(&prefix);
        assert_eq!(received.len(), 1, "{route}: forwarded once");
        assert_eq!(received[0].body, body.as_bytes(), "{route}: the raw body");
        for (name, value) in headers {
            assert_eq!(
                received[0].header(name),
                Some(value.as_str()),
                "{route}: {name} reaches the origin"
            );
        }
        let expected_key = (provider.key)(&event, &genuine);
        assert_eq!(
            received[0].header("idempotency-key"),
            Some(format!("\"{expected_key}\"").as_str()),
            "{route}: the default key comes from signed content"
        );
        received[0].verify(FORWARD_SECRET).unwrap();

        // Forgeries: each is 401 and reaches nothing.
        let wrong = signed(route, &wrong_secret(route), &(provider.body)(&event), t);
        let mut cases = vec![
            (
                "tampered body",
                headers.clone(),
                body.replace("evt_", "evx_"),
                "mismatch",
            ),
            (
                "wrong secret",
                wrong.headers.clone(),
                text(&wrong.body),
                "mismatch",
            ),
        ];
        if route == "adyen" {
            // The signature is in the body: tamper with a signed field; a
            // missing signature is a malformed item.
            cases[0].2 = body.replacen("\"value\":1000", "\"value\":1001", 1);
            cases.push((
                "missing signature",
                Vec::new(),
                body.replace("hmacSignature", "signature"),
                "malformed",
            ));
        } else {
            cases.push(("missing header", Vec::new(), body.clone(), "missing header"));
        }
        if provider.signs_time {
            for (what, at) in [("10 minutes old", t - 600), ("10 minutes ahead", t + 600)] {
                let stale = signed(route, provider.secret, &body, at);
                cases.push((what, stale.headers, text(&stale.body), "stale"));
            }
        }
        for (what, headers, body, reason) in cases {
            let reply = send(&url, &headers, &body).await;
            reply.assert_problem(401, "bad-signature");
            let detail = reply.json()["detail"].as_str().unwrap().to_string();
            assert!(detail.starts_with(reason), "{route}, {what}: {detail}");
        }
        assert_eq!(
            world.origin.count(&prefix),
            1,
            "{route}: no forgery was forwarded"
        );
    }
}

fn text(body: &[u8]) -> String {
    String::from_utf8(body.to_vec()).unwrap()
}

fn wrong_secret(route: &str) -> String {
    match route {
        "standard" => "whsec_b3RoZXItc2VjcmV0".into(),
        "adyen" => "11".repeat(32),
        _ => "another-secret".into(),
    }
}

/// A signed delivery is one key per route (the path is not signed): the
/// same genuine event sent to other spellings or sub-paths of the route is
/// a replay, never a new forward.
pub async fn a_signed_delivery_is_one_key_however_its_path_is_spelt(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let event = format!("evt_spelling_{}", now());
    let body = format!(r#"{{"id":"{event}","type":"charge.succeeded"}}"#);
    let t = now();
    let headers = signed("stripe", STRIPE, &body, t).headers;
    let first = send(&gateway.url("/p/stripe"), &headers, &body).await;
    assert_eq!(first.status, 201);
    for spelling in [
        "/p/stripe/",
        "//p/stripe",
        "/p/%73tripe",
        "/p/stripe/other",
        "/p/./stripe",
    ] {
        let reply = send(&gateway.url(spelling), &headers, &body).await;
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
