//! The cost of reconciliation (SPEC §11): a Stripe route whose events API
//! (the tests' local fake, support/provider_api.rs) lists `RECONCILE_EVENTS`
//! events (default 10,000) that never arrived. The first pass fills every
//! one (each forwarded to the origin once); the second lists them all
//! again and fills none. A pass is the runs it takes: the first started by
//! the operator API, each next one by the route object's alarm from the
//! cursor, until a run completes its window.

use super::*;
use support::provider_api::ProviderApi;

const API_KEY: &str = "rk_test_bench_reconcile";
const STRIPE_SECRET: &str = "whsec_bench_reconcile";

pub(crate) async fn reconcile(events: usize) -> Value {
    let origin = TestOrigin::start().await;
    let api = ProviderApi::start(API_KEY).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for index in 0..events {
        api.add_stripe_event(json!({
            "id": format!("evt_bench_{index:05}"), "object": "event", "type": "payment_intent.succeeded",
            "created": now - 3_000 + (index as u64 * 2_000 / events as u64), "livemode": false,
            "pending_webhooks": 1, "data": {"object": {"id": format!("pi_{index}"), "amount": 1000}}
        }));
    }
    let routes = json!({
        "stripe": {
            "path": "/bench/stripe", "signature": "stripe", "signing_secret": "BENCH_STRIPE_SECRET",
            "reconcile": {
                "source": "stripe", "api_key": "BENCH_STRIPE_API_KEY", "types": ["payment_intent.*"],
                "lookback_seconds": 3_600, "grace_seconds": 0, "api_base": api.url()
            }
        }
    })
    .to_string();
    let gateway = Gateway::start_without_inspector(&[
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", origin.url().as_str()),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("BENCH_STRIPE_SECRET", STRIPE_SECRET),
        ("BENCH_STRIPE_API_KEY", API_KEY),
        // A reconciled route must sign its forwards: a filled event
        // carries no signature of the sender's.
        ("FORWARD_SECRET", "bench-forward-secret"),
    ])
    .await;
    eprintln!("bench: reconciliation, {events} events: filling every one");
    let filling = pass(&gateway, &api).await;
    let sample = receipt_ops(&gateway, "evt_bench_00000").await;
    eprintln!("bench: reconciliation, {events} events: listing them again");
    let listing = pass(&gateway, &api).await;
    let forwarded = origin.count("/bench/stripe");
    // Why an event failed is in the log lines (`reconcile-event-failed`).
    std::fs::write(
        crate::root().join("target/reconcile-gateway.log"),
        gateway.log(),
    )
    .unwrap();
    json!({
        "events": events,
        "forwarded": forwarded,
        "filling": filling,
        "listing": listing,
        "filled_receipt_storage": sample,
    })
}

async fn receipt_ops(gateway: &Gateway, key: &str) -> Value {
    let reply = client()
        .get(gateway.url("/__idemgate/receipts"))
        .query(&[("route", "stripe"), ("key", key)])
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    Reply::read(reply).await.json()["object_storage_ops"].clone()
}

async fn runs(gateway: &Gateway) -> Value {
    support::reconcile(gateway, ADMIN_TOKEN, reqwest::Method::GET, "stripe")
        .await
        .json()
}

/// One pass over the window: its runs, their counts and what they cost.
async fn pass(gateway: &Gateway, api: &ProviderApi) -> Value {
    let before = stats(gateway).await;
    let api_before = api.requests().len();
    let earlier: Vec<Value> = runs(gateway).await["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|run| run["id"].clone())
        .collect();
    let started = Instant::now();
    let first = support::reconcile(gateway, ADMIN_TOKEN, reqwest::Method::POST, "stripe").await;
    assert_eq!(
        first.status,
        200,
        "the first run of the pass: {}\n{}",
        String::from_utf8_lossy(&first.body),
        gateway.log()
    );
    // The pass's runs (a route keeps its last 50: two passes over 10,000
    // events take about 30), until one completes the window.
    let mut polls = 0.0;
    let pass: Vec<Value> = loop {
        polls += 1.0;
        let all = runs(gateway).await["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let new: Vec<Value> = all
            .into_iter()
            .filter(|run| !earlier.contains(&run["id"]))
            .collect();
        if new.first().is_some_and(|run| run["complete"] == true) {
            break new;
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "the pass ends"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let seconds = started.elapsed().as_secs_f64();
    let after = stats(gateway).await;
    let sum = |name: &str| {
        pass.iter()
            .map(|run| run[name].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let (count, listed, filled, already, failed) = (
        pass.len(),
        sum("listed"),
        sum("filled"),
        sum("already_received"),
        sum("failed"),
    );
    json!({
        "runs": count,
        "listed": listed,
        "filled": filled,
        "already_received": already,
        "failed": failed,
        "api_requests": api.requests().len() - api_before,
        // The isolate counts every RPC call it makes: the pass's calls to
        // keys' objects, and the bench's own to the route's object (the
        // listing before, the POST and each poll), taken out here.
        "object_requests": counter(&before, &after, "object_requests") - polls - 2.0,
        "log_lines": counter(&before, &after, "log_lines"),
        "metric_points": counter(&before, &after, "metric_points"),
        "seconds": seconds,
    })
}

pub(crate) fn print(measured: &Value) {
    let events = measured["events"].as_f64().unwrap_or(0.0);
    println!(
        "\nReconciliation: {} events listed by a local fake of Stripe's API (forwarded: {})",
        events, measured["forwarded"]
    );
    println!("| pass | runs | listed | filled | already received | failed | API requests | DO requests | DO requests per event | log lines | seconds | ms per event |");
    println!(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for (name, pass) in [
        ("fills every event", &measured["filling"]),
        ("fills none", &measured["listing"]),
    ] {
        let listed = pass["listed"].as_f64().unwrap_or(0.0).max(1.0);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {:.1} | {:.2} |",
            pass["runs"],
            pass["listed"],
            pass["filled"],
            pass["already_received"],
            pass["failed"],
            pass["api_requests"],
            pass["object_requests"],
            pass["object_requests"].as_f64().unwrap_or(0.0) / listed,
            pass["log_lines"],
            pass["seconds"].as_f64().unwrap_or(0.0),
            pass["seconds"].as_f64().unwrap_or(0.0) * 1_000.0 / listed,
        );
    }
    println!(
        "a filled event's receipt: {} (an already-received check reads that row when its object is not in memory, and writes nothing); the route's object writes 5 rows a run (its state and route, before and after the run; its alarm)",
        measured["filled_receipt_storage"]
    );
}
