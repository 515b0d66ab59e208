//! What happens when things go wrong (SPEC §2, §5): origin failures,
//! timeouts, unreachable origins, lease takeovers, crashes, retention.

use std::time::Duration;

use tokio::task::JoinSet;

use crate::support::{client, post_json, read_receipt, Gateway, Reply};
use crate::{Profile, World, ADMIN_TOKEN};

/// The epoch an answer of the test origin names.
fn epoch_in(reply: &Reply) -> u64 {
    reply.json()["epoch"].as_str().unwrap().parse().unwrap()
}

const BODY: &str = r#"{"amount":1200,"currency":"eur"}"#;

pub async fn origin_500_then_200_forwards_again_with_a_higher_epoch(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let url = gateway.url("/f500/fail-first/1/500/pay");
    let first = post_json(&client, &url, Some("f500"), BODY).await;
    assert_eq!(first.status, 500);
    assert_eq!(first.header("idemgate-decision"), Some("failed"));
    let second = post_json(&client, &url, Some("f500"), BODY).await;
    assert_eq!(second.status, 201);
    assert!(!second.replayed());
    let third = post_json(&client, &url, Some("f500"), BODY).await;
    assert!(third.replayed());
    assert_eq!(third.body, second.body);
    assert_eq!(world.origin.rising_epochs("/f500/").len(), 2);
}

pub async fn retryable_statuses_are_not_cached_and_final_ones_are(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    for (code, cached) in [
        (429, false),
        (503, false),
        (408, false),
        (400, true),
        (409, true),
    ] {
        let prefix = format!("/cache-{code}/");
        let url = gateway.url(&format!("{prefix}status/{code}/pay"));
        let key = format!("cache-{code}");
        let first = post_json(&client, &url, Some(&key), BODY).await;
        let second = post_json(&client, &url, Some(&key), BODY).await;
        assert_eq!((first.status, second.status), (code, code));
        assert_eq!(second.replayed(), cached, "{code}");
        let forwards = if cached { 1 } else { 2 };
        assert_eq!(
            world.origin.rising_epochs(&prefix).len(),
            forwards,
            "{code}"
        );
    }
}

/// A forward that times out is failed, and the next delivery forwards with
/// a higher epoch while the first is still running at the origin (whose
/// late answer reaches no one: the gateway gave up on it). Since the lease
/// outlives the timeout, this is how a hung forward is overtaken; a fencing
/// origin refuses the hung one (demo_origin.rs).
pub async fn origin_timeout_is_504_and_the_next_delivery_has_a_higher_epoch(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let url = gateway.url("/timeout/slow-first/3000/pay");
    let first = post_json(&client, &url, Some("timeout-1"), BODY).await;
    first.assert_problem(504, "origin-timeout");
    let second = post_json(&client, &url, Some("timeout-1"), BODY).await;
    assert_eq!(second.status, 201);
    let epochs = world.origin.rising_epochs("/timeout/");
    assert_eq!(epochs.len(), 2);
    assert_eq!(epoch_in(&second), epochs[1]);
    // The first forward's late answer (at 3 s) does not replace the second.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let replay = post_json(&client, &url, Some("timeout-1"), BODY).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, second.body);
}

pub async fn unreachable_origin_is_502_and_the_receipt_is_failed_not_stuck(world: &'static World) {
    let gateway = world.gateway(Profile::Unreachable).await;
    let client = client();
    let url = gateway.url("/down/pay");
    let mut last_epoch = 0;
    for attempt in 0..2 {
        let reply = post_json(&client, &url, Some("down-1"), BODY).await;
        reply.assert_problem(502, "origin-unreachable");
        let receipt = read_receipt(&gateway, ADMIN_TOKEN, "down-1", "/down/pay").await;
        assert_eq!(receipt.status, 200);
        let receipt = receipt.json();
        assert_eq!(receipt["state"], "failed");
        let epoch = receipt["epoch"].as_u64().unwrap();
        assert!(epoch > last_epoch, "each delivery forwards again, higher");
        last_epoch = epoch;
        assert_eq!(receipt["attempts"].as_array().unwrap().len(), attempt + 1);
        assert!(receipt["attempts"][attempt]["error"]
            .as_str()
            .unwrap()
            .starts_with("unreachable"));
    }
}

pub async fn waiting_duplicates_get_the_same_failure(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let url = gateway.url("/wait-fail/slow/500/status/503/pay");
    let mut duplicates = JoinSet::new();
    for _ in 0..8 {
        let (client, url) = (client.clone(), url.clone());
        duplicates.spawn(async move { post_json(&client, &url, Some("wait-fail"), BODY).await });
    }
    let replies: Vec<Reply> = duplicates.join_all().await;
    assert_eq!(world.origin.count("/wait-fail/"), 1);
    for reply in &replies {
        assert_eq!(reply.status, 503);
        assert!(
            !reply.replayed(),
            "a failure is never passed off as a replay"
        );
        assert_eq!(reply.body, replies[0].body);
    }
    assert_eq!(
        replies
            .iter()
            .filter(|reply| reply.header("idemgate-decision") == Some("waited"))
            .count(),
        7
    );
}

pub async fn crash_keeps_completed_keys_and_takes_over_in_flight_ones(world: &'static World) {
    let origin = world.origin.url();
    let vars = [
        ("ORIGIN_URL", origin.as_str()),
        ("ORIGIN_TIMEOUT_MS", "3000"),
        ("LEASE_MS", "4000"),
    ];
    let gateway = Gateway::start(&vars).await;
    let client = client();
    let done_url = gateway.url("/crash-done/pay");
    let done = post_json(&client, &done_url, Some("crash-done"), BODY).await;
    assert_eq!(done.status, 201);
    let hung_url = gateway.url("/crash-hung/slow-first/60000/pay");
    // Its connection dies with the gateway: the result is not looked at.
    let hung = client
        .post(&hung_url)
        .header("content-type", "application/json")
        .header("idempotency-key", "crash-hung")
        .body(BODY)
        .send();
    let hung = tokio::spawn(async move {
        let _ = hung.await;
    });
    crate::support::eventually(20, "the hung forward reaches the origin", || async {
        world.origin.count("/crash-hung/") == 1
    })
    .await;
    let crashed_at = std::time::Instant::now();

    let state = gateway.crash();
    hung.abort();
    let gateway = Gateway::start_in(state, &vars).await;
    let client = crate::support::client();
    let replay = post_json(
        &client,
        &gateway.url("/crash-done/pay"),
        Some("crash-done"),
        BODY,
    )
    .await;
    assert!(replay.replayed(), "a completed key survives the crash");
    assert_eq!(replay.body, done.body);
    assert_eq!(world.origin.count("/crash-done/"), 1);

    // The receipt is in flight under the dead forward's lease: a delivery
    // before its end is refused (or held), one after takes the key over.
    let hung_url = gateway.url("/crash-hung/slow-first/60000/pay");
    let early = post_json(&client, &hung_url, Some("crash-hung"), r#"{"other":1}"#).await;
    early.assert_problem(422, "fingerprint-mismatch");
    tokio::time::sleep(Duration::from_millis(4_000).saturating_sub(crashed_at.elapsed())).await;
    let taken_over = post_json(&client, &hung_url, Some("crash-hung"), BODY).await;
    assert_eq!(
        taken_over.status,
        201,
        "{}",
        String::from_utf8_lossy(&taken_over.body)
    );
    assert_eq!(taken_over.header("idemgate-decision"), Some("forwarded"));
    let epochs = world.origin.rising_epochs("/crash-hung/");
    assert_eq!(epochs.len(), 2);
    assert_eq!(epoch_in(&taken_over), epochs[1]);
}

pub async fn retention_makes_a_key_new_again_with_a_higher_epoch(world: &'static World) {
    let gateway = world.gateway(Profile::ShortRetention).await;
    let client = client();
    let url = gateway.url("/retention/pay");
    let first = post_json(&client, &url, Some("retention-1"), BODY).await;
    assert_eq!(first.status, 201);
    assert!(post_json(&client, &url, Some("retention-1"), BODY)
        .await
        .replayed());
    // RETENTION_SECONDS is at least 60; the edge cache keeps a replay 10 s.
    tokio::time::sleep(Duration::from_secs(62)).await;
    let after = post_json(&client, &url, Some("retention-1"), BODY).await;
    assert_eq!(after.status, 201);
    assert!(
        !after.replayed(),
        "forwarded again once the receipt expired"
    );
    let epochs = world.origin.rising_epochs("/retention/");
    assert_eq!(epochs.len(), 2, "a new life's epoch is higher, not 1 again");
    let received = world.origin.received("/retention/");
    let verified: Vec<u64> = received
        .iter()
        .map(|request| request.verify(crate::FORWARD_SECRET).unwrap().epoch)
        .collect();
    assert_eq!(verified, epochs);
}

pub async fn large_responses_reach_the_first_caller_whole(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let url = gateway.url("/large/big/5000/pay");
    let first = post_json(&client, &url, Some("large-1"), BODY).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.body.len(), 5000);
    let replay = post_json(&client, &url, Some("large-1"), BODY).await;
    assert_eq!(replay.status, 201);
    assert!(replay.replayed());
    assert!(replay.body.is_empty());
    assert_eq!(replay.header("idemgate-body-omitted"), Some("5000"));
    assert_eq!(world.origin.count("/large/"), 1);
}

/// Counted by the object itself (the operator API's `object_storage_ops`).
pub async fn storage_writes_per_delivery_kind(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let ops = |reply: Reply| reply.json()["object_storage_ops"].clone();

    let url = gateway.url("/cost/pay");
    post_json(&client, &url, Some("cost-1"), BODY).await;
    let first = ops(read_receipt(&gateway, ADMIN_TOKEN, "cost-1", "/cost/pay").await);
    assert_eq!(first["writes"], 2, "in_flight, then completed");
    assert_eq!(first["alarm_writes"], 1);
    for _ in 0..3 {
        assert!(post_json(&client, &url, Some("cost-1"), BODY)
            .await
            .replayed());
    }
    let replays = ops(read_receipt(&gateway, ADMIN_TOKEN, "cost-1", "/cost/pay").await);
    assert_eq!(replays, first, "replays cost no storage operation");

    let failing = gateway.url("/cost-fail/status/503/pay");
    for _ in 0..2 {
        post_json(&client, &failing, Some("cost-2"), BODY).await;
    }
    let failures =
        ops(read_receipt(&gateway, ADMIN_TOKEN, "cost-2", "/cost-fail/status/503/pay").await);
    assert_eq!(failures["writes"], 4, "two failures, two writes each");
    assert_eq!(failures["alarm_writes"], 1, "one alarm per object lifetime");
    assert_eq!(failures["index_writes"], 1, "listed once as failed");
    assert_eq!(
        first["index_writes"], 0,
        "a happy delivery is never indexed"
    );
    eprintln!(
        "storage ops: first delivery {first}; after 3 replays {replays}; two failures {failures}"
    );
}
