//! idemgate in front of the demo payments origin: verified headers, a
//! SQLite ledger with one payment per key, and fencing by epoch.

use std::collections::HashSet;

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
    // The ledger would answer a repeat with the first result: count what
    // reached it, not only what it charged.
    assert_eq!(
        origin.forwards(),
        20,
        "one forward per key reached the origin"
    );
    assert_eq!(replies.iter().filter(|reply| !reply.replayed()).count(), 20);
    let payments = origin.payments().await;
    assert_eq!(payments.len(), 20, "one payment per key in the ledger");
    let keys: HashSet<&str> = payments
        .iter()
        .map(|payment| payment["idempotency_key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 20);
}

/// A forward that hangs at the origin past the gateway's timeout is failed;
/// the sender's retry is forwarded with a higher epoch and charged, and
/// when the hung forward finally reaches the ledger, the fence refuses it.
pub async fn the_ledger_refuses_the_stale_epoch_of_an_overtaken_forward(_world: &'static World) {
    let origin = DemoOrigin::start(FORWARD_SECRET).await;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.url.as_str()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ORIGIN_TIMEOUT_MS", "1000"),
        ("LEASE_MS", "2000"),
    ])
    .await;
    let client = client();
    // Only the first forward of the key is slow: it is still running at
    // the origin when the retry is charged.
    let url = gateway.url("/payments?delay_ms=3000&slow=first");
    let hung = charge(&client, &url, "fenced-1", 900).await;
    hung.assert_problem(504, "origin-timeout");
    let retry = charge(&client, &url, "fenced-1", 900).await;
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.body)
    );
    let epoch = retry.json()["epoch"].as_u64().unwrap();

    crate::support::eventually(10, "the hung forward reaches the ledger", || {
        let refused = origin.printed("refused stale epoch").len();
        async move { refused == 1 }
    })
    .await;
    let payments = origin.payments().await;
    assert_eq!(payments.len(), 1);
    assert_eq!(payments[0]["epoch"], epoch);
    let replay = charge(&client, &url, "fenced-1", 900).await;
    assert!(replay.replayed());
    assert_eq!(
        replay.body, retry.body,
        "the stale forward never replaced the real one"
    );
}

/// Two tenants' payments under one key are two payments: the demo ledger
/// is unique on scope and key, and refuses a different body under one key.
pub async fn the_ledger_keeps_tenants_apart_and_refuses_a_changed_body(_world: &'static World) {
    let origin = DemoOrigin::start(FORWARD_SECRET).await;
    let gateway = Gateway::start(&[
        ("ORIGIN_URL", origin.url.as_str()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("TENANT_HEADER", "Authorization"),
    ])
    .await;
    let client = client();
    let pay = |tenant: &'static str, amount: u64| {
        let request = client
            .post(gateway.url("/payments"))
            .header("content-type", "application/json")
            .header("idempotency-key", "order-1")
            .header("authorization", format!("Bearer {tenant}"))
            .body(format!(r#"{{"amount":{amount},"currency":"eur"}}"#));
        async move { Reply::read(request.send().await.unwrap()).await }
    };
    let alice = pay("alice", 100).await;
    let bob = pay("bob", 999).await;
    assert_eq!((alice.status, bob.status), (201, 201));
    assert_ne!(alice.json()["payment_id"], bob.json()["payment_id"]);
    assert_eq!(
        bob.json()["amount"],
        999,
        "bob is charged his own amount, not alice's"
    );
    assert_ne!(alice.json()["scope"], bob.json()["scope"]);
    assert_eq!(origin.payments().await.len(), 2);
}
