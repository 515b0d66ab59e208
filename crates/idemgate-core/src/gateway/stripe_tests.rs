//! Stripe's two kinds of event through the gateway's steps, each key's
//! object the real [`Engine`] over a [`MemoryBackend`] (SPEC v5 §4): a
//! thin event (`"object": "v2.core.event"`, `created` in RFC 3339, a
//! `related_object`) is verified under the same `Stripe-Signature`, keyed
//! by its `id`, forwarded once and replayed to Stripe's retries, exactly
//! as a snapshot event (`"object": "event"`) is.

use super::engine_edge::EngineEdge;
use super::*;
use crate::signature::{Message, SignatureScheme};

const NOW: u64 = 1_796_464_800_000;
const SECRET: &str = "whsec_thin_events_test_secret";

/// A thin event as Stripe's event destinations post it
/// (https://docs.stripe.com/api/v2/core/events/event-types): no snapshot
/// of the object, only a reference to it, and its time in RFC 3339 with
/// milliseconds.
const THIN_EVENT: &str = r#"{"id":"evt_test_65R9Ijk8dLk1mVvs316R9IiXnQSQKMpTNQOWJbUnYxr3Z2","object":"v2.core.event","type":"v1.billing.meter.error_report_triggered","livemode":false,"created":"2026-12-05T10:00:00.000Z","related_object":{"id":"mtr_test_61R9IiYPH1rWXkX9H41R9IiWfDQSQ0IK","type":"billing.meter","url":"/v1/billing/meters/mtr_test_61R9IiYPH1rWXkX9H41R9IiWfDQSQ0IK"},"context":null}"#;

/// A snapshot event of the same account (https://docs.stripe.com/api/events/object).
const SNAPSHOT_EVENT: &str = r#"{"id":"evt_3QsnapshotEventId0000001","object":"event","api_version":"2026-10-28.endive","created":1796464800,"data":{"object":{"id":"pi_3QsnapshotEventId0000001","object":"payment_intent","amount":2000,"status":"succeeded"}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"payment_intent.succeeded"}"#;

/// An edge with one Stripe route, whose objects are engines in memory.
fn stripe_edge() -> EngineEdge {
    EngineEdge::new(
        NOW,
        &[("SIGNATURE_SCHEME", "stripe"), ("SIGNING_SECRET", SECRET)],
    )
}

impl EngineEdge {
    /// Posts `body` as Stripe does, signed `seconds_ago` before now (a
    /// retry is signed afresh: another `t`, another `v1`).
    fn post_as_stripe(&self, body: &str, seconds_ago: u64) -> Handled<String> {
        let mut message = Message {
            headers: vec![(
                "content-type".into(),
                "application/json; charset=utf-8".into(),
            )],
            body: body.as_bytes().to_vec(),
        };
        self.scheme.sign(&mut message, NOW / 1_000 - seconds_ago);
        self.send_to_stripe_route(message)
    }

    fn send_to_stripe_route(&self, message: Message) -> Handled<String> {
        self.send(message, "https://edge.test/webhooks/stripe")
    }
}

/// The object's answer: its status and `Idemgate-Decision`.
fn decided(handled: Handled<String>) -> (u16, String) {
    match handled {
        Handled::Answered(reply) => (
            reply.response.status,
            headers::get(&reply.response.headers, "idemgate-decision")
                .unwrap_or_default()
                .to_string(),
        ),
        Handled::EdgeReplay { replay, .. } => (replay.status, "replayed".into()),
        Handled::Rejected { problem, .. } => (problem.status(), problem.name().to_string()),
        other => panic!("unexpected: {other:?}"),
    }
}

#[test]
fn a_thin_event_is_forwarded_once_and_stripes_retry_is_replayed_as_a_snapshot_events() {
    for (what, body) in [("thin", THIN_EVENT), ("snapshot", SNAPSHOT_EVENT)] {
        let edge = stripe_edge();
        assert_eq!(
            decided(edge.post_as_stripe(body, 0)),
            (201, "forwarded".into())
        );
        // Stripe's retry: the same bytes under a new Stripe-Signature.
        assert_eq!(
            decided(edge.post_as_stripe(body, 120)),
            (201, "replayed".into()),
            "{what}"
        );
        let forwarded = edge.forwarded();
        assert_eq!(forwarded.len(), 1, "{what}: the origin got it once");
        assert_eq!(forwarded[0].body, body.as_bytes(), "{what}: byte for byte");
        assert!(
            headers::get(&forwarded[0].headers, "stripe-signature").is_some(),
            "{what}: with Stripe's own signature, which the origin may check"
        );
        let id: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            headers::get(&forwarded[0].headers, "idempotency-key"),
            Some(format!("\"{}\"", id["id"].as_str().unwrap()).as_str()),
            "{what}: keyed by the event's id (json:/id)"
        );
    }
}

#[test]
fn a_thin_event_tampered_with_or_signed_by_another_secret_is_refused() {
    let edge = stripe_edge();
    let tampered = THIN_EVENT.replace("mtr_test_61R9", "mtr_test_61R8");
    let mut message = Message {
        headers: vec![("content-type".into(), "application/json".into())],
        body: THIN_EVENT.as_bytes().to_vec(),
    };
    edge.scheme.sign(&mut message, NOW / 1_000);
    message.body = tampered.into_bytes();
    assert_eq!(decided(edge.send_to_stripe_route(message)).0, 401);
    let other = SignatureScheme::configure(
        "stripe",
        &crate::signature::SchemeSettings {
            secret: Some("whsec_another_endpoint".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let mut forged = Message {
        headers: Vec::new(),
        body: THIN_EVENT.as_bytes().to_vec(),
    };
    other.sign(&mut forged, NOW / 1_000);
    assert_eq!(decided(edge.send_to_stripe_route(forged)).0, 401);
    assert!(edge.forwarded().is_empty());
}

#[test]
fn a_thin_event_and_a_snapshot_event_of_one_id_are_one_key_and_two_payloads() {
    // Stripe never sends both under one id; if a sender did, the second is
    // another payload under the key (422), never a second forward.
    let edge = stripe_edge();
    let id = "evt_test_65R9Ijk8dLk1mVvs316R9IiXnQSQKMpTNQOWJbUnYxr3Z2";
    let snapshot = SNAPSHOT_EVENT.replace("evt_3QsnapshotEventId0000001", id);
    assert_eq!(decided(edge.post_as_stripe(THIN_EVENT, 0)).0, 201);
    assert_eq!(decided(edge.post_as_stripe(&snapshot, 0)).0, 422);
    assert_eq!(edge.forwarded().len(), 1);
}
