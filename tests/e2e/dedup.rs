//! Deduplication under real concurrency: storms, policies, replays.

use std::collections::HashMap;

use tokio::task::JoinSet;

use crate::support::{client, post_json, Reply};
use crate::{Profile, World, FORWARD_SECRET};

pub async fn storm_of_1000_under_wait_forwards_once_per_key(world: &'static World) {
    const KEYS: usize = 20;
    const DELIVERIES: usize = 50;
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let url = gateway.url("/storm/slow/400/payments");
    let mut storm = JoinSet::new();
    for _ in 0..DELIVERIES {
        for key in 0..KEYS {
            let (client, url) = (client.clone(), url.clone());
            storm.spawn(async move {
                let body = format!(r#"{{"amount":{},"currency":"eur"}}"#, 100 + key);
                let reply = post_json(&client, &url, Some(&format!("storm-{key}")), &body).await;
                (key, reply)
            });
        }
    }
    let mut by_key: HashMap<usize, Vec<Reply>> = HashMap::new();
    while let Some(result) = storm.join_next().await {
        let (key, reply) = result.unwrap();
        by_key.entry(key).or_default().push(reply);
    }

    assert_eq!(
        world.origin.count("/storm/"),
        KEYS,
        "exactly one forward per key"
    );
    let mut replayed = 0;
    for (key, replies) in &by_key {
        assert_eq!(replies.len(), DELIVERIES);
        let first = replies.iter().find(|reply| !reply.replayed()).unwrap();
        for reply in replies {
            assert_eq!(
                reply.status,
                201,
                "key {key}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            assert_eq!(
                reply.body, first.body,
                "key {key}: every caller gets the origin's body"
            );
        }
        let key_replays = replies.iter().filter(|reply| reply.replayed()).count();
        assert_eq!(key_replays, DELIVERIES - 1, "key {key}");
        replayed += key_replays;
    }
    assert_eq!(replayed, KEYS * (DELIVERIES - 1));
}

pub async fn conflict_policy_answers_409_then_replays(world: &'static World) {
    let gateway = world.gateway(Profile::Conflict).await;
    let client = client();
    let url = gateway.url("/conflict/slow/1500/payments");
    let body = r#"{"amount":700}"#;
    let mut concurrent = JoinSet::new();
    for _ in 0..10 {
        let (client, url) = (client.clone(), url.clone());
        concurrent.spawn(async move { post_json(&client, &url, Some("conflict-1"), body).await });
    }
    let replies: Vec<Reply> = concurrent.join_all().await;
    let forwarded: Vec<&Reply> = replies.iter().filter(|reply| reply.status == 201).collect();
    assert_eq!(forwarded.len(), 1);
    assert!(!forwarded[0].replayed());
    for reply in replies.iter().filter(|reply| reply.status != 201) {
        reply.assert_problem(409, "in-flight");
        let retry_after: u64 = reply.header("retry-after").unwrap().parse().unwrap();
        assert!(retry_after >= 1);
    }

    let later = post_json(&client, &url, Some("conflict-1"), body).await;
    assert_eq!(later.status, 201);
    assert!(later.replayed());
    assert_eq!(later.body, forwarded[0].body);
    assert_eq!(world.origin.count("/conflict/"), 1);
}

pub async fn replay_matches_the_first_answer_and_ignores_json_layout(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let url = gateway.url("/replay/payments");
    let first = post_json(
        &client,
        &url,
        Some("replay-1"),
        r#"{"amount":1000,"currency":"eur","customer":{"id":"c_1","name":"Zoë"}}"#,
    )
    .await;
    assert_eq!(first.status, 201);
    assert!(!first.replayed());
    assert_eq!(first.header("idemgate-decision"), Some("forwarded"));

    let reordered = "{ \"customer\" : { \"name\":\"Zo\\u00eb\", \"id\":\"c_1\" },\n\t\"currency\": \"eur\", \"amount\": 1000 }";
    let replay = post_json(&client, &url, Some("replay-1"), reordered).await;
    assert_eq!(replay.status, first.status);
    assert_eq!(replay.body, first.body);
    assert!(replay.replayed());
    assert_eq!(replay.header("idemgate-decision"), Some("replayed"));
    for header in ["content-type", "x-origin-sequence"] {
        assert_eq!(replay.header(header), first.header(header), "{header}");
    }
    assert_eq!(world.origin.count("/replay/"), 1);
}

pub async fn changed_payload_is_422_and_not_forwarded(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let url = gateway.url("/mismatch/payments");
    let first = post_json(&client, &url, Some("mismatch-1"), r#"{"amount":1000}"#).await;
    assert_eq!(first.status, 201);
    let changed = post_json(&client, &url, Some("mismatch-1"), r#"{"amount":1001}"#).await;
    changed.assert_problem(422, "fingerprint-mismatch");
    assert_eq!(world.origin.count("/mismatch/"), 1);
    // The receipt is untouched: the original payload still replays.
    let again = post_json(&client, &url, Some("mismatch-1"), r#"{"amount":1000}"#).await;
    assert!(again.replayed());
}

pub async fn forward_carries_idempotency_headers_and_drops_forged_ones(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let body = r#"{"amount":5,"note":"raw bytes are kept"}"#;
    let reply = client()
        .post(gateway.url("/headers/payments?attempt=1"))
        .header("content-type", "application/json")
        .header("idempotency-key", "\"hdr-1\"")
        .header("idempotency-epoch", "99")
        .header("idempotency-signature", "t=1,v1=forged")
        .header("idempotency_scope", "forged-underscore")
        .header("Idempotency_Epoch", "98")
        .header("x-idemgate-fingerprint", "forged")
        .header("X-Idemgate_Route", "forged-underscore")
        .header("x-custom", "kept")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 201);

    let received = world.origin.received("/headers/");
    assert_eq!(received.len(), 1);
    let forward = &received[0];
    assert_eq!(forward.method, "POST");
    assert_eq!(forward.query.as_deref(), Some("attempt=1"));
    assert_eq!(
        forward.body,
        body.as_bytes(),
        "the body is forwarded byte for byte"
    );
    assert_eq!(forward.header("idempotency-key"), Some("\"hdr-1\""));
    assert_eq!(forward.header("x-custom"), Some("kept"));
    for forged in [
        "x-idemgate-fingerprint",
        "x-idemgate_route",
        "idempotency_scope",
        "idempotency_epoch",
    ] {
        assert_eq!(forward.header(forged), None, "{forged} must be stripped");
    }
    let forged_values: Vec<&str> = forward
        .headers
        .values()
        .filter_map(|value| value.to_str().ok())
        .filter(|value| value.contains("forged") || *value == "99" || *value == "98")
        .collect();
    assert!(forged_values.is_empty(), "{forged_values:?}");
    // Checked with the origin-side crate, not with the gateway's own signer:
    // method, path and query, scope, key, epoch and body are all signed.
    let verified = forward.verify(FORWARD_SECRET).unwrap();
    assert_eq!(verified.key, "hdr-1");
    assert_eq!(
        Some(verified.scope.as_str()),
        forward.header("idempotency-scope")
    );
    assert!(
        verified.epoch > 1_000_000_000_000_000,
        "a time-derived epoch: {}",
        verified.epoch
    );
}
