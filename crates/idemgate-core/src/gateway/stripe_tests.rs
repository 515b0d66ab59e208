//! Stripe's two kinds of event through the gateway's steps, each key's
//! object the real [`Engine`] over a [`MemoryBackend`] (SPEC v5 §4): a
//! thin event (`"object": "v2.core.event"`, `created` in RFC 3339, a
//! `related_object`) is verified under the same `Stripe-Signature`, keyed
//! by its `id`, forwarded once and replayed to Stripe's retries, exactly
//! as a snapshot event (`"object": "event"`) is.

use std::cell::RefCell;
use std::collections::HashMap;

use futures::executor::block_on;

use super::*;
use crate::engine::{Engine, Policy};
use crate::memory_backend::MemoryBackend;
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
struct StripeEdge {
    config: Rc<Config>,
    scheme: SignatureScheme,
    request: RefCell<Message>,
    replays: RefCell<ReplayCache>,
    objects: RefCell<HashMap<String, Rc<Engine<MemoryBackend>>>>,
}

impl StripeEdge {
    fn new() -> StripeEdge {
        let vars: HashMap<String, String> = [
            ("ORIGIN_URL", "http://origin:9"),
            ("SIGNATURE_SCHEME", "stripe"),
            ("SIGNING_SECRET", SECRET),
            ("FORWARD_SECRET", "forward-secret"),
        ]
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        let config = Config::from_lookup(|name| vars.get(name).cloned()).unwrap();
        assert!(config.broken.is_empty());
        StripeEdge {
            scheme: config.route_for("/").unwrap().signature_scheme.clone(),
            config: Rc::new(config),
            request: RefCell::new(Message::default()),
            replays: RefCell::new(ReplayCache::default()),
            objects: RefCell::new(HashMap::new()),
        }
    }

    /// Posts `body` as Stripe does, signed `seconds_ago` before now (a
    /// retry is signed afresh: another `t`, another `v1`).
    fn post(&self, body: &str, seconds_ago: u64) -> Handled<String> {
        let mut message = Message {
            headers: vec![(
                "content-type".into(),
                "application/json; charset=utf-8".into(),
            )],
            body: body.as_bytes().to_vec(),
        };
        self.scheme.sign(&mut message, NOW / 1_000 - seconds_ago);
        self.send(message)
    }

    fn send(&self, message: Message) -> Handled<String> {
        *self.request.borrow_mut() = message;
        block_on(handle(self, "POST", "https://edge.test/webhooks/stripe")).unwrap()
    }

    /// What the origin got, in every object.
    fn forwarded(&self) -> Vec<crate::origin::OutboundRequest> {
        self.objects
            .borrow()
            .values()
            .flat_map(|engine| engine.backend().forwarded.borrow().clone())
            .collect()
    }
}

impl Edge for StripeEdge {
    type Response = String;
    type Error = String;

    fn now_ms(&self) -> u64 {
        NOW
    }

    fn config(&self) -> Result<Rc<Config>, Problem> {
        Ok(self.config.clone())
    }

    fn headers(&self) -> HeaderList {
        self.request.borrow().headers.clone()
    }

    async fn operator(&self, _: &str, _: Option<&str>) -> Result<String, String> {
        Err("no operator here".into())
    }

    async fn passthrough(
        &self,
        _: &str,
        _: &HeaderList,
        _: Option<&str>,
    ) -> Result<String, Problem> {
        Err(Problem::NotFound)
    }

    async fn read_body(&self, _: BodyFraming, _: u64) -> Result<Option<Vec<u8>>, String> {
        Ok(Some(self.request.borrow().body.clone()))
    }

    async fn check_public_keys(&self, _: &[PublicKeyCheck]) -> PublicKeyChecked {
        PublicKeyChecked::Rejected
    }

    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> T {
        f(&mut self.replays.borrow_mut())
    }

    fn has_index(&self) -> bool {
        true
    }

    async fn upgrade_since(&self) -> Option<u64> {
        None
    }

    async fn call(&self, call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem> {
        let engine = self
            .objects
            .borrow_mut()
            .entry(call.object.clone())
            .or_insert_with(|| {
                let backend = MemoryBackend::new(NOW);
                backend.set_secret("FORWARD_SECRET", "forward-secret");
                Rc::new(Engine::new(backend))
            })
            .clone();
        let policy = Policy::from(self.config.route(&call.route).unwrap());
        let delivery = call.into_delivery(body)?;
        let answer = engine.deliver(delivery, &policy).await;
        Ok(Reply {
            replayable_until: matches!(answer, crate::answer::Answer::Replayed(_))
                .then(|| engine.replayable_until())
                .flatten(),
            response: answer.render(),
            unknown_key: false,
            already_received: false,
        })
    }

    fn count_delivery(&self) {}
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
        let edge = StripeEdge::new();
        assert_eq!(decided(edge.post(body, 0)), (201, "forwarded".into()));
        // Stripe's retry: the same bytes under a new Stripe-Signature.
        assert_eq!(
            decided(edge.post(body, 120)),
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
    let edge = StripeEdge::new();
    let tampered = THIN_EVENT.replace("mtr_test_61R9", "mtr_test_61R8");
    let mut message = Message {
        headers: vec![("content-type".into(), "application/json".into())],
        body: THIN_EVENT.as_bytes().to_vec(),
    };
    edge.scheme.sign(&mut message, NOW / 1_000);
    message.body = tampered.into_bytes();
    assert_eq!(decided(edge.send(message)).0, 401);
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
    assert_eq!(decided(edge.send(forged)).0, 401);
    assert!(edge.forwarded().is_empty());
}

#[test]
fn a_thin_event_and_a_snapshot_event_of_one_id_are_one_key_and_two_payloads() {
    // Stripe never sends both under one id; if a sender did, the second is
    // another payload under the key (422), never a second forward.
    let edge = StripeEdge::new();
    let id = "evt_test_65R9Ijk8dLk1mVvs316R9IiXnQSQKMpTNQOWJbUnYxr3Z2";
    let snapshot = SNAPSHOT_EVENT.replace("evt_3QsnapshotEventId0000001", id);
    assert_eq!(decided(edge.post(THIN_EVENT, 0)).0, 201);
    assert_eq!(decided(edge.post(&snapshot, 0)).0, 422);
    assert_eq!(edge.forwarded().len(), 1);
}
