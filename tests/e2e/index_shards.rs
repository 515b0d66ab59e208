//! The receipt index in shards (SPEC §15, v5): an async acknowledgement
//! waits on the key's object alone, even while every shard of its route
//! fails, and the row lands once they answer; a v4 deployment's D1 rows
//! move into the shards without losing a dead letter, a failed receipt or
//! a pending one, and health says when the old binding can go.

use crate::support::gateway::{Index, Worker};
use crate::support::{client, eventually, operator, post_json, read_stats, Gateway};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const BODY: &str = r#"{"amount":900,"currency":"eur"}"#;

/// The keys `route`'s listing of `state` shows (every page).
async fn listed(gateway: &Gateway, route: &str, state: &str) -> Option<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("route", route), ("state", state)];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor));
        }
        let reply = operator(gateway, reqwest::Method::GET, ADMIN_TOKEN, &query).await;
        if reply.status != 200 {
            return None;
        }
        let page = reply.json();
        for receipt in page["receipts"].as_array().unwrap() {
            keys.push(receipt["key"].as_str().unwrap().to_string());
        }
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return Some(keys),
        }
    }
}

/// A gateway with the test hooks whose every delivery is async, retried
/// an hour later, with `extra` settings.
async fn async_gateway(world: &'static World, extra: &[(&str, &str)]) -> Gateway {
    let origin = world.origin.url();
    let mut vars = vec![
        ("ORIGIN_URL", origin.as_str()),
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1h"),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    vars.extend_from_slice(extra);
    Gateway::start_with_hooks(&vars).await
}

/// An async delivery of `key` to `path`, acknowledged (202): its reply.
async fn accepted(gateway: &Gateway, path: &str, key: &str) -> crate::support::Reply {
    let ack = post_json(&client(), &gateway.url(path), Some(key), BODY).await;
    assert_eq!(ack.status, 202, "{}", String::from_utf8_lossy(&ack.body));
    ack
}

async fn health(gateway: &Gateway) -> serde_json::Value {
    let reply = client()
        .get(gateway.url("/__idemgate/health"))
        .send()
        .await
        .unwrap();
    serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap()
}

async fn fail_shards(gateway: &Gateway, route: &str, fail: bool) {
    let reply = client()
        .post(gateway.url("/__idemgate/test/index-shards"))
        .query(&[
            ("route", route),
            ("fail", if fail { "true" } else { "false" }),
        ])
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
}

pub async fn an_async_delivery_is_acknowledged_while_every_index_shard_fails(
    world: &'static World,
) {
    let gateway = async_gateway(world, &[("INDEX_SHARDS", "4")]).await;
    world.origin.fail("/shards-down/", true);
    fail_shards(&gateway, "default", true).await;
    let ack = accepted(&gateway, "/shards-down/pay", "down-1").await;
    eventually(10, "the first attempt", || async {
        world.origin.count("/shards-down/") == 1
    })
    .await;
    assert_eq!(
        listed(&gateway, "default", "failed").await,
        None,
        "no listing while the shards fail"
    );
    // Health counts and names it, from its object's word (SPEC §2b, v5).
    let receipt_id = ack.header("idemgate-receipt-id").unwrap().to_string();
    eventually(
        10,
        "health names the receipt whose row has not landed",
        || {
            let receipt_id = receipt_id.clone();
            let gateway = &gateway;
            async move {
                let owed = &health(gateway).await["index_rows_not_landed"];
                owed["count"] == 1
                    && owed["receipts"][0]["receipt_id"] == receipt_id.as_str()
                    && owed["receipts"][0]["state"] == "failed"
            }
        },
    )
    .await;
    fail_shards(&gateway, "default", false).await;
    // The key's alarm writes its row again within 10 s.
    eventually(25, "the row lands", || async {
        listed(&gateway, "default", "failed").await == Some(vec!["down-1".to_string()])
    })
    .await;
    eventually(10, "health hears that it landed", || async {
        health(&gateway).await["index_rows_not_landed"]["count"] == 0
    })
    .await;
    assert_eq!(world.origin.count("/shards-down/"), 1, "sent once");
    world.origin.fail("/shards-down/", false);
}

/// SPEC §15 (v5): a delivery the origin takes within a second needs no
/// row, so a storm the origin keeps up with costs the index shards
/// nothing; one it refuses is listed `failed`.
pub async fn a_delivery_the_origin_takes_at_once_writes_no_index_row(world: &'static World) {
    let gateway = async_gateway(world, &[]).await;
    let shard_requests = || async {
        read_stats(&gateway, ADMIN_TOKEN).await["requests_by_class"]["INDEX_SHARD"]
            .as_u64()
            .unwrap_or(0)
    };
    let before = shard_requests().await;
    for n in 0..10 {
        accepted(&gateway, "/quick-rows/pay", &format!("quick-{n}")).await;
    }
    eventually(10, "every delivery at the origin", || async {
        world.origin.count("/quick-rows/") == 10
    })
    .await;
    // Past the second a row waits for.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    assert_eq!(shard_requests().await, before, "no shard asked");
    world.origin.fail("/refused-rows/", true);
    accepted(&gateway, "/refused-rows/pay", "refused-1").await;
    eventually(10, "the refused delivery listed", || async {
        listed(&gateway, "default", "failed").await == Some(vec!["refused-1".to_string()])
    })
    .await;
    assert!(
        shard_requests().await > before,
        "the refused delivery's row went to its shard"
    );
    // A burst over every shard: the merged listing pages through them
    // all.
    let mut burst = tokio::task::JoinSet::new();
    for n in 0..160 {
        let url = gateway.url("/refused-rows/pay");
        burst.spawn(async move {
            post_json(&client(), &url, Some(&format!("burst-{n}")), BODY)
                .await
                .status
        });
    }
    while let Some(status) = burst.join_next().await {
        assert_eq!(status.unwrap(), 202);
    }
    eventually(15, "every burst delivery refused at the origin", || async {
        world.origin.count("/refused-rows/") >= 161
    })
    .await;
    eventually(15, "every row listed", || async {
        listed(&gateway, "default", "failed")
            .await
            .is_some_and(|keys| keys.len() == 161)
    })
    .await;
    world.origin.fail("/refused-rows/", false);
}

fn routes() -> String {
    serde_json::json!({
        "dies": {"path": "/v4-dies", "delivery": "async", "retry_schedule": "1s"},
        "waits": {"path": "/v4-waits", "delivery": "async", "retry_schedule": "1s,1h"}
    })
    .to_string()
}

pub async fn an_upgrade_from_the_d1_index_moves_every_row_and_loses_none(world: &'static World) {
    let origin = world.origin.url();
    let routes = routes();
    let mut vars = vec![
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", origin.as_str()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    let mut before_vars = vars.clone();
    before_vars.push(("IDEMGATE_TEST_V4_INDEX", "true"));
    let before = Gateway::start_in_with_index(
        tempfile::tempdir().unwrap(),
        Worker::TestHooks,
        Index::Legacy,
        &before_vars,
    )
    .await;
    world.origin.fail("/v4-", true);
    let dead = ["v4-dead-1", "v4-dead-2", "v4-dead-3"];
    for key in dead {
        accepted(&before, "/v4-dies/pay", key).await;
    }
    accepted(&before, "/v4-waits/pay", "v4-failed").await;
    eventually(20, "the v4 rows", || async {
        let mut dead_listed = listed(&before, "dies", "dead").await.unwrap_or_default();
        dead_listed.sort();
        dead_listed == dead
            && listed(&before, "waits", "failed").await == Some(vec!["v4-failed".into()])
    })
    .await;
    assert_eq!(health(&before).await["legacy_index"]["rows"], 4);

    // The upgrade: the release worker on the same state, D1 still bound.
    let state = before.crash();
    vars.retain(|(name, _)| !name.starts_with("IDEMGATE_TEST"));
    let after = Gateway::start_in_with_index(state, Worker::Release, Index::Legacy, &vars).await;
    // Read in place at once, then moved by the Cron Trigger's pages.
    let mut dead_listed = listed(&after, "dies", "dead").await.unwrap();
    dead_listed.sort();
    assert_eq!(dead_listed, dead);
    eventually(30, "the old table empty", || async {
        let _ = client().get(after.url("/__scheduled")).send().await;
        health(&after).await["legacy_index"]["rows"] == 0
    })
    .await;
    assert_eq!(
        health(&after).await["legacy_index"]["state"],
        "empty: the IDEMGATE_INDEX binding can go"
    );
    let mut dead_listed = listed(&after, "dies", "dead").await.unwrap();
    dead_listed.sort();
    assert_eq!(dead_listed, dead, "every dead letter, now from the shards");
    assert_eq!(
        listed(&after, "waits", "failed").await,
        Some(vec!["v4-failed".to_string()])
    );
    let summary: serde_json::Value = {
        let reply = client()
            .get(after.url("/__idemgate/summary"))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap()
    };
    let count = |route: &str, state: &str| {
        summary["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["route"] == route)
            .map(|entry| entry[state].clone())
    };
    assert_eq!(count("dies", "dead"), Some(3.into()), "{summary}");
    assert_eq!(count("waits", "failed"), Some(1.into()), "{summary}");
    // Nothing acknowledged is lost: re-driven, each is delivered.
    world.origin.fail("/v4-", false);
    let redrive = |route: &'static str, key: &'static str, path: &'static str| {
        let after = &after;
        async move {
            let reply = operator(
                after,
                reqwest::Method::POST,
                ADMIN_TOKEN,
                &[("route", route), ("key", key), ("path", path)],
            )
            .await;
            assert_eq!(
                reply.status,
                202,
                "{key}: {}",
                String::from_utf8_lossy(&reply.body)
            );
        }
    };
    for key in dead {
        redrive("dies", key, "/v4-dies/pay").await;
    }
    redrive("waits", "v4-failed", "/v4-waits/pay").await;
    eventually(20, "delivered", || async {
        listed(&after, "dies", "dead").await == Some(Vec::new())
            && listed(&after, "waits", "failed").await == Some(Vec::new())
    })
    .await;
}
