//! Async delivery (SPEC §2b): acknowledged at the edge once durable, a
//! first attempt made by the accepting call, retries by the key's alarm,
//! dead letters listed and re-driven, and nothing lost or doubled across
//! a crash.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::support::{
    client, eventually, operator, post_json, DemoOrigin, Gateway, Reply, StripeOrigin,
};
use crate::{Profile, World, ADMIN_TOKEN, FORWARD_SECRET};

const BODY: &str = r#"{"amount":4200,"currency":"eur"}"#;

async fn receipt(gateway: &Gateway, key: &str, path: &str) -> serde_json::Value {
    let reply = operator(
        gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("key", key), ("path", path)],
    )
    .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

pub async fn a_delivery_is_acknowledged_durable_then_delivered_once(world: &'static World) {
    let gateway = world.gateway(Profile::Async).await;
    // The origin takes 500 ms, so the duplicate and the other payload
    // below reach the object while the attempt is at the origin, and
    // within the second the acceptance's row waits for its outcome.
    let url = gateway.url("/async-ok/slow/500/pay");
    let ack = post_json(&client(), &url, Some("async-ok-1"), BODY).await;
    assert_eq!(ack.status, 202);
    assert_eq!(ack.header("idemgate-decision"), Some("queued"));
    let receipt_id = ack.header("idemgate-receipt-id").unwrap().to_string();
    assert_eq!(
        ack.json(),
        serde_json::json!({"receipt_id": receipt_id, "state": "queued"})
    );
    let duplicate = post_json(&client(), &url, Some("async-ok-1"), BODY).await;
    assert_eq!(duplicate.status, 202);
    assert_eq!(duplicate.header("idemgate-decision"), Some("duplicate"));
    assert_eq!(
        duplicate.header("idemgate-receipt-id"),
        Some(receipt_id.as_str())
    );
    post_json(&client(), &url, Some("async-ok-1"), r#"{"amount":1}"#)
        .await
        .assert_problem(422, "fingerprint-mismatch");

    eventually(10, "the delivery completes", || async {
        receipt(&gateway, "async-ok-1", "/async-ok/slow/500/pay").await["state"] == "completed"
    })
    .await;
    let done = receipt(&gateway, "async-ok-1", "/async-ok/slow/500/pay").await;
    assert_eq!(done["receipt_id"], receipt_id.as_str());
    assert_eq!(done["response"]["status"], 201);
    // The accepting call made the attempt after its 202, under the epoch
    // it accepted the delivery with: no alarm invocation, no takeover, and
    // two receipt writes and two alarm writes in all (accepted in flight,
    // then the outcome with the alarm moved to retention).
    assert_eq!(done["attempts"].as_array().unwrap().len(), 1, "{done}");
    let ops = &done["object_storage_ops"];
    assert_eq!(
        (&ops["writes"], &ops["alarm_writes"]),
        (&2.into(), &2.into()),
        "{done}"
    );
    assert_eq!(
        ops["index_writes"], 0,
        "delivered within a second: no row, not even for the duplicate"
    );
    assert!(!gateway.log().contains("\"decision\":\"taken_over\""));
    let received = world.origin.received("/async-ok/");
    assert_eq!(received.len(), 1, "one forward, whatever the duplicates");
    assert_eq!(
        received[0].body,
        BODY.as_bytes(),
        "stored whole, forwarded as sent"
    );
    received[0].verify(FORWARD_SECRET).unwrap();
    let late = post_json(&client(), &url, Some("async-ok-1"), BODY).await;
    assert_eq!(
        (late.status, late.header("idemgate-decision")),
        (202, Some("duplicate"))
    );
    assert_eq!(late.json()["state"], "completed");
    assert_eq!(world.origin.count("/async-ok/"), 1);
}

pub async fn an_origin_that_fails_first_gets_the_delivery_once_it_recovers(world: &'static World) {
    let gateway = world.gateway(Profile::Async).await;
    let path = "/async-flaky/fail-first/2/503/pay";
    let ack = post_json(&client(), &gateway.url(path), Some("flaky-1"), BODY).await;
    assert_eq!(ack.status, 202);
    eventually(15, "delivered after two failures", || async {
        receipt(&gateway, "flaky-1", path).await["state"] == "completed"
    })
    .await;
    let epochs = world.origin.rising_epochs("/async-flaky/");
    assert_eq!(epochs.len(), 3, "two failures, one success");
    let done = receipt(&gateway, "flaky-1", path).await;
    let statuses: Vec<u64> = done["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|attempt| attempt["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [503, 503, 201]);
}

pub async fn an_origin_that_always_fails_leaves_a_dead_letter_to_redrive(world: &'static World) {
    let gateway = world.gateway(Profile::Async).await;
    let path = "/async-down/pay";
    world.origin.fail("/async-down/", true);
    assert_eq!(
        post_json(&client(), &gateway.url(path), Some("dead-1"), BODY)
            .await
            .status,
        202
    );
    // The first attempt, then 1 s, 1 s and 2 s (each +-10%).
    eventually(15, "dead after the schedule", || async {
        receipt(&gateway, "dead-1", path).await["state"] == "dead"
    })
    .await;
    assert_eq!(world.origin.count("/async-down/"), 4);
    let listing = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("route", "default"), ("state", "dead")],
    )
    .await;
    assert_eq!(
        listing.status,
        200,
        "{}",
        String::from_utf8_lossy(&listing.body)
    );
    let listed = listing.json();
    let entry = listed["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["key"] == "dead-1")
        .unwrap_or_else(|| panic!("dead-1 is listed: {listed}"))
        .clone();
    assert_eq!(entry["path"], path);
    assert_eq!(entry["attempts"], 4);
    assert_eq!(entry["last_status"], 503);
    assert_eq!(
        entry["receipt_id"],
        receipt(&gateway, "dead-1", path).await["receipt_id"]
    );

    // A re-drive while the origin is still down is fine too; after it
    // recovers, the dead letter completes with a higher epoch.
    world.origin.fail("/async-down/", false);
    let redriven = operator(
        &gateway,
        reqwest::Method::POST,
        ADMIN_TOKEN,
        &[("key", "dead-1"), ("path", path)],
    )
    .await;
    assert_eq!(
        redriven.status,
        202,
        "{}",
        String::from_utf8_lossy(&redriven.body)
    );
    assert_eq!(redriven.json()["state"], "queued");
    eventually(10, "the re-drive completes", || async {
        receipt(&gateway, "dead-1", path).await["state"] == "completed"
    })
    .await;
    assert_eq!(world.origin.rising_epochs("/async-down/").len(), 5);
    let again = operator(
        &gateway,
        reqwest::Method::POST,
        ADMIN_TOKEN,
        &[("key", "dead-1"), ("path", path)],
    )
    .await;
    again.assert_problem(409, "not-redrivable");
    let listing = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("route", "default"), ("state", "dead")],
    )
    .await;
    assert!(
        !listing.json()["receipts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|entry| entry["key"] == "dead-1"),
        "a completed receipt leaves the index"
    );
}

/// A SIGKILL of `wrangler dev` while deliveries are queued and in flight,
/// then a restart on the same state: every key is charged exactly once at
/// a fencing origin (the demo origin's ledger).
pub async fn a_crash_loses_no_delivery_and_doubles_none(_world: &'static World) {
    const KEYS: usize = 40;
    let origin = DemoOrigin::start(FORWARD_SECRET).await;
    let vars = [
        ("ORIGIN_URL", origin.url.as_str()),
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1s,1s,2s,4s"),
        ("ORIGIN_TIMEOUT_MS", "1000"),
        ("LEASE_MS", "2000"),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    let gateway = Gateway::start(&vars).await;
    let url = gateway.url("/payments?delay_ms=1500&slow=first");
    let mut burst = JoinSet::new();
    for key in 0..KEYS {
        let url = url.clone();
        burst.spawn(async move {
            let body = format!(r#"{{"amount":{key},"currency":"eur"}}"#);
            post_json(&client(), &url, Some(&format!("crash-{key}")), &body).await
        });
    }
    for reply in burst.join_all().await {
        assert_eq!(
            reply.status,
            202,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    // Each key's first attempt starts once it is acknowledged and sleeps
    // 1.5 s at the origin, so all of them are in flight now; the restart
    // takes them over when their leases end.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let state = gateway.crash();
    let gateway = Gateway::start_in(state, &vars).await;
    let payments = || origin.payments();
    eventually(60, "every key is charged", || async {
        payments().await.len() == KEYS
    })
    .await;
    for key in 0..KEYS {
        eventually(20, "every receipt completes", || async {
            receipt(&gateway, &format!("crash-{key}"), "/payments").await["state"] == "completed"
        })
        .await;
    }
    let charged: Vec<serde_json::Value> = payments().await;
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for payment in &charged {
        *per_key
            .entry(payment["idempotency_key"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(per_key.len(), KEYS);
    assert!(per_key.values().all(|count| *count == 1), "{per_key:?}");
    println!(
        "crash: {} forwards reached the ledger for {KEYS} keys; {} refused as stale",
        origin.forwards(),
        origin.printed("refused stale epoch").len()
    );
}

/// 1,000 deliveries of 100 keys acknowledged in a burst are all delivered,
/// one forward each; prints the time from acknowledgement to delivery.
pub async fn a_burst_of_a_thousand_is_delivered_once_per_key(world: &'static World) {
    const KEYS: usize = 100;
    const COPIES: usize = 10;
    let gateway = world.gateway(Profile::Async).await;
    let url = gateway.url("/async-burst/pay");
    let client = client();
    let mut burst = JoinSet::new();
    for _ in 0..COPIES {
        for key in 0..KEYS {
            let (client, url) = (client.clone(), url.clone());
            burst.spawn(async move {
                let body = format!(r#"{{"amount":{key}}}"#);
                let reply = post_json(&client, &url, Some(&format!("burst-{key}")), &body).await;
                (key, reply, Instant::now())
            });
        }
    }
    let mut first_ack: HashMap<usize, Instant> = HashMap::new();
    let mut queued = 0;
    for (key, reply, at) in burst.join_all().await {
        let reply: Reply = reply;
        assert_eq!(
            reply.status,
            202,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        if reply.header("idemgate-decision") == Some("queued") {
            queued += 1;
            first_ack.insert(key, at);
        }
    }
    assert_eq!(queued, KEYS, "one first delivery per key");
    eventually(30, "every key is delivered", || async {
        world.origin.count("/async-burst/") >= KEYS
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let received = world.origin.received("/async-burst/");
    if received.len() != KEYS {
        let mut by_key: HashMap<String, Vec<String>> = HashMap::new();
        for request in &received {
            by_key
                .entry(request.header("idempotency-key").unwrap().to_string())
                .or_default()
                .push(request.header("idempotency-epoch").unwrap().to_string());
        }
        for (key, epochs) in by_key.iter().filter(|(_, epochs)| epochs.len() > 1) {
            let key = key.trim_matches('"');
            let receipt = receipt(&gateway, key, "/async-burst/pay").await;
            println!("doubled {key}: epochs {epochs:?}; receipt {receipt}");
        }
    }
    assert_eq!(received.len(), KEYS, "one forward per key, none doubled");
    let mut latencies: Vec<u128> = received
        .iter()
        .map(|request| {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            let key = body["amount"].as_u64().unwrap() as usize;
            request
                .at
                .saturating_duration_since(first_ack[&key])
                .as_millis()
        })
        .collect();
    latencies.sort_unstable();
    println!(
        "async burst: acknowledgement to origin delivery p50 {} ms, p99 {} ms, max {} ms",
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 99 / 100],
        latencies[latencies.len() - 1]
    );
}

/// SPEC §2b (v3), "nothing acknowledged is lost": a Stripe delivery is
/// acknowledged, the origin is down for longer than Stripe's timestamp
/// tolerance, and the retry that finally reaches it carries a stale
/// `Stripe-Signature`. An origin that verifies idemgate's signature (as
/// the README tells origins behind async routes to) takes it once; one
/// that insists on Stripe's own answers 400, which is retried and ends as
/// a dead letter to re-drive, never as "completed".
pub async fn a_stale_sender_signature_never_loses_an_acknowledged_delivery(_world: &'static World) {
    const STRIPE: &str = "whsec_async_stale_stripe";
    // The origin's own Stripe check allows 2 s: the retries arrive later.
    let origin = StripeOrigin::start(STRIPE, FORWARD_SECRET, 2).await;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", &origin.url),
        ("SIGNATURE_SCHEME", "stripe"),
        ("SIGNING_SECRET", STRIPE),
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1s,1s,2s,2s"),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await;
    origin.set_down(true).await;
    let run = crate::senders::now();
    let mut keys = Vec::new();
    for path in ["/trust-idemgate/hooks", "/trust-stripe/hooks"] {
        let event = format!("evt_stale_{}_{run}", &path[1..8]);
        let body = format!(r#"{{"id":"{event}","type":"payment_intent.succeeded"}}"#);
        let signature = crate::senders::stripe_signature(STRIPE, crate::senders::now(), &body);
        let ack = client()
            .post(gateway.url(path))
            .header("content-type", "application/json")
            .header("stripe-signature", signature)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(ack.status(), 202, "acknowledged once durable");
        keys.push(event);
    }
    // Down well past Stripe's 2 s: every attempt so far was a 503.
    tokio::time::sleep(Duration::from_secs(3)).await;
    origin.set_down(false).await;
    let state = |key: &str| {
        let gateway = &gateway;
        let key = key.to_string();
        async move {
            let reply =
                operator(gateway, reqwest::Method::GET, ADMIN_TOKEN, &[("key", &key)]).await;
            reply.json()["state"].as_str().unwrap_or("").to_string()
        }
    };
    eventually(20, "the idemgate-trusting origin takes it", || async {
        state(&keys[0]).await == "completed"
    })
    .await;
    eventually(
        20,
        "the Stripe-only origin's refusals end in a dead letter",
        || async { state(&keys[1]).await == "dead" },
    )
    .await;
    let log = origin.log().await;
    let taken: Vec<&serde_json::Value> =
        log.iter().filter(|entry| entry["status"] == 201).collect();
    assert_eq!(taken.len(), 1, "delivered once: {log:?}");
    assert_eq!(taken[0]["path"], "/trust-idemgate/hooks");
    assert_eq!(taken[0]["idemgate"], "valid", "a fresh idemgate signature");
    let stripe = taken[0]["stripe"].as_str().unwrap();
    assert!(
        stripe.contains("tolerance"),
        "Stripe's own signature had gone stale: {stripe}"
    );
    let refused: Vec<&serde_json::Value> = log
        .iter()
        .filter(|entry| entry["path"] == "/trust-stripe/hooks" && entry["status"] == 400)
        .collect();
    assert!(!refused.is_empty(), "{log:?}");
    // The dead letter is there for the operator, with its request.
    let dead = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("key", &keys[1])],
    )
    .await;
    assert_eq!(
        dead.json()["attempts"].as_array().unwrap().last().unwrap()["status"],
        400
    );
}
