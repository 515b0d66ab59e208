//! Flow control (SPEC §2, v3) under `wrangler dev`, with the real
//! coordinator object and an origin that records how many requests it is
//! answering at once: the origin never sees more than it was promised, and
//! every delivery still arrives once.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::support::{client, eventually, operator, post_json, read_summary};
use crate::{Profile, World, ADMIN_TOKEN};

/// `ROUTES` of the flow profile.
pub fn routes_json() -> String {
    let mut routes = serde_json::json!({
        "limited": {"path": "/flow/limited", "delivery": "async", "max_in_flight": 4},
        "rated": {"path": "/flow/rated", "delivery": "async", "rate_per_second": 10},
        "single": {"path": "/flow/single", "max_in_flight": 1},
        "pair": {"path": "/flow/pair", "delivery": "async", "max_in_flight": 2},
    });
    // The ordered routes (ordering.rs) share this profile's gateway.
    for (name, route) in crate::ordering::routes().as_object().unwrap() {
        routes[name] = route.clone();
    }
    routes.to_string()
}

const BODY: &str = r#"{"amount":1200,"currency":"eur"}"#;

/// 60 keys acknowledged at once on a route with `max_in_flight = 4`,
/// against a 300 ms origin: each is delivered once, never more than 4 at a
/// time, and the operator sees the permits and the queue meanwhile.
pub async fn sixty_deliveries_reach_the_origin_four_at_a_time_each_once(world: &'static World) {
    let gateway = world.gateway(Profile::Flow).await;
    let mut sends = JoinSet::new();
    for i in 0..60 {
        let url = gateway.url(&format!("/flow/limited/slow/300/k{i}"));
        sends.spawn(async move {
            post_json(&client(), &url, Some(&format!("limited-{i}")), BODY).await
        });
    }
    while let Some(ack) = sends.join_next().await {
        assert_eq!(ack.unwrap().status, 202, "each is acknowledged at once");
    }
    // While the backlog drains, the operator sees the permits in use and
    // the deliveries waiting for one.
    let summary = read_summary(&gateway, ADMIN_TOKEN).await;
    let route = summary["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|route| route["route"] == "limited")
        .unwrap()
        .clone();
    let flow = &route["flow"];
    assert_eq!(flow["max_in_flight"], 4, "{summary}");
    assert!(flow["permits_in_use"].as_u64().unwrap() <= 4, "{summary}");
    eventually(60, "all 60 reach the origin", || async {
        world.origin.count("/flow/limited/") >= 60
    })
    .await;
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for received in world.origin.received("/flow/limited/") {
        *per_key.entry(received.path.clone()).or_default() += 1;
    }
    assert_eq!(per_key.len(), 60);
    assert!(per_key.values().all(|count| *count == 1), "{per_key:?}");
    let most = world.origin.max_concurrency("/flow/limited");
    assert!(most <= 4, "the origin saw {most} at once");
    println!("max_in_flight 4: at most {most} at once at the origin");
}

/// The review's case (round 4): 20 keys under `max_in_flight = 2` to an
/// origin that takes 2 s. Never more than 2 at the origin; and since a
/// wake only moves the woken key's alarm (it never waits on a forward),
/// and wakes go out together, no key waits out a reservation's claim
/// and falls back to asking again 30 s later: the last starts within
/// 1.5x the ideal drain (20 s), where a lost or late wake alone costs 30.
pub async fn twenty_deliveries_to_a_slow_origin_two_at_a_time_without_a_late_wake(
    world: &'static World,
) {
    let gateway = world.gateway(Profile::Flow).await;
    let mut sends = JoinSet::new();
    for i in 0..20 {
        let url = gateway.url(&format!("/flow/pair/slow/2000/k{i}"));
        sends.spawn(
            async move { post_json(&client(), &url, Some(&format!("pair-{i}")), BODY).await },
        );
    }
    while let Some(ack) = sends.join_next().await {
        assert_eq!(ack.unwrap().status, 202, "each is acknowledged at once");
    }
    eventually(90, "all 20 reach the origin", || async {
        world.origin.count("/flow/pair/") >= 20
    })
    .await;
    let received = world.origin.received("/flow/pair/");
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for request in &received {
        *per_key.entry(request.path.clone()).or_default() += 1;
    }
    assert_eq!(per_key.len(), 20);
    assert!(per_key.values().all(|count| *count == 1), "{per_key:?}");
    let most = world.origin.max_concurrency("/flow/pair");
    assert!(
        most <= 2,
        "the origin saw {most} at once under max_in_flight 2"
    );
    let first = received.iter().map(|r| r.at).min().unwrap();
    let last = received.iter().map(|r| r.at).max().unwrap();
    let ideal = Duration::from_secs(20);
    assert!(
        last - first < ideal.mul_f64(1.5),
        "the last of 20 started {:?} after the first (ideal drain {ideal:?}): a wake came late",
        last - first
    );
    println!(
        "max_in_flight 2, 2 s origin: at most {most} at once, last started after {:?}",
        last - first
    );
}

/// 40 keys at `rate_per_second = 10`: a bucket of 10 starts at once, the
/// other 30 follow at ten a second.
pub async fn forty_deliveries_at_ten_per_second_take_over_two_and_a_half_seconds(
    world: &'static World,
) {
    let gateway = world.gateway(Profile::Flow).await;
    let mut sends = JoinSet::new();
    for i in 0..40 {
        let url = gateway.url(&format!("/flow/rated/k{i}"));
        sends.spawn(
            async move { post_json(&client(), &url, Some(&format!("rated-{i}")), BODY).await },
        );
    }
    while let Some(ack) = sends.join_next().await {
        assert_eq!(ack.unwrap().status, 202);
    }
    eventually(60, "all 40 reach the origin", || async {
        world.origin.count("/flow/rated/") >= 40
    })
    .await;
    let received = world.origin.received("/flow/rated/");
    assert_eq!(received.len(), 40, "each once");
    let first = received.iter().map(|r| r.at).min().unwrap();
    let last = received.iter().map(|r| r.at).max().unwrap();
    let spread = last - first;
    assert!(
        spread >= Duration::from_millis(2_500),
        "40 at 10/s over {spread:?}"
    );
    // A wake lost between the coordinator and a waiting key costs that
    // key REQUEUE_MS (30 s) before it asks again: none may be lost.
    assert!(
        spread < Duration::from_secs(20),
        "40 at 10/s over {spread:?}: a wake was lost"
    );
    println!("rate_per_second 10: 40 deliveries spread over {spread:?}");
}

/// A sync first delivery over its route's limit is 429 `origin-busy` with
/// `Retry-After`, and nothing is stored: a retry later goes through.
pub async fn a_sync_delivery_over_the_limit_is_429_and_a_retry_goes_through(world: &'static World) {
    let gateway = world.gateway(Profile::Flow).await;
    let slow_url = gateway.url("/flow/single/slow/2000/first");
    let slow =
        tokio::spawn(
            async move { post_json(&client(), &slow_url, Some("single-first"), BODY).await },
        );
    eventually(10, "the first is at the origin", || async {
        world.origin.count("/flow/single/slow/2000/first") == 1
    })
    .await;
    let url = gateway.url("/flow/single/second");
    let busy = post_json(&client(), &url, Some("single-second"), BODY).await;
    busy.assert_problem(429, "origin-busy");
    assert!(busy.header("retry-after").is_some());
    let stored = operator(
        &gateway,
        reqwest::Method::GET,
        ADMIN_TOKEN,
        &[
            ("route", "single"),
            ("key", "single-second"),
            ("path", "/flow/single/second"),
        ],
    )
    .await;
    assert_eq!(stored.status, 404, "nothing stored");
    assert_eq!(slow.await.unwrap().status, 201);
    let retried = post_json(&client(), &url, Some("single-second"), BODY).await;
    assert_eq!(retried.status, 201);
    assert_eq!(world.origin.count("/flow/single/second"), 1);
}
