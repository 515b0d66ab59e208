//! The engine against the in-memory backend: every transition of SPEC §2
//! and §2b, with virtual time.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use futures::channel::oneshot;
use futures::executor::block_on;
use idemgate_origin::{ForwardedHeaders, ForwardedRequest, Verifier};

use super::*;
use crate::answer::Answer;
use crate::canonical::sha256_hex;
use crate::config::AsyncDelivery;
use crate::delivery::DeliveryRequest;
use crate::headers::get;
use crate::index::IndexUpdate;
use crate::memory_backend::{created, MemoryBackend};
use crate::origin::OutboundRequest;
use crate::receipt::{next_epoch, HttpResponse, ReceiptState};
use async_delivery::ROW_DEFERRED_MS;

pub(super) const NOW: u64 = 1_700_000_000_000;
pub(super) const SECRET: &str = "engine-test-forward-secret";

pub(super) fn policy(in_flight: InFlightPolicy) -> Policy {
    Policy {
        delivery: DeliveryMode::Sync,
        in_flight,
        wait_ms: 10_000,
        max_waiters: 256,
        origin_timeout_ms: 10_000,
        lease_ms: 17_000,
        retention_ms: 60_000,
        max_stored_response_bytes: 1024,
        retryable: RetryableStatuses::default(),
        flow: None,
        forward_secret: Some(Secret::new(SECRET.into())),
        forward_secret_name: Some("FORWARD_SECRET".into()),
        log_duplicates: false,
        ordered: false,
        masked_headers: Vec::new(),
    }
}

pub(super) fn async_policy(schedule: &[u64]) -> Policy {
    Policy {
        delivery: DeliveryMode::Async(AsyncDelivery {
            retry_schedule_ms: schedule.to_vec(),
            ack_status: 202,
            ack_body: None,
            give_up_statuses: crate::receipt::StatusSet::default(),
            dead_retention_seconds: 86_400,
        }),
        ..policy(InFlightPolicy::Wait)
    }
}

/// An async route with flow control: an accepted delivery is queued for
/// its permit, and the alarm makes every attempt (its in-flight row then
/// goes alongside the send).
pub(super) fn queued_policy(schedule: &[u64]) -> Policy {
    Policy {
        flow: Some(crate::flow::FlowLimits {
            max_in_flight: Some(100),
            rate_thousandths: None,
            shards: 1,
        }),
        ..async_policy(schedule)
    }
}

pub(super) fn delivery(body: &str) -> Delivery {
    Delivery {
        identity: Identity {
            receipt_id: String::new(),
            route: "default".into(),
            object: "object-1".into(),
            scope: "a".repeat(64),
            key: "k-1".into(),
            path: None,
            tenant_sha256: None,
        },
        fingerprint: Fingerprint::of_bytes(body.as_bytes()),
        request: DeliveryRequest {
            method: "POST".into(),
            url: "http://origin/pay?x=1".into(),
            path_and_query: "/pay?x=1".into(),
            headers: vec![],
            raw_body_sha256: sha256_hex(body.as_bytes()),
            body: body.as_bytes().to_vec(),
            source: None,
            stale: false,
            batch: None,
            order: None,
            via: None,
        },
        if_known: false,
        if_absent: false,
    }
}

pub(super) fn status(status: u16) -> ForwardResult {
    ForwardResult::Answered(HttpResponse {
        status,
        headers: vec![],
        body: vec![],
    })
}

fn epoch_of(request: &OutboundRequest) -> u64 {
    get(&request.headers, "idempotency-epoch")
        .unwrap()
        .parse()
        .unwrap()
}

pub(super) fn engine() -> Engine<MemoryBackend> {
    let backend = MemoryBackend::new(NOW);
    backend.set_secret("FORWARD_SECRET", SECRET);
    Engine::new(backend)
}

#[test]
fn first_delivery_forwards_signed_and_later_ones_replay() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    let first = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(first.decision(), "forwarded");
    let writes_after_first = engine.backend().ops.get().writes;
    assert_eq!(writes_after_first, 2, "in_flight before, outcome after");
    let replay = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(replay.decision(), "replayed");
    assert_eq!(replay.render().body, first.render().body);
    assert_eq!(
        engine.backend().ops.get().writes,
        writes_after_first,
        "a replay writes nothing"
    );
    let forwarded = engine.backend().forwarded.borrow();
    assert_eq!(forwarded.len(), 1);
    let sent = &forwarded[0];
    assert_eq!(epoch_of(sent), next_epoch(0, NOW));
    assert_eq!(get(&sent.headers, "idempotency-key"), Some("\"k-1\""));
    assert_eq!(
        get(&sent.headers, "idempotency-scope"),
        Some("a".repeat(64).as_str())
    );
    // Checked with the origin's own verifier, at the time the engine signed.
    let headers = ForwardedHeaders::from_lookup(|name| get(&sent.headers, name));
    let request = ForwardedRequest {
        method: "POST",
        path_and_query: "/pay?x=1",
        body: &sent.body,
    };
    let verified = Verifier::new(SECRET)
        .verify(&headers, &request, NOW / 1000)
        .unwrap();
    assert_eq!(
        (verified.key.as_str(), verified.epoch),
        ("k-1", next_epoch(0, NOW))
    );
    assert!(
        Verifier::new(SECRET)
            .verify(&headers, &request, NOW / 1000 + 301)
            .is_err(),
        "signed with seconds, not milliseconds"
    );
    drop(forwarded);
    assert_eq!(engine.receipt().unwrap().unwrap().duplicates, 1);
    assert_eq!(
        engine.backend().logged(),
        ["forwarded"],
        "the replay is counted, not logged"
    );
    assert_eq!(engine.backend().counted(), ["forwarded", "replayed"]);
}

#[test]
fn duplicates_are_logged_on_request() {
    let engine = engine();
    let policy = Policy {
        log_duplicates: true,
        ..policy(InFlightPolicy::Wait)
    };
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(engine.backend().logged(), ["forwarded", "replayed"]);
    let events = engine.backend().events.borrow();
    assert_eq!(events[1].0.receipt_id, events[0].0.receipt_id);
    assert_eq!(events[0].0.route.as_deref(), Some("default"));
}

#[test]
fn the_lease_is_lease_ms_counted_from_the_send() {
    let engine = engine();
    block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    let at_send = engine.backend().stored_at_send.borrow()[0].clone().unwrap();
    assert_eq!(
        at_send.state,
        ReceiptState::InFlight {
            lease_expires_at: NOW + 17_000
        },
        "LEASE_MS, not ORIGIN_TIMEOUT_MS + 5000"
    );
    assert_eq!(
        engine.backend().alarm.get(),
        Some(NOW + 60_000 + 17_000),
        "set with the send, past the retention counted from the lease's end"
    );
}

#[test]
fn a_failed_write_forwards_nothing() {
    let engine = engine();
    engine.backend().fail_writes.set(true);
    let answer = block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    assert_eq!(answer.render().status, 503);
    assert_eq!(answer.render().headers[0].1, "application/problem+json");
    assert!(engine.backend().forwarded.borrow().is_empty());
}

#[test]
fn failures_are_not_cached_and_each_retry_has_a_higher_epoch() {
    let engine = engine();
    let backend = engine.backend();
    backend.answer_with(status(500));
    backend.answer_with(ForwardResult::TimedOut);
    backend.answer_with(ForwardResult::Unreachable("refused".into()));
    backend.answer_with(created("paid"));
    let policy = policy(InFlightPolicy::Wait);
    let statuses: Vec<u16> = (0..5)
        .map(|_| {
            block_on(engine.deliver(delivery("a"), &policy))
                .render()
                .status
        })
        .collect();
    assert_eq!(statuses, [500, 504, 502, 201, 201]);
    let epochs: Vec<u64> = backend.forwarded.borrow().iter().map(epoch_of).collect();
    assert_eq!(epochs.len(), 4);
    assert!(
        epochs.windows(2).all(|pair| pair[0] < pair[1]),
        "{epochs:?}"
    );
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(receipt.attempts.len(), 4);
    assert_eq!(receipt.attempts[1].error.as_deref(), Some("timeout"));
}

#[test]
fn retryable_statuses_are_configurable() {
    let engine = engine();
    engine.backend().answer_with(status(404));
    let policy = Policy {
        retryable: RetryableStatuses::parse("404,500-599").unwrap(),
        flow: None,
        ..policy(InFlightPolicy::Wait)
    };
    let first = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!((first.decision(), first.render().status), ("failed", 404));
    let second = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(second.decision(), "forwarded", "404 was not replayed");
    assert_eq!(engine.backend().forwarded.borrow().len(), 2);
}

#[test]
fn a_different_payload_is_rejected_and_not_forwarded() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("a"), &policy));
    let answer = block_on(engine.deliver(delivery("b"), &policy));
    assert_eq!(answer.render().status, 422);
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    assert_eq!(engine.backend().logged(), ["forwarded", "mismatch"]);
}

/// A receipt left in flight by an earlier life of the object.
fn engine_with_receipt_in_flight() -> Engine<MemoryBackend> {
    let backend = MemoryBackend::new(NOW);
    let mut receipt = Receipt::new(
        delivery("a").identity,
        Fingerprint::of_bytes(b"a"),
        DeliveryKind::Sync,
        ReceiptState::Queued {
            next_attempt_at: NOW,
        },
        NOW,
        60_000,
    );
    receipt.begin_forward(next_epoch(0, NOW), NOW, 15_000, 60_000);
    *backend.stored.borrow_mut() = Some(receipt);
    Engine::new(backend)
}

#[test]
fn in_flight_policies() {
    let conflict = engine_with_receipt_in_flight();
    let answer =
        block_on(conflict.deliver(delivery("a"), &policy(InFlightPolicy::Conflict))).render();
    assert_eq!(answer.status, 409);
    assert_eq!(get(&answer.headers, "retry-after"), Some("15"));

    let ack = engine_with_receipt_in_flight();
    let answer = block_on(ack.deliver(delivery("a"), &policy(InFlightPolicy::Ack)));
    assert_eq!(answer.render().status, 202);
    assert!(ack.backend().forwarded.borrow().is_empty());
}

#[test]
fn a_waiter_gives_up_after_wait_ms_when_the_lease_outlasts_it() {
    // A broken lease or wait comparison must fail, not hang.
    crate::within(10, || {
        let engine = engine_with_receipt_in_flight();
        let mut policy = policy(InFlightPolicy::Wait);
        policy.wait_ms = 2_000;
        let answer = block_on(engine.deliver(delivery("a"), &policy));
        assert_eq!(answer.decision(), "conflict");
        assert_eq!(engine.backend().now_ms(), NOW + 2_000);
        assert!(engine.backend().forwarded.borrow().is_empty());
    });
}

#[test]
fn a_waiter_that_outlives_the_lease_is_told_to_retry_and_holds_no_body() {
    // A broken lease or wait comparison must fail, not hang.
    crate::within(10, || {
        let engine = engine_with_receipt_in_flight();
        let mut policy = policy(InFlightPolicy::Wait);
        policy.wait_ms = 20_000;
        let answer = block_on(engine.deliver(delivery("a"), &policy));
        assert_eq!(
            engine.backend().now_ms(),
            NOW + 15_000,
            "woke at the lease's end"
        );
        assert_eq!(
            (answer.decision(), answer.render().status),
            ("conflict", 409)
        );
        assert_eq!(get(&answer.render().headers, "retry-after"), Some("1"));
        assert!(
            engine.backend().forwarded.borrow().is_empty(),
            "it dropped its body"
        );
        // The caller's retry, with its body, takes the key over.
        let retry = block_on(engine.deliver(delivery("a"), &policy));
        assert_eq!(retry.decision(), "forwarded");
        assert!(epoch_of(&engine.backend().forwarded.borrow()[0]) > next_epoch(0, NOW));
        assert!(engine.backend().logged().contains(&"taken_over"));
    });
}

/// Polls futures that wait on each other with no executor: each poll is
/// independent, and the tests move the clock and open the gates.
pub(super) struct Tasks<'a>(
    Vec<Option<Pin<Box<dyn Future<Output = Answer> + 'a>>>>,
    Vec<Option<Answer>>,
);

impl<'a> Tasks<'a> {
    pub(super) fn new() -> Tasks<'a> {
        Tasks(Vec::new(), Vec::new())
    }

    pub(super) fn spawn(&mut self, future: impl Future<Output = Answer> + 'a) -> usize {
        self.0.push(Some(Box::pin(future)));
        self.1.push(None);
        self.run();
        self.0.len() - 1
    }

    pub(super) fn run(&mut self) {
        let mut context = Context::from_waker(Waker::noop());
        for _ in 0..8 {
            for (task, answer) in self.0.iter_mut().zip(self.1.iter_mut()) {
                if let Some(future) = task {
                    if let Poll::Ready(done) = future.as_mut().poll(&mut context) {
                        *answer = Some(done);
                        *task = None;
                    }
                }
            }
        }
    }

    pub(super) fn answer(&self, task: usize) -> Option<&Answer> {
        self.1[task].as_ref()
    }
}

pub(super) fn gated(backend: &MemoryBackend) -> oneshot::Sender<ForwardResult> {
    let (sender, receiver) = oneshot::channel();
    backend.gates.borrow_mut().push_back(receiver);
    sender
}

fn body_of(result: &ForwardResult) -> Vec<u8> {
    match result {
        ForwardResult::Answered(response) => response.body.clone(),
        _ => Vec::new(),
    }
}

#[test]
fn the_late_answer_of_a_taken_over_forward_wakes_no_waiter() {
    // A broken lease or wait comparison must fail, not hang.
    crate::within(10, || {
        let engine = engine();
        let backend = engine.backend();
        backend.manual_clock.set(true);
        let policy = Policy {
            wait_ms: 60_000,
            ..policy(InFlightPolicy::Wait)
        };
        let gate_a = gated(backend);
        let gate_b = gated(backend);
        let mut tasks = Tasks::new();
        let a = tasks.spawn(engine.deliver(delivery("a"), &policy));
        backend.now.set(NOW + 17_000); // A's lease ends; A is still running
        let b = tasks.spawn(engine.deliver(delivery("a"), &policy));
        backend.now.set(NOW + 17_001);
        let waiter = tasks.spawn(engine.deliver(delivery("a"), &policy));
        assert!(tasks.answer(waiter).is_none(), "waits for B");
        let late = created("answer of A");
        gate_a.send(late.clone()).unwrap();
        tasks.run();
        assert_eq!(
            tasks.answer(a).unwrap().render().body,
            body_of(&late),
            "A's caller gets A's answer"
        );
        assert!(
            tasks.answer(waiter).is_none(),
            "A no longer owns the key: the waiter is B's"
        );
        let current = created("answer of B");
        gate_b.send(current.clone()).unwrap();
        tasks.run();
        assert_eq!(tasks.answer(b).unwrap().decision(), "forwarded");
        let waited = tasks.answer(waiter).unwrap();
        assert_eq!(waited.decision(), "waited");
        assert_eq!(waited.render().body, body_of(&current));
        let replay = block_on(engine.deliver(delivery("a"), &policy));
        assert_eq!(
            replay.render().body,
            body_of(&current),
            "the late answer did not overwrite B's"
        );
    });
}

#[test]
fn waiters_share_the_outcome_but_never_the_cookie() {
    // A broken lease or wait comparison must fail, not hang.
    crate::within(10, || {
        let engine = engine();
        let backend = engine.backend();
        backend.manual_clock.set(true);
        let policy = policy(InFlightPolicy::Wait);
        let gate = gated(backend);
        let mut tasks = Tasks::new();
        let first = tasks.spawn(engine.deliver(delivery("a"), &policy));
        let waiter = tasks.spawn(engine.deliver(delivery("a"), &policy));
        gate.send(ForwardResult::Answered(HttpResponse {
            status: 201,
            headers: vec![
                ("set-cookie".into(), "session=first".into()),
                ("x-a".into(), "1".into()),
            ],
            body: b"paid".to_vec(),
        }))
        .unwrap();
        tasks.run();
        let first = tasks.answer(first).unwrap().render();
        assert_eq!(get(&first.headers, "set-cookie"), Some("session=first"));
        let waited = tasks.answer(waiter).unwrap().render();
        assert_eq!(get(&waited.headers, "set-cookie"), None);
        assert_eq!(get(&waited.headers, "x-a"), Some("1"));
        let replay = block_on(engine.deliver(delivery("a"), &policy)).render();
        assert_eq!(get(&replay.headers, "set-cookie"), None);
        assert_eq!(replay.body, b"paid");
    });
}

#[test]
fn at_most_max_waiters_wait_and_more_conflict_at_once() {
    // A broken lease or wait comparison must fail, not hang.
    crate::within(10, || {
        let engine = engine();
        let backend = engine.backend();
        backend.manual_clock.set(true);
        let policy = Policy {
            max_waiters: 2,
            ..policy(InFlightPolicy::Wait)
        };
        let _gate = gated(backend);
        let mut tasks = Tasks::new();
        tasks.spawn(engine.deliver(delivery("a"), &policy));
        let waiters: Vec<usize> = (0..2)
            .map(|_| tasks.spawn(engine.deliver(delivery("a"), &policy)))
            .collect();
        let third = tasks.spawn(engine.deliver(delivery("a"), &policy));
        assert!(waiters.iter().all(|waiter| tasks.answer(*waiter).is_none()));
        let refused = tasks.answer(third).expect("answered at once");
        assert_eq!(
            (refused.decision(), refused.render().status),
            ("conflict", 409)
        );
    });
}

#[test]
fn the_alarm_deletes_only_a_receipt_that_is_due() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("a"), &policy));
    let backend = engine.backend();
    assert!(backend.alarm.get().is_some());

    block_on(engine.on_alarm()).unwrap();
    assert!(
        backend.stored.borrow().is_some(),
        "an early alarm reschedules"
    );
    assert_eq!(backend.alarm.get(), Some(NOW + 60_000));

    backend.now.set(NOW + 60_000);
    block_on(engine.on_alarm()).unwrap();
    assert!(backend.stored.borrow().is_none());
    assert_eq!(backend.logged().last(), Some(&"expired"));
    block_on(engine.on_alarm()).unwrap();
    let again = block_on(engine.deliver(delivery("b"), &policy));
    assert_eq!(
        again.decision(),
        "forwarded",
        "after retention the key is new"
    );
    let epochs: Vec<u64> = backend.forwarded.borrow().iter().map(epoch_of).collect();
    assert!(
        epochs[1] > epochs[0],
        "epochs rise across lives: {epochs:?}"
    );
}

#[test]
fn an_alarm_that_cannot_write_fails_so_the_runtime_retries_it() {
    let engine = engine();
    block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    engine.backend().now.set(NOW + 120_000);
    engine.backend().fail_writes.set(true);
    assert!(block_on(engine.on_alarm()).is_err());
    engine.backend().fail_writes.set(false);
    assert!(block_on(engine.on_alarm()).is_ok());
    assert!(engine.backend().stored.borrow().is_none());
}

#[test]
fn a_receipt_that_no_longer_parses_still_expires_and_purges() {
    let engine = engine();
    block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    let fresh = Engine::new(MemoryBackend::new(NOW));
    *fresh.backend().stored.borrow_mut() = engine.backend().stored.borrow().clone();
    fresh.backend().corrupt.set(true);
    assert!(
        block_on(fresh.on_alarm()).is_ok(),
        "not due yet: rescheduled"
    );
    assert!(fresh.backend().stored.borrow().is_some());
    fresh.backend().now.set(NOW + 60_000);
    block_on(fresh.on_alarm()).unwrap();
    assert!(
        fresh.backend().stored.borrow().is_none(),
        "deleted without parsing"
    );

    let purged = Engine::new(MemoryBackend::new(NOW));
    *purged.backend().stored.borrow_mut() = engine.backend().stored.borrow().clone();
    purged.backend().corrupt.set(true);
    assert_eq!(
        block_on(purged.purge("object-1", false)),
        Ok(true),
        "a settled receipt that no longer parses needs no force"
    );
    assert!(matches!(
        purged.backend().index.borrow().as_slice(),
        [IndexUpdate::Remove { object, .. }] if object == "object-1"
    ));
}

#[test]
fn purge_makes_the_key_new_with_higher_epochs() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("a"), &policy));
    engine.backend().now.set(NOW + 1);
    assert_eq!(block_on(engine.purge("object-1", false)), Ok(true));
    assert_eq!(block_on(engine.purge("object-1", false)), Ok(false));
    assert_eq!(
        block_on(engine.deliver(delivery("a"), &policy)).decision(),
        "forwarded"
    );
    let epochs: Vec<u64> = engine
        .backend()
        .forwarded
        .borrow()
        .iter()
        .map(epoch_of)
        .collect();
    assert!(epochs[1] > epochs[0], "{epochs:?}");
    assert_eq!(
        engine.backend().logged(),
        ["forwarded", "purged", "forwarded"]
    );
}

#[test]
fn a_failed_sync_delivery_is_indexed_until_it_completes() {
    let engine = engine();
    engine.backend().answer_with(status(503));
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.deliver(delivery("a"), &policy));
    let index = engine.backend().index.borrow();
    assert_eq!(index.len(), 2);
    assert!(
        matches!(&index[0], IndexUpdate::Upsert(row) if row.state == "failed" && row.identity.key == "k-1")
    );
    assert!(matches!(
        &index[1],
        IndexUpdate::Remove { object, version, .. }
            if object == "object-1" && *version > index[0].version()
    ));
}

#[test]
fn an_async_delivery_is_acknowledged_in_flight_and_forwarded_after_its_answer() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000, 60_000]);
    let ack = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(ack.decision(), "queued");
    let rendered = ack.render();
    assert_eq!(rendered.status, 202);
    let receipt_id = get(&rendered.headers, "idemgate-receipt-id")
        .unwrap()
        .to_string();
    assert!(
        backend.forwarded.borrow().is_empty(),
        "acknowledged, not yet forwarded"
    );
    let accepted = backend.stored.borrow().clone().unwrap();
    assert_eq!(accepted.state_name(), "in_flight", "accepted in flight");
    assert_eq!(
        backend.request.borrow().as_ref().unwrap().body,
        b"a",
        "stored whole"
    );
    let lease_end = NOW + 17_000;
    assert_eq!(
        backend.alarm.get(),
        Some(lease_end),
        "the alarm waits at the lease's end, for a crash mid-forward"
    );
    assert!(
        backend.index_rows().is_empty(),
        "its row follows the acknowledgement"
    );
    assert_eq!(
        (backend.ops.get().writes, backend.ops.get().alarm_writes),
        (1, 1),
        "one row write and one alarm accept it"
    );
    assert!(engine.has_first_attempt());

    let duplicate = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(duplicate.decision(), "duplicate");
    assert_eq!(
        get(&duplicate.render().headers, "idemgate-receipt-id"),
        Some(receipt_id.as_str())
    );
    assert_eq!(
        block_on(engine.deliver(delivery("b"), &policy))
            .render()
            .status,
        422
    );

    let reads = backend.ops.get().reads;
    assert!(
        block_on(engine.after_answer()),
        "the accepting call forwards"
    );
    assert!(!engine.has_first_attempt());
    assert_eq!(backend.ops.get().reads, reads, "from memory: no read");
    let forwarded = backend.forwarded.borrow().clone();
    assert_eq!(forwarded.len(), 1);
    assert_eq!(
        epoch_of(&forwarded[0]),
        accepted.epoch,
        "at the accepted epoch"
    );
    let receipt = backend.stored.borrow().clone().unwrap();
    assert_eq!(receipt.state_name(), "completed");
    assert_eq!(receipt.identity.receipt_id, receipt_id);
    assert!(
        backend.request.borrow().is_none(),
        "the stored request goes once delivered"
    );
    assert_eq!(backend.alarm.get(), Some(receipt.expires_at));
    assert_eq!(
        (backend.ops.get().writes, backend.ops.get().alarm_writes),
        (2, 2),
        "the outcome, and the alarm moved to retention"
    );
    let index = written_states(backend);
    assert!(
        index.is_empty(),
        "delivered within {ROW_DEFERRED_MS} ms: no index write at all ({index:?})"
    );
    assert!(backend.index_rows().is_empty());
    let duplicate = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(duplicate.decision(), "duplicate", "never forwarded again");
    assert_eq!(backend.forwarded.borrow().len(), 1);
    assert!(!block_on(engine.after_answer()), "nothing more to send");
    assert_eq!(backend.logged(), ["queued", "mismatch", "forwarded"]);
}

#[test]
fn a_limited_route_queues_an_accepted_delivery_for_its_permit() {
    let engine = engine();
    let backend = engine.backend();
    let policy = Policy {
        flow: Some(crate::flow::FlowLimits {
            max_in_flight: Some(1),
            rate_thousandths: None,
            shards: 1,
        }),
        ..async_policy(&[10_000])
    };
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "queued"
    );
    assert_eq!(backend.alarm.get(), Some(NOW), "due at once");
    assert!(!engine.has_first_attempt(), "the alarm asks for the permit");
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(backend.forwarded.borrow().len(), 1);
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "completed"
    );
}

#[test]
fn a_first_attempt_whose_lease_has_run_short_is_queued_for_the_alarm() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    // The acknowledgement took most of the timeout (10 s, lease 17 s):
    // sent now, the forward could outlast the lease and meet a takeover.
    backend.now.set(NOW + 6_000);
    assert!(!block_on(engine.after_answer()));
    assert!(backend.forwarded.borrow().is_empty());
    let queued = backend.stored.borrow().clone().unwrap();
    assert_eq!(queued.state_name(), "queued", "not sent, so not in flight");
    assert!(
        queued.attempts.is_empty(),
        "the unsent attempt is forgotten"
    );
    assert_eq!(backend.alarm.get(), Some(NOW + 6_000), "due at once");
    assert_eq!(backend.index_rows(), [("object-1".into(), "queued".into())]);
    block_on(engine.on_alarm()).unwrap();
    let forwarded = backend.forwarded.borrow();
    assert_eq!(forwarded.len(), 1);
    assert!(epoch_of(&forwarded[0]) > queued.epoch, "a new epoch");
    assert_eq!(*backend.timeouts.borrow(), [10_000], "the whole timeout");
    assert_eq!(backend.logged(), ["queued", "forwarded"], "no takeover");

    // A shorter wait shortens the forward's timeout by as much.
    let engine = self::engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &policy));
    backend.now.set(NOW + 1_000);
    assert!(block_on(engine.after_answer()));
    assert_eq!(
        *backend.timeouts.borrow(),
        [9_000],
        "it ends, with the route's 7 s margin, before the lease does"
    );
}

#[test]
fn a_delivery_refused_after_it_was_stored_is_still_sent_at_once() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    backend.fail_alarms.set(true);
    let refused = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(refused.render().status, 503, "not acknowledged");
    backend.fail_alarms.set(false);
    assert!(
        block_on(engine.after_answer()),
        "durable: sent, not left for the lease's end"
    );
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    let retried = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(
        (retried.decision(), retried.render().status),
        ("duplicate", 202)
    );
    assert_eq!(backend.forwarded.borrow().len(), 1);
}

#[test]
fn a_route_whose_timeout_outlasts_an_idle_object_queues_for_the_alarm() {
    let engine = engine();
    let backend = engine.backend();
    let policy = Policy {
        origin_timeout_ms: 120_000,
        lease_ms: 125_000,
        ..async_policy(&[10_000])
    };
    block_on(engine.deliver(delivery("a"), &policy));
    assert!(!engine.has_first_attempt());
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "queued"
    );
    assert_eq!(backend.alarm.get(), Some(NOW));
}

#[test]
fn a_first_attempt_finds_its_receipt_gone_or_moved_on_and_sends_nothing() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(block_on(engine.purge("object-1", true)), Ok(true));
    assert!(!block_on(engine.after_answer()), "purged with force first");
    assert!(backend.forwarded.borrow().is_empty());

    // Purged, then a new life the first attempt does not know (its route
    // made sync meanwhile): the first attempt is not that life's.
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(block_on(engine.purge("object-1", true)), Ok(true));
    backend.now.set(NOW + 1);
    let sync = self::policy(InFlightPolicy::Wait);
    let gate = gated(backend);
    let mut tasks = Tasks::new();
    tasks.spawn(engine.deliver(delivery("a"), &sync));
    assert_eq!(backend.forwarded.borrow().len(), 1, "the sync forward");
    assert!(!block_on(engine.after_answer()), "moved on: nothing sent");
    assert_eq!(backend.forwarded.borrow().len(), 1);
    gate.send(created("ok")).unwrap();
    tasks.run();
    drop(tasks);
    backend.forwarded.borrow_mut().clear();

    // A restart loses the first attempt: the alarm at the lease's end
    // takes the delivery over, under a higher epoch.
    assert_eq!(block_on(engine.purge("object-1", true)), Ok(true));
    block_on(engine.deliver(delivery("a"), &policy));
    let accepted = backend.stored.borrow().clone().unwrap();
    let restarted = Engine::new(MemoryBackend::new(NOW));
    *restarted.backend().stored.borrow_mut() = backend.stored.borrow().clone();
    *restarted.backend().request.borrow_mut() = backend.request.borrow().clone();
    assert!(!block_on(restarted.after_answer()));
    block_on(restarted.on_alarm()).unwrap();
    assert!(
        restarted.backend().forwarded.borrow().is_empty(),
        "the lease is live"
    );
    // Accepted a millisecond after the start: its lease ends 17 s later.
    restarted.backend().now.set(NOW + 1 + 17_000);
    block_on(restarted.on_alarm()).unwrap();
    let forwarded = restarted.backend().forwarded.borrow();
    assert_eq!(forwarded.len(), 1);
    assert!(epoch_of(&forwarded[0]) > accepted.epoch);
    assert_eq!(restarted.backend().logged(), ["taken_over"]);
}

#[test]
fn async_failures_retry_on_schedule_die_and_are_redriven() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000, 60_000]);
    for _ in 0..3 {
        backend.answer_with(status(503));
    }
    block_on(engine.deliver(delivery("a"), &policy));
    let alarm = || block_on(engine.on_alarm()).unwrap();
    block_on(engine.after_answer());
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "failed"
    );
    assert_eq!(backend.alarm.get(), Some(NOW + 10_000));
    alarm(); // early: nothing happens
    assert_eq!(backend.forwarded.borrow().len(), 1);
    backend.now.set(NOW + 10_000);
    alarm();
    assert_eq!(backend.alarm.get(), Some(NOW + 70_000));
    backend.now.set(NOW + 70_000);
    alarm();
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "dead"
    );
    assert_eq!(backend.forwarded.borrow().len(), 3);
    assert!(
        backend.request.borrow().is_some(),
        "a dead letter keeps its request"
    );

    let redriven = block_on(engine.redrive()).unwrap();
    assert_eq!(redriven.state_name(), "queued");
    alarm();
    let receipt = backend.stored.borrow().clone().unwrap();
    assert_eq!(receipt.state_name(), "completed");
    let epochs: Vec<u64> = backend.forwarded.borrow().iter().map(epoch_of).collect();
    assert!(
        epochs.windows(2).all(|pair| pair[0] < pair[1]),
        "{epochs:?}"
    );
    assert_eq!(
        backend.logged(),
        [
            "queued",
            "failed",
            "failed",
            "dead",
            // Kept a day (the policy's bound): announced as it dies.
            "dead_expiring",
            "redriven",
            "forwarded"
        ]
    );
    assert_eq!(
        block_on(engine.redrive()).unwrap_err().name(),
        "not-redrivable"
    );
}

#[test]
fn a_crash_mid_forward_is_taken_over_by_the_alarm_after_the_lease() {
    // A broken lease or wait comparison must fail, not hang.
    crate::within(10, || {
        let engine = engine();
        let policy = async_policy(&[10_000]);
        block_on(engine.deliver(delivery("a"), &policy));
        let gate = gated(engine.backend());
        let mut tasks = Tasks::new();
        tasks.spawn(async {
            engine.after_answer().await;
            Answer::Acknowledged
        });
        assert_eq!(engine.backend().forwarded.borrow().len(), 1);
        drop(tasks); // the object crashes with the forward outstanding
        drop(gate);
        let lease_end = NOW + 17_000;
        // The runtime retries the alarm whose handler died (or the sweep
        // wakes the object): it finds the lease and waits it out.
        let restarted = Engine::new(MemoryBackend::new(NOW));
        let backend = restarted.backend();
        *backend.stored.borrow_mut() = engine.backend().stored.borrow().clone();
        *backend.request.borrow_mut() = engine.backend().request.borrow().clone();
        block_on(restarted.on_alarm()).unwrap();
        assert!(
            backend.forwarded.borrow().is_empty(),
            "not before the lease ends"
        );
        assert_eq!(
            backend.alarm.get(),
            Some(lease_end),
            "the alarm waits for the lease"
        );
        backend.now.set(lease_end);
        block_on(restarted.on_alarm()).unwrap();
        let forwarded = backend.forwarded.borrow();
        assert_eq!(forwarded.len(), 1);
        assert!(epoch_of(&forwarded[0]) > epoch_of(&engine.backend().forwarded.borrow()[0]));
        assert_eq!(
            backend.stored.borrow().as_ref().unwrap().state_name(),
            "completed"
        );
        assert_eq!(backend.logged(), ["taken_over"]);
    });
}

#[test]
fn a_sync_receipt_is_not_redrivable() {
    let engine = engine();
    engine.backend().answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    let problem = block_on(engine.redrive()).unwrap_err();
    assert_eq!((problem.status(), problem.name()), (409, "not-redrivable"));
    assert!(
        problem.detail().contains("failed (sync)"),
        "{}",
        problem.detail()
    );
    assert_eq!(
        block_on(Engine::new(MemoryBackend::new(NOW)).redrive()).unwrap_err(),
        Problem::NotFound
    );
}

#[test]
fn duplicates_an_isolate_absorbed_are_added_to_the_receipt() {
    let engine = engine();
    engine.absorb(5);
    assert_eq!(
        engine.receipt().unwrap(),
        None,
        "no receipt, nothing to count"
    );
    block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    engine.absorb(3);
    engine.absorb(2);
    assert_eq!(engine.receipt().unwrap().unwrap().duplicates, 5);
}

#[test]
fn only_a_completed_receipt_with_its_body_is_replayable_from_an_isolate() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    assert_eq!(engine.replayable_until(), None);
    block_on(engine.deliver(delivery("a"), &policy));
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(engine.replayable_until(), Some(receipt.expires_at));

    let failed = self::engine();
    failed.backend().answer_with(status(503));
    block_on(failed.deliver(delivery("a"), &policy));
    assert_eq!(
        failed.replayable_until(),
        None,
        "a failure is never replayed"
    );

    let large = self::engine();
    large.backend().answer_with(created(&"x".repeat(2_000)));
    block_on(large.deliver(delivery("a"), &policy));
    assert_eq!(
        large.replayable_until(),
        None,
        "a body over MAX_STORED_RESPONSE_BYTES is not kept, so only the object replays it"
    );
}

#[test]
fn a_routes_retention_is_counted_in_milliseconds() {
    let config = crate::config::Config::from_lookup(|name| match name {
        "ORIGIN_URL" => Some("http://o".into()),
        "RETENTION_SECONDS" => Some("120".into()),
        _ => None,
    })
    .unwrap();
    let policy = Policy::from(&config.routes[0]);
    assert_eq!(policy.retention_ms, 120_000);
    assert_eq!(policy.lease_ms, 15_000);
}

#[test]
fn async_duplicates_are_counted_and_logged_with_what_is_known() {
    let engine = engine();
    let backend = engine.backend();
    let policy = Policy {
        log_duplicates: true,
        ..async_policy(&[10_000])
    };
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.deliver(delivery("b"), &policy));
    assert_eq!(
        engine.receipt().unwrap().unwrap().duplicates,
        2,
        "a different payload is a mismatch, not a duplicate"
    );
    block_on(engine.after_answer());
    block_on(engine.deliver(delivery("a"), &policy));
    let events = backend.events.borrow();
    let of = |decision: &str| -> Vec<&DecisionLog> {
        events
            .iter()
            .map(|(event, _)| event)
            .filter(|event| event.decision == decision)
            .collect()
    };
    let duplicates = of("duplicate");
    assert_eq!(duplicates.len(), 3);
    let forwarded = of("forwarded");
    assert_eq!(
        duplicates[0].epoch, forwarded[0].epoch,
        "accepted in flight: the epoch of its first attempt"
    );
    assert_eq!(duplicates[2].epoch, forwarded[0].epoch);
    assert!(
        forwarded[0].origin_ms.is_some(),
        "the attempt's origin time"
    );
}

#[test]
fn a_duplicate_re_arms_the_alarm_only_when_nothing_says_it_is_set() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    let alarm_writes = backend.ops.get().alarm_writes;
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(
        backend.ops.get().alarm_writes,
        alarm_writes,
        "known: no write"
    );

    // A restart forgets the alarm (say its write failed before the crash).
    let restarted = Engine::new(MemoryBackend::new(NOW));
    *restarted.backend().stored.borrow_mut() = backend.stored.borrow().clone();
    *restarted.backend().request.borrow_mut() = backend.request.borrow().clone();
    block_on(restarted.deliver(delivery("a"), &policy));
    assert_eq!(
        restarted.backend().alarm.get(),
        Some(NOW + 17_000),
        "re-armed, at the lease's end"
    );
    assert_eq!(restarted.backend().ops.get().alarm_writes, 1);
    block_on(restarted.deliver(delivery("a"), &policy));
    assert_eq!(restarted.backend().ops.get().alarm_writes, 1, "once");

    // A completed one needs no alarm for delivery.
    restarted.backend().now.set(NOW + 17_000);
    block_on(restarted.on_alarm()).unwrap();
    let settled = Engine::new(MemoryBackend::new(NOW));
    *settled.backend().stored.borrow_mut() = restarted.backend().stored.borrow().clone();
    block_on(settled.deliver(delivery("a"), &policy));
    assert_eq!(settled.backend().ops.get().alarm_writes, 0);
}

#[test]
fn an_async_forward_is_signed_with_seconds() {
    let engine = engine();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.after_answer());
    let forwarded = engine.backend().forwarded.borrow();
    let sent = &forwarded[0];
    let headers = ForwardedHeaders::from_lookup(|name| get(&sent.headers, name));
    let request = ForwardedRequest {
        method: "POST",
        path_and_query: "/pay?x=1",
        body: &sent.body,
    };
    let verifier = Verifier::new(SECRET);
    assert!(verifier.verify(&headers, &request, NOW / 1000).is_ok());
    assert!(verifier
        .verify(&headers, &request, NOW / 1000 + 301)
        .is_err());
}

#[test]
fn a_sync_receipt_whose_alarm_failed_with_the_send_gets_one_with_its_outcome() {
    let engine = engine();
    let backend = engine.backend();
    backend.fail_alarms.set(true);
    let policy = policy(InFlightPolicy::Wait);
    let gate = gated(backend);
    let mut tasks = Tasks::new();
    tasks.spawn(engine.deliver(delivery("a"), &policy));
    assert_eq!(
        backend.alarm.get(),
        None,
        "the alarm write with the send failed"
    );
    backend.fail_alarms.set(false);
    gate.send(created("ok")).unwrap();
    tasks.run();
    drop(tasks);
    let receipt = backend.stored.borrow().clone().unwrap();
    assert_eq!(receipt.state_name(), "completed");
    assert_eq!(
        backend.alarm.get(),
        Some(receipt.expires_at),
        "otherwise the receipt would never be freed"
    );
    let writes = backend.ops.get().alarm_writes;
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(backend.ops.get().alarm_writes, writes, "a replay sets none");
}

#[test]
fn a_key_a_sync_route_left_failed_is_accepted_and_delivered_once_the_route_is_async() {
    let engine = engine();
    let backend = engine.backend();
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
    let failed_epoch = backend.stored.borrow().as_ref().unwrap().epoch;
    let policy = async_policy(&[10_000]);
    let answer = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(answer.decision(), "queued", "not a duplicate of a failure");
    assert_eq!(backend.alarm.get(), Some(NOW + 17_000));
    block_on(engine.after_answer());
    let receipt = backend.stored.borrow().clone().unwrap();
    assert_eq!(receipt.state_name(), "completed");
    assert!(receipt.epoch > failed_epoch);
    assert_eq!(backend.forwarded.borrow().len(), 2);
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "gone".into())],
        "the failed row goes"
    );
}

#[test]
fn an_async_duplicate_whose_alarm_cannot_be_set_is_not_acknowledged() {
    let engine = engine();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    let restarted = Engine::new(MemoryBackend::new(NOW));
    *restarted.backend().stored.borrow_mut() = engine.backend().stored.borrow().clone();
    restarted.backend().fail_alarms.set(true);
    let answer = block_on(restarted.deliver(delivery("a"), &policy)).render();
    assert_eq!(answer.status, 503, "the sender must retry");
    restarted.backend().fail_alarms.set(false);
    let answer = block_on(restarted.deliver(delivery("a"), &policy)).render();
    assert_eq!(answer.status, 202);
    assert_eq!(restarted.backend().alarm.get(), Some(NOW + 17_000));
}

#[test]
fn an_attempt_that_cannot_set_its_next_alarm_fails_so_the_runtime_runs_it_again() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000, 10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    // The first attempt's next alarm cannot be set: the one at its
    // lease's end stays, and makes the next attempt.
    backend.answer_with(status(503));
    backend.fail_alarms.set(true);
    block_on(engine.after_answer());
    assert_eq!(backend.alarm.get(), Some(NOW + 17_000));
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "failed");
    // An attempt the alarm made fails its handler instead.
    backend.now.set(NOW + 17_000);
    backend.answer_with(status(503));
    let attempt = block_on(engine.on_alarm());
    assert!(attempt.is_err(), "no alarm would ever retry it");
    backend.fail_alarms.set(false);
    block_on(engine.on_alarm()).unwrap();
    let receipt = backend.stored.borrow().clone().unwrap();
    assert_eq!(backend.alarm.get(), Some(receipt.next_wake()));
    assert_eq!(receipt.state_name(), "failed");
}

#[test]
fn a_delivered_request_is_kept_until_its_outcome_is_written() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    let gate = gated(backend);
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        engine.after_answer().await;
        Answer::Acknowledged
    });
    backend.fail_receipt_writes.set(true);
    gate.send(created("ok")).unwrap();
    tasks.run();
    drop(tasks);
    backend.fail_receipt_writes.set(false);
    assert!(
        backend.request.borrow().is_some(),
        "the outcome was not written: the request stays for the takeover"
    );
    let restarted = Engine::new(MemoryBackend::new(NOW + 17_000));
    *restarted.backend().stored.borrow_mut() = backend.stored.borrow().clone();
    *restarted.backend().request.borrow_mut() = backend.request.borrow().clone();
    block_on(restarted.on_alarm()).unwrap();
    assert_eq!(
        restarted
            .backend()
            .stored
            .borrow()
            .as_ref()
            .unwrap()
            .state_name(),
        "completed",
        "taken over and delivered, not dead"
    );
}

/// Whether `sent` carries a signature `secret` made, at `now_ms`.
fn signed_with(sent: &OutboundRequest, secret: &str, now_ms: u64) -> bool {
    let headers = ForwardedHeaders::from_lookup(|name| get(&sent.headers, name));
    let request = ForwardedRequest {
        method: "POST",
        path_and_query: "/pay?x=1",
        body: &sent.body,
    };
    Verifier::new(secret)
        .verify(&headers, &request, now_ms / 1000)
        .is_ok()
}

#[test]
fn an_async_400_is_retried_and_give_up_statuses_end_it() {
    // An origin that re-checks the sender's own signature answers 400 once
    // its timestamp is stale: retried, never taken as delivered.
    let engine = engine();
    let backend = engine.backend();
    backend.answer_with(status(400));
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000, 60_000])));
    block_on(engine.after_answer());
    let receipt = backend.stored.borrow().clone().unwrap();
    assert_eq!(receipt.state_name(), "failed");
    assert_eq!(receipt.next_attempt_at(), Some(NOW + 10_000));
    assert!(backend.request.borrow().is_some(), "the delivery is kept");
    backend.now.set(NOW + 10_000);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    assert_eq!(backend.forwarded.borrow().len(), 2);

    let engine = self::engine();
    let backend = engine.backend();
    let mut policy = async_policy(&[10_000, 60_000]);
    if let DeliveryMode::Async(settings) = &mut policy.delivery {
        settings.give_up_statuses = crate::receipt::StatusSet::parse("410").unwrap();
    }
    backend.answer_with(status(410));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.after_answer());
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "dead");
    assert_eq!(backend.forwarded.borrow().len(), 1, "no retry");
    assert!(backend.logged().contains(&"dead"));
}

#[test]
fn a_pending_delivery_keeps_its_terms_when_its_route_changes_or_goes() {
    let engine = engine();
    let backend = engine.backend();
    for _ in 0..2 {
        backend.answer_with(status(503));
    }
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000, 60_000])));
    // The route is flipped to sync by a deploy: its pending receipt keeps
    // the schedule it was accepted with, not an empty one.
    backend
        .routes
        .borrow_mut()
        .push(("default".into(), policy(InFlightPolicy::Wait)));
    block_on(engine.after_answer());
    assert_eq!(
        engine.receipt().unwrap().unwrap().next_attempt_at(),
        Some(NOW + 10_000)
    );
    // Then removed: still delivered, to the origin it was accepted for.
    backend.routes.borrow_mut().clear();
    backend.now.set(NOW + 10_000);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "failed");
    backend.now.set(NOW + 70_000);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    let forwarded = backend.forwarded.borrow();
    assert_eq!(forwarded.len(), 3);
    assert!(forwarded
        .iter()
        .all(|sent| sent.url == "http://origin/pay?x=1"));
}

#[test]
fn each_attempt_is_signed_with_the_forward_secret_as_it_is_now() {
    let engine = engine();
    let backend = engine.backend();
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    block_on(engine.after_answer());
    backend.set_secret("FORWARD_SECRET", "rotated-secret");
    backend.now.set(NOW + 3_600_000);
    block_on(engine.on_alarm()).unwrap();
    let forwarded = backend.forwarded.borrow();
    assert!(signed_with(&forwarded[0], SECRET, NOW));
    // Hours after acceptance: a fresh signature, by the rotated secret.
    assert!(signed_with(
        &forwarded[1],
        "rotated-secret",
        NOW + 3_600_000
    ));
    assert!(!signed_with(&forwarded[1], "rotated-secret", NOW));
}

#[test]
fn a_receipt_stored_without_terms_takes_its_routes_then_the_defaults() {
    let engine = engine();
    let backend = engine.backend();
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &queued_policy(&[10_000])));
    // As the second version stored it: no terms of its own.
    backend.stored.borrow_mut().as_mut().unwrap().terms = None;
    *engine.cache.borrow_mut() = None;
    backend
        .routes
        .borrow_mut()
        .push(("default".into(), async_policy(&[5_000])));
    block_on(engine.on_alarm()).unwrap();
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(receipt.next_attempt_at(), Some(NOW + 5_000));
    assert_eq!(receipt.record_version, crate::receipt::RECORD_VERSION);
    assert_eq!(
        receipt.terms.unwrap().retry_schedule_ms,
        [5_000],
        "adopted once, kept from then on"
    );
}

#[test]
fn a_dead_letter_is_kept_announced_then_expired() {
    let engine = engine();
    let backend = engine.backend();
    let mut policy = async_policy(&[]);
    if let DeliveryMode::Async(settings) = &mut policy.delivery {
        settings.dead_retention_seconds = 10 * 86_400;
    }
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.after_answer());
    let day = 86_400_000;
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "dead");
    assert_eq!(backend.alarm.get(), Some(NOW + 9 * day));
    // Past RETENTION_SECONDS (60 s here), the dead letter is still there.
    backend.now.set(NOW + 8 * day);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "dead");
    backend.now.set(NOW + 9 * day);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(backend.logged().last(), Some(&"dead_expiring"));
    assert_eq!(backend.alarm.get(), Some(NOW + 10 * day));
    // The index row moves to the expiry with the warning: left at the
    // warning's time it is overdue, and the sweep would wake it again.
    let row_wake = |backend: &MemoryBackend| match backend.index.borrow().last() {
        Some(crate::index::IndexUpdate::Upsert(row)) => row.next_wake_at,
        other => panic!("no row written: {other:?}"),
    };
    assert_eq!(row_wake(backend), Some(NOW + 10 * day));
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(
        backend
            .logged()
            .iter()
            .filter(|line| **line == "dead_expiring")
            .count(),
        1,
        "announced once"
    );
    backend.now.set(NOW + 10 * day);
    block_on(engine.on_alarm()).unwrap();
    assert!(backend.stored.borrow().is_none());
    assert_eq!(backend.logged().last(), Some(&"expired"));
}

#[test]
fn a_pending_delivery_is_purged_only_with_force() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[]);
    block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(
        block_on(engine.purge("object-1", false))
            .unwrap_err()
            .name(),
        "pending-delivery"
    );
    assert!(backend.stored.borrow().is_some(), "nothing discarded");
    assert_eq!(block_on(engine.purge("object-1", true)), Ok(true));
    assert!(backend.stored.borrow().is_none());
    assert!(backend.request.borrow().is_none());
    // A dead letter needs no force.
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.after_answer());
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "dead");
    assert_eq!(block_on(engine.purge("object-1", false)), Ok(true));
    // One that cannot be read may be pending: it takes force too.
    block_on(engine.deliver(delivery("a"), &policy));
    let corrupt = Engine::new(MemoryBackend::new(NOW));
    *corrupt.backend().stored.borrow_mut() = backend.stored.borrow().clone();
    corrupt.backend().corrupt.set(true);
    assert_eq!(
        block_on(corrupt.purge("object-1", false))
            .unwrap_err()
            .name(),
        "pending-delivery"
    );
    assert_eq!(block_on(corrupt.purge("object-1", true)), Ok(true));
}

#[test]
fn a_queued_delivery_can_be_redriven() {
    let engine = engine();
    block_on(engine.deliver(delivery("a"), &queued_policy(&[10_000])));
    let redriven = block_on(engine.redrive()).unwrap();
    assert_eq!(redriven.state_name(), "queued");
    assert_eq!(redriven.next_attempt_at(), Some(NOW));
    assert!(engine.backend().logged().contains(&"redriven"));
}

#[test]
fn the_sweep_delivers_what_no_alarm_will_and_waking_twice_does_nothing_twice() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    // The alarm is gone (the runtime gave up on it): nothing fires it.
    backend.alarm.set(None);
    backend.fail_alarms.set(true);
    backend.now.set(NOW + 60_000);
    let gate = {
        let (sender, receiver) = oneshot::channel();
        backend.gates.borrow_mut().push_back(receiver);
        sender
    };
    let mut first = Box::pin(engine.wake("object-1"));
    assert!(
        poll_once(first.as_mut()).is_none(),
        "the attempt is at the origin"
    );
    // A second sweep wakes the object while the first attempt runs.
    let second = block_on(engine.wake("object-1"));
    assert!(
        second.is_err(),
        "alarms still fail: the sweep will come again"
    );
    assert_eq!(backend.forwarded.borrow().len(), 1, "one forward");
    gate.send(created("{}")).unwrap();
    let _ = block_on(first);
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    assert_eq!(backend.forwarded.borrow().len(), 1);
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
    assert!(backend.logged().contains(&"swept"));
    // Woken again, a completed receipt sends nothing.
    backend.fail_alarms.set(false);
    block_on(engine.wake("object-1")).unwrap();
    assert_eq!(backend.forwarded.borrow().len(), 1);
}

#[test]
fn the_sweep_puts_a_lagging_row_right_and_removes_a_ghost() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    assert!(write_accepted_row(&engine));
    // The outcome's index write is lost: the row still says in flight.
    backend.fail_index.set(true);
    block_on(engine.after_answer());
    backend.fail_index.set(false);
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "in_flight".into())]
    );
    block_on(engine.wake("object-1")).unwrap();
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
    // A row whose object holds nothing at all (its purge's write was lost).
    let empty = self::engine();
    block_on(empty.wake("object-9")).unwrap();
    assert_eq!(
        empty.backend().index_rows(),
        [("object-9".into(), "gone".into())]
    );
}

/// A row that did not land is never taken for written: the alarm, the
/// next duplicate, transition or sweep writes it again.
#[test]
fn a_row_that_did_not_land_is_not_confirmed() {
    let engine = engine();
    engine.backend().fail_index.set(true);
    let acknowledged = block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    assert_eq!(acknowledged.render().status, 202);
    assert!(!write_accepted_row(&engine));
    let receipt = engine.receipt().unwrap().unwrap();
    assert!(!receipt.indexed.confirmed);
}

/// SPEC §2b (v5): health counts and names a receipt whose row did not
/// land, from its object's word, until the row lands.
#[test]
fn health_hears_of_a_row_that_did_not_land_until_it_lands() {
    let engine = engine();
    let backend = engine.backend();
    backend.fail_index.set(true);
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    assert!(!write_accepted_row(&engine));
    let receipt = engine.receipt().unwrap().unwrap();
    let said: Vec<(String, String, bool)> = backend
        .row_reports
        .borrow()
        .iter()
        .map(|report| {
            (
                report.receipt_id.clone(),
                report.state.clone(),
                report.landed,
            )
        })
        .collect();
    assert_eq!(
        said,
        [(
            receipt.identity.receipt_id.clone(),
            "in_flight".into(),
            false
        )]
    );
    assert_eq!(backend.row_reports.borrow()[0].route, "default");
    backend.fail_index.set(false);
    backend.now.set(backend.alarm.get().unwrap());
    block_on(engine.on_alarm()).unwrap();
    let last = backend.row_reports.borrow().last().cloned().unwrap();
    assert_eq!(
        (last.receipt_id, last.landed),
        (receipt.identity.receipt_id, true),
        "the repair landed, and says so"
    );
    let count = backend.row_reports.borrow().len();
    block_on(engine.wake("object-1")).unwrap();
    assert_eq!(
        backend.row_reports.borrow().len(),
        count,
        "a row that always landed is nobody's news"
    );
}

/// A write that fails after a later one of the object landed is not
/// owed: health hears nothing of a receipt whose row is confirmed.
#[test]
fn a_failed_write_a_later_one_overtook_is_not_reported() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &queued_policy(&[10_000])));
    assert!(block_on(engine.write_index_after_answer()));
    // The alarm's attempt: its in-flight row is slow, the origin quick,
    // the outcome's removal lands, then the in-flight write fails.
    let (release, gate) = oneshot::channel();
    backend.index_gates.borrow_mut().push_back(gate);
    let origin = gated(backend);
    backend.now.set(backend.alarm.get().unwrap());
    let mut alarm = Box::pin(engine.on_alarm());
    assert!(poll_once(alarm.as_mut()).is_none());
    origin.send(created("x")).unwrap();
    assert!(poll_once(alarm.as_mut()).is_none());
    backend.fail_index.set(true);
    release.send(()).unwrap();
    let _ = poll_once(alarm.as_mut());
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(receipt.state_name(), "completed");
    assert!(receipt.indexed.confirmed);
    assert!(
        backend.row_reports.borrow().is_empty(),
        "{:?}",
        backend.row_reports.borrow()
    );
}

/// A row that did not land rests on the alarm alone: an alarm handler
/// that can neither land it nor set the alarm that writes it again fails,
/// so that the runtime runs it again.
#[test]
fn an_alarm_that_cannot_arm_the_repair_of_its_row_fails() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    backend.fail_index.set(true);
    deliver_after_the_row(&engine);
    assert!(!engine.receipt().unwrap().unwrap().indexed.confirmed);
    backend.fail_alarms.set(true);
    assert!(block_on(engine.on_alarm()).is_err());
    backend.fail_alarms.set(false);
    assert!(
        block_on(engine.on_alarm()).is_ok(),
        "the repair is armed: the alarm will come again"
    );
    backend.fail_index.set(false);
    assert!(block_on(engine.on_alarm()).is_ok());
    assert!(engine.receipt().unwrap().unwrap().indexed.confirmed);
}

/// The sweep's wake writes the row whatever the receipt believes: a row
/// D1 lost after confirming it (a restore, an operator's delete) is put back.
#[test]
fn the_sweep_writes_a_row_the_receipt_believes_confirmed() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    // The first attempt fails: the next is ten seconds away.
    backend.answer_with(status(500));
    block_on(engine.after_answer());
    assert!(engine.receipt().unwrap().unwrap().indexed.confirmed);
    let rows = backend.index_rows();
    assert_eq!(rows.len(), 1);
    backend.index.borrow_mut().clear();
    block_on(engine.wake("object-1")).unwrap();
    assert_eq!(backend.index_rows(), rows);
    assert_eq!(backend.forwarded.borrow().len(), 1, "not due yet");
}

#[test]
fn a_slow_index_never_holds_an_origins_answer_unrecorded() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &queued_policy(&[10_000])));
    // The in-flight row's write hangs (a slow D1).
    let (release, gate) = oneshot::channel();
    backend.index_gates.borrow_mut().push_back(gate);
    let mut alarm = Box::pin(engine.on_alarm());
    assert!(
        poll_once(alarm.as_mut()).is_none(),
        "held by the index write"
    );
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "completed",
        "the origin's answer is durable before the index write lands"
    );
    release.send(()).unwrap();
    block_on(alarm).unwrap();
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
}

/// Polls `future` a few times without waiting: its output, if it finished.
pub(super) fn poll_once<T>(mut future: Pin<&mut impl Future<Output = T>>) -> Option<T> {
    let mut context = Context::from_waker(Waker::noop());
    for _ in 0..8 {
        if let Poll::Ready(done) = future.as_mut().poll(&mut context) {
            return Some(done);
        }
    }
    None
}

#[test]
fn an_if_known_delivery_goes_on_only_where_a_receipt_is() {
    let engine = engine();
    let backend = engine.backend();
    let policy = policy(InFlightPolicy::Wait);
    let probe = || Delivery {
        if_known: true,
        if_absent: false,
        ..delivery("a")
    };
    assert!(block_on(engine.deliver_if_known(probe(), &policy)).is_none());
    assert!(backend.stored.borrow().is_none(), "nothing stored");
    assert!(backend.forwarded.borrow().is_empty(), "nothing sent");
    assert!(backend.events.borrow().is_empty(), "nothing counted");
    // The second version's receipt of the key: a retry is replayed there.
    block_on(engine.deliver(delivery("a"), &policy));
    let replay = block_on(engine.deliver_if_known(probe(), &policy)).unwrap();
    assert_eq!(replay.decision(), "replayed");
    assert_eq!(backend.forwarded.borrow().len(), 1);
    // Past its retention it is no receipt.
    backend.now.set(NOW + 60_000);
    assert!(block_on(engine.deliver_if_known(probe(), &policy)).is_none());
}

#[test]
fn retry_jitter_spreads_attempts_within_ten_percent_of_the_schedule() {
    let mut delays = Vec::new();
    for seed in 0..40 {
        let engine = engine();
        let backend = engine.backend();
        backend.random_seed.set(Some(seed));
        backend.answer_with(status(503));
        block_on(engine.deliver(delivery("a"), &async_policy(&[100_000])));
        block_on(engine.after_answer());
        let next = engine
            .receipt()
            .unwrap()
            .unwrap()
            .next_attempt_at()
            .unwrap();
        delays.push(next - NOW);
    }
    assert!(
        delays
            .iter()
            .all(|delay| (90_000..=110_000).contains(delay)),
        "{delays:?}"
    );
    let distinct: std::collections::HashSet<u64> = delays.iter().copied().collect();
    // 21 steps of 1% each way: most of them are met.
    assert!(
        distinct.len() >= 10,
        "the jitter reaches the schedule: {} distinct delays of 40",
        distinct.len()
    );
}

#[test]
fn a_redriven_receipt_starts_its_schedule_again() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000, 60_000]);
    for _ in 0..4 {
        backend.answer_with(status(503));
    }
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.after_answer());
    backend.now.set(NOW + 10_000);
    block_on(engine.on_alarm()).unwrap();
    backend.now.set(NOW + 70_000);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "dead");
    block_on(engine.redrive()).unwrap();
    block_on(engine.on_alarm()).unwrap();
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(
        receipt.state_name(),
        "failed",
        "the re-driven attempt failed: retried, not dead at once"
    );
    assert_eq!(
        receipt.next_attempt_at(),
        Some(NOW + 70_000 + 10_000),
        "after the schedule's first delay"
    );
}

#[test]
fn an_outcome_that_cannot_be_stored_leaves_the_row_as_the_receipt_still_is() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &queued_policy(&[10_000])));
    let origin = gated(backend);
    let mut alarm = Box::pin(engine.on_alarm());
    assert!(
        poll_once(alarm.as_mut()).is_none(),
        "the attempt is at the origin"
    );
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "in_flight".into())]
    );
    // The origin takes it, but its outcome cannot be written: the receipt
    // stays in flight (its lease's end takes it over), and so must its row,
    // or the sweep would never find it should that alarm be lost.
    backend.fail_receipt_writes.set(true);
    origin.send(created("{}")).unwrap();
    let _ = block_on(alarm);
    assert_eq!(
        backend.stored.borrow().as_ref().unwrap().state_name(),
        "in_flight"
    );
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "in_flight".into())],
        "no row removed for an outcome that was never stored"
    );
}

#[test]
fn a_redrive_whose_alarm_cannot_be_set_is_listed_for_the_sweep() {
    let engine = engine();
    let backend = engine.backend();
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &async_policy(&[])));
    block_on(engine.after_answer());
    assert_eq!(backend.index_rows(), [("object-1".into(), "dead".into())]);
    // Alarms fail: the operator hears of it, and the delivery is queued
    // again with a row that says so (due now), which the sweep wakes;
    // its old row (dead, due at its expiry) would keep it waiting.
    backend.fail_alarms.set(true);
    assert_eq!(
        block_on(engine.redrive()).unwrap_err().name(),
        "storage-unavailable"
    );
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "queued");
    assert_eq!(backend.index_rows(), [("object-1".into(), "queued".into())]);
    backend.now.set(NOW + 60_000);
    let _ = block_on(engine.wake("object-1"));
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
}

#[test]
fn a_sync_row_left_behind_is_found_by_the_sweep_once_its_receipt_expires() {
    let engine = engine();
    let backend = engine.backend();
    let policy = policy(InFlightPolicy::Wait);
    let row_wake = || match backend.index.borrow().last() {
        Some(IndexUpdate::Upsert(row)) => row.next_wake_at,
        _ => None,
    };
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy));
    let expires_at = engine.receipt().unwrap().unwrap().expires_at;
    assert_eq!(
        row_wake(),
        Some(expires_at),
        "the sweep's cue, should the row outlive its receipt"
    );
    // A retry moves the expiry, but the row is not written for that.
    backend.now.set(NOW + 30_000);
    let writes = backend.ops.get().index_writes;
    backend.fail_index.set(true);
    let retried = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(retried.decision(), "forwarded");
    assert_eq!(backend.ops.get().index_writes, writes + 1, "the removal");
    // That removal failed, and the receipt's alarm is lost: the row says
    // failed until the sweep wakes the object, past the row's wake.
    backend.fail_index.set(false);
    backend.alarm.set(None);
    assert_eq!(backend.index_rows(), [("object-1".into(), "failed".into())]);
    backend.now.set(expires_at + crate::sweep::GRACE_MS);
    block_on(engine.wake("object-1")).unwrap();
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
    assert!(backend.stored.borrow().is_some(), "not yet expired");
    assert!(backend.alarm.get().is_some(), "its alarm set again");
}

#[test]
fn a_forward_held_by_its_index_write_answers_no_waiter_of_a_later_life() {
    crate::within(10, || {
        let engine = engine();
        let backend = engine.backend();
        backend.manual_clock.set(true);
        let policy = Policy {
            wait_ms: 60_000,
            ..policy(InFlightPolicy::Wait)
        };
        backend.answer_with(status(503));
        block_on(engine.deliver(delivery("a"), &policy));
        // A retry completes; the removal of its failed row is slow.
        let (release, index_gate) = oneshot::channel();
        backend.index_gates.borrow_mut().push_back(index_gate);
        let late = created("answer of the first life");
        backend.answer_with(late.clone());
        let mut tasks = Tasks::new();
        let first = tasks.spawn(engine.deliver(delivery("a"), &policy));
        assert!(tasks.answer(first).is_none(), "held by its index write");
        // Meanwhile the key is purged and lives again: a new forward, and
        // a duplicate waiting for it.
        assert_eq!(block_on(engine.purge("object-1", false)), Ok(true));
        let origin = gated(backend);
        let second = tasks.spawn(engine.deliver(delivery("a"), &policy));
        let waiter = tasks.spawn(engine.deliver(delivery("a"), &policy));
        assert!(tasks.answer(waiter).is_none(), "waits for the new forward");
        release.send(()).unwrap();
        tasks.run();
        assert_eq!(
            tasks.answer(first).unwrap().render().body,
            body_of(&late),
            "its own caller gets its answer"
        );
        assert!(
            tasks.answer(waiter).is_none(),
            "the waiter is the new forward's"
        );
        let current = created("answer of the second life");
        origin.send(current.clone()).unwrap();
        tasks.run();
        assert_eq!(tasks.answer(second).unwrap().decision(), "forwarded");
        let waited = tasks.answer(waiter).unwrap();
        assert_eq!(waited.decision(), "waited");
        assert_eq!(waited.render().body, body_of(&current));
    });
}

#[test]
fn a_late_index_write_confirms_only_the_row_last_planned() {
    let engine = engine();
    let backend = engine.backend();
    let policy = queued_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    // The first life's attempt: its in-flight row is slow, and so is the
    // origin.
    let (release, index_gate) = oneshot::channel();
    backend.index_gates.borrow_mut().push_back(index_gate);
    let _first_origin = gated(backend);
    let mut first = Box::pin(engine.on_alarm());
    assert!(poll_once(first.as_mut()).is_none());
    // Purged with force, the key lives again in the same millisecond, and
    // none of the new life's rows lands.
    assert_eq!(block_on(engine.purge("object-1", true)), Ok(true));
    backend.fail_index.set(true);
    let acknowledged = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(acknowledged.render().status, 202);
    assert!(!block_on(engine.write_index_after_answer()));
    let _second_origin = gated(backend);
    let mut second = Box::pin(engine.on_alarm());
    assert!(poll_once(second.as_mut()).is_none());
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "in_flight");
    // The first life's row lands now: the same state and wake as the new
    // life's, but not its write (and under the purge's tombstone).
    backend.fail_index.set(false);
    release.send(()).unwrap();
    assert!(poll_once(first.as_mut()).is_none(), "still at its origin");
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
    let duplicate = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(duplicate.decision(), "duplicate");
    assert!(block_on(engine.write_index_after_answer()));
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "in_flight".into())],
        "the duplicate writes the row after its acknowledgement"
    );
}

/// The index writes made so far: each upsert's state, or `remove`.
fn written_states(backend: &MemoryBackend) -> Vec<String> {
    backend
        .index
        .borrow()
        .iter()
        .map(|update| match update {
            IndexUpdate::Upsert(row) => row.state.clone(),
            IndexUpdate::Remove { .. } => "remove".into(),
        })
        .collect()
}

/// Writes the row of the delivery just accepted at once, as when its
/// first attempt outlasts [`ROW_DEFERRED_MS`]: whether it landed.
pub(super) fn write_accepted_row(engine: &Engine<MemoryBackend>) -> bool {
    engine.undefer_row();
    block_on(engine.write_index_after_answer())
}

/// Runs the first attempt of the delivery just accepted with an origin
/// slower than [`ROW_DEFERRED_MS`], so that its acceptance's row is
/// written before the attempt ends; the origin then takes it.
fn deliver_after_the_row(engine: &Engine<MemoryBackend>) {
    let origin = gated(engine.backend());
    let mut attempt = Box::pin(engine.after_answer());
    assert!(poll_once(attempt.as_mut()).is_none(), "at the origin");
    origin.send(created("slow")).unwrap();
    assert_eq!(poll_once(attempt.as_mut()), Some(true));
}

/// An attempt that outlasts [`ROW_DEFERRED_MS`] is listed in flight
/// meanwhile: its acceptance's row goes, and its removal follows.
#[test]
fn a_first_attempt_slower_than_a_second_is_listed_in_flight_meanwhile() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    let origin = gated(backend);
    let mut attempt = Box::pin(engine.after_answer());
    assert!(poll_once(attempt.as_mut()).is_none(), "at the origin");
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "in_flight".into())]
    );
    origin.send(created("slow")).unwrap();
    assert_eq!(poll_once(attempt.as_mut()), Some(true));
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
    assert!(engine.receipt().unwrap().unwrap().indexed.confirmed);
}

/// A first attempt that fails within [`ROW_DEFERRED_MS`] writes one row,
/// its outcome's; a duplicate meanwhile writes none of its own.
#[test]
fn a_first_attempt_that_fails_at_once_writes_its_outcome_row_alone() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    let origin = gated(backend);
    backend.manual_clock.set(true);
    let mut attempt = Box::pin(engine.after_answer());
    assert!(poll_once(attempt.as_mut()).is_none(), "at the origin");
    let duplicate = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(duplicate.decision(), "duplicate");
    assert!(!engine.has_after_answer(), "the row is held back still");
    origin
        .send(ForwardResult::Answered(HttpResponse {
            status: 503,
            headers: vec![],
            body: vec![],
        }))
        .unwrap();
    assert_eq!(poll_once(attempt.as_mut()), Some(true));
    let states = written_states(backend);
    assert_eq!(states, ["failed"]);
    assert!(engine.receipt().unwrap().unwrap().indexed.confirmed);
}

/// SPEC §2b (v5): a duplicate never waits on the index. One whose row
/// did not land is acknowledged at once, and writes the row after.
#[test]
fn a_duplicate_is_acknowledged_at_once_while_its_row_is_slow() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    // Delivered slowly, but its rows are lost: the receipt says so.
    backend.fail_index.set(true);
    deliver_after_the_row(&engine);
    backend.fail_index.set(false);
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    let (release, index_gate) = oneshot::channel();
    backend.index_gates.borrow_mut().push_back(index_gate);
    let duplicate = block_on(engine.deliver(delivery("a"), &policy));
    assert_eq!(
        (duplicate.decision(), duplicate.render().status),
        ("duplicate", 202),
        "answered without the index"
    );
    assert!(engine.has_after_answer());
    let mut written = Box::pin(engine.after_answer());
    assert!(poll_once(written.as_mut()).is_none(), "the row is slow");
    release.send(()).unwrap();
    assert_eq!(
        poll_once(written.as_mut()),
        Some(false),
        "nothing to forward"
    );
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
    assert!(engine.receipt().unwrap().unwrap().indexed.confirmed);
}

/// SPEC §2b (v5): an async delivery is acknowledged while the index
/// fails; its receipt knows the row is not written, its alarm comes back
/// within `INDEX_REPAIR_MS` however far its next attempt is, and writes
/// the row once the index answers.
#[test]
fn an_async_delivery_is_acknowledged_while_its_index_fails_and_its_alarm_writes_the_row() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[10_000]);
    backend.fail_index.set(true);
    let ack = block_on(engine.deliver(delivery("a"), &policy)).render();
    assert_eq!(ack.status, 202);
    assert!(backend.index_rows().is_empty());
    let stored = backend.stored.borrow().clone().unwrap();
    assert!(!stored.indexed.confirmed, "it knows its row is not written");
    // The object dies after its answer; a new instance takes a duplicate.
    let restarted = Engine::new(MemoryBackend::new(NOW));
    *restarted.backend().stored.borrow_mut() = Some(stored);
    restarted.backend().fail_index.set(true);
    let duplicate = block_on(restarted.deliver(delivery("a"), &policy));
    assert_eq!(duplicate.render().status, 202);
    assert!(
        !block_on(restarted.write_index_after_answer()),
        "still failing"
    );
    assert_eq!(
        restarted.backend().alarm.get(),
        Some(NOW + super::index_writes::INDEX_REPAIR_MS),
        "the alarm comes back for the row before the lease's end"
    );
    restarted.backend().fail_index.set(false);
    restarted
        .backend()
        .now
        .set(NOW + super::index_writes::INDEX_REPAIR_MS);
    block_on(restarted.on_alarm()).unwrap();
    assert_eq!(
        restarted.backend().index_rows(),
        [("object-1".into(), "in_flight".into())]
    );
    assert!(restarted.receipt().unwrap().unwrap().indexed.confirmed);
    // Known written, a later duplicate costs no index write.
    let writes = restarted.backend().ops.get().index_writes;
    block_on(restarted.deliver(delivery("a"), &policy));
    assert!(!restarted.has_after_answer());
    assert_eq!(restarted.backend().ops.get().index_writes, writes);
}

/// The review's case (round 4, item 2): the receipt is durable and its
/// first attempt set up when the alarm write fails. The attempt still
/// goes out, so the sender must never hear "nothing was forwarded":
/// 503 `outcome-unknown` (retry with the same key), not
/// `storage-unavailable`.
#[test]
fn an_acceptance_whose_alarm_fails_after_the_receipt_is_durable_is_outcome_unknown() {
    let engine = engine();
    let backend = engine.backend();
    backend.fail_alarms.set(true);
    let refused = block_on(engine.deliver(delivery("a"), &async_policy(&[10_000]))).render();
    assert_eq!(refused.status, 503);
    let problem: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(problem["type"], "urn:idemgate:problem:outcome-unknown");
    assert!(engine.has_first_attempt(), "the first attempt is set up");
    assert!(block_on(engine.after_answer()), "and it is sent");
    assert_eq!(backend.forwarded.borrow().len(), 1);
}

/// The review's case (round 4, item 6): an operator read a dead letter,
/// the key then began a new life (purged, delivered again), and the
/// operator's act, named for the old life, must not touch the new one.
#[test]
fn an_act_named_for_another_life_of_the_key_is_receipt_changed() {
    let engine = engine();
    let backend = engine.backend();
    let policy = async_policy(&[]);
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.after_answer());
    let old = engine.receipt().unwrap().unwrap();
    assert_eq!(old.state_name(), "dead");
    let old_life = old.identity.receipt_id.clone();
    assert_eq!(engine.check_life(Some(&old_life)), Ok(()));
    // Purged, and delivered again: a new life of the same key, pending.
    assert_eq!(block_on(engine.purge("object-1", true)), Ok(true));
    backend.now.set(NOW + 1_000);
    backend.answer_with(status(503));
    block_on(engine.deliver(delivery("a"), &policy));
    let new = engine.receipt().unwrap().unwrap();
    assert_ne!(new.identity.receipt_id, old_life);
    assert_eq!(
        engine.check_life(Some(&old_life)),
        Err(Problem::ReceiptChanged)
    );
    assert_eq!(Problem::ReceiptChanged.status(), 409);
    assert_eq!(Problem::ReceiptChanged.name(), "receipt-changed");
    assert_eq!(engine.check_life(Some(&new.identity.receipt_id)), Ok(()));
    assert_eq!(
        engine.check_life(None),
        Ok(()),
        "without receipt_id, as before"
    );
}

/// The review's case (round 4, item 7): index versions come from the
/// clock. After it steps back, the object's new row would lose to the row
/// an earlier life left (a tombstone, say) and the acknowledgement would
/// rest on a row that still says gone. The losing write is seen (D1's
/// `changes` is 0) and written again above the row's version.
#[test]
fn an_index_write_that_loses_to_a_row_from_ahead_of_the_clock_goes_again_above_it() {
    let engine = engine();
    let backend = engine.backend();
    let ahead = NOW + 3_600_000;
    backend.index_row_version.set(ahead);
    let answer = block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    assert_eq!(answer.render().status, 202);
    assert!(write_accepted_row(&engine), "its row landed");
    let versions: Vec<u64> = backend.index.borrow().iter().map(|u| u.version()).collect();
    assert_eq!(versions.len(), 1);
    assert!(versions[0] > ahead, "{versions:?} above {ahead}");
    assert_eq!(
        backend.index_rows(),
        [("object-1".into(), "in_flight".into())]
    );
}

/// Tests that catch, round 4 (break 6): a completed async receipt's row
/// removal failed (unconfirmed); when the receipt expires, the removal is
/// written again, so no row outlives its receipt until the sweep finds it.
#[test]
fn an_expiry_writes_again_a_removal_that_was_never_confirmed() {
    let engine = engine();
    let backend = engine.backend();
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    backend.fail_index.set(true);
    deliver_after_the_row(&engine);
    let completed = engine.receipt().unwrap().unwrap();
    assert_eq!(completed.state_name(), "completed");
    assert!(!completed.indexed.confirmed, "its row's removal failed");
    backend.fail_index.set(false);
    backend.now.set(completed.expires_at);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.receipt(), Ok(None), "expired");
    assert!(
        matches!(
            backend.index.borrow().last(),
            Some(crate::index::IndexUpdate::Remove { .. })
        ),
        "the removal was written at the expiry"
    );
    assert_eq!(backend.index_rows(), [("object-1".into(), "gone".into())]);
}

// --- Reconciliation's delivery (SPEC §11): only if no delivery arrived ---

/// The delivery a reconciliation run makes of event `k-1` (the key is the
/// provider's event id): its fingerprint is the event id, not its bytes,
/// since the API's rendering and the webhook's body differ.
fn reconciled(body: &str) -> Delivery {
    let mut delivery = delivery(body);
    delivery.fingerprint = Fingerprint::of_event("k-1");
    delivery.if_absent = true;
    delivery.request.source = Some(crate::reconcile::RECONCILIATION.into());
    delivery
}

/// An engine whose key holds a receipt of `kind` in `state`, as an
/// earlier life of the object left it.
fn engine_holding(kind: DeliveryKind, state: ReceiptState) -> Engine<MemoryBackend> {
    let engine = engine();
    let mut receipt = Receipt::new(
        delivery("live").identity,
        Fingerprint::of_bytes(b"live"),
        kind,
        state,
        NOW,
        60_000,
    );
    receipt.identity.receipt_id = "receipt-earlier".into();
    receipt.epoch = next_epoch(0, NOW - 1_000);
    *engine.backend().stored.borrow_mut() = Some(receipt);
    engine
}

#[test]
fn a_reconciled_delivery_without_a_receipt_is_forwarded_once_marked_and_stored() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    let answer = block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy))
        .expect("no receipt: delivered");
    assert_eq!(
        (answer.decision(), answer.render().status),
        ("forwarded", 201)
    );
    let forwarded = engine.backend().forwarded.borrow();
    assert_eq!(forwarded.len(), 1);
    assert_eq!(forwarded[0].body, b"api rendering");
    // The origin can tell (under idemgate's signature) where it came from.
    assert_eq!(
        get(&forwarded[0].headers, "idempotency-source"),
        Some("reconciliation")
    );
    drop(forwarded);
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(receipt.state_name(), "completed");
    assert_eq!(receipt.fingerprint, Fingerprint::of_event("k-1"));
    // Asked again (the next run), nothing more is sent.
    assert!(block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy)).is_none());
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
}

#[test]
fn a_reconciled_delivery_after_a_completed_live_one_does_nothing() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("webhook body"), &policy));
    let before = engine.receipt().unwrap().unwrap();
    let writes = engine.backend().ops.get().writes;
    assert!(block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy)).is_none());
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    assert_eq!(engine.backend().ops.get().writes, writes, "nothing stored");
    assert_eq!(engine.receipt().unwrap().unwrap(), before);
}

#[test]
fn a_reconciled_delivery_forwards_again_a_live_one_whose_forward_failed() {
    let engine = engine();
    let backend = engine.backend();
    let policy = policy(InFlightPolicy::Wait);
    backend.answer_with(status(503));
    let live = block_on(engine.deliver(delivery("webhook body"), &policy));
    assert_eq!(live.render().status, 503);
    assert_eq!(engine.has_arrived(), Ok(false), "its sender retries");
    // The sender stopped retrying; the run finds the event and delivers
    // it. Its fingerprint is the event id, the failed receipt's is the
    // body's: one event, so not a 422.
    backend.now.set(NOW + 5_000);
    let answer = block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy))
        .expect("a failed sync receipt is not an arrival");
    assert_eq!(
        (answer.decision(), answer.render().status),
        ("forwarded", 201)
    );
    let forwarded = backend.forwarded.borrow();
    assert_eq!(forwarded.len(), 2);
    assert!(epoch_of(&forwarded[1]) > epoch_of(&forwarded[0]));
    assert_eq!(forwarded[1].body, b"api rendering");
    assert_eq!(
        get(&forwarded[1].headers, "idempotency-source"),
        Some("reconciliation")
    );
    drop(forwarded);
    assert_eq!(engine.receipt().unwrap().unwrap().state_name(), "completed");
    assert!(!backend.counted().contains(&"mismatch"));
}

#[test]
fn a_live_delivery_after_a_reconciled_one_is_replayed_though_its_bytes_differ() {
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    let filled = block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy)).unwrap();
    // Stripe's webhook body differs from the API's (pending_webhooks).
    let live = block_on(engine.deliver(delivery("webhook body"), &policy));
    assert_eq!(live.decision(), "replayed");
    assert_eq!(live.render().status, 201);
    assert_eq!(live.render().body, filled.render().body);
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    // And the live delivery's own retry, still the same event.
    let again = block_on(engine.deliver(delivery("webhook body, retried"), &policy));
    assert_eq!(again.decision(), "replayed");
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
}

#[test]
fn two_live_deliveries_of_one_key_with_different_bodies_are_still_a_mismatch() {
    // The event-id rule holds only where one side came from
    // reconciliation: a live body that differs is still 422.
    let engine = engine();
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("webhook body"), &policy));
    let other = block_on(engine.deliver(delivery("another body"), &policy));
    assert_eq!((other.decision(), other.render().status), ("mismatch", 422));
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    // Nor does a live delivery take the event-id rule for itself by
    // carrying a key whose event fingerprint it does not hold.
    assert_eq!(
        engine.receipt().unwrap().unwrap().fingerprint,
        Fingerprint::of_bytes(b"webhook body")
    );
}

#[test]
fn a_reconciled_delivery_to_an_async_route_is_accepted_and_delivered_by_the_alarm() {
    let engine = engine();
    let policy = async_policy(&[10_000]);
    let answer = block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy))
        .expect("no receipt: accepted");
    assert_eq!(answer.render().status, 202);
    assert!(block_on(engine.after_answer()));
    let forwarded = engine.backend().forwarded.borrow();
    assert_eq!(forwarded.len(), 1);
    assert_eq!(
        get(&forwarded[0].headers, "idempotency-source"),
        Some("reconciliation"),
        "the stored request keeps its source for every attempt"
    );
    drop(forwarded);
    // A live delivery arriving afterwards is a duplicate, not a mismatch.
    let live = block_on(engine.deliver(delivery("webhook body"), &policy));
    assert_eq!(live.render().status, 202);
    assert!(!engine.backend().counted().contains(&"mismatch"));
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
}

#[test]
fn has_arrived_is_false_without_a_receipt_and_after_it_expired() {
    let engine = engine();
    assert_eq!(engine.has_arrived(), Ok(false));
    let policy = policy(InFlightPolicy::Wait);
    block_on(engine.deliver(delivery("webhook body"), &policy));
    assert_eq!(engine.has_arrived(), Ok(true));
    let expires_at = engine.receipt().unwrap().unwrap().expires_at;
    engine.backend().now.set(expires_at);
    // Past retention the receipt no longer says the event arrived: the
    // lookback is kept an hour inside retention for this reason.
    assert_eq!(engine.has_arrived(), Ok(false));
    let answer = block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy));
    assert_eq!(answer.unwrap().decision(), "forwarded");
}

#[test]
fn has_arrived_holds_for_every_receipt_but_a_failed_sync_one() {
    let later = NOW + 10_000;
    for (kind, state, arrived) in [
        (
            DeliveryKind::Sync,
            ReceiptState::Failed {
                failed_at: NOW,
                next_attempt_at: None,
            },
            false,
        ),
        (
            DeliveryKind::Sync,
            ReceiptState::Completed {
                completed_at: NOW,
                response: crate::receipt::StoredResponse::keep(
                    &HttpResponse {
                        status: 200,
                        headers: vec![],
                        body: vec![],
                    },
                    0,
                ),
            },
            true,
        ),
        (
            DeliveryKind::Sync,
            ReceiptState::InFlight {
                lease_expires_at: later,
            },
            true,
        ),
        // Its object died mid-forward: the lease ran out, nothing came.
        (
            DeliveryKind::Sync,
            ReceiptState::InFlight {
                lease_expires_at: NOW,
            },
            false,
        ),
        (
            DeliveryKind::Async,
            ReceiptState::Queued {
                next_attempt_at: later,
            },
            true,
        ),
        (
            DeliveryKind::Async,
            ReceiptState::InFlight {
                lease_expires_at: later,
            },
            true,
        ),
        (
            DeliveryKind::Async,
            ReceiptState::Dead {
                dead_at: NOW,
                expiry_warned: false,
                superseded: false,
            },
            true,
        ),
    ] {
        let name = format!("{kind:?} {}", state.name());
        let engine = engine_holding(kind, state);
        assert_eq!(engine.has_arrived(), Ok(arrived), "{name}");
        let policy = match kind {
            DeliveryKind::Sync => policy(InFlightPolicy::Conflict),
            DeliveryKind::Async => async_policy(&[10_000]),
        };
        let answer = block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy));
        assert_eq!(answer.is_some(), !arrived, "{name}");
        if arrived {
            assert!(engine.backend().forwarded.borrow().is_empty(), "{name}");
        }
    }
}

#[test]
fn an_async_delivery_waiting_for_its_retry_has_arrived() {
    // Accepted and acknowledged, its origin answered 503: the receipt is
    // failed with a retry scheduled. Its sender will not retry (it was
    // acknowledged) and the alarm delivers it: the event arrived. A run
    // must count it already received, not ask the provider to re-send it
    // or count a duplicate's acknowledgement as filled.
    let engine = engine();
    let policy = async_policy(&[60_000]);
    engine.backend().answer_with(status(503));
    block_on(engine.deliver(delivery("webhook body"), &policy));
    assert!(block_on(engine.after_answer()));
    let receipt = engine.receipt().unwrap().unwrap();
    assert!(
        matches!(
            receipt.state,
            ReceiptState::Failed {
                next_attempt_at: Some(_),
                ..
            }
        ),
        "{:?}",
        receipt.state
    );
    assert_eq!(engine.has_arrived(), Ok(true));
    assert!(block_on(engine.deliver_if_absent(reconciled("api rendering"), &policy)).is_none());
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
}
