//! The receipt index and the scheduled sweep (SPEC §2b, §7, v3): no alarm
//! is the only thing standing between an acknowledged delivery and its
//! delivery; the index is there whenever the worker runs; a pending
//! delivery is purged only on purpose; dead letters are re-driven in bulk.

use std::time::Duration;

use crate::support::gateway::{Index, Worker};
use crate::support::{client, eventually, operator, post_json, Gateway};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const BODY: &str = r#"{"amount":700,"currency":"eur"}"#;

async fn state(gateway: &Gateway, key: &str, path: &str) -> String {
    let reply = operator(
        gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("key", key), ("path", path)],
    )
    .await;
    reply.json()["state"].as_str().unwrap_or("").to_string()
}

async fn run_sweep(gateway: &Gateway) {
    let reply = client()
        .get(gateway.url("/__scheduled"))
        .send()
        .await
        .unwrap();
    assert!(reply.status().is_success(), "the sweep ran");
}

/// Alarms vanish (the test-hooks worker drops every one a key's object
/// sets): the first attempts, which the accepting calls make, fail, and
/// only the sweep (each index shard's alarm, SPEC §15 v5) can make the
/// next ones; it delivers each acknowledged delivery once, however often
/// the Cron Trigger runs too.
pub async fn the_sweep_delivers_what_no_alarm_will(world: &'static World) {
    let origin = world.origin.url();
    let gateway = Gateway::start_with_hooks(&[
        ("ORIGIN_URL", &origin),
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1s"),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("IDEMGATE_TEST_DROP_ALARMS", "true"),
    ])
    .await;
    let path = "/swept/pay";
    let keys = ["swept-1", "swept-2", "swept-3"];
    world.origin.fail("/swept/", true);
    for key in keys {
        let ack = post_json(&client(), &gateway.url(path), Some(key), BODY).await;
        assert_eq!(ack.status, 202);
    }
    for key in keys {
        eventually(10, "the first attempt failed", || async {
            state(&gateway, key, path).await == "failed"
        })
        .await;
    }
    world.origin.fail("/swept/", false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        world.origin.count("/swept/"),
        3,
        "the first attempts only: no alarm fired"
    );
    // Overdue once their next step (a second after the first attempt) is
    // 10 s late (the sweep's grace).
    tokio::time::sleep(Duration::from_secs(9)).await;
    run_sweep(&gateway).await;
    for key in keys {
        eventually(10, "swept into delivery", || async {
            state(&gateway, key, path).await == "completed"
        })
        .await;
    }
    run_sweep(&gateway).await;
    run_sweep(&gateway).await;
    let received = world.origin.received("/swept/");
    assert_eq!(
        received.len(),
        6,
        "each once more, however often it is swept"
    );
    for request in &received {
        request.verify(FORWARD_SECRET).unwrap();
    }
    assert!(gateway.log().contains("\"decision\":\"swept\""));
    let summary = operator_get(&gateway, "/__idemgate/summary").await;
    assert_eq!(summary["routes"][0]["queued"], 0, "{summary}");
    assert_eq!(summary["routes"][0]["failed"], 0, "{summary}");
}

async fn operator_get(gateway: &Gateway, path: &str) -> serde_json::Value {
    let reply = client()
        .get(gateway.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "{path}");
    serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap()
}

/// The hook that drops alarms is compiled into the test build only.
pub async fn the_release_worker_has_no_test_hook(_world: &'static World) {
    let marker = b"IDEMGATE_TEST_DROP_ALARMS";
    let holds = |worker: Worker| {
        let wasm = std::fs::read(worker.wasm()).unwrap();
        wasm.windows(marker.len()).any(|window| window == marker)
    };
    assert!(
        holds(Worker::TestHooks),
        "the check finds the hook where it is"
    );
    assert!(!holds(Worker::Release), "the release wasm has no test hook");
}

/// A deployment with no D1 binding at all (SPEC §15, v5): a delivery is
/// acknowledged, listed from the index's shards, and health says the
/// index is well, with no old table to move.
pub async fn a_gateway_without_d1_lists_what_it_acknowledged(world: &'static World) {
    let origin = world.origin.url();
    let vars = [
        ("ORIGIN_URL", origin.as_str()),
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1s"),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    let gateway = Gateway::start_with_index(Index::Shards, &vars).await;
    world.origin.fail("/unmigrated/", true);
    let path = "/unmigrated/pay";
    let ack = post_json(&client(), &gateway.url(path), Some("first-use-1"), BODY).await;
    assert_eq!(ack.status, 202, "{}", String::from_utf8_lossy(&ack.body));
    eventually(10, "dead", || async {
        state(&gateway, "first-use-1", path).await == "dead"
    })
    .await;
    let listing = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("state", "dead")],
    )
    .await;
    assert_eq!(
        listing.status,
        200,
        "{}",
        String::from_utf8_lossy(&listing.body)
    );
    assert_eq!(listing.json()["receipts"][0]["key"], "first-use-1");
    let health = operator_get_open(&gateway, "/__idemgate/health").await;
    assert_eq!(health["index"], "ok");
    assert_eq!(health["legacy_index"], serde_json::Value::Null);
    world.origin.fail("/unmigrated/", false);
}

async fn operator_get_open(gateway: &Gateway, path: &str) -> serde_json::Value {
    let reply = client().get(gateway.url(path)).send().await.unwrap();
    serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap()
}

/// Without the index's shards, an async route takes nothing (the sweep
/// could not find it): its deliveries are refused as misconfigured, before
/// anything is stored; health says why, and the operator API says what to
/// bind, with no word of forwarding.
pub async fn without_an_index_nothing_is_acknowledged(world: &'static World) {
    let origin = world.origin.url();
    let gateway = Gateway::start_with_index(
        Index::Missing,
        &[
            ("ORIGIN_URL", &origin),
            ("DELIVERY", "async"),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ],
    )
    .await;
    let refused = post_json(
        &client(),
        &gateway.url("/unbound/pay"),
        Some("unbound-1"),
        BODY,
    )
    .await;
    refused.assert_problem(500, "misconfigured");
    let detail = refused.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.starts_with("INDEX_SHARD"), "{detail}");
    let health = operator_get_open(&gateway, "/__idemgate/health").await;
    assert!(
        health["index"].as_str().unwrap().contains("INDEX_SHARD"),
        "{health}"
    );
    let listing = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[("state", "dead")],
    )
    .await;
    listing.assert_problem(500, "misconfigured");
    let detail = listing.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("INDEX_SHARD"), "{detail}");
    assert!(!detail.contains("forward"), "{detail}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        world.origin.count("/unbound/"),
        0,
        "nothing stored, nothing sent"
    );
}

/// SPEC §7 (v3): a pending delivery was acknowledged to its sender, so a
/// purge takes `force=true`; a dead letter needs none; and a route's dead
/// letters are re-driven in bulk, a page per call.
pub async fn purges_of_pending_deliveries_take_force_and_dead_letters_redrive_in_bulk(
    world: &'static World,
) {
    let gateway = world.gateway(crate::Profile::Async).await;
    world.origin.fail("/bulk/", true);
    let path = |key: &str| format!("/bulk/{key}");
    let keys: Vec<String> = (0..4).map(|n| format!("bulk-{n}")).collect();
    for key in &keys {
        let ack = post_json(&client(), &gateway.url(&path(key)), Some(key), BODY).await;
        assert_eq!(ack.status, 202);
    }
    // Still within its schedule (1 s, 1 s, 2 s): pending.
    let query = [("key", keys[0].as_str()), ("path", "/bulk/bulk-0")];
    let refused = operator(&gateway, reqwest::Method::DELETE, ADMIN_TOKEN, &query).await;
    refused.assert_problem(409, "pending-delivery");
    assert!(
        !state(&gateway, &keys[0], "/bulk/bulk-0").await.is_empty(),
        "kept"
    );
    let forced = [
        ("key", keys[0].as_str()),
        ("path", "/bulk/bulk-0"),
        ("force", "true"),
    ];
    let purged = operator(&gateway, reqwest::Method::DELETE, ADMIN_TOKEN, &forced).await;
    assert_eq!(
        purged.status,
        204,
        "{}",
        String::from_utf8_lossy(&purged.body)
    );
    for key in &keys[1..] {
        eventually(15, "dead after the schedule", || async {
            state(&gateway, key, &path(key)).await == "dead"
        })
        .await;
    }
    // A dead letter is purged without force.
    let dead = [("key", keys[3].as_str()), ("path", "/bulk/bulk-3")];
    let purged = operator(&gateway, reqwest::Method::DELETE, ADMIN_TOKEN, &dead).await;
    assert_eq!(purged.status, 204);
    world.origin.fail("/bulk/", false);
    let reply = client()
        .post(gateway.url("/__idemgate/receipts/redrive?route=default&state=dead"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let page: serde_json::Value = serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap();
    assert!(page["redriven"].as_u64().unwrap() >= 2, "{page}");
    assert_eq!(page["failed"], 0);
    for key in &keys[1..3] {
        eventually(10, "re-driven and delivered", || async {
            state(&gateway, key, &path(key)).await == "completed"
        })
        .await;
    }
    // A queued delivery may be re-driven too (its alarm may have failed).
    world.origin.fail("/bulk/", true);
    let ack = post_json(
        &client(),
        &gateway.url("/bulk/queued"),
        Some("bulk-q"),
        BODY,
    )
    .await;
    assert_eq!(ack.status, 202);
    let redrive = [("key", "bulk-q"), ("path", "/bulk/queued")];
    let redriven = operator(&gateway, reqwest::Method::POST, ADMIN_TOKEN, &redrive).await;
    assert!(
        [202, 409].contains(&redriven.status),
        "queued or failed is re-drivable; in flight is not: {}",
        String::from_utf8_lossy(&redriven.body)
    );
    world.origin.fail("/bulk/", false);
}

/// The review's case (round 4, item 15): under a plain `wrangler dev`,
/// wrangler prints "to manually trigger a scheduled event, run: curl
/// .../cdn-cgi/handler/scheduled". That call answered 500 `exception`
/// while the worker had an `[assets]` table (wrangler 4.86's assets proxy
/// has no scheduled handler); the page is now the worker's own, and the
/// call reaches the sweep.
pub async fn the_cron_trigger_wrangler_prints_runs_the_sweep(world: &'static World) {
    let origin = world.origin.url();
    let gateway = Gateway::start_as_a_developer_would(&[
        ("ORIGIN_URL", &origin),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await;
    let reply = client()
        .get(gateway.url("/cdn-cgi/handler/scheduled?cron=*+*+*+*+*"))
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let body = reply.text().await.unwrap();
    assert_eq!(
        (status, body.as_str()),
        (200, "ok"),
        "the scheduled handler ran to its end\n{}",
        gateway.log()
    );
    // The page is still served, by the worker.
    let page = client()
        .get(gateway.url("/__idemgate/ui"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
}
