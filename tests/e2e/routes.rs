//! `ROUTES` (SPEC §0): several routes in one gateway, paths that match no
//! route or cannot be normalised, routes given as a TOML table, and a
//! broken route that names itself.

use crate::support::{client, post_json, Gateway, Reply};
use crate::{Profile, World, ADMIN_TOKEN};

pub async fn an_unrouted_path_is_404_whatever_the_method(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let before = world.origin.count("/");
    for method in [
        reqwest::Method::GET,
        reqwest::Method::POST,
        reqwest::Method::DELETE,
    ] {
        let reply = Reply::read(
            client()
                .request(method.clone(), gateway.url("/nowhere/x"))
                .header("idempotency-key", "k")
                .send()
                .await
                .unwrap(),
        )
        .await;
        reply.assert_problem(404, "no-route");
    }
    // Whole segments only: /p/stripex is not under /p/stripe.
    post_json(&client(), &gateway.url("/p/stripex"), Some("k"), "{}")
        .await
        .assert_problem(404, "no-route");
    assert_eq!(world.origin.count("/"), before, "nothing was forwarded");
}

pub async fn a_path_that_cannot_be_normalised_is_400(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    for path in ["/v1/a%2Fb", "/v1/a%5Cb", "/v1/a%zz"] {
        let reply = post_json(&client(), &gateway.url(path), Some("k"), "{}").await;
        reply.assert_problem(400, "invalid-path");
    }
}

/// The API route of the routes profile: its own mode and tenant header,
/// and GET proxied to the route's origin.
pub async fn an_api_route_beside_webhook_routes(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let charge = |tenant: &'static str| {
        let request = client()
            .post(gateway.url("/v1/charges"))
            .header("content-type", "application/json")
            .header("idempotency-key", "api-1")
            .header("authorization", format!("Bearer {tenant}"))
            .body(r#"{"amount":1}"#);
        async move { Reply::read(request.send().await.unwrap()).await }
    };
    let first = charge("alice").await;
    assert_eq!(first.status, 201);
    assert!(charge("alice").await.replayed());
    assert!(!charge("bob").await.replayed());
    let received = world.origin.received("/v1/charges");
    assert_eq!(received.len(), 2);
    // api mode: no Idempotency-Key is 400 (no webhook fallbacks).
    let missing = Reply::read(
        client()
            .post(gateway.url("/v1/charges"))
            .header("content-type", "application/json")
            .header("authorization", "Bearer alice")
            .body(r#"{"id":"x"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    missing.assert_problem(400, "missing-key");
    let get = Reply::read(
        client()
            .get(gateway.url("/v1/charges?page=1"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(get.status, 201, "proxied to the origin as it is");
    assert_eq!(get.header("idemgate-decision"), None);
}

/// `ROUTES` as a TOML table in `wrangler.toml` (numbers and booleans as
/// TOML values), and as a JSON string, configure the same gateway.
pub async fn routes_given_as_a_toml_table(world: &'static World) {
    let origin = world.origin.url();
    let table = format!(
        r#"
[vars.ROUTES.orders]
path = "/toml/orders"
origin = "{origin}"
mode = "api"
wait_ms = 2000
log_duplicates = true

[vars.ROUTES.refunds]
path = "/toml/refunds"
in_flight = "conflict"
"#
    );
    let gateway = Gateway::start_with(
        &[
            ("ORIGIN_URL", origin.as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ],
        &table,
    )
    .await;
    let first = post_json(
        &client(),
        &gateway.url("/toml/orders/1"),
        Some("toml-1"),
        "{}",
    )
    .await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert!(post_json(
        &client(),
        &gateway.url("/toml/orders/1"),
        Some("toml-1"),
        "{}"
    )
    .await
    .replayed());
    let refund = post_json(
        &client(),
        &gateway.url("/toml/refunds/1"),
        Some("toml-2"),
        "{}",
    )
    .await;
    assert_eq!(refund.status, 201);
    post_json(&client(), &gateway.url("/elsewhere"), Some("toml-3"), "{}")
        .await
        .assert_problem(404, "no-route");
    assert_eq!(world.origin.count("/toml/"), 2);
}

/// A broken route answers 500 `misconfigured` naming the route and field,
/// never a secret, and forwards nothing.
/// SPEC §6 (v3): a broken route fails alone. Its own requests get its 500
/// naming the setting at fault (never a value, not even one inlined where
/// a secret's name belongs); every other route and the operator API keep
/// working; health names the broken routes.
pub async fn a_broken_route_fails_alone_and_health_names_it(world: &'static World) {
    let origin = world.origin.url();
    let routes = r#"{
        "stripe": {"path": "/broken/s", "signature": "strip", "signing_secret": "STRIPE_ROUTE_SECRET"},
        "inlined": {"path": "/broken/i", "signature": "stripe", "signing_secret": "whsec_live_inlined_by_mistake_4eC39HqLyjWD"},
        "good": {"path": "/broken"}
    }"#;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.as_str()),
        ("ROUTES", routes),
        ("STRIPE_ROUTE_SECRET", "whsec_never_shown"),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await;
    let reply = post_json(&client(), &gateway.url("/broken/s/pay"), Some("k"), "{}").await;
    reply.assert_problem(500, "misconfigured");
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.starts_with("ROUTES.stripe.signature: unknown scheme \"strip\""),
        "{detail}"
    );
    assert!(!detail.contains("never_shown"));
    let reply = post_json(&client(), &gateway.url("/broken/i/pay"), Some("k"), "{}").await;
    reply.assert_problem(500, "misconfigured");
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains("holds a value, not the name of a secret"),
        "{detail}"
    );
    assert!(!detail.contains("inlined_by_mistake"), "{detail}");
    // The good route, under the same prefix, works; so does the operator API.
    let good = post_json(&client(), &gateway.url("/broken/pay"), Some("good-1"), "{}").await;
    assert_eq!(good.status, 201);
    assert_eq!(world.origin.count("/broken/s"), 0);
    assert_eq!(world.origin.count("/broken/i"), 0);
    assert_eq!(world.origin.count("/broken/pay"), 1);
    let receipt = crate::support::operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[
            ("route", "good"),
            ("key", "good-1"),
            ("path", "/broken/pay"),
        ],
    )
    .await;
    assert_eq!(
        receipt.status,
        200,
        "{}",
        String::from_utf8_lossy(&receipt.body)
    );
    let health = crate::support::get(&gateway, "/__idemgate/health").await;
    assert_eq!(health.status, 200);
    let health = health.json();
    assert_eq!(
        health["configuration"]["broken_routes"],
        serde_json::json!([
            {"route": "stripe", "setting": "ROUTES.stripe.signature"},
            {"route": "inlined", "setting": "ROUTES.inlined.signing_secret"}
        ])
    );
    assert_eq!(
        health["configuration"]["routes"],
        serde_json::json!(["good"])
    );
    assert!(!health.to_string().contains("whsec"), "{health}");
}

/// The review's items 2, 4, 9 and 14 (round 5), as a deployment meets
/// them: a reconciled route whose receipts would expire before Stripe's
/// own retries, a reconciled PayPal route keyed by a header ahead of the
/// event id, a batch route with no `FORWARD_SECRET`, and an `ALERTS` sink
/// whose URL holds a user and password. Each broken route answers 500
/// naming its setting and forwards nothing; health names each, and the
/// sink by its position and host alone.
pub async fn routes_that_would_forward_twice_or_unverifiably_are_refused(world: &'static World) {
    let origin = world.origin.url();
    let routes = r#"{
        "short": {"path": "/refused/short", "signature": "stripe", "signing_secret": "STRIPE_ROUTE_SECRET",
                  "retention_seconds": 86400,
                  "reconcile": {"source": "stripe", "api_key": "RECONCILE_KEY", "types": ["*"], "lookback_seconds": 82800}},
        "paypal": {"path": "/refused/paypal", "signature": "paypal", "signing_secret": "PAYPAL_WEBHOOK_ID",
                   "key_sources": "header:paypal-transmission-id,json:/id",
                   "reconcile": {"source": "paypal", "api_key": "RECONCILE_KEY", "types": ["*"]}},
        "batch": {"path": "/refused/batch", "signature": "gocardless", "signing_secret": "STRIPE_ROUTE_SECRET"},
        "good": {"path": "/refused"}
    }"#;
    let alerts = r#"[{"url": "https://ops-user:S3cretPassw0rd@ops.example/idemgate?key=QueryKey99", "format": "slack"}]"#;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.as_str()),
        ("ROUTES", routes),
        ("STRIPE_ROUTE_SECRET", "whsec_never_shown"),
        ("PAYPAL_WEBHOOK_ID", "8PT597110X687430LKGECATA"),
        ("RECONCILE_KEY", "rk_live_never_shown_either"),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("ALERTS", alerts),
    ])
    .await;
    for (path, says) in [
        ("/refused/short/x", "ROUTES.short.reconcile: stripe may deliver an event itself for 259200 s"),
        ("/refused/paypal/x", "ROUTES.paypal.key_sources: header:paypal-transmission-id is read ahead of the event id"),
        ("/refused/batch/x", "ROUTES.batch.forward_secret: is required on this route"),
    ] {
        let reply = post_json(&client(), &gateway.url(path), Some("k"), "{}").await;
        reply.assert_problem(500, "misconfigured");
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.starts_with(says), "{detail}");
        assert!(!detail.contains("never_shown"), "{detail}");
    }
    assert_eq!(world.origin.count("/refused/short"), 0);
    assert_eq!(world.origin.count("/refused/paypal"), 0);
    assert_eq!(world.origin.count("/refused/batch"), 0);
    let good = post_json(&client(), &gateway.url("/refused/x"), Some("fine-1"), "{}").await;
    assert_eq!(good.status, 201);
    let health = crate::support::get(&gateway, "/__idemgate/health").await;
    let health = health.json();
    assert_eq!(
        health["configuration"]["broken_routes"],
        serde_json::json!([
            {"route": "short", "setting": "ROUTES.short.reconcile"},
            {"route": "paypal", "setting": "ROUTES.paypal.key_sources"},
            {"route": "batch", "setting": "ROUTES.batch.forward_secret"}
        ])
    );
    let said = health["alerts"].as_str().unwrap_or_default().to_string();
    assert!(
        said.starts_with("ALERTS sink 1 (ops.example): "),
        "{health}"
    );
    for hidden in ["ops-user", "S3cretPassw0rd", "QueryKey99", "idemgate?"] {
        assert!(!health.to_string().contains(hidden), "{hidden} in {health}");
    }
}
