//! Sender authentication and key scopes (SPEC §3, §4): a forged delivery
//! reaches neither a Durable Object nor the origin.

use std::time::{SystemTime, UNIX_EPOCH};

use idemgate_core::signature::{Message, SchemeSettings, SignatureScheme};

use crate::support::{client, operator, post_json, Reply};
use crate::{Profile, World, ADMIN_TOKEN, STANDARD_WEBHOOKS_SECRET, STRIPE_SECRET};

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `body` signed by idemgate's own signer for `scheme` with `secret` at
/// `t`, starting from `headers`; the value of the header `signature`.
fn signature(
    scheme: &str,
    secret: &str,
    headers: &[(&str, &str)],
    t: u64,
    body: &str,
    signature: &str,
) -> String {
    let mut message = Message {
        headers: headers
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect(),
        body: body.as_bytes().to_vec(),
    };
    let settings = SchemeSettings {
        secret: Some(secret.to_string()),
        ..SchemeSettings::default()
    };
    SignatureScheme::configure(scheme, &settings)
        .unwrap()
        .sign(&mut message, t);
    idemgate_core::headers::get(&message.headers, signature)
        .unwrap()
        .to_string()
}

pub fn stripe_signature(secret: &str, t: u64, body: &str) -> String {
    signature("stripe", secret, &[], t, body, "stripe-signature")
}

fn standard_signature(secret: &str, id: &str, t: u64, body: &str) -> String {
    signature(
        "standard-webhooks",
        secret,
        &[("webhook-id", id)],
        t,
        body,
        "webhook-signature",
    )
}

async fn send(url: &str, headers: &[(&str, String)], body: &str) -> Reply {
    let mut request = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    Reply::read(request.send().await.unwrap()).await
}

pub async fn stripe_delivery_is_forwarded_once_with_its_signature_and_raw_body(
    world: &'static World,
) {
    let gateway = world.gateway(Profile::Stripe).await;
    let url = gateway.url("/stripe-ok/webhook");
    // Odd spacing: the origin must get these exact bytes to verify Stripe's signature.
    let body = r#"{ "id": "evt_ok_1",  "type": "payment_intent.succeeded" }"#;
    let signature = stripe_signature(STRIPE_SECRET, now(), body);
    let first = send(&url, &[("stripe-signature", signature.clone())], body).await;
    assert_eq!(first.status, 201);
    let again = send(&url, &[("stripe-signature", signature.clone())], body).await;
    assert!(again.replayed());
    let received = world.origin.received("/stripe-ok/");
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, body.as_bytes());
    assert_eq!(
        received[0].header("stripe-signature"),
        Some(signature.as_str())
    );
    assert_eq!(
        received[0].header("idempotency-key"),
        Some("\"evt_ok_1\""),
        "json:/id"
    );
}

pub async fn stripe_forgeries_are_401_and_store_nothing(world: &'static World) {
    let gateway = world.gateway(Profile::Stripe).await;
    let url = gateway.url("/stripe-forged/webhook");
    let body = r#"{"id":"evt_forged","amount":100}"#;
    let tampered = r#"{"id":"evt_forged","amount":100000}"#;
    let now = now();
    let cases = [
        (
            "tampered body",
            Some(stripe_signature(STRIPE_SECRET, now, body)),
            tampered,
            "mismatch",
        ),
        (
            "wrong secret",
            Some(stripe_signature("whsec_other", now, body)),
            body,
            "mismatch",
        ),
        (
            "10 minutes old",
            Some(stripe_signature(STRIPE_SECRET, now - 600, body)),
            body,
            "stale",
        ),
        (
            "10 minutes ahead",
            Some(stripe_signature(STRIPE_SECRET, now + 600, body)),
            body,
            "stale",
        ),
        ("missing header", None, body, "missing header"),
        (
            "malformed header",
            Some("v1=abc".to_string()),
            body,
            "malformed",
        ),
    ];
    for (what, signature, body, reason) in cases {
        let headers: Vec<(&str, String)> = signature
            .map(|value| vec![("stripe-signature", value)])
            .unwrap_or_default();
        let reply = send(&url, &headers, body).await;
        reply.assert_problem(401, "bad-signature");
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.starts_with(reason), "{what}: {detail}");
    }
    assert_eq!(world.origin.count("/stripe-forged/"), 0);
    // A signed route scopes keys by route: its receipts are asked for
    // without path= (v5: a parameter the route does not use is refused).
    let receipt = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("key", "evt_forged")],
    )
    .await;
    receipt.assert_problem(404, "not-found");
}

fn standard_headers(id: &str, t: u64, signature: String) -> Vec<(&'static str, String)> {
    vec![
        ("webhook-id", id.to_string()),
        ("webhook-timestamp", t.to_string()),
        ("webhook-signature", signature),
    ]
}

pub async fn standard_webhooks_delivery_is_forwarded_once(world: &'static World) {
    let gateway = world.gateway(Profile::StandardWebhooks).await;
    let url = gateway.url("/sw-ok/webhook");
    let body = r#"{"type":"invoice.paid","amount":4200}"#;
    let t = now();
    let headers = standard_headers(
        "msg_ok_1",
        t,
        standard_signature(STANDARD_WEBHOOKS_SECRET, "msg_ok_1", t, body),
    );
    assert_eq!(send(&url, &headers, body).await.status, 201);
    assert!(send(&url, &headers, body).await.replayed());
    let received = world.origin.received("/sw-ok/");
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].header("idempotency-key"),
        Some("\"msg_ok_1\""),
        "webhook-id"
    );
    assert!(received[0].header("webhook-signature").is_some());
}

pub async fn standard_webhooks_forgeries_are_401_and_store_nothing(world: &'static World) {
    let gateway = world.gateway(Profile::StandardWebhooks).await;
    let url = gateway.url("/sw-forged/webhook");
    let body = r#"{"type":"invoice.paid","amount":4200}"#;
    let id = "msg_forged";
    let now = now();
    let sign = |secret: &str, t: u64| standard_signature(secret, id, t, body);
    let other_secret = "whsec_c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=";
    let cases = [
        (
            "tampered body",
            standard_headers(id, now, sign(STANDARD_WEBHOOKS_SECRET, now)),
            r#"{"type":"invoice.paid","amount":1}"#,
            "mismatch",
        ),
        (
            "wrong secret",
            standard_headers(id, now, sign(other_secret, now)),
            body,
            "mismatch",
        ),
        (
            "10 minutes old",
            standard_headers(id, now - 600, sign(STANDARD_WEBHOOKS_SECRET, now - 600)),
            body,
            "stale",
        ),
        (
            "10 minutes ahead",
            standard_headers(id, now + 600, sign(STANDARD_WEBHOOKS_SECRET, now + 600)),
            body,
            "stale",
        ),
        (
            "missing signature",
            standard_headers(id, now, String::new())[..2].to_vec(),
            body,
            "missing header",
        ),
    ];
    for (what, headers, body, reason) in cases {
        let reply = send(&url, &headers, body).await;
        reply.assert_problem(401, "bad-signature");
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.starts_with(reason), "{what}: {detail}");
    }
    assert_eq!(world.origin.count("/sw-forged/"), 0);
    let receipt = operator(&gateway, reqwest::Method::GET, ADMIN_TOKEN, &[("key", id)]).await;
    receipt.assert_problem(404, "not-found");
}

/// Two tenants using one key get separate receipts, separate forwards and
/// separate scopes at the origin, under both key scopes; the origin can
/// tell them apart because the scope is forwarded and signed.
pub async fn tenants_never_share_a_receipt(world: &'static World) {
    for (profile, prefix) in [
        (Profile::Tenants, "/tenants-path/"),
        (Profile::GlobalScope, "/tenants-route/"),
    ] {
        let gateway = world.gateway(profile).await;
        let url = gateway.url(&format!("{prefix}payments"));
        let body = r#"{"amount":300}"#;
        let as_tenant = |token: &'static str| {
            let url = url.clone();
            async move {
                let response = client()
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("idempotency-key", "shared-key")
                    .header("authorization", format!("Bearer {token}"))
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                Reply::read(response).await
            }
        };
        let alice = as_tenant("alice").await;
        let bob = as_tenant("bob").await;
        assert_eq!((alice.status, bob.status), (201, 201), "{profile:?}");
        assert!(!alice.replayed() && !bob.replayed(), "{profile:?}");
        assert_ne!(
            alice.body, bob.body,
            "{profile:?}: bob never sees alice's answer"
        );
        let again = as_tenant("alice").await;
        assert_eq!(again.status, 201);
        assert!(again.replayed());
        assert_eq!(again.body, alice.body);
        let received = world.origin.received(prefix);
        assert_eq!(received.len(), 2, "{profile:?}");
        let scopes: Vec<&str> = received
            .iter()
            .map(|request| request.header("idempotency-scope").unwrap())
            .collect();
        assert_ne!(
            scopes[0], scopes[1],
            "{profile:?}: the origin can tell the tenants apart"
        );
        assert_eq!(
            received[0].header("idempotency-key"),
            received[1].header("idempotency-key")
        );
        let anonymous = post_json(&client(), &url, Some("shared-key"), body).await;
        anonymous.assert_problem(400, "missing-tenant");
    }
}

pub async fn path_scope_separates_paths_and_route_scope_shares_them(world: &'static World) {
    let body = r#"{"amount":10}"#;
    let path_scoped = world.gateway(Profile::Wait).await;
    for path in ["/scope-path/a", "/scope-path/b"] {
        let reply = post_json(&client(), &path_scoped.url(path), Some("scope-1"), body).await;
        assert_eq!(reply.status, 201);
        assert!(!reply.replayed(), "{path}");
    }
    assert_eq!(world.origin.count("/scope-path/"), 2);
    // One path however it is spelt.
    for spelling in ["/scope-path/a/", "//scope-path/a", "/scope-path/%61"] {
        let reply = post_json(&client(), &path_scoped.url(spelling), Some("scope-1"), body).await;
        assert_eq!(reply.status, 201, "{spelling}");
        assert!(reply.replayed(), "{spelling}");
    }
    assert_eq!(world.origin.count("/scope-path/"), 2);

    let global = world.gateway(Profile::GlobalScope).await;
    let post = |path: &'static str| {
        let url = global.url(path);
        async move {
            let response = client()
                .post(&url)
                .header("content-type", "application/json")
                .header("idempotency-key", "scope-1")
                .header("authorization", "Bearer carol")
                .body(body)
                .send()
                .await
                .unwrap();
            Reply::read(response).await
        }
    };
    let first = post("/scope-global/a").await;
    let second = post("/scope-global/b").await;
    assert_eq!((first.status, second.status), (201, 201));
    assert!(!first.replayed());
    assert!(second.replayed());
    assert_eq!(world.origin.count("/scope-global/"), 1);
}
