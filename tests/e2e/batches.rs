//! Batches (SPEC §4, v4) under `wrangler dev`: GoCardless's `events` and
//! Adyen's `notificationItems` are one receipt and one forward per event;
//! a batch re-sent, or sent again with more, forwards only what is new,
//! also when it is sent many times at once; a forged batch is 401, and one
//! that repeats an event or holds too many is 400 with nothing stored.

use crate::providers::{adyen_item, send, signed, ADYEN, GOCARDLESS};
use crate::senders::now;
use crate::support::{eventually, operator};
use crate::{Profile, World, ADMIN_TOKEN, FORWARD_SECRET};

const JSON: &str = "application/json";

/// A GoCardless webhook of `ids`, as GoCardless lays one out ("Webhooks",
/// https://developer.gocardless.com/api-reference#webhooks).
fn gocardless_batch(ids: &[String], webhook: &str) -> String {
    let events: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                r#"{{"id":"{id}","created_at":"2026-12-03T10:00:00.000Z","resource_type":"payments","action":"confirmed","links":{{"payment":"PM{id}"}},"details":{{"origin":"gocardless","cause":"payment_confirmed","description":"Enough time has passed since the payment was submitted for the banks to return an error, so this payment is now confirmed."}},"metadata":{{}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"events":[{}],"meta":{{"webhook_id":"{webhook}"}}}}"#,
        events.join(",")
    )
}

/// Event ids of one test's `run` (a name and the time: the route's keys
/// are shared by every test).
fn ids(run: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|n| format!("EV{run}-{n}")).collect()
}

/// The event ids the origin got under `prefix`, one per forward.
fn forwarded_ids(world: &World, prefix: &str) -> Vec<String> {
    world
        .origin
        .received(prefix)
        .iter()
        .map(|received| {
            let body: serde_json::Value = serde_json::from_slice(&received.body).unwrap();
            let events = body["events"].as_array().expect("the sender's envelope");
            assert_eq!(events.len(), 1, "one event per forward");
            assert_eq!(body["meta"]["webhook_id"].as_str().map(|_| ()), Some(()));
            received.verify(FORWARD_SECRET).expect("signed by idemgate");
            assert_eq!(received.header("webhook-signature"), None);
            let id = events[0]["id"].as_str().unwrap().to_string();
            assert_eq!(
                received.header("idempotency-key"),
                Some(format!("\"{id}\"").as_str()),
                "keyed by its event's id"
            );
            id
        })
        .collect()
}

pub async fn a_gocardless_batch_is_one_forward_per_event(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = &format!("one{}", now());
    let prefix = format!("/p/gocardless/{run}/");
    let url = gateway.url(&format!("{prefix}webhooks"));
    let three = gocardless_batch(&ids(run, 0..3), "WB1");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &three, now());
    let first = send(&url, JSON, &delivery.headers, &three).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let batch = first.header("idemgate-batch").unwrap().to_string();
    let answer = first.json();
    assert_eq!(answer["batch"], batch.as_str());
    let decisions: Vec<&str> = answer["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["forwarded"; 3]);
    let mut forwarded = forwarded_ids(world, &prefix);
    assert_eq!(forwarded, ids(run, 0..3), "in the batch's order");

    // Sent again in another webhook with one event more: one forward.
    let four = gocardless_batch(&ids(run, 0..4), "WB2");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &four, now());
    let again = send(&url, JSON, &delivery.headers, &four).await;
    assert_eq!(again.status, 200);
    forwarded = forwarded_ids(world, &prefix);
    assert_eq!(forwarded, ids(run, 0..4), "only the new event");

    // Each event is a receipt the operator can read, naming its batch.
    let key = &ids(run, 1..2)[0];
    let query = [("key", key.as_str()), ("route", "gocardless")];
    let receipt = operator(&gateway, reqwest::Method::GET, ADMIN_TOKEN, &query).await;
    assert_eq!(
        receipt.status,
        200,
        "{}",
        String::from_utf8_lossy(&receipt.body)
    );
    assert_eq!(receipt.json()["batch"], batch.as_str());
    assert_eq!(receipt.json()["state"], "completed");
}

/// A batch of one event on a sync route is answered as that event: the
/// origin's own status and body, and the same answer replayed.
pub async fn a_batch_of_one_is_answered_as_its_event(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = &format!("single{}", now());
    let prefix = format!("/p/gocardless/{run}/");
    let url = gateway.url(&format!("{prefix}webhooks"));
    let one = gocardless_batch(&ids(run, 0..1), "WB1");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &one, now());
    let first = send(&url, JSON, &delivery.headers, &one).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert!(first.header("idemgate-batch").is_some());
    let payment = first.json()["payment_id"].as_str().map(str::to_string);
    assert!(payment.is_some(), "the origin's own body");
    let again = send(&url, JSON, &delivery.headers, &one).await;
    assert_eq!(again.status, 201);
    assert_eq!(
        again.json()["payment_id"].as_str().map(str::to_string),
        payment
    );
    assert_eq!(forwarded_ids(world, &prefix), ids(run, 0..1));
}

/// The same batch sent ten times at once, and a larger one beside it:
/// each event reaches the origin once.
pub async fn a_batch_sent_many_times_at_once_forwards_each_event_once(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = &format!("storm{}", now());
    let prefix = format!("/p/gocardless/storm-{run}/");
    let url = gateway.url(&format!("{prefix}webhooks"));
    let sends = (0..12).map(|n| {
        let body = match n % 3 {
            0 => gocardless_batch(&ids(run, 0..5), &format!("WB{n}")),
            1 => gocardless_batch(&ids(run, 2..5), &format!("WB{n}")),
            _ => gocardless_batch(
                &[ids(run, 4..5), ids(run, 0..2)].concat(),
                &format!("WB{n}"),
            ),
        };
        let delivery = signed(&origin, "gocardless", GOCARDLESS, &body, now());
        let url = url.clone();
        async move { send(&url, JSON, &delivery.headers, &body).await }
    });
    let replies = futures::future::join_all(sends).await;
    for reply in &replies {
        // A duplicate arriving while its event is forwarded waits for it,
        // or, past WAIT_MS on a loaded machine, is told to come back.
        assert!(
            matches!(reply.status, 200 | 409),
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let whole = gocardless_batch(&ids(run, 0..5), "WB-last");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &whole, now());
    let last = send(&url, JSON, &delivery.headers, &whole).await;
    assert_eq!(last.status, 200, "{}", String::from_utf8_lossy(&last.body));
    let mut forwarded = forwarded_ids(world, &prefix);
    forwarded.sort();
    assert_eq!(forwarded, ids(run, 0..5), "each event once");
}

pub async fn a_batch_that_cannot_be_taken_whole_stores_nothing(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = &format!("refused{}", now());
    let prefix = format!("/p/gocardless/refused-{run}/");
    let url = gateway.url(&format!("{prefix}webhooks"));

    let genuine = gocardless_batch(&ids(run, 0..2), "WB1");
    let forged = signed(&origin, "gocardless", "another-secret", &genuine, now());
    send(&url, JSON, &forged.headers, &genuine)
        .await
        .assert_problem(401, "bad-signature");

    let repeated = gocardless_batch(&[ids(run, 0..2), ids(run, 0..1)].concat(), "WB2");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &repeated, now());
    let reply = send(&url, JSON, &delivery.headers, &repeated).await;
    reply.assert_problem(400, "invalid-batch");
    assert!(reply.json()["detail"]
        .as_str()
        .unwrap()
        .contains("events 1 and 3"));

    // The route takes at most five events a batch.
    let six = gocardless_batch(&ids(run, 0..6), "WB3");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &six, now());
    let reply = send(&url, JSON, &delivery.headers, &six).await;
    reply.assert_problem(400, "invalid-batch");
    assert!(reply.json()["detail"]
        .as_str()
        .unwrap()
        .contains("MAX_BATCH_EVENTS (5)"));

    assert_eq!(world.origin.count(&prefix), 0, "nothing forwarded");
    // Nothing stored: the genuine batch is forwarded whole afterwards.
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &genuine, now());
    let reply = send(&url, JSON, &delivery.headers, &genuine).await;
    assert_eq!(reply.status, 200);
    assert_eq!(forwarded_ids(world, &prefix), ids(run, 0..2));
}

/// On an async route the batch is acknowledged once every event is
/// durable, and each event is then delivered once.
pub async fn an_async_batch_is_acknowledged_then_each_event_delivered(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = &format!("async{}", now());
    let prefix = format!("/p/gocardless-async/{run}/");
    let url = gateway.url(&format!("{prefix}webhooks"));
    let body = gocardless_batch(&ids(run, 0..3), "WB1");
    let delivery = signed(&origin, "gocardless", GOCARDLESS, &body, now());
    let reply = send(&url, JSON, &delivery.headers, &body).await;
    assert_eq!(
        reply.status,
        202,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    eventually(20, "three deliveries", || async {
        world.origin.count(&prefix) >= 3
    })
    .await;
    let again = send(&url, JSON, &delivery.headers, &body).await;
    assert_eq!(again.status, 202);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let mut forwarded = forwarded_ids(world, &prefix);
    forwarded.sort();
    assert_eq!(forwarded, ids(run, 0..3));
}

pub async fn an_adyen_notification_is_one_forward_per_item(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = now();
    let prefix = format!("/p/adyen/items-{run}/");
    let url = gateway.url(&format!("{prefix}notifications"));
    let notification = |items: &[String]| {
        let body = format!(
            r#"{{"live":"false","notificationItems":[{}]}}"#,
            items.join(",")
        );
        signed(&origin, "adyen", ADYEN, &body, now())
    };
    let (a, b) = (
        adyen_item(&format!("A{run}"), 1000),
        adyen_item(&format!("B{run}"), 250),
    );
    let two = notification(&[a.clone(), b.clone()]);
    let body = String::from_utf8(two.body.clone()).unwrap();
    let reply = send(&url, JSON, &two.headers, &body).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.body, b"[accepted]", "Adyen's acknowledgement");
    let received = world.origin.received(&prefix);
    assert_eq!(received.len(), 2, "one forward per item");
    let keys: Vec<String> = received
        .iter()
        .map(|received| {
            let items: serde_json::Value = serde_json::from_slice(&received.body).unwrap();
            assert_eq!(items["live"], "false");
            let items = items["notificationItems"].as_array().unwrap();
            assert_eq!(items.len(), 1);
            let item = &items[0]["NotificationRequestItem"];
            assert!(
                item["additionalData"]["hmacSignature"].is_string(),
                "its own"
            );
            received.header("idempotency-key").unwrap().to_string()
        })
        .collect();
    assert_eq!(
        keys,
        [
            format!("\"pspA{run}:AUTHORISATION:true\""),
            format!("\"pspB{run}:AUTHORISATION:true\"")
        ]
    );
    // The second item alone is a replay; a notification repeating the
    // first is refused whole.
    let alone = notification(std::slice::from_ref(&b));
    let body = String::from_utf8(alone.body.clone()).unwrap();
    let reply = send(&url, JSON, &alone.headers, &body).await;
    assert_eq!(reply.status, 201);
    assert!(reply.replayed());
    let repeated = notification(&[a.clone(), b, a]);
    let body = String::from_utf8(repeated.body.clone()).unwrap();
    send(&url, JSON, &repeated.headers, &body)
        .await
        .assert_problem(400, "invalid-batch");
    assert_eq!(world.origin.count(&prefix), 2);
}

/// The review's item 13 (round 5): Adyen signs each item, never the
/// envelope, and every envelope member was copied into every item's
/// part: a notification padded with an unsigned 1 MB member became about
/// 50 MB of parts, and the member reached the origin in each. Now a part
/// is `live` and its item, and what is copied into every part is bounded.
pub async fn a_padded_adyen_notification_forwards_only_live_and_each_item(world: &'static World) {
    let gateway = world.gateway(Profile::Routes).await;
    let origin = world.origin.url();
    let run = now();
    let prefix = format!("/p/adyen/padded-{run}/");
    let url = gateway.url(&format!("{prefix}notifications"));
    let items = [
        adyen_item(&format!("P{run}"), 100),
        adyen_item(&format!("Q{run}"), 200),
    ];
    let body = format!(
        r#"{{"live":"false","notificationItems":[{}]}}"#,
        items.join(",")
    );
    let delivery = signed(&origin, "adyen", ADYEN, &body, now());
    let signed_body = String::from_utf8(delivery.body.clone()).unwrap();
    let padding = "x".repeat(200_000);
    let padded = signed_body.replacen(
        "{\"live\"",
        &format!("{{\"padding\":\"{padding}\",\"live\""),
        1,
    );
    assert_ne!(padded, signed_body);
    let reply = send(&url, JSON, &delivery.headers, &padded).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let received = world.origin.received(&prefix);
    assert_eq!(received.len(), 2, "one forward per item");
    for part in &received {
        assert!(part.body.len() < 2_000, "{} bytes", part.body.len());
        let envelope: serde_json::Value = serde_json::from_slice(&part.body).unwrap();
        let members: Vec<&String> = envelope.as_object().unwrap().keys().collect();
        assert_eq!(members, ["live", "notificationItems"]);
    }
    // A member the format keeps, padded past the bound: refused whole.
    let long_live = signed_body.replacen(
        "\"live\":\"false\"",
        &format!("\"live\":\"{}\"", "f".repeat(2_000)),
        1,
    );
    send(&url, JSON, &delivery.headers, &long_live)
        .await
        .assert_problem(400, "invalid-batch");
    assert_eq!(world.origin.count(&prefix), 2);
}
