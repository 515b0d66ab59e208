//! Money safety across scopes, key lifetimes and limits (issue 13): each
//! test is a way a payment could be executed twice, a sender told
//! "success" for something the origin never accepted, or one tenant shown
//! another's data.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::support::{client, post_json, Reply};
use crate::{Profile, World, FORWARD_SECRET};

/// Two paths that use one key are two scopes: the origin gets a different,
/// signed `Idempotency-Scope` for each, so an origin keyed on scope and key
/// never answers one with the other's payment.
pub async fn the_scope_reaches_the_origin_signed(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let body = r#"{"amount":100}"#;
    for path in [
        "/scoped/a/charges?currency=eur",
        "/scoped/b/charges?currency=eur",
    ] {
        let reply = post_json(&client(), &gateway.url(path), Some("order-1"), body).await;
        assert_eq!(reply.status, 201);
        assert!(!reply.replayed());
    }
    let received = world.origin.received("/scoped/");
    assert_eq!(received.len(), 2);
    let verified: Vec<idemgate_origin::Forwarded> = received
        .iter()
        .map(|request| request.verify(FORWARD_SECRET).unwrap())
        .collect();
    assert_eq!(verified[0].key, verified[1].key);
    assert_ne!(verified[0].scope, verified[1].scope);
    // The path and query are signed: the same headers on another target fail.
    let mut moved = received[0].clone();
    moved.path = "/scoped/b/charges".into();
    assert!(moved.verify(FORWARD_SECRET).is_err());
    let mut requeried = received[0].clone();
    requeried.query = Some("currency=usd".into());
    assert!(requeried.verify(FORWARD_SECRET).is_err());
}

/// `RETRYABLE_STATUSES` with 401 and 404: a deploy in progress or a rotated
/// secret is retried, not replayed for 72 hours; 403 still completes.
pub async fn retryable_statuses_are_configurable(world: &'static World) {
    let gateway = world.gateway(Profile::Strict).await;
    let client = client();
    for (code, replayed) in [(401, false), (404, false), (403, true)] {
        let prefix = format!("/strict-{code}/");
        let url = gateway.url(&format!("{prefix}status/{code}/pay"));
        let key = format!("strict-{code}");
        let first = post_json(&client, &url, Some(&key), "{}").await;
        let second = post_json(&client, &url, Some(&key), "{}").await;
        assert_eq!((first.status, second.status), (code, code));
        let decision = if replayed { "forwarded" } else { "failed" };
        assert_eq!(first.header("idemgate-decision"), Some(decision), "{code}");
        assert_eq!(second.replayed(), replayed, "{code}");
        let forwards = if replayed { 1 } else { 2 };
        assert_eq!(
            world.origin.rising_epochs(&prefix).len(),
            forwards,
            "{code}"
        );
    }
}

/// `Set-Cookie` reaches only the caller whose delivery was forwarded: not
/// the duplicates that waited for it, not a replay.
pub async fn set_cookie_stays_with_its_caller(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let url = gateway.url("/cookie/slow/700/pay");
    let mut storm = JoinSet::new();
    for _ in 0..6 {
        let (client, url) = (client.clone(), url.clone());
        storm.spawn(async move { post_json(&client, &url, Some("cookie-1"), "{}").await });
    }
    let replies: Vec<Reply> = storm.join_all().await;
    assert!(replies.iter().all(|reply| reply.status == 201));
    let with_cookie: Vec<&Reply> = replies
        .iter()
        .filter(|reply| reply.header("set-cookie").is_some())
        .collect();
    assert_eq!(
        with_cookie.len(),
        1,
        "only the forwarded caller gets the cookie"
    );
    assert_eq!(
        with_cookie[0].header("idemgate-decision"),
        Some("forwarded")
    );
    assert_eq!(
        replies
            .iter()
            .filter(|reply| reply.header("idemgate-decision") == Some("waited"))
            .count(),
        5
    );
    for _ in 0..2 {
        let replay = post_json(&client, &url, Some("cookie-1"), "{}").await;
        assert!(replay.replayed());
        assert_eq!(
            replay.header("set-cookie"),
            None,
            "a replay never carries it"
        );
        assert_eq!(replay.body, with_cookie[0].body);
    }
    assert_eq!(world.origin.count("/cookie/"), 1);
}

/// The fingerprint covers the method and the query string, refuses
/// duplicate member names, and tells large numbers apart.
pub async fn fingerprints_cover_method_query_and_exact_numbers(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let charge = |query: &str| gateway.url(&format!("/fp/charges?{query}"));
    assert_eq!(
        post_json(&client, &charge("amount=100"), Some("fp-1"), "{}")
            .await
            .status,
        201
    );
    post_json(&client, &charge("amount=999"), Some("fp-1"), "{}")
        .await
        .assert_problem(422, "fingerprint-mismatch");
    assert!(
        post_json(&client, &charge("amount=100"), Some("fp-1"), "{}")
            .await
            .replayed()
    );
    let put = Reply::read(
        client
            .put(charge("amount=100"))
            .header("content-type", "application/json")
            .header("idempotency-key", "fp-1")
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    put.assert_problem(422, "fingerprint-mismatch");

    let duplicate = post_json(
        &client,
        &charge("x=1"),
        Some("fp-2"),
        r#"{"amount":1,"amount":100}"#,
    )
    .await;
    duplicate.assert_problem(400, "invalid-json");
    assert!(duplicate.json()["detail"]
        .as_str()
        .unwrap()
        .contains("duplicate member name"));

    let big = |amount: &str| format!(r#"{{"amount":{amount}}}"#);
    assert_eq!(
        post_json(
            &client,
            &charge("x=2"),
            Some("fp-3"),
            &big("9007199254740993")
        )
        .await
        .status,
        201
    );
    post_json(
        &client,
        &charge("x=2"),
        Some("fp-3"),
        &big("9007199254740992"),
    )
    .await
    .assert_problem(422, "fingerprint-mismatch");
    post_json(
        &client,
        &charge("x=2"),
        Some("fp-3"),
        &big("9007199254740993.0000000000000001"),
    )
    .await
    .assert_problem(422, "fingerprint-mismatch");
    assert!(post_json(
        &client,
        &charge("x=2"),
        Some("fp-3"),
        &big("90071992547409930e-1")
    )
    .await
    .replayed());
    assert_eq!(world.origin.count("/fp/"), 2);
}

/// At most `MAX_WAITERS` duplicates wait on a key; more are refused at
/// once, without waiting (409 `in-flight`).
pub async fn waiters_are_bounded(world: &'static World) {
    let gateway = world.gateway(Profile::Strict).await;
    let client = client();
    let url = gateway.url("/waiters/slow/1500/pay");
    let first = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { post_json(&client, &url, Some("waiters-1"), "{}").await })
    };
    crate::support::eventually(10, "the first delivery reaches the origin", || async {
        world.origin.count("/waiters/") == 1
    })
    .await;
    let mut duplicates = JoinSet::new();
    for _ in 0..10 {
        let (client, url) = (client.clone(), url.clone());
        duplicates.spawn(async move {
            let started = Instant::now();
            let reply = post_json(&client, &url, Some("waiters-1"), "{}").await;
            (reply, started.elapsed())
        });
    }
    let answers = duplicates.join_all().await;
    assert_eq!(first.await.unwrap().status, 201);
    let waited = answers
        .iter()
        .filter(|(reply, _)| reply.header("idemgate-decision") == Some("waited"))
        .count();
    let refused: Vec<&(Reply, Duration)> = answers
        .iter()
        .filter(|(reply, _)| reply.status == 409)
        .collect();
    assert_eq!(waited, 2, "MAX_WAITERS=2");
    assert_eq!(refused.len(), 8);
    for (reply, elapsed) in refused {
        reply.assert_problem(409, "in-flight");
        assert!(reply.header("retry-after").is_some());
        assert!(
            *elapsed < Duration::from_millis(1200),
            "refused at once, not after waiting: {elapsed:?}"
        );
    }
    assert_eq!(world.origin.count("/waiters/"), 1);
}

/// The storm of issue 13 item 12: 100 keys x 100 identical deliveries,
/// sent key 0..99 then again, over 1,000 concurrent connections, against a
/// 300 ms origin. Every delivery is answered by the origin's success, and
/// each key is forwarded exactly once.
pub async fn an_interleaved_storm_over_a_thousand_connections(world: &'static World) {
    const KEYS: usize = 100;
    const ROUNDS: usize = 100;
    let gateway = world.gateway(Profile::Wait).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1_000)
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let connections = Arc::new(Semaphore::new(1_000));
    let url = gateway.url("/storm12/slow/300/pay");
    let mut storm = JoinSet::new();
    for _ in 0..ROUNDS {
        for key in 0..KEYS {
            let (client, url, connections) = (client.clone(), url.clone(), connections.clone());
            storm.spawn(async move {
                let _permit = connections.acquire_owned().await.unwrap();
                let body = format!(r#"{{"amount":{key}}}"#);
                let result = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("storm12-{key}"))
                    .body(body)
                    .send()
                    .await;
                match result {
                    Ok(response) => Ok((key, Reply::read(response).await)),
                    Err(error) => Err(format!("{error:?}")),
                }
            });
        }
    }
    let mut failures = Vec::new();
    let mut bodies: Vec<Option<Vec<u8>>> = vec![None; KEYS];
    let mut answered = 0;
    while let Some(result) = storm.join_next().await {
        match result.unwrap() {
            Ok((key, reply)) if reply.status == 201 => {
                answered += 1;
                let first = bodies[key].get_or_insert_with(|| reply.body.clone());
                assert_eq!(
                    *first, reply.body,
                    "key {key}: every caller gets the one answer"
                );
            }
            Ok((key, reply)) => failures.push(format!(
                "key {key}: {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            )),
            Err(error) => failures.push(error),
        }
    }
    println!(
        "interleaved storm: {answered} of {} answered 201, {} failed",
        KEYS * ROUNDS,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failed, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(
        world.origin.count("/storm12/"),
        KEYS,
        "exactly one forward per key"
    );
}
