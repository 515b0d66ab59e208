//! The operator API (SPEC §7) and the decision logs.

use tokio::task::JoinSet;

use crate::senders::{now, stripe_signature};
use crate::support::{client, post_json, read_receipt, read_stats, Gateway, Reply};
use crate::{Profile, World, ADMIN_TOKEN, FORWARD_SECRET, STRIPE_SECRET};

pub async fn receipt_routes_need_the_admin_token(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let url = gateway.url("/__idemgate/receipts?key=nobody&path=/x");
    let client = client();
    let anonymous = Reply::read(client.get(&url).send().await.unwrap()).await;
    anonymous.assert_problem(401, "unauthorized");
    let wrong = Reply::read(client.get(&url).bearer_auth("guess").send().await.unwrap()).await;
    wrong.assert_problem(401, "unauthorized");
    let right = read_receipt(&gateway, ADMIN_TOKEN, "nobody", "/x").await;
    right.assert_problem(404, "not-found");

    let unconfigured = world.gateway(Profile::Conflict).await;
    for token in [None, Some(ADMIN_TOKEN)] {
        let mut request = client.get(unconfigured.url("/__idemgate/receipts?key=k&path=/x"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let reply = Reply::read(request.send().await.unwrap()).await;
        reply.assert_problem(404, "not-found");
    }
    assert_eq!(
        world.origin.count("/__idemgate"),
        0,
        "operator paths are never forwarded"
    );
}

pub async fn receipt_after_a_storm_shows_duplicates_and_attempts(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let path = "/op-storm/slow/300/pay";
    let client = client();
    let mut storm = JoinSet::new();
    for _ in 0..30 {
        let (client, url) = (client.clone(), gateway.url(path));
        storm.spawn(
            async move { post_json(&client, &url, Some("op-storm"), r#"{"amount":1}"#).await },
        );
    }
    let replies: Vec<Reply> = storm.join_all().await;
    for reply in &replies {
        assert_eq!(
            reply.status,
            201,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.body, replies[0].body);
    }
    assert_eq!(replies.iter().filter(|reply| !reply.replayed()).count(), 1);
    assert_eq!(world.origin.count("/op-storm/"), 1);
    let receipt = read_receipt(&gateway, ADMIN_TOKEN, "op-storm", path).await;
    assert_eq!(receipt.status, 200);
    let receipt = receipt.json();
    assert_eq!(receipt["state"], "completed");
    let epoch = receipt["epoch"].as_u64().unwrap();
    assert_eq!(
        Some(epoch),
        world.origin.rising_epochs("/op-storm/").first().copied()
    );
    assert_eq!(receipt["route"], "default");
    assert_eq!(receipt["key"], "op-storm");
    assert_eq!(receipt["receipt_id"].as_str().unwrap().len(), 36, "a UUID");
    assert_eq!(receipt["duplicates"], 29);
    assert_eq!(receipt["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(receipt["attempts"][0]["status"], 201);
    assert_eq!(receipt["response"]["status"], 201);
    assert!(receipt["response"]["body_bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        receipt["response"]["body"].as_str().unwrap().as_bytes(),
        replies[0].body,
        "the stored response, as the operator's page shows it"
    );
    assert_eq!(receipt["view_version"], 1);
    assert_eq!(receipt["fingerprint"].as_str().unwrap().len(), 64);
    assert!(receipt["expires_at"].as_u64() > receipt["completed_at"].as_u64());
}

/// A purge makes the key new: the same payload is forwarded again (the
/// isolate's replay cache forgot it too), with a higher epoch.
pub async fn purge_makes_the_key_new_and_unknown_keys_are_404(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let url = gateway.url("/purge/pay");
    let body = r#"{"amount":1}"#;
    assert_eq!(
        post_json(&client, &url, Some("purge-1"), body).await.status,
        201
    );
    // Twice: the second replay is the isolate cache's.
    for _ in 0..2 {
        assert!(post_json(&client, &url, Some("purge-1"), body)
            .await
            .replayed());
    }
    let purge = |key: &'static str| {
        let request = client
            .delete(gateway.url("/__idemgate/receipts"))
            .query(&[("key", key), ("path", "/purge/pay")])
            .bearer_auth(ADMIN_TOKEN);
        async move { Reply::read(request.send().await.unwrap()).await }
    };
    assert_eq!(purge("purge-1").await.status, 204);
    read_receipt(&gateway, ADMIN_TOKEN, "purge-1", "/purge/pay")
        .await
        .assert_problem(404, "not-found");
    let again = post_json(&client, &url, Some("purge-1"), body).await;
    assert_eq!(again.status, 201);
    assert!(
        !again.replayed(),
        "a purged key is new: its payload is forwarded again"
    );
    assert_eq!(
        world.origin.rising_epochs("/purge/").len(),
        2,
        "and its epoch is higher"
    );
    let other = post_json(&client, &url, Some("purge-1"), r#"{"amount":2}"#).await;
    other.assert_problem(422, "fingerprint-mismatch");
    purge("never-seen").await.assert_problem(404, "not-found");
}

/// A gateway of its own (so no earlier test's lines count), holding a
/// signing secret, a forward secret and an admin token: its output holds
/// none of them, nor any body or key, but one JSON line per state change
/// and per rejection (SPEC §9), and no line for an absorbed duplicate.
pub async fn logs_have_state_changes_and_rejections_but_no_secrets(world: &'static World) {
    let origin = world.origin.url();
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.as_str()),
        ("SIGNATURE_SCHEME", "stripe"),
        ("SIGNING_SECRET", STRIPE_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("FORWARD_SECRET", FORWARD_SECRET),
    ])
    .await;
    let marker = "BODY-MARKER-4711";
    let body = format!(r#"{{"id":"evt_log_1","note":"{marker}"}}"#);
    let signed = stripe_signature(STRIPE_SECRET, now(), &body);
    let mut statuses = Vec::new();
    for signature in [
        signed.as_str(),
        signed.as_str(),
        signed.as_str(),
        "t=1,v1=00",
    ] {
        let response = client()
            .post(gateway.url("/logs/webhook"))
            .header("content-type", "application/json")
            .header("stripe-signature", signature)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [201, 201, 201, 401]);
    read_receipt(&gateway, ADMIN_TOKEN, "evt_log_1", "/logs/webhook").await;
    let decisions = || -> Vec<serde_json::Value> {
        gateway
            .log()
            .lines()
            .filter_map(|line| {
                line.find("{\"event\":\"idemgate.decision\"")
                    .map(|at| &line[at..])
            })
            .map(|json| serde_json::from_str(json).unwrap())
            .collect()
    };
    crate::support::eventually(5, "two decision lines", || {
        let count = decisions().len();
        async move { count >= 2 }
    })
    .await;
    let names: Vec<String> = decisions()
        .iter()
        .map(|d| d["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        ["forwarded", "rejected"],
        "replays are counted, not logged"
    );
    let forwarded = &decisions()[0];
    assert_eq!(forwarded["route"], "default");
    assert_eq!(forwarded["receipt_id"].as_str().unwrap().len(), 36);
    let stats = read_stats(&gateway, ADMIN_TOKEN).await;
    assert_eq!(stats["decisions"]["default"]["replayed"], 2, "{stats}");
    assert_eq!(stats["decisions"]["default"]["forwarded"], 1, "{stats}");
    let log = gateway.log();
    for secret in [
        STRIPE_SECRET,
        ADMIN_TOKEN,
        FORWARD_SECRET,
        marker,
        "evt_log_1",
    ] {
        assert!(!log.contains(secret), "{secret} leaked into the logs");
    }
}

/// A replay from the isolate's cache is the object's replay, byte for
/// byte, and a different payload still reaches the object (422).
pub async fn edge_replays_match_the_objects_and_are_counted(world: &'static World) {
    let gateway = world.gateway(Profile::Failing).await;
    let client = client();
    let url = gateway.url("/edge/pay");
    let stats = || read_stats(&gateway, ADMIN_TOKEN);
    post_json(&client, &url, Some("edge-1"), r#"{"amount":1}"#).await;
    let from_object = post_json(&client, &url, Some("edge-1"), r#"{"amount":1}"#).await;
    let before = stats().await;
    let from_cache = post_json(&client, &url, Some("edge-1"), r#"{"amount":1}"#).await;
    let after = stats().await;
    assert_eq!(
        after["cache_hits"].as_u64().unwrap(),
        before["cache_hits"].as_u64().unwrap() + 1
    );
    assert_eq!(
        after["object_requests"], before["object_requests"],
        "no object request"
    );
    assert_eq!(from_cache.status, from_object.status);
    assert_eq!(from_cache.body, from_object.body);
    for header in [
        "content-type",
        "x-origin-sequence",
        "idempotent-replayed",
        "idemgate-decision",
    ] {
        assert_eq!(
            from_cache.header(header),
            from_object.header(header),
            "{header}"
        );
    }
    assert!(from_cache
        .headers
        .keys()
        .all(|name| !name.as_str().starts_with("x-idemgate-")));
    let changed = post_json(&client, &url, Some("edge-1"), r#"{"amount":2}"#).await;
    changed.assert_problem(422, "fingerprint-mismatch");
    let receipt = read_receipt(&gateway, ADMIN_TOKEN, "edge-1", "/edge/pay")
        .await
        .json();
    assert_eq!(
        receipt["duplicates"], 2,
        "the edge's replay reached the receipt's count"
    );
}
