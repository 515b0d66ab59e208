//! The Durable Object's logic, written against a small [`Backend`] trait:
//! the real backend wraps Durable Object storage, alarms, timers and fetch
//! (the Worker's `dedup_object`); tests and simulations bring their own.
//!
//! One engine serves one key. Storage calls are synchronous (SQLite-backed
//! Durable Object storage), so a decision and the write that follows it run
//! with no other delivery in between: that is the serialisation the
//! gateway relies on. Waiters and the receipt cache are in memory only and
//! are rebuilt from storage after a restart.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::{select, Either};

use crate::answer::{Answer, Settled};
use crate::canonical::Fingerprint;
use crate::config::{Config, InFlightPolicy};
use crate::decision_log::{DecisionLog, Trace};
use crate::key::IdempotencyKey;
use crate::mutation::{is_active, Mutation};
use crate::origin::OutboundRequest;
use crate::problem::Problem;
use crate::receipt::{decide, retry_after_secs, Decision, ForwardResult, Receipt};
use crate::signature::Secret;

/// What the engine needs from the world.
#[allow(async_fn_in_trait)] // single-threaded (wasm32): no Send bound wanted
pub trait Backend {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    fn load(&self) -> Result<Option<Receipt>, String>;
    fn save(&self, receipt: &Receipt) -> Result<(), String>;
    fn delete(&self) -> Result<(), String>;
    async fn set_alarm(&self, at_ms: u64) -> Result<(), String>;
    /// A fresh random token for the forward about to hold the lease.
    fn new_owner(&self) -> u64;
    /// Sends the request; gives up after `timeout_ms` with `TimedOut`.
    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult;
    fn sleep(&self, ms: u64) -> impl Future<Output = ()>;
    /// One structured line per decision.
    fn log(&self, line: &DecisionLog);
}

/// Storage operations, as counted by a backend: the cost of a delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StorageOps {
    pub reads: u64,
    pub writes: u64,
    pub alarm_writes: u64,
}

impl StorageOps {
    pub fn bump(counter: &Cell<StorageOps>, bump: impl FnOnce(&mut StorageOps)) {
        let mut ops = counter.get();
        bump(&mut ops);
        counter.set(ops);
    }
}

/// The part of the configuration the Durable Object acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub in_flight: InFlightPolicy,
    pub wait_ms: u64,
    pub origin_timeout_ms: u64,
    pub lease_ms: u64,
    pub retention_ms: u64,
    pub max_stored_response_bytes: u64,
    pub forward_secret: Option<Secret>,
}

impl From<&Config> for Policy {
    fn from(config: &Config) -> Policy {
        Policy {
            in_flight: config.in_flight,
            wait_ms: config.wait_ms,
            origin_timeout_ms: config.origin_timeout_ms,
            lease_ms: config.lease_ms,
            retention_ms: config.retention_seconds * 1000,
            max_stored_response_bytes: config.max_stored_response_bytes,
            forward_secret: config.forward_secret.clone(),
        }
    }
}

/// One admitted delivery, as handed to the key's Durable Object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The key's scope hash (the object's name), for logs and the receipt.
    pub scope: String,
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    /// The request to send if this delivery is forwarded, without
    /// idemgate's idempotency headers (the epoch is not known yet).
    pub request: OutboundRequest,
}

pub struct Engine<B: Backend> {
    backend: B,
    /// `None` until storage was read once; then the receipt as stored, plus
    /// the duplicates counted since the last write.
    cache: RefCell<Option<Option<Receipt>>>,
    /// Duplicates waiting for an outcome, by the payload they carry.
    waiters: RefCell<Vec<(Fingerprint, oneshot::Sender<Settled>)>>,
    alarm_known: Cell<bool>,
}

impl<B: Backend> Engine<B> {
    pub fn new(backend: B) -> Engine<B> {
        Engine {
            backend,
            cache: RefCell::new(None),
            waiters: RefCell::new(Vec::new()),
            alarm_known: Cell::new(false),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub async fn deliver(&self, delivery: Delivery, policy: &Policy) -> Answer {
        let started = self.backend.now_ms();
        let scope = delivery.scope.clone();
        let mut trace = Trace::default();
        let answer = self.answer(delivery, policy, &mut trace).await;
        let elapsed = self.backend.now_ms().saturating_sub(started);
        self.backend
            .log(&DecisionLog::of_answer(&answer, &scope, trace, elapsed));
        answer
    }

    async fn answer(&self, delivery: Delivery, policy: &Policy, trace: &mut Trace) -> Answer {
        let wait_deadline = self.backend.now_ms() + policy.wait_ms;
        let mut counted = false;
        loop {
            let now = self.backend.now_ms();
            let decided = self.with_receipt(|receipt| {
                let decision = decide(receipt.as_ref(), &delivery.fingerprint, now);
                let duplicate = matches!(decision, Decision::Replay | Decision::InFlight { .. });
                if let (true, false, Some(receipt)) = (duplicate, counted, receipt.as_mut()) {
                    receipt.duplicates += 1;
                }
                let stored = match decision {
                    Decision::Replay => {
                        receipt.as_ref().and_then(Receipt::stored_response).cloned()
                    }
                    _ => None,
                };
                (
                    decision,
                    stored,
                    receipt.as_ref().map(|receipt| receipt.epoch),
                )
            });
            let (decision, stored, current_epoch) = match decided {
                Ok(decided) => decided,
                Err(message) => return Answer::Rejected(Problem::StorageUnavailable { message }),
            };
            trace.epoch = current_epoch;
            match decision {
                Decision::Forward { epoch, takeover } => {
                    trace.epoch = Some(epoch);
                    trace.takeover = takeover;
                    return self.forward(delivery, epoch, policy, trace).await;
                }
                Decision::Mismatch => return Answer::Rejected(Problem::FingerprintMismatch),
                Decision::Replay => {
                    let stored = stored.expect("a completed receipt has a response");
                    return Answer::Replayed(stored);
                }
                Decision::InFlight { lease_expires_at } => {
                    counted = true;
                    let retry_after_secs = retry_after_secs(lease_expires_at, now);
                    match policy.in_flight {
                        InFlightPolicy::Conflict => {
                            return Answer::Rejected(Problem::InFlight { retry_after_secs })
                        }
                        InFlightPolicy::Ack => return Answer::Acknowledged,
                        InFlightPolicy::Wait if is_active(Mutation::AcknowledgeWhileWaiting) => {
                            return Answer::Acknowledged
                        }
                        InFlightPolicy::Wait if now >= wait_deadline => {
                            return Answer::Rejected(Problem::InFlight { retry_after_secs })
                        }
                        InFlightPolicy::Wait => {
                            // Wake at the outcome, at the wait deadline, or when the
                            // lease ends; after a lease end, decide again (takeover).
                            let until = wait_deadline.min(lease_expires_at);
                            let waited = self.wait_for_outcome(&delivery.fingerprint, until - now);
                            if let Some(settled) = waited.await {
                                return Answer::Waited(settled);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Runs `f` on the cached receipt, reading storage the first time.
    fn with_receipt<T>(&self, f: impl FnOnce(&mut Option<Receipt>) -> T) -> Result<T, String> {
        let mut cache = self.cache.borrow_mut();
        if cache.is_none() {
            *cache = Some(self.backend.load()?);
        }
        Ok(f(cache.as_mut().expect("filled above")))
    }

    /// Writes `receipt`; on failure the cache is dropped, so the next
    /// delivery decides from what storage really holds.
    fn store(&self, receipt: Receipt) -> Result<(), String> {
        match self.backend.save(&receipt) {
            Ok(()) => {
                *self.cache.borrow_mut() = Some(Some(receipt));
                Ok(())
            }
            Err(message) => {
                *self.cache.borrow_mut() = None;
                Err(message)
            }
        }
    }

    async fn forward(
        &self,
        delivery: Delivery,
        epoch: u64,
        policy: &Policy,
        trace: &mut Trace,
    ) -> Answer {
        let now = self.backend.now_ms();
        let previous = match self.with_receipt(Option::take) {
            Ok(previous) => previous,
            Err(message) => return Answer::Rejected(Problem::StorageUnavailable { message }),
        };
        let owner = self.backend.new_owner();
        let fingerprint = delivery.fingerprint.clone();
        let mut receipt = Receipt::begin_forward(
            previous,
            delivery.fingerprint,
            epoch,
            owner,
            now,
            policy.lease_ms,
            policy.retention_ms,
        );
        receipt.scope = Some(delivery.scope);
        let deadline = receipt.next_deadline();
        // The receipt is durable before anything is sent: a restart after
        // this point never forgets that the key was accepted.
        if let Err(message) = self.store(receipt) {
            return Answer::Rejected(Problem::StorageUnavailable { message });
        }
        self.ensure_alarm(deadline).await;

        let request = delivery.request.with_idempotency(
            &delivery.key,
            epoch,
            policy.forward_secret.as_ref().map(Secret::expose),
            now / 1000,
        );
        let sent_at = self.backend.now_ms();
        let result = self
            .backend
            .forward(request, policy.origin_timeout_ms)
            .await;
        trace.origin_ms = Some(self.backend.now_ms().saturating_sub(sent_at));
        let owned = self.record(owner, &result, policy);

        let settled = match result {
            ForwardResult::Answered(response) => Settled::Response(Rc::new(response)),
            ForwardResult::TimedOut => Settled::Problem(Problem::OriginTimeout {
                after_ms: policy.origin_timeout_ms,
            }),
            ForwardResult::Unreachable(message) => {
                Settled::Problem(Problem::OriginUnreachable { message })
            }
        };
        // A forward whose key was taken over answers only its own caller:
        // the waiters belong to the newer forward and get its outcome. And
        // only waiters of this payload: after a purge, a new forward may
        // carry another one, whose outcome is not theirs.
        if owned {
            let waiting = std::mem::take(&mut *self.waiters.borrow_mut());
            let (answered, still_waiting): (Vec<_>, Vec<_>) = waiting
                .into_iter()
                .partition(|(payload, _)| *payload == fingerprint);
            *self.waiters.borrow_mut() = still_waiting;
            for (_, waiter) in answered {
                let _ = waiter.send(settled.clone());
            }
        }
        Answer::Forwarded(settled)
    }

    /// Stores the outcome of the forward holding `owner`, unless a later forward
    /// took the key over meanwhile (or it was purged); returns whether this
    /// forward still owned the key. The caller gets the origin's answer
    /// either way: it happened, whether or not it could be recorded.
    fn record(&self, owner: u64, result: &ForwardResult, policy: &Policy) -> bool {
        let now = self.backend.now_ms();
        let recorded = self.with_receipt(|slot| {
            let mut receipt = slot.clone()?;
            receipt
                .record(
                    owner,
                    result,
                    now,
                    policy.retention_ms,
                    policy.max_stored_response_bytes,
                )
                .ok()?;
            Some(receipt)
        });
        match recorded {
            Ok(Some(receipt)) => {
                // A failed write leaves the key in flight until its lease
                // ends; the next delivery then forwards with a higher epoch.
                let _ = self.store(receipt);
                true
            }
            _ => false,
        }
    }

    async fn wait_for_outcome(&self, fingerprint: &Fingerprint, ms: u64) -> Option<Settled> {
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = self.waiters.borrow_mut();
            waiters.retain(|(_, waiter)| !waiter.is_canceled());
            waiters.push((fingerprint.clone(), sender));
        }
        let timeout = std::pin::pin!(self.backend.sleep(ms));
        match select(receiver, timeout).await {
            Either::Left((Ok(settled), _)) => Some(settled),
            _ => None,
        }
    }

    /// Sets the alarm once per object lifetime; it reschedules itself
    /// until the receipt is due, so one alarm per key is enough. It is set
    /// without asking whether one exists: whatever alarm it replaces, the
    /// new one serves the receipt as it now is. Asking would cost a read,
    /// and a turn that splits the alarm's write from the receipt's commit.
    async fn ensure_alarm(&self, at_ms: u64) {
        if !self.alarm_known.get() && self.backend.set_alarm(at_ms).await.is_ok() {
            self.alarm_known.set(true);
        }
    }

    /// The retention alarm: deletes the receipt once it is due, otherwise
    /// sets the alarm again for when it will be. Late or repeated alarms
    /// are harmless.
    pub async fn on_alarm(&self) -> Result<(), String> {
        self.alarm_known.set(false);
        let now = self.backend.now_ms();
        let due = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .map(|receipt| (receipt.is_expired(now), receipt.next_deadline()))
        })?;
        match due {
            None => Ok(()),
            Some((true, _)) => {
                let expired = self.with_receipt(Option::take)?;
                self.backend.delete()?;
                *self.cache.borrow_mut() = Some(None);
                if let Some(receipt) = expired {
                    let mut line = DecisionLog::new("expired", 0);
                    line.scope = receipt.scope;
                    line.epoch = Some(receipt.epoch);
                    self.backend.log(&line);
                }
                Ok(())
            }
            Some((false, deadline)) => {
                self.backend.set_alarm(deadline).await?;
                self.alarm_known.set(true);
                Ok(())
            }
        }
    }

    /// Counts duplicates a gateway isolate answered on this key's behalf;
    /// kept in memory and written with the receipt's next write.
    pub fn absorb(&self, duplicates: u64) {
        let _ = self.with_receipt(|receipt| {
            if let Some(receipt) = receipt {
                receipt.duplicates += duplicates;
            }
        });
    }

    /// Until when the answer just given may be replayed from an isolate's
    /// cache: the receipt's expiry, when it is completed with its body kept.
    pub fn replayable_until(&self) -> Option<u64> {
        self.with_receipt(|receipt| {
            let receipt = receipt.as_ref()?;
            let stored = receipt.stored_response()?;
            stored.body_stored.then_some(receipt.expires_at)
        })
        .ok()
        .flatten()
    }

    /// The receipt as the operator API shows it, duplicates included.
    pub fn receipt(&self) -> Result<Option<Receipt>, String> {
        let now = self.backend.now_ms();
        self.with_receipt(|receipt| receipt.clone().filter(|r| !r.is_expired(now)))
    }

    /// Deletes the receipt; returns whether there was one.
    pub fn purge(&self) -> Result<bool, String> {
        let existing = self.receipt()?;
        self.backend.delete()?;
        *self.cache.borrow_mut() = Some(None);
        if let Some(receipt) = &existing {
            let mut line = DecisionLog::new("purged", 0);
            line.scope = receipt.scope.clone();
            line.epoch = Some(receipt.epoch);
            self.backend.log(&line);
        }
        Ok(existing.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::get;
    use crate::key::KeySource;
    use crate::memory_backend::{created, MemoryBackend};
    use crate::receipt::HttpResponse;
    use futures::executor::block_on;

    const NOW: u64 = 1_700_000_000_000;

    fn policy(in_flight: InFlightPolicy) -> Policy {
        Policy {
            in_flight,
            wait_ms: 10_000,
            origin_timeout_ms: 10_000,
            lease_ms: 15_000,
            retention_ms: 60_000,
            max_stored_response_bytes: 1024,
            forward_secret: None,
        }
    }

    fn delivery(body: &str) -> Delivery {
        Delivery {
            scope: "scope-1".into(),
            key: IdempotencyKey::parse("k-1", &KeySource::BodySha256).unwrap(),
            fingerprint: Fingerprint::of_bytes(body.as_bytes()),
            request: OutboundRequest {
                method: "POST".into(),
                url: "http://origin/pay".into(),
                headers: vec![],
                body: body.as_bytes().to_vec(),
            },
        }
    }

    fn status(status: u16) -> ForwardResult {
        ForwardResult::Answered(HttpResponse {
            status,
            headers: vec![],
            body: vec![],
        })
    }

    fn epoch_of(request: &OutboundRequest) -> &str {
        get(&request.headers, "idempotency-epoch").unwrap()
    }

    #[test]
    fn first_delivery_forwards_at_epoch_one_and_later_ones_replay() {
        let engine = Engine::new(MemoryBackend::new(NOW));
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
        assert_eq!(epoch_of(&forwarded[0]), "1");
        assert_eq!(
            get(&forwarded[0].headers, "idempotency-key"),
            Some("\"k-1\"")
        );
        assert_eq!(engine.receipt().unwrap().unwrap().duplicates, 1);
        let logged: Vec<&str> = engine
            .backend()
            .logged
            .borrow()
            .iter()
            .map(|l| l.decision)
            .collect();
        assert_eq!(logged, ["forwarded", "replayed"]);
        assert_eq!(
            engine.backend().logged.borrow()[0].scope.as_deref(),
            Some("scope-1")
        );
    }

    #[test]
    fn a_failed_write_forwards_nothing() {
        let engine = Engine::new(MemoryBackend::new(NOW));
        engine.backend().fail_writes.set(true);
        let answer = block_on(engine.deliver(delivery("a"), &policy(InFlightPolicy::Wait)));
        assert_eq!(answer.render().status, 503);
        assert!(engine.backend().forwarded.borrow().is_empty());
    }

    #[test]
    fn failures_are_not_cached_and_each_retry_has_the_next_epoch() {
        let engine = Engine::new(MemoryBackend::new(NOW));
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
        let epochs: Vec<String> = backend
            .forwarded
            .borrow()
            .iter()
            .map(|request| epoch_of(request).to_string())
            .collect();
        assert_eq!(epochs, ["1", "2", "3", "4"]);
        let receipt = engine.receipt().unwrap().unwrap();
        assert_eq!(receipt.attempts.len(), 4);
        assert_eq!(receipt.attempts[1].error.as_deref(), Some("timeout"));
    }

    #[test]
    fn a_different_payload_is_rejected_and_not_forwarded() {
        let engine = Engine::new(MemoryBackend::new(NOW));
        let policy = policy(InFlightPolicy::Wait);
        block_on(engine.deliver(delivery("a"), &policy));
        let answer = block_on(engine.deliver(delivery("b"), &policy));
        assert_eq!(answer.render().status, 422);
        assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    }

    /// A receipt left in flight by an earlier life of the object.
    fn engine_with_receipt_in_flight() -> Engine<MemoryBackend> {
        let backend = MemoryBackend::new(NOW);
        let receipt =
            Receipt::begin_forward(None, Fingerprint::of_bytes(b"a"), 1, 7, NOW, 15_000, 60_000);
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
        let engine = engine_with_receipt_in_flight();
        let mut policy = policy(InFlightPolicy::Wait);
        policy.wait_ms = 2_000;
        let answer = block_on(engine.deliver(delivery("a"), &policy));
        assert_eq!(answer.decision(), "conflict");
        assert_eq!(engine.backend().now_ms(), NOW + 2_000);
        assert!(engine.backend().forwarded.borrow().is_empty());
    }

    #[test]
    fn a_waiter_takes_over_when_the_lease_ends_first() {
        let engine = engine_with_receipt_in_flight();
        let mut policy = policy(InFlightPolicy::Wait);
        policy.wait_ms = 20_000;
        let answer = block_on(engine.deliver(delivery("a"), &policy));
        assert_eq!(answer.decision(), "forwarded");
        assert_eq!(engine.backend().now_ms(), NOW + 15_000);
        assert_eq!(epoch_of(&engine.backend().forwarded.borrow()[0]), "2");
        let logged = engine.backend().logged.borrow();
        assert_eq!(logged[0].decision, "taken_over");
        assert_eq!(logged[0].epoch, Some(2));
    }

    #[test]
    fn the_alarm_deletes_only_a_receipt_that_is_due() {
        let engine = Engine::new(MemoryBackend::new(NOW));
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
        assert_eq!(backend.logged.borrow().last().unwrap().decision, "expired");
        block_on(engine.on_alarm()).unwrap();
        let again = block_on(engine.deliver(delivery("b"), &policy));
        assert_eq!(
            again.decision(),
            "forwarded",
            "after retention the key is new"
        );
    }

    #[test]
    fn purge_makes_the_key_new() {
        let engine = Engine::new(MemoryBackend::new(NOW));
        let policy = policy(InFlightPolicy::Wait);
        block_on(engine.deliver(delivery("a"), &policy));
        assert!(engine.purge().unwrap());
        assert!(!engine.purge().unwrap());
        assert_eq!(
            block_on(engine.deliver(delivery("b"), &policy)).decision(),
            "forwarded"
        );
    }
}
