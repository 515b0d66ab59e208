//! idemgate in front of the demo payments origin: verified headers, a
//! SQLite ledger with one payment per key, and fencing by epoch.

use std::collections::HashSet;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::support::{client, DemoOrigin, Gateway, Reply};
use crate::{World, FORWARD_SECRET};

async fn charge(client: &reqwest::Client, url: &str, key: &str, amount: u64) -> Reply {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        // A forged signature of the caller's: idemgate must drop it.
        .header("idempotency-signature", "t=1,v1=00")
        .body(format!(r#"{{"amount":{amount},"currency":"eur"}}"#))
        .send()
        .await
        .unwrap();
    Reply::read(response).await
}

pub async fn storm_charges_once_per_key_and_every_forward_verifies(_world: &'static World) {
    let origin = DemoOrigin::start(FORWARD_SECRET).await;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.url.as_str()),
        ("FORWARD_SECRET", FORWARD_SECRET),
    ])
    .await;
    let client = client();
    let url = gateway.url("/payments?delay_ms=300");
    let mut storm = JoinSet::new();
    for _ in 0..50 {
        for key in 0..20u64 {
            let (client, url) = (client.clone(), url.clone());
            storm.spawn(
                async move { charge(&client, &url, &format!("demo-{key}"), 100 + key).await },
            );
        }
    }
    let replies: Vec<Reply> = storm.join_all().await;
    for reply in &replies {
        // 401 would mean the demo origin could not verify a forward.
        assert_eq!(
            reply.status,
            201,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let payments = origin.payments().await;
    assert_eq!(payments.len(), 20, "one payment per key in the ledger");
    let keys: HashSet<&str> = payments
        .iter()
        .map(|payment| payment["idempotency_key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 20);
}

pub async fn the_ledger_refuses_the_stale_epoch_of_a_taken_over_forward(_world: &'static World) {
    let origin = DemoOrigin::start(FORWARD_SECRET).await;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.url.as_str()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ORIGIN_TIMEOUT_MS", "6000"),
        ("LEASE_MS", "1000"),
    ])
    .await;
    let client = client();
    // Only the epoch-1 forward is slow: it is still running when its lease ends.
    let url = gateway.url("/payments?delay_ms=3000&slow_epoch=1");
    let slow = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { charge(&client, &url, "fenced-1", 900).await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let takeover = charge(&client, &url, "fenced-1", 900).await;
    assert_eq!(takeover.status, 201);
    assert_eq!(takeover.json()["epoch"], 2);

    let stale = slow.await.unwrap();
    assert_eq!(
        stale.status, 409,
        "the ledger refuses epoch 1 after accepting epoch 2"
    );
    assert_eq!(stale.json()["error"], "stale-epoch");

    let payments = origin.payments().await;
    assert_eq!(payments.len(), 1);
    assert_eq!(payments[0]["epoch"], 2);
    let replay = charge(&client, &url, "fenced-1", 900).await;
    assert!(replay.replayed());
    assert_eq!(
        replay.body, takeover.body,
        "the stale answer never replaced the real one"
    );
}
