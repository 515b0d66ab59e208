//! Order per entity (SPEC §12, v4) under `wrangler dev`, with the real
//! order objects and an origin that records when each event arrived:
//! one entity's events reach it one at a time, oldest first; another
//! entity's run beside them; an event older than one delivered is marked
//! stale, or superseded and re-drivable; a failing event holds its
//! entity's later ones until it is delivered.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::support::origin::Received;
use crate::support::{client, eventually, operator, post_json, read_stats};
use crate::{Profile, World, ADMIN_TOKEN};

/// The ordered routes of the flow profile (`flow::routes_json`).
pub fn routes() -> serde_json::Value {
    let ordered = |path: &str, on_stale: &str, hold_ms: u64| {
        serde_json::json!({
            "path": path,
            "delivery": "async",
            "order_key": "json:/data/object/id",
            "order_time": "json:/created",
            "on_stale": on_stale,
            "order_hold_ms": hold_ms,
            "retry_schedule": "1s,1s,1s",
        })
    };
    serde_json::json!({
        "ordered": ordered("/order/live", "forward", 5_000),
        "ordered-skip": ordered("/order/skip", "skip", 1_000),
        "ordered-retry": ordered("/order/retry", "forward", 1_000),
    })
}

/// A Stripe-shaped event of `entity` created at `created` (Unix seconds).
fn event(id: &str, entity: &str, created: u64) -> String {
    serde_json::json!({
        "id": id,
        "type": "invoice.updated",
        "created": created,
        "data": {"object": {"id": entity, "object": "invoice"}},
    })
    .to_string()
}

/// The `created` of a request the origin received.
fn created_of(received: &Received) -> u64 {
    let body: serde_json::Value = serde_json::from_slice(&received.body).unwrap();
    body["created"].as_u64().unwrap()
}

/// 8 events of each of two entities sent at once, in shuffled order, to an
/// origin that takes 300 ms: each entity's events arrive one at a time
/// (each at least 300 ms after the one before, which the origin was
/// still answering until then), oldest first, none marked stale; the two
/// entities run side by side.
pub async fn eight_events_of_two_entities_reach_a_slow_origin_one_at_a_time_oldest_first(
    world: &'static World,
) {
    let gateway = world.gateway(Profile::Flow).await;
    let mut sends = JoinSet::new();
    // An order no entity's events were created in.
    let shuffled = [5, 2, 7, 0, 3, 6, 1, 4];
    for (entity, base) in [("in_a", 1_796_000_000), ("in_b", 1_796_100_000)] {
        for index in shuffled {
            let url = gateway.url(&format!("/order/live/slow/300/{entity}/e{index}"));
            let body = event(&format!("evt_{entity}_{index}"), entity, base + index);
            let key = format!("order-live-{entity}-{index}");
            sends.spawn(async move { post_json(&client(), &url, Some(&key), &body).await });
        }
    }
    while let Some(ack) = sends.join_next().await {
        assert_eq!(ack.unwrap().status, 202, "each is acknowledged at once");
    }
    eventually(60, "all 16 reach the origin", || async {
        world.origin.count("/order/live/") >= 16
    })
    .await;
    let received = world.origin.received("/order/live/");
    assert_eq!(received.len(), 16, "each once");
    let mut spans = HashMap::new();
    for entity in ["in_a", "in_b"] {
        let arrivals: Vec<_> = received
            .iter()
            .filter(|request| request.path.contains(&format!("/{entity}/")))
            .collect();
        assert_eq!(arrivals.len(), 8);
        let times: Vec<u64> = arrivals.iter().map(|request| created_of(request)).collect();
        let mut sorted = times.clone();
        sorted.sort_unstable();
        assert_eq!(times, sorted, "{entity}: oldest first");
        for pair in arrivals.windows(2) {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= Duration::from_millis(300),
                "{entity}: two at once ({gap:?} apart)"
            );
        }
        assert!(arrivals
            .iter()
            .all(|request| request.header("idempotency-stale").is_none()));
        spans.insert(entity, (arrivals[0].at, arrivals[7].at));
    }
    let (a, b) = (spans["in_a"], spans["in_b"]);
    assert!(
        a.0 < b.1 && b.0 < a.1,
        "the entities ran side by side: {a:?} {b:?}"
    );
    println!(
        "ordered: 2 entities x 8 events, each entity's span {:?} and {:?}",
        a.1 - a.0,
        b.1 - b.0
    );
}

/// An older event after a newer one was delivered: forwarded marked
/// `Idempotency-Stale: true` under the signature (`on_stale = "forward"`),
/// or ended `superseded`, listed, and forwarded marked when re-driven
/// (`"skip"`). An event without an entity goes unordered, counted.
pub async fn an_event_older_than_one_delivered_is_marked_stale_or_superseded(
    world: &'static World,
) {
    let gateway = world.gateway(Profile::Flow).await;
    let send = |path: &str, key: &str, body: String| {
        let url = gateway.url(path);
        let key = key.to_string();
        async move { post_json(&client(), &url, Some(&key), &body).await }
    };
    // Forward: the late one arrives, marked.
    let newer = send(
        "/order/live/stale/newer",
        "stale-newer",
        event("evt_n", "in_s", 200),
    );
    assert_eq!(newer.await.status, 202);
    eventually(30, "the newer event arrives", || async {
        world.origin.count("/order/live/stale/newer") == 1
    })
    .await;
    let older = send(
        "/order/live/stale/older",
        "stale-older",
        event("evt_o", "in_s", 100),
    );
    assert_eq!(older.await.status, 202);
    eventually(30, "the older event arrives", || async {
        world.origin.count("/order/live/stale/older") == 1
    })
    .await;
    let late = &world.origin.received("/order/live/stale/older")[0];
    assert_eq!(late.header("idempotency-stale"), Some("true"));
    assert!(late.header("idempotency-signature").is_some(), "signed");
    let first = &world.origin.received("/order/live/stale/newer")[0];
    assert_eq!(first.header("idempotency-stale"), None);

    // Skip: the late one is superseded, not forwarded.
    let newer = send(
        "/order/skip/newer",
        "skip-newer",
        event("evt_sn", "in_k", 200),
    );
    assert_eq!(newer.await.status, 202);
    eventually(30, "the newer event arrives", || async {
        world.origin.count("/order/skip/newer") == 1
    })
    .await;
    let older = send(
        "/order/skip/older",
        "skip-older",
        event("evt_so", "in_k", 100),
    );
    assert_eq!(older.await.status, 202);
    let listed = || async {
        let list = operator(
            &gateway,
            reqwest::Method::GET,
            ADMIN_TOKEN,
            &[("route", "ordered-skip"), ("state", "superseded")],
        )
        .await;
        let list: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
        list["receipts"].as_array().map_or(0, Vec::len)
    };
    eventually(30, "the older event is listed superseded", || async {
        listed().await == 1
    })
    .await;
    assert_eq!(
        world.origin.count("/order/skip/older"),
        0,
        "never forwarded"
    );
    let redrive = operator(
        &gateway,
        reqwest::Method::POST,
        ADMIN_TOKEN,
        &[
            ("route", "ordered-skip"),
            ("key", "skip-older"),
            ("path", "/order/skip/older"),
        ],
    )
    .await;
    assert!(
        (200..300).contains(&redrive.status),
        "{} {}",
        redrive.status,
        String::from_utf8_lossy(&redrive.body)
    );
    eventually(30, "the re-driven event arrives", || async {
        world.origin.count("/order/skip/older") == 1
    })
    .await;
    let redriven = &world.origin.received("/order/skip/older")[0];
    assert_eq!(redriven.header("idempotency-stale"), Some("true"));

    // No entity: delivered unordered, and counted.
    let body = serde_json::json!({"id": "evt_u", "created": 1}).to_string();
    let unordered = send("/order/skip/unordered", "unordered-1", body);
    assert_eq!(unordered.await.status, 202);
    eventually(30, "the unordered event arrives", || async {
        world.origin.count("/order/skip/unordered") == 1
    })
    .await;
    let stats = read_stats(&gateway, ADMIN_TOKEN).await;
    assert_eq!(
        stats["decisions"]["ordered-skip"]["unordered"], 1,
        "{stats}"
    );
}

/// The first of two events of one entity fails twice (503): its retries
/// hold the second behind it, which reaches the origin only after the
/// first was accepted, unmarked.
pub async fn a_failing_event_holds_its_entitys_later_events_until_it_is_delivered(
    world: &'static World,
) {
    let gateway = world.gateway(Profile::Flow).await;
    let client = client();
    let (first_url, second_url) = (
        gateway.url("/order/retry/fail-first/2/503/first"),
        gateway.url("/order/retry/second"),
    );
    let (first_body, second_body) = (event("evt_r1", "in_r", 100), event("evt_r2", "in_r", 200));
    let first = post_json(&client, &first_url, Some("retry-first"), &first_body);
    let second = post_json(&client, &second_url, Some("retry-second"), &second_body);
    let (first, second) = tokio::join!(first, second);
    assert_eq!((first.status, second.status), (202, 202));
    eventually(60, "both are delivered", || async {
        world.origin.count("/order/retry/second") == 1
    })
    .await;
    let attempts = world.origin.received("/order/retry/fail-first/");
    assert_eq!(attempts.len(), 3, "two 503s, then accepted");
    let second = &world.origin.received("/order/retry/second")[0];
    assert!(
        second.at > attempts[2].at,
        "the second went only after the first was accepted"
    );
    assert_eq!(second.header("idempotency-stale"), None);
}
