//! The Durable Object's logic, written against a small [`Backend`] trait:
//! the real backend wraps Durable Object storage, alarms, timers, fetch and
//! the D1 index (the Worker's `dedup_object`); tests and simulations bring
//! their own.
//!
//! One engine serves one key. Storage calls are synchronous (SQLite-backed
//! Durable Object storage), so a decision and the write that follows it run
//! with no other delivery in between: that is the serialisation the
//! gateway relies on. Waiters and the receipt cache are in memory only and
//! are rebuilt from storage after a restart.
//!
//! - [`sync`]: SPEC §2, the forward while the sender waits, and duplicates
//!   that wait for its outcome;
//! - [`async_delivery`]: SPEC §2b, acknowledge, then deliver from the alarm
//!   with retries.

mod async_attempts;
mod async_delivery;
mod backend;
mod dispatch;
#[cfg(test)]
mod flow_tests;
mod forward;
mod index_writes;
mod order;
#[cfg(test)]
mod order_tests;
mod permits;
mod receipt_acts;
#[cfg(test)]
mod shard_tests;
mod sync;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};

use futures::channel::oneshot;

use crate::answer::{Answer, Settled};
use crate::canonical::Fingerprint;
use crate::config::{Delivery as DeliveryMode, InFlightPolicy, RouteConfig};
use crate::decision_log::{DecisionLog, Trace};
use crate::delivery::{Delivery, DeliveryRequest, Identity};
use crate::flow::FlowLimits;
use crate::mutation::{is_active, Mutation};
use crate::problem::Problem;
use crate::receipt::{
    AsyncTerms, DeliveryKind, ForwardResult, Receipt, RecordPolicy, RetryableStatuses,
    RECORD_VERSION,
};
use crate::signature::Secret;

/// What a key's object holds of a delivery, as reconciliation asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Arrived,
    /// A sync receipt whose forward failed or was abandoned.
    Failed,
    Absent,
}

/// Storage operations, as counted by a backend (the operator's view of a
/// receipt shows them, so they are defined with it).
pub use crate::operator::view::StorageOps;
pub use backend::Backend;
pub use index_writes::INDEX_REPAIR_MS;

/// The part of a route's configuration the Durable Object acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub delivery: DeliveryMode,
    pub in_flight: InFlightPolicy,
    pub wait_ms: u64,
    pub max_waiters: usize,
    pub origin_timeout_ms: u64,
    pub lease_ms: u64,
    pub retention_ms: u64,
    pub max_stored_response_bytes: u64,
    pub retryable: RetryableStatuses,
    /// Flow-control limits; `None`: no permit is asked for.
    pub flow: Option<FlowLimits>,
    pub forward_secret: Option<Secret>,
    pub forward_secret_name: Option<String>,
    pub log_duplicates: bool,
    /// The route orders per entity (SPEC §12): a delivery accepted
    /// without an order ticket is counted as unordered.
    pub ordered: bool,
    /// Headers the operator's view masks (the route's signature header
    /// and tenant header).
    pub masked_headers: Vec<String>,
}

impl From<&RouteConfig> for Policy {
    fn from(route: &RouteConfig) -> Policy {
        Policy {
            delivery: route.delivery.clone(),
            in_flight: route.in_flight,
            wait_ms: route.wait_ms,
            max_waiters: route.max_waiters,
            origin_timeout_ms: route.origin_timeout_ms,
            lease_ms: route.lease_ms,
            retention_ms: route.retention_seconds * 1_000,
            max_stored_response_bytes: route.max_stored_response_bytes,
            retryable: route.retryable_statuses.clone(),
            flow: route.flow,
            forward_secret: route.forward_secret.clone(),
            forward_secret_name: route.forward_secret_name.clone(),
            log_duplicates: route.log_duplicates,
            ordered: route.order.is_some(),
            masked_headers: route
                .masked_headers()
                .into_iter()
                .map(str::to_string)
                .collect(),
        }
    }
}

impl Policy {
    fn record_policy(&self, random: u64) -> RecordPolicy {
        RecordPolicy {
            retryable: self.retryable.clone(),
            retention_ms: self.retention_ms,
            max_stored_response_bytes: self.max_stored_response_bytes,
            random,
        }
    }

    /// The terms an async delivery accepted now keeps for its life.
    pub fn async_terms(&self) -> Option<AsyncTerms> {
        let DeliveryMode::Async(settings) = &self.delivery else {
            return None;
        };
        Some(AsyncTerms {
            retry_schedule_ms: settings.retry_schedule_ms.clone(),
            give_up: settings.give_up_statuses.clone(),
            retention_ms: self.retention_ms,
            dead_retention_ms: settings.dead_retention_seconds.saturating_mul(1_000),
            origin_timeout_ms: self.origin_timeout_ms,
            lease_ms: self.lease_ms,
            max_stored_response_bytes: self.max_stored_response_bytes,
            forward_secret: self.forward_secret_name.clone(),
        })
    }
}

pub struct Engine<B: Backend> {
    backend: B,
    /// `None` until storage was read once; then the receipt as stored, plus
    /// the duplicates counted since the last write.
    cache: RefCell<Option<Option<Receipt>>>,
    /// Duplicates waiting for an outcome, by the payload they carry and
    /// the epoch of the forward they wait for.
    waiters: RefCell<Vec<(Fingerprint, u64, oneshot::Sender<Settled>)>>,
    /// Whether the durable alarm is known to serve the receipt as it is.
    alarm_known: Cell<bool>,
    /// The highest epoch this instance has seen or forwarded: it outlives a
    /// purge or an expiry, which delete the receipt, so that a new life's
    /// first forward within the same millisecond still gets a higher epoch.
    epoch_floor: Cell<u64>,
    /// The highest index version this instance wrote, likewise.
    index_floor: Cell<u64>,
    /// Deliveries waiting while another asks for a permit to forward.
    forward_claim: RefCell<Option<Vec<oneshot::Sender<()>>>>,
    /// Whether an async attempt is under way (see `attempt`).
    attempting: Cell<bool>,
    /// Whether the coordinator's wake came since the attempt under way
    /// asked for its permit (see `attempt_once`).
    woken: Cell<bool>,
    /// The first attempt of the async delivery just accepted, until
    /// [`Engine::after_answer`] sends it.
    first_attempt: RefCell<Option<async_delivery::FirstAttempt>>,
    /// The index row an acknowledged delivery needs, written once the
    /// acknowledgement has left (SPEC §2b, v5): the acknowledgement waits
    /// on this object alone.
    index_after_answer: RefCell<Option<index_writes::AfterAnswer>>,
    /// What the index showed before an acceptance whose row is held back
    /// for its first attempt's outcome (see [`Engine::after_answer`]).
    row_deferred: RefCell<Option<crate::index::Indexed>>,
    /// Whether this instance told health its receipt's row had not
    /// landed, so that it says when it has.
    row_owed: Cell<bool>,
    /// Whether the alarm meant to write a row that did not land again
    /// could not be set (see `on_alarm`).
    repair_unarmed: Cell<bool>,
    /// The shard this object's row is in, once known (its receipt's, or
    /// the one its last write went to): a removal written after the
    /// receipt is gone goes there too.
    index_shard: Cell<Option<u16>>,
    /// The object's route, as its receipt or the call being answered
    /// named it last: where a removal goes once the receipt is gone, or
    /// when the object holds nothing (a wake from a row left behind).
    known_route: RefCell<Option<String>>,
}

impl<B: Backend> Engine<B> {
    pub fn new(backend: B) -> Engine<B> {
        Engine {
            backend,
            cache: RefCell::new(None),
            waiters: RefCell::new(Vec::new()),
            alarm_known: Cell::new(false),
            epoch_floor: Cell::new(0),
            index_floor: Cell::new(0),
            forward_claim: RefCell::new(None),
            attempting: Cell::new(false),
            woken: Cell::new(false),
            first_attempt: RefCell::new(None),
            index_after_answer: RefCell::new(None),
            row_deferred: RefCell::new(None),
            row_owed: Cell::new(false),
            repair_unarmed: Cell::new(false),
            index_shard: Cell::new(None),
            known_route: RefCell::new(None),
        }
    }

    /// The epoch for a new forward of `receipt` (SPEC §2: above every
    /// earlier forward of the key, across lives).
    fn new_epoch(&self, receipt: &Receipt, now: u64) -> u64 {
        let floor = receipt.epoch.max(self.epoch_floor.get());
        let epoch = crate::receipt::next_epoch(floor, now);
        self.epoch_floor.set(epoch);
        epoch
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, its storage kept, for a test that restarts the object.
    #[cfg(test)]
    pub fn into_backend(self) -> B {
        self.backend
    }

    /// [`Engine::deliver`], only if this object holds a live receipt of
    /// the key: else `None`, and nothing is stored or sent. The gateway's
    /// lookup, after an upgrade, of a receipt the second version kept
    /// under another name (SPEC §3, v3).
    pub async fn deliver_if_known(&self, delivery: Delivery, policy: &Policy) -> Option<Answer> {
        let now = self.backend.now_ms();
        let known = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .is_some_and(|receipt| !receipt.is_expired(now))
        });
        match known {
            // Storage that cannot be read answers as a delivery would.
            Ok(false) => None,
            _ => Some(self.deliver(delivery, policy).await),
        }
    }

    /// [`Engine::deliver`], only if this object holds no receipt of a
    /// delivery that arrived ([`Engine::has_arrived`]): else `None`, and
    /// nothing is stored or sent. Reconciliation's delivery of an event
    /// the provider lists (SPEC §11, v4).
    pub async fn deliver_if_absent(&self, delivery: Delivery, policy: &Policy) -> Option<Answer> {
        match self.has_arrived() {
            // Storage that cannot be read answers as a delivery would.
            Ok(true) => None,
            _ => Some(self.deliver(delivery, policy).await),
        }
    }

    /// Whether the key holds a live receipt of a delivery that arrived.
    pub fn has_arrived(&self) -> Result<bool, String> {
        Ok(self.presence()? == Presence::Arrived)
    }

    /// What the key holds of a delivery (SPEC §11): one that arrived (any
    /// live receipt but the two below); a sync one whose forward failed,
    /// or whose object died mid-forward (its lease ran out), which its
    /// sender retries and reconciliation may forward again; or none.
    pub fn presence(&self) -> Result<Presence, String> {
        let now = self.backend.now_ms();
        self.with_receipt(|receipt| match receipt.as_ref() {
            Some(receipt) if !receipt.is_expired(now) => match (receipt.delivery, &receipt.state) {
                (DeliveryKind::Sync, crate::receipt::ReceiptState::Failed { .. }) => {
                    Presence::Failed
                }
                (
                    DeliveryKind::Sync,
                    crate::receipt::ReceiptState::InFlight { lease_expires_at },
                ) if crate::receipt::lease_expired(*lease_expires_at, now) => Presence::Failed,
                _ => Presence::Arrived,
            },
            _ => Presence::Absent,
        })
    }

    pub async fn deliver(&self, mut delivery: Delivery, policy: &Policy) -> Answer {
        self.compare_by_event_id(&mut delivery);
        let started = self.backend.now_ms();
        let identity = delivery.identity.clone();
        let batch = delivery.request.batch.clone();
        let mut trace = Trace::default();
        let answer = match policy.delivery {
            DeliveryMode::Sync => self.answer_sync(delivery, policy, &mut trace).await,
            DeliveryMode::Async(_) => self.answer_async(delivery, policy, &mut trace).await,
        };
        let elapsed = self.backend.now_ms().saturating_sub(started);
        let mut event = DecisionLog::of_answer(&answer, trace.clone(), elapsed);
        event.route = Some(identity.route);
        event.scope = Some(identity.scope);
        event.receipt_id = trace.receipt_id;
        event.batch = batch;
        self.backend
            .emit(&event, event.is_logged(policy.log_duplicates));
        answer
    }

    /// Where the receipt or the delivery came from reconciliation, its
    /// fingerprint is the provider's event id, which the key is (SPEC §11):
    /// both are one event, whatever their bytes, and the delivery takes
    /// the receipt's fingerprint, so it is a duplicate, not a mismatch.
    pub(super) fn compare_by_event_id(&self, delivery: &mut Delivery) {
        let event = Fingerprint::of_event(delivery.identity.key.as_str());
        let _ = self.with_receipt(|receipt| {
            if let Some(receipt) = receipt {
                if receipt.fingerprint == event || delivery.fingerprint == event {
                    delivery.fingerprint = receipt.fingerprint.clone();
                }
            }
        });
    }

    /// Runs `f` on the cached receipt, reading storage the first time.
    fn with_receipt<T>(&self, f: impl FnOnce(&mut Option<Receipt>) -> T) -> Result<T, String> {
        let mut cache = self.cache.borrow_mut();
        if cache.is_none() {
            let loaded = self.backend.load()?;
            if let Some(receipt) = &loaded {
                self.index_shard
                    .set(receipt.indexed.shard.or(self.index_shard.get()));
                *self.known_route.borrow_mut() = Some(receipt.identity.route.clone());
            }
            *cache = Some(loaded);
        }
        Ok(f(cache.as_mut().expect("filled above")))
    }

    /// Writes `receipt`; on failure the cache is dropped, so the next
    /// delivery decides from what storage really holds.
    fn store(&self, receipt: Receipt) -> Result<(), String> {
        self.store_with(receipt, None)
    }

    /// [`Engine::store`], with an accepted delivery's request in the same
    /// write.
    fn store_with(
        &self,
        mut receipt: Receipt,
        request: Option<&DeliveryRequest>,
    ) -> Result<(), String> {
        // Written by this version, in this version's form.
        receipt.record_version = RECORD_VERSION;
        match self.backend.save(&receipt, request) {
            Ok(()) => {
                *self.cache.borrow_mut() = Some(Some(receipt));
                Ok(())
            }
            Err(message) => {
                *self.cache.borrow_mut() = None;
                self.alarm_known.set(false);
                Err(message)
            }
        }
    }

    /// A state change the engine made on its own (alarm, operator).
    fn emit_change(&self, decision: &'static str, receipt: &Receipt, trace: Trace) {
        let mut line = DecisionLog::new(decision, 0);
        line.route = Some(receipt.identity.route.clone());
        line.scope = Some(receipt.identity.scope.clone());
        line.receipt_id = Some(receipt.identity.receipt_id.clone());
        line.epoch = Some(receipt.epoch);
        line.origin_status = receipt.last_status();
        line.origin_ms = trace.origin_ms;
        line.waited_ms = trace.waited_ms;
        self.backend.emit(&line, true);
    }

    /// A new life of the key: a new receipt, with a new receipt id, whose
    /// epochs continue above those of `previous` (an expired receipt still
    /// in storage).
    fn new_receipt(
        &self,
        mut identity: Identity,
        fingerprint: Fingerprint,
        kind: DeliveryKind,
        previous: Option<&Receipt>,
        policy: &Policy,
    ) -> Receipt {
        let now = self.backend.now_ms();
        identity.receipt_id = self.backend.new_receipt_id(now);
        let mut receipt = Receipt::new(
            identity,
            fingerprint,
            kind,
            crate::receipt::ReceiptState::Queued {
                next_attempt_at: now,
            },
            now,
            policy.retention_ms,
        );
        receipt.epoch = previous.map_or(0, |previous| previous.epoch);
        receipt.terms = policy.async_terms().filter(|_| kind == DeliveryKind::Async);
        // The index row is per object: the new life updates (or removes) it.
        receipt.indexed = previous
            .map(|previous| previous.indexed.clone())
            .unwrap_or_default();
        receipt
    }

    /// The alarm: retention for every receipt, and the deliveries of async
    /// ones, by the terms each was accepted with. A storage failure is an
    /// error, so the runtime runs the alarm again.
    pub async fn on_alarm(&self) -> Result<(), String> {
        let advanced = self.advance().await;
        // A row that has not landed is written again from the alarm until
        // it does (SPEC §2b, v5): a failed write moved the alarm near.
        let unconfirmed = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .filter(|receipt| !receipt.indexed.confirmed)
                .map(|receipt| receipt.identity.object.clone())
        });
        self.repair_unarmed.set(false);
        if let Ok(Some(object)) = unconfirmed {
            self.reconcile_index(&object).await;
        }
        if self.repair_unarmed() {
            return Err("the index row did not land, and no alarm is set to write it".into());
        }
        advanced
    }

    /// What the alarm does for the receipt (without the index's repair).
    async fn advance(&self) -> Result<(), String> {
        self.alarm_known.set(false);
        let now = self.backend.now_ms();
        let receipt = match self.with_receipt(|receipt| receipt.clone()) {
            Ok(receipt) => receipt,
            Err(message) => {
                // A receipt that no longer parses still expires.
                *self.cache.borrow_mut() = None;
                return match self.backend.stored_deletable_at()? {
                    Some(at) if now >= at => self.backend.delete_all().await.map(|_| ()),
                    Some(at) => self.backend.set_alarm(at).await,
                    None => Err(message),
                };
            }
        };
        let Some(receipt) = receipt else {
            return Ok(());
        };
        match receipt.delivery {
            DeliveryKind::Sync if receipt.is_expired(now) => self.expire(receipt).await,
            DeliveryKind::Sync => self.set_alarm(receipt.next_wake()).await,
            DeliveryKind::Async => self.advance_async(receipt).await,
        }
    }

    /// The scheduled sweep's wake (SPEC §2b, v3): does whatever the alarm
    /// would (an overdue attempt runs here and now, which does not need
    /// the alarm that failed to fire), then writes the index row as the
    /// receipt is, so a row that lagged its receipt is put right. Waking
    /// twice does nothing twice: a second wake finds the attempt in flight
    /// under its lease, or nothing due.
    pub async fn wake(&self, object: &str) -> Result<(), String> {
        let mut line = DecisionLog::new("swept", 0);
        if let Ok(Some(receipt)) = self.with_receipt(|receipt| receipt.clone()) {
            line.route = Some(receipt.identity.route.clone());
            line.scope = Some(receipt.identity.scope.clone());
            line.receipt_id = Some(receipt.identity.receipt_id.clone());
            line.epoch = Some(receipt.epoch);
        }
        self.backend.emit(&line, true);
        let advanced = self.advance().await;
        let indexed = match is_active(Mutation::WakeWithoutReconcile) {
            true => true,
            false => self.reconcile_index(object).await,
        };
        advanced?;
        match indexed {
            true => Ok(()),
            false => Err("the receipt index did not take the row".into()),
        }
    }

    async fn set_alarm(&self, at: u64) -> Result<(), String> {
        // Until a write succeeds, nothing says which alarm is set.
        let written = self.backend.set_alarm(at).await;
        self.alarm_known.set(written.is_ok());
        written
    }

    /// Deletes a settled receipt past retention, with all of the object's storage.
    async fn expire(&self, receipt: Receipt) -> Result<(), String> {
        self.backend.delete_all().await?;
        *self.cache.borrow_mut() = Some(None);
        self.alarm_known.set(false);
        if receipt.indexed.state.is_some() || !receipt.indexed.confirmed {
            self.write_index(Some(self.planned_removal(&receipt.identity.object)))
                .await;
        }
        self.emit_change("expired", &receipt, Trace::default());
        Ok(())
    }
}

/// A forward's result as its callers see it.
fn settle(result: ForwardResult, completed: bool, timeout_ms: u64) -> Settled {
    match result {
        ForwardResult::Answered(response) => Settled::Response {
            response: std::rc::Rc::new(response),
            completed,
        },
        ForwardResult::TimedOut => Settled::Problem(Problem::OriginTimeout {
            after_ms: timeout_ms,
        }),
        ForwardResult::Unreachable(message) => {
            Settled::Problem(Problem::OriginUnreachable { message })
        }
    }
}
