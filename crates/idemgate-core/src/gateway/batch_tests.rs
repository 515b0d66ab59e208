//! Batches through the gateway's steps, each event's object the real
//! [`Engine`] over a [`MemoryBackend`]: what reaches the origin, what is
//! refused whole, and the property of SPEC §4 (v4): no subset, repetition
//! or reordering of a batch's events forwards any event twice.

use std::collections::HashMap;

use futures::executor::block_on;
use proptest::prelude::*;

use super::engine_edge::EngineEdge;
use super::*;
use crate::answer::render_problem;
use crate::signature::Message;

const NOW: u64 = 1_700_000_000_000;
const SECRET: &str = "gocardless-endpoint-secret";

impl EngineEdge {
    fn gocardless(vars: &[(&str, &str)]) -> EngineEdge {
        let mut all = vec![
            ("SIGNATURE_SCHEME", "gocardless"),
            ("SIGNING_SECRET", SECRET),
        ];
        all.extend_from_slice(vars);
        EngineEdge::new(NOW, &all)
    }

    /// Posts `body`, signed as the route's sender signs it, or with
    /// GoCardless's `signature`.
    fn post(&self, body: &str, signature: Option<&str>) -> Handled<String> {
        let mut message = Message {
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
        };
        self.scheme.sign(&mut message, NOW / 1000);
        if let Some(signature) = signature {
            message
                .headers
                .retain(|(name, _)| !name.eq_ignore_ascii_case("webhook-signature"));
            message
                .headers
                .push(("Webhook-Signature".into(), signature.into()));
        }
        self.send(message, "https://edge.test/gocardless")
    }

    /// Each event's forwards, by the event id in the body the origin got.
    fn forwards(&self) -> HashMap<String, usize> {
        let mut forwards = HashMap::new();
        for engine in self.objects.borrow().values() {
            for request in engine.backend().forwarded.borrow().iter() {
                let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
                let events = body["events"].as_array().unwrap();
                assert_eq!(events.len(), 1, "one event per forward");
                let id = events[0]["id"].as_str().unwrap().to_string();
                *forwards.entry(id).or_default() += 1;
            }
        }
        forwards
    }
}

fn batch(ids: &[&str], webhook: &str) -> String {
    let events: Vec<String> = ids
        .iter()
        .map(|id| format!(r#"{{"id":"{id}","action":"confirmed","resource_type":"payments"}}"#))
        .collect();
    format!(
        r#"{{"events":[{}],"meta":{{"webhook_id":"{webhook}"}}}}"#,
        events.join(",")
    )
}

fn answered(handled: Handled<String>) -> HttpResponse {
    match handled {
        Handled::Batch { response, .. } => response,
        Handled::Rejected { problem, .. } => render_problem(&problem),
        other => panic!("not a batch's answer: {other:?}"),
    }
}

#[test]
fn a_batch_forwards_each_event_once_in_an_envelope_of_its_own() {
    let edge = EngineEdge::gocardless(&[]);
    let first = answered(edge.post(&batch(&["EV1", "EV2", "EV3"], "WB1"), None));
    assert_eq!(first.status, 200);
    let forwards = edge.forwards();
    assert_eq!(forwards.len(), 3);
    assert!(forwards.values().all(|count| *count == 1));
    let engine = edge.objects.borrow().values().next().unwrap().clone();
    let sent = engine.backend().forwarded.borrow()[0].clone();
    assert!(
        headers::get(&sent.headers, "webhook-signature").is_none(),
        "the sender's signature covered the batch"
    );
    assert!(headers::get(&sent.headers, "idempotency-signature").is_some());
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(receipt.batch.as_deref().map(str::len), Some(32));
    let logged = engine.backend().events.borrow();
    assert!(
        logged.iter().all(|(line, _)| line.batch == receipt.batch),
        "each decision names the batch its event came in"
    );
    drop(logged);
    let Handled::Batch { batch: id, .. } = edge.post(&batch(&["EV1"], "WB9"), None) else {
        panic!("a batch")
    };
    assert_ne!(receipt.batch, Some(id), "a batch is named by its bytes");
    let again = answered(edge.post(&batch(&["EV1", "EV2", "EV3", "EV4"], "WB2"), None));
    assert_eq!(again.status, 200, "three replays and one forward");
    assert_eq!(edge.forwards().values().sum::<usize>(), 4);
    assert_eq!(
        again
            .headers
            .iter()
            .filter(|(name, _)| name == "idemgate-batch")
            .count(),
        1
    );
    let body: serde_json::Value = serde_json::from_slice(&again.body).unwrap();
    let decisions: Vec<&str> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["decision"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(decisions, ["replayed", "replayed", "replayed", "forwarded"]);
}

/// A batch of one event is answered as that event always was: the
/// origin's own status and body (then its replay), not a list of one.
#[test]
fn a_batch_of_one_is_answered_with_the_origins_own_answer() {
    let edge = EngineEdge::gocardless(&[]);
    edge.origin_answers.borrow_mut().insert("EV1".into(), 202);
    let first = answered(edge.post(&batch(&["EV1"], "WB1"), None));
    assert_eq!((first.status, first.body.as_slice()), (202, &b"{}"[..]));
    assert!(headers::get(&first.headers, "idemgate-batch").is_some());
    let again = answered(edge.post(&batch(&["EV1"], "WB2"), None));
    assert_eq!((again.status, again.body.as_slice()), (202, &b"{}"[..]));
    assert_eq!(
        headers::get(&again.headers, "idempotent-replayed"),
        Some("true")
    );
    assert_eq!(edge.forwards()["EV1"], 1);
}

#[test]
fn a_batch_that_cannot_be_taken_whole_stores_nothing() {
    let edge = EngineEdge::gocardless(&[("MAX_BATCH_EVENTS", "3")]);
    let repeated = answered(edge.post(&batch(&["EV1", "EV2", "EV1"], "WB1"), None));
    assert_eq!(repeated.status, 400);
    assert!(String::from_utf8_lossy(&repeated.body).contains("events 1 and 3"));
    let over = answered(edge.post(&batch(&["EV1", "EV2", "EV3", "EV4"], "WB1"), None));
    assert_eq!(over.status, 400);
    let keyless = answered(edge.post(r#"{"events":[{"id":"EV1"},{"action":"x"}]}"#, None));
    assert_eq!(keyless.status, 400, "an event without its id");
    let forged = answered(edge.post(&batch(&["EV1"], "WB1"), Some(&"0".repeat(64))));
    assert_eq!(forged.status, 401);
    assert_eq!(*edge.calls.borrow(), 0, "no object was asked");
}

/// An event the origin refuses, for good (4xx) or for now (5xx): the
/// batch is answered with its status, never 2xx, and a re-sent batch
/// forwards only what did not reach it.
#[test]
fn a_batch_an_origin_did_not_take_whole_is_not_2xx() {
    let edge = EngineEdge::gocardless(&[]);
    edge.origin_answers.borrow_mut().insert("EV2".into(), 503);
    edge.origin_answers.borrow_mut().insert("EV3".into(), 400);
    let first = answered(edge.post(&batch(&["EV1", "EV2", "EV3", "EV4"], "WB1"), None));
    assert_eq!(first.status, 503, "the first failing event's status");
    assert_eq!(edge.forwards().values().sum::<usize>(), 4, "each was tried");
    let again = answered(edge.post(&batch(&["EV1", "EV2", "EV3", "EV4"], "WB1"), None));
    assert_eq!(again.status, 400, "the refused event still answers 400");
    let forwards = edge.forwards();
    assert_eq!(forwards["EV2"], 2, "the failed event went again");
    assert_eq!(
        (forwards["EV1"], forwards["EV3"], forwards["EV4"]),
        (1, 1, 1)
    );
}

/// A route keyed by `body-sha256` keys a batch's event by its payload: the
/// same event in another webhook (another `meta`) is the same key.
#[test]
fn body_sha256_keys_an_event_whatever_batch_it_came_in() {
    let edge = EngineEdge::gocardless(&[("KEY_SOURCES", "body-sha256")]);
    let first = answered(edge.post(&batch(&["EV1", "EV2"], "WB1"), None));
    assert_eq!(first.status, 200);
    let again = answered(edge.post(&batch(&["EV2", "EV1", "EV3"], "WB2"), None));
    assert_eq!(again.status, 200);
    let forwards = edge.forwards();
    assert_eq!(forwards.len(), 3);
    assert!(forwards.values().all(|count| *count == 1), "{forwards:?}");
}

const ADYEN_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

fn adyen_notification(psps: &[&str]) -> String {
    let items: Vec<String> = psps
        .iter()
        .map(|psp| {
            format!(
                r#"{{"NotificationRequestItem":{{"amount":{{"currency":"EUR","value":1000}},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"ref-{psp}","pspReference":"{psp}","success":"true"}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"live":"false","notificationItems":[{}]}}"#,
        items.join(",")
    )
}

/// SPEC §3's upgrade rule for Adyen (v4 notes): a notification of several
/// items the third version took whole, under its items' joined key, is
/// answered from that receipt when re-sent, not delivered item by item.
#[test]
fn an_adyen_notification_the_third_version_took_whole_is_answered_from_it() {
    let edge =
        EngineEdge::gocardless(&[("SIGNATURE_SCHEME", "adyen"), ("SIGNING_SECRET", ADYEN_KEY)]);
    let mut signed = Message {
        headers: vec![("content-type".into(), "application/json".into())],
        body: adyen_notification(&["PSP1", "PSP2"]).into_bytes(),
    };
    edge.scheme.sign(&mut signed, NOW / 1000);
    let body = String::from_utf8(signed.body.clone()).unwrap();
    // What the third version did: one delivery of the whole notification.
    let route = edge.config.route_for("/").unwrap();
    let inbound = Inbound {
        method: "POST",
        path: "/adyen",
        normalized_path: "/adyen",
        query: None,
        headers: &signed.headers,
        body: &signed.body,
        now: NOW / 1000,
    };
    let authenticated = authenticate(route, &inbound).unwrap().done().unwrap();
    let whole = admit(&authenticated).unwrap().delivery;
    assert_eq!(
        whole.identity.key,
        "PSP1:AUTHORISATION:true,PSP2:AUTHORISATION:true"
    );
    block_on(edge.call(ObjectCall::deliver(whole, 0), signed.body.clone())).unwrap();
    let forwards = |edge: &EngineEdge| -> usize {
        let objects = edge.objects.borrow();
        objects
            .values()
            .map(|engine| engine.backend().forwarded.borrow().len())
            .sum()
    };
    assert_eq!(forwards(&edge), 1);
    let Handled::Answered(reply) = edge.post(&body, None) else {
        panic!("answered from the joined receipt")
    };
    assert_eq!(
        headers::get(&reply.response.headers, "idempotent-replayed"),
        Some("true")
    );
    assert_eq!(forwards(&edge), 1, "nothing delivered again");
    // A notification of these items the third version never saw: each
    // item is delivered on its own.
    let fresh = adyen_notification(&["PSP3", "PSP4"]);
    let response = answered(edge.post(&fresh, None));
    assert_eq!(response.status, 200);
    assert_eq!(forwards(&edge), 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Batches drawn from eight events, each a subset in any order, some
    /// repeating an event: each event reaches the origin at most once,
    /// every event of an accepted batch exactly once, and a batch that
    /// repeats one is refused whole.
    #[test]
    fn no_subset_repetition_or_order_forwards_an_event_twice(
        batches in prop::collection::vec(
            prop::collection::vec(0usize..8, 1..8),
            1..6,
        ),
    ) {
        let edge = EngineEdge::gocardless(&[]);
        let mut delivered = std::collections::HashSet::new();
        for (index, picks) in batches.iter().enumerate() {
            let ids: Vec<String> = picks.iter().map(|pick| format!("EV{pick}")).collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let response = answered(edge.post(&batch(&ids, &format!("WB{index}")), None));
            let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
            match unique.len() == ids.len() {
                true => {
                    prop_assert!((200..300).contains(&response.status));
                    delivered.extend(ids.iter().map(|id| id.to_string()));
                }
                false => prop_assert_eq!(response.status, 400),
            }
            let forwards = edge.forwards();
            prop_assert!(forwards.values().all(|count| *count == 1), "{:?}", forwards);
            prop_assert_eq!(
                forwards.keys().cloned().collect::<std::collections::HashSet<_>>(),
                delivered.clone()
            );
        }
    }
}
