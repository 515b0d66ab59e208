//! Every sender scheme of SPEC §4 behind one gateway with `ROUTES`: each
//! provider's genuine delivery is forwarded once and its duplicate
//! replayed; a tampered body, a wrong secret, a missing signature and
//! (where the provider signs a time) a stale one are 401 and reach nothing.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

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

fn mac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// One provider's delivery: its body, and how it signs one.
struct Provider {
    route: &'static str,
    secret: &'static str,
    /// Whether the provider signs a time (then a stale one is refused).
    signs_time: bool,
    /// The idempotency key the route derives from the body.
    key: fn(&str) -> String,
    body: fn(&str) -> String,
    /// The signature headers of `body` signed with `secret` at `t`.
    sign: fn(secret: &str, body: &str, t: u64) -> Vec<(String, String)>,
}

fn header(name: &str, value: String) -> Vec<(String, String)> {
    vec![(name.to_string(), value)]
}

fn sha256_hex(body: &str) -> String {
    use sha2::Digest;
    hex::encode(Sha256::digest(body.as_bytes()))
}

fn adyen_item(event: &str, value: u64, secret: &str) -> String {
    let psp = format!("psp{event}");
    let signed = format!("{psp}::TestMerchant:ref-{event}:{value}:EUR:AUTHORISATION:true");
    let signature = STANDARD.encode(mac(
        &hex::decode(secret).unwrap_or_default(),
        &[signed.as_bytes()],
    ));
    format!(
        r#"{{"NotificationRequestItem":{{"additionalData":{{"hmacSignature":"{signature}"}},"amount":{{"currency":"EUR","value":{value}}},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"ref-{event}","pspReference":"{psp}","success":"true"}}}}"#
    )
}

fn providers() -> Vec<Provider> {
    vec![
        Provider {
            route: "stripe",
            secret: STRIPE,
            signs_time: true,
            key: |event| event.to_string(),
            body: |event| {
                format!(r#"{{"id":"{event}","type":"payment_intent.succeeded","amount":1000}}"#)
            },
            sign: |secret, body, t| {
                header(
                    "stripe-signature",
                    format!(
                        "t={t},v1={}",
                        hex::encode(mac(
                            secret.as_bytes(),
                            &[format!("{t}.").as_bytes(), body.as_bytes()]
                        ))
                    ),
                )
            },
        },
        Provider {
            route: "standard",
            secret: STANDARD_SECRET,
            signs_time: true,
            key: |event| format!("msg_{event}"),
            body: |event| format!(r#"{{"type":"invoice.paid","event":"{event}"}}"#),
            sign: |secret, body, t| {
                let key = STANDARD
                    .decode(secret.trim_start_matches("whsec_"))
                    .unwrap_or_default();
                let event = body
                    .split("\"event\":\"")
                    .nth(1)
                    .unwrap()
                    .trim_end_matches("\"}");
                let id = format!("msg_{event}");
                let signature = STANDARD.encode(mac(
                    &key,
                    &[format!("{id}.{t}.").as_bytes(), body.as_bytes()],
                ));
                vec![
                    ("webhook-id".into(), id),
                    ("webhook-timestamp".into(), t.to_string()),
                    ("webhook-signature".into(), format!("v1,{signature}")),
                ]
            },
        },
        Provider {
            route: "github",
            secret: GITHUB,
            signs_time: false,
            key: |_| String::new(),
            body: |event| format!(r#"{{"action":"completed","delivery":"{event}"}}"#),
            sign: |secret, body, _| {
                header(
                    "x-hub-signature-256",
                    format!(
                        "sha256={}",
                        hex::encode(mac(secret.as_bytes(), &[body.as_bytes()]))
                    ),
                )
            },
        },
        Provider {
            route: "shopify",
            secret: SHOPIFY,
            signs_time: false,
            key: |_| String::new(),
            body: |event| format!(r#"{{"id":"{event}","total_price":"10.00"}}"#),
            sign: |secret, body, _| {
                header(
                    "x-shopify-hmac-sha256",
                    STANDARD.encode(mac(secret.as_bytes(), &[body.as_bytes()])),
                )
            },
        },
        Provider {
            route: "paddle",
            secret: PADDLE,
            signs_time: true,
            key: |event| event.to_string(),
            body: |event| {
                format!(r#"{{"event_id":"{event}","event_type":"transaction.completed"}}"#)
            },
            sign: |secret, body, t| {
                header(
                    "paddle-signature",
                    format!(
                        "ts={t};h1={}",
                        hex::encode(mac(
                            secret.as_bytes(),
                            &[format!("{t}:").as_bytes(), body.as_bytes()]
                        ))
                    ),
                )
            },
        },
        Provider {
            route: "square",
            secret: SQUARE,
            signs_time: false,
            key: |event| event.to_string(),
            body: |event| format!(r#"{{"event_id":"{event}","type":"payment.updated"}}"#),
            sign: |secret, body, _| {
                header(
                    "x-square-hmacsha256-signature",
                    STANDARD.encode(mac(
                        secret.as_bytes(),
                        &[SQUARE_URL.as_bytes(), body.as_bytes()],
                    )),
                )
            },
        },
        Provider {
            route: "checkout",
            secret: CHECKOUT,
            signs_time: false,
            key: |event| event.to_string(),
            body: |event| format!(r#"{{"id":"{event}","type":"payment_approved"}}"#),
            sign: |secret, body, _| {
                header(
                    "cko-signature",
                    hex::encode(mac(secret.as_bytes(), &[body.as_bytes()])),
                )
            },
        },
        Provider {
            route: "razorpay",
            secret: RAZORPAY,
            signs_time: false,
            key: |_| String::new(),
            body: |event| {
                format!(r#"{{"entity":"event","event":"payment.captured","note":"{event}"}}"#)
            },
            sign: |secret, body, _| {
                header(
                    "x-razorpay-signature",
                    hex::encode(mac(secret.as_bytes(), &[body.as_bytes()])),
                )
            },
        },
        Provider {
            route: "adyen",
            secret: ADYEN,
            signs_time: false,
            key: |_| String::new(),
            // Signed inside the body: `sign` adds no header, and the body
            // carries the signature made with the route's own key.
            body: |event| {
                format!(
                    r#"{{"live":"false","notificationItems":[{},{}]}}"#,
                    adyen_item(event, 1000, ADYEN),
                    adyen_item(&format!("{event}b"), 5, ADYEN)
                )
            },
            sign: |_, _, _| Vec::new(),
        },
        Provider {
            route: "generic",
            secret: GENERIC,
            signs_time: false,
            key: |_| String::new(),
            body: |event| format!(r#"{{"event":"{event}"}}"#),
            sign: |secret, body, _| {
                header(
                    "x-signature",
                    format!(
                        "sha256={}",
                        STANDARD.encode(mac(secret.as_bytes(), &[body.as_bytes()]))
                    ),
                )
            },
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
        let body = (provider.body)(&event);
        let t = now();
        let headers = (provider.sign)(provider.secret, &body, t);

        let first = send(&url, &headers, &body).await;
        assert_eq!(
            first.status,
            201,
            "{route}: {}",
            String::from_utf8_lossy(&first.body)
        );
        assert!(!first.replayed(), "{route}");
        let again = send(&url, &headers, &body).await;
        assert_eq!(again.status, 201, "{route}");
        assert!(again.replayed(), "{route}: the duplicate is replayed");
        assert_eq!(again.body, first.body, "{route}");
        let received = world.origin.received(&prefix);
        assert_eq!(received.len(), 1, "{route}: forwarded once");
        assert_eq!(received[0].body, body.as_bytes(), "{route}: the raw body");
        for (name, value) in &headers {
            assert_eq!(
                received[0].header(name),
                Some(value.as_str()),
                "{route}: {name} reaches the origin"
            );
        }
        let expected_key = match (provider.key)(&event) {
            key if key.is_empty() => sha256_hex(&body),
            key => key,
        };
        assert_eq!(
            received[0].header("idempotency-key"),
            Some(format!("\"{expected_key}\"").as_str()),
            "{route}: the default key comes from signed content"
        );
        received[0].verify(FORWARD_SECRET).unwrap();

        // Forgeries: each is 401 and reaches nothing.
        let tampered = body.replace("evt_", "evx_");
        let mut cases = vec![
            (
                "tampered body",
                (provider.sign)(provider.secret, &body, t),
                tampered.clone(),
                "mismatch",
            ),
            (
                "wrong secret",
                (provider.sign)(&wrong_secret(route), &body, t),
                body.clone(),
                "mismatch",
            ),
        ];
        if route == "adyen" {
            // The signature is in the body: tamper with a signed field, and
            // sign with another key; a missing signature is a malformed item.
            cases[0].2 = body.replacen("\"value\":1000", "\"value\":1001", 1);
            cases[1].2 = format!(
                r#"{{"live":"false","notificationItems":[{}]}}"#,
                adyen_item(&event, 1000, &"11".repeat(32))
            );
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
            cases.push((
                "10 minutes old",
                (provider.sign)(provider.secret, &body, t - 600),
                body.clone(),
                "stale",
            ));
            cases.push((
                "10 minutes ahead",
                (provider.sign)(provider.secret, &body, t + 600),
                body.clone(),
                "stale",
            ));
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

fn wrong_secret(route: &str) -> String {
    match route {
        "standard" => "whsec_b3RoZXItc2VjcmV0".into(),
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
    let signature = format!(
        "t={t},v1={}",
        hex::encode(mac(
            STRIPE.as_bytes(),
            &[format!("{t}.").as_bytes(), body.as_bytes()]
        ))
    );
    let headers = vec![("stripe-signature".to_string(), signature)];
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
