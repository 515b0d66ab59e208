//! The operator's page (`/__idemgate/ui`, docs/operator-page.md): its files
//! as the worker serves them, and a real browser (Debian's chromium, driven
//! by Playwright: `tests/ui/operator-page.mjs`) using it against real dead
//! letters of a real failing origin, which the browser script fixes
//! half-way through a control socket served here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tokio::task::JoinSet;

use crate::support::{client, eventually, operator, post_json, Gateway, Reply};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const BODY: &str = r#"{"amount":1500,"currency":"eur"}"#;

/// Dead letters the bulk re-drive takes.
const BULK: usize = 30;

/// Four async routes: two that give up fast (dead letters), one that
/// retries only in an hour (a pending delivery, purged by force), one with
/// flow control (the overview's flow line); and a Stripe route reconciled
/// against `api` (the overview's reconciliation lines).
fn routes_json(api: &str) -> String {
    serde_json::json!({
        "stripe": {"path": "/ui/stripe", "signature": "stripe", "signing_secret": "UI_STRIPE_SECRET",
                   "reconcile": {"source": "stripe", "api_key": "UI_STRIPE_API_KEY", "types": ["*"],
                                 "grace_seconds": 0, "lookback_seconds": 3600, "api_base": api}},
        "payments": {"path": "/ui/pay", "delivery": "async", "retry_schedule": "1s,1s"},
        "refunds": {"path": "/ui/refunds", "delivery": "async", "retry_schedule": "1s"},
        "held": {"path": "/ui/held", "delivery": "async", "retry_schedule": "1h"},
        "limited": {"path": "/ui/limited", "delivery": "async", "max_in_flight": 4},
        // Ordered, skipping stale events (a superseded one on the overview);
        // outside /ui/, whose origin fails.
        "ordered": {"path": "/ui-ordered", "delivery": "async", "order_key": "json:/data/object/id",
                    "order_time": "json:/created", "on_stale": "skip", "order_hold_ms": 0},
    })
    .to_string()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Debian's chromium (`scripts/test` installs it), or `$CHROMIUM`.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    [
        "/usr/lib/chromium/chromium",
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|path| path.exists())
    .expect(
        "chromium is missing: scripts/test installs it (apt-get install chromium), or set CHROMIUM",
    )
}

async fn summary(gateway: &Gateway) -> HashMap<String, serde_json::Value> {
    let reply = client()
        .get(gateway.url("/__idemgate/summary"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let summary = Reply::read(reply).await.json();
    summary["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|route| (route["route"].as_str().unwrap().to_string(), route.clone()))
        .collect()
}

/// The count of `state` on `route`.
fn count(summary: &HashMap<String, serde_json::Value>, route: &str, state: &str) -> u64 {
    summary[route][state].as_u64().unwrap()
}

/// A socket the browser script calls to make the origin fail or recover:
/// `POST /origin?prefix=/ui/&failing=false`.
async fn control(world: &'static World) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app =
        axum::Router::new().route(
            "/origin",
            axum::routing::post(
                move |axum::extract::Query(query): axum::extract::Query<
                    HashMap<String, String>,
                >| async move {
                    world
                        .origin
                        .fail(&query["prefix"], query["failing"] == "true");
                    "ok"
                },
            ),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// The worker serves the page and its files with their security headers,
/// and keeps every other path as its own, whatever the method.
async fn the_page_is_served_with_its_security_headers(world: &'static World, gateway: &Gateway) {
    let client = client();
    let page = Reply::read(
        client
            .get(gateway.url("/__idemgate/ui"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    let csp = page.header("content-security-policy").unwrap();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let html = String::from_utf8_lossy(&page.body);
    assert!(
        !html.contains("<script>") && !html.contains(" style="),
        "no inline script or style"
    );
    for (path, kind) in [
        ("/__idemgate/ui/app.js", "text/javascript"),
        ("/__idemgate/ui/page.js", "text/javascript"),
        ("/__idemgate/ui/router.js", "text/javascript"),
        ("/__idemgate/ui/views.js", "text/javascript"),
        ("/__idemgate/ui/receipt.js", "text/javascript"),
        ("/__idemgate/ui/api.js", "text/javascript"),
        ("/__idemgate/ui/dom.js", "text/javascript"),
        ("/__idemgate/ui/app.css", "text/css"),
    ] {
        let file = Reply::read(client.get(gateway.url(path)).send().await.unwrap()).await;
        assert_eq!(file.status, 200, "{path}");
        assert!(
            file.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
        assert!(file.header("content-security-policy").is_some(), "{path}");
    }
    // Nothing of ui/ but the page's own files is served: an unrouted
    // path is the worker's 404 problem.
    let headers_file =
        Reply::read(client.get(gateway.url("/_headers")).send().await.unwrap()).await;
    headers_file.assert_problem(404, "no-route");
    let posted = Reply::read(
        client
            .post(gateway.url("/__idemgate/ui"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(posted.status, 405, "the page takes no POST");
    let beside = Reply::read(
        client
            .get(gateway.url("/__idemgate/uix"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    beside.assert_problem(404, "not-found");
    // A webhook on a routed path is the worker's, with its headers.
    let ack = post_json(
        &client,
        &gateway.url("/ui/limited/check"),
        Some("ui-check-1"),
        BODY,
    )
    .await;
    assert_eq!(ack.status, 202, "{}", String::from_utf8_lossy(&ack.body));
    assert_eq!(ack.header("idemgate-decision"), Some("queued"));
    assert!(ack.header("content-security-policy").is_none());
    eventually(10, "the check delivery reaches the origin", || async {
        world.origin.count("/ui/limited/check") == 1
    })
    .await;
    assert_eq!(world.origin.count("/__idemgate"), 0);
}

pub async fn the_operator_page_drives_the_operator_api_in_a_browser(world: &'static World) {
    let script = root().join("tests/ui/operator-page.mjs");
    assert!(
        root().join("tests/ui/node_modules/playwright").exists(),
        "tests/ui has no node_modules: run scripts/test (npm ci --prefix tests/ui)"
    );
    let browser = chromium();
    let origin = world.origin.url();
    // One event Stripe lists and never delivered: a run fills it before
    // the browser comes, and the browser's run finds it received.
    let api = crate::support::provider_api::ProviderApi::start("rk_test_ui_key").await;
    let created = crate::senders::now() - 60;
    api.add_stripe_event(serde_json::json!({
        "id": "evt_ui_1", "object": "event", "type": "payment_intent.succeeded", "created": created,
        "data": {"object": {"id": "pi_ui_1", "amount": 1500}}
    }));
    let routes = routes_json(&api.url());
    // Alerts to a Slack-shaped sink on the test origin: the dead letters
    // below fire `dead` on payments, which the page shows.
    let alerts =
        serde_json::json!([{"url": format!("{origin}/ui-alerts/slack"), "format": "slack"}])
            .to_string();
    let gateway = Gateway::start(&[
        ("UI_STRIPE_SECRET", "whsec_ui_stripe"),
        ("UI_STRIPE_API_KEY", "rk_test_ui_key"),
        ("ALERTS", &alerts),
        ("ALERT_INTERVAL_SECONDS", "600"),
        ("ROUTES", &routes),
        ("ORIGIN_URL", &origin),
        ("ORIGIN_TIMEOUT_MS", "8000"),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await;
    the_page_is_served_with_its_security_headers(world, &gateway).await;
    let run = crate::support::reconcile(&gateway, ADMIN_TOKEN, reqwest::Method::POST, "stripe")
        .await
        .json();
    assert_eq!(run["filled"], 1, "{run}");

    // Dead letters of a failing origin: one to open and re-drive, 30 for
    // the bulk re-drive, one to purge, one for the keyboard; and a pending
    // delivery (retried only in an hour) to purge by force.
    world.origin.fail("/ui/", true);
    let mut sends = JoinSet::new();
    let mut deliveries: Vec<(String, String)> = vec![
        ("ui-purge-1".into(), "/ui/pay/purge".into()),
        ("ui-kbd-1".into(), "/ui/refunds/kbd".into()),
        ("ui-held-1".into(), "/ui/held/one".into()),
    ];
    deliveries.extend((0..BULK).map(|n| (format!("ui-bulk-{n}"), format!("/ui/pay/bulk/{n}"))));
    for (key, path) in deliveries {
        let url = gateway.url(&path);
        sends.spawn(async move { post_json(&client(), &url, Some(&key), BODY).await });
    }
    // The one the browser opens carries a credential and a trace header:
    // the page shows the first masked, the second as it is.
    let first = client()
        .post(gateway.url("/ui/pay/one"))
        .header("content-type", "application/json")
        .header("idempotency-key", "ui-dead-1")
        .header("authorization", "Bearer sender-credential")
        .header("x-trace-id", "trace-42")
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 202);
    while let Some(ack) = sends.join_next().await {
        let ack = ack.unwrap();
        assert_eq!(ack.status, 202, "{}", String::from_utf8_lossy(&ack.body));
    }
    eventually(30, "the dead letters and the pending delivery", || async {
        let summary = summary(&gateway).await;
        count(&summary, "payments", "dead") == BULK as u64 + 2
            && count(&summary, "refunds", "dead") == 1
            && count(&summary, "held", "failed") == 1
    })
    .await;
    // An event older than one already delivered for its entity:
    // superseded on the ordered route.
    for (key, created) in [("ui-newer", 200), ("ui-older", 100)] {
        let body =
            serde_json::json!({"id": key, "created": created, "data": {"object": {"id": "in_ui"}}});
        let ack = client()
            .post(gateway.url(&format!("/ui-ordered/{key}")))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(ack.status(), 202);
        eventually(30, "the ordered event is settled", || async {
            let summary = summary(&gateway).await;
            world.origin.count("/ui-ordered/ui-newer") == 1
                && (key == "ui-newer" || count(&summary, "ordered", "superseded") == 1)
        })
        .await;
    }
    eventually(20, "the dead alert fires on payments", || async {
        let summary = summary(&gateway).await;
        summary["payments"]["alerts"]
            .as_array()
            .is_some_and(|alerts| {
                alerts
                    .iter()
                    .any(|alert| alert["condition"] == "dead" && alert["firing"] == true)
            })
    })
    .await;
    assert!(
        world.origin.count("/ui-alerts/slack") >= 1,
        "the sink was told"
    );
    let dead = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[
            ("route", "payments"),
            ("key", "ui-dead-1"),
            ("path", "/ui/pay/one"),
        ],
    )
    .await
    .json();
    let headers = dead["request"]["headers"].as_array().unwrap();
    assert!(
        headers.contains(&serde_json::json!(["authorization", "[masked]"])),
        "{dead}"
    );

    let control = control(world).await;
    let started = std::time::Instant::now();
    let base = gateway.base.clone();
    let status = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(&script)
            .args([&base, ADMIN_TOKEN, &control])
            .env("CHROMIUM", &browser)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
            .status()
            .expect("node runs")
    })
    .await
    .unwrap();
    world.origin.fail("/ui/", false);
    assert!(
        status.success(),
        "the browser script failed ({status}); screenshots in target/ui-screenshots/"
    );
    println!(
        "operator page: the browser scenario took {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // What the browser did, seen from the origin and the API: the opened
    // dead letter and the 30 of the bulk were each delivered once more
    // (after their failed attempts), and the purged ones are gone.
    let epochs = world.origin.rising_epochs("/ui/pay/one");
    assert_eq!(epochs.len(), 4, "three failures, then the re-drive");
    eventually(30, "the bulk re-drive completes", || async {
        let summary = summary(&gateway).await;
        ["payments", "refunds", "held"].iter().all(|route| {
            ["queued", "in_flight", "failed", "dead"]
                .iter()
                .all(|state| count(&summary, route, state) == 0)
        })
    })
    .await;
    let received = world.origin.received("/ui/pay/bulk/");
    for n in 0..BULK {
        let path = format!("/ui/pay/bulk/{n}");
        let forwards = received
            .iter()
            .filter(|request| request.path == path)
            .count();
        assert_eq!(forwards, 4, "{path}: three failures and one re-drive");
    }
    // Every act the page made is on record, and the chain verifies.
    let export = client()
        .get(gateway.url("/__idemgate/audit?order=oldest"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let export = Reply::read(export).await.json();
    let entries = export["entries"].as_array().unwrap();
    idemgate_origin::audit::verify_chain(entries).expect("the page's acts form a valid chain");
    assert!(
        entries.len() >= 7,
        "six acts and the keyboard's purge: {export}"
    );
    for (route, key, path) in [
        ("payments", "ui-purge-1", "/ui/pay/purge"),
        ("refunds", "ui-kbd-1", "/ui/refunds/kbd"),
        ("held", "ui-held-1", "/ui/held/one"),
    ] {
        operator(
            &gateway,
            reqwest::Method::GET,
            ADMIN_TOKEN,
            &[("route", route), ("key", key), ("path", path)],
        )
        .await
        .assert_problem(404, "not-found");
    }
}
