//! SPEC §2b's acceptance: a first delivery is stored whole and
//! acknowledged once it is durable; its first attempt follows the
//! acknowledgement, or waits for the alarm (`async_attempts`), which
//! delivers it one forward at a time, retrying on the route's schedule
//! until it completes or is dead; and the operator's re-drive queues a
//! dead letter again.

use futures::future::{join, select, Either};

use super::async_attempts::Attempt;
use super::index_writes::AfterAnswer;
use super::{Backend, Engine, Policy};
use crate::answer::{Ack, Answer};
use crate::config::Delivery as DeliveryMode;
use crate::decision_log::Trace;
use crate::delivery::{Delivery, DeliveryRequest};
use crate::mutation::{is_active, Mutation};
use crate::problem::Problem;
use crate::receipt::{
    decide_async, retry_after_secs, AsyncDecision, DeliveryKind, Receipt, ReceiptState,
};

impl<B: Backend> Engine<B> {
    pub(super) async fn answer_async(
        &self,
        delivery: Delivery,
        policy: &Policy,
        trace: &mut Trace,
    ) -> Answer {
        let DeliveryMode::Async(settings) = &policy.delivery else {
            unreachable!("an async policy");
        };
        let now = self.backend.now_ms();
        let decided = self.with_receipt(|receipt| {
            let decision = decide_async(receipt.as_ref(), &delivery.fingerprint, now);
            match receipt.as_mut() {
                Some(receipt) if decision == AsyncDecision::Duplicate => {
                    receipt.duplicates += 1;
                    (
                        decision,
                        Some((
                            receipt.identity.receipt_id.clone(),
                            receipt.state_name(),
                            receipt.next_wake(),
                            receipt.is_pending(),
                            receipt.indexed.confirmed,
                        )),
                        receipt.epoch,
                    )
                }
                Some(receipt) => (decision, None, receipt.epoch),
                None => (decision, None, 0),
            }
        });
        let (decision, duplicate, epoch) = match decided {
            Ok(decided) => decided,
            Err(message) => return Answer::Rejected(Problem::StorageUnavailable { message }),
        };
        let ack = |receipt_id: String, state: &'static str| Ack {
            receipt_id,
            state,
            status: settings.ack_status,
            body: settings.ack_body.clone(),
        };
        match decision {
            AsyncDecision::Mismatch => Answer::Rejected(Problem::FingerprintMismatch),
            AsyncDecision::InFlight { lease_expires_at } => Answer::Rejected(Problem::InFlight {
                retry_after_secs: retry_after_secs(lease_expires_at, now),
            }),
            AsyncDecision::Duplicate => {
                let (receipt_id, state, wake, pending, indexed) =
                    duplicate.expect("a duplicate has a receipt");
                trace.epoch = (epoch > 0).then_some(epoch);
                trace.receipt_id = Some(receipt_id.clone());
                // After a restart, or a failed alarm write, nothing says the
                // alarm serves this receipt: a duplicate re-arms it.
                if pending && !self.alarm_known.get() {
                    if let Err(message) = self.set_alarm(wake).await {
                        // Acknowledged, the sender would stop retrying a
                        // delivery nothing is scheduled to make. Stored,
                        // it may have been sent: never "nothing was".
                        return Answer::Rejected(Problem::NotAcknowledged { message });
                    }
                }
                // Its index row may not have landed yet: written again
                // once this acknowledgement has left, unless it is held
                // back for the first attempt (`after_answer`).
                if !indexed && !self.row_deferred() {
                    self.write_after_answer(AfterAnswer::Reconcile(
                        delivery.identity.object.clone(),
                    ));
                }
                if let Some(refused) = self.refuse_if_moved_on(&receipt_id) {
                    return refused;
                }
                Answer::Duplicate(ack(receipt_id, state))
            }
            AsyncDecision::Accept => {
                let previous = self.with_receipt(Option::take).ok().flatten();
                let mut receipt = self.new_receipt(
                    delivery.identity.clone(),
                    delivery.fingerprint.clone(),
                    DeliveryKind::Async,
                    previous.as_ref(),
                    policy,
                );
                receipt.batch = delivery.request.batch.clone();
                // Without flow control the accepting call makes the first
                // attempt itself, once its acknowledgement has left
                // (`after_answer`): the receipt is accepted already in
                // flight, in the same write, and the alarm waits at the
                // lease's end, where it takes the delivery over if this
                // object dies mid-forward. A limited route queues the
                // delivery for its permit instead.
                let terms = self.terms_of(&receipt);
                let mut delivery = delivery;
                // An event time more than a day ahead is a sender's bug,
                // not a time: as newest delivered it would make every
                // later event of its entity stale. It goes unordered.
                if delivery.request.order.as_ref().is_some_and(|ticket| {
                    ticket.time_ms > now.saturating_add(MAX_ORDER_TIME_AHEAD_MS)
                }) {
                    delivery.request.order = None;
                }
                let ordered = delivery.request.order.is_some();
                let first_epoch = match policy.flow {
                    None if !ordered && terms.origin_timeout_ms <= FIRST_ATTEMPT_MAX_TIMEOUT_MS => {
                        let epoch = self.new_epoch(&receipt, now);
                        receipt.begin_forward(epoch, now, terms.lease_ms, terms.retention_ms);
                        Some(epoch)
                    }
                    _ => {
                        receipt.queue(now, now);
                        None
                    }
                };
                let wake = receipt.next_wake();
                let shown_before = receipt.indexed.clone();
                let index = self.plan_index(&mut receipt);
                if is_active(Mutation::AcknowledgeWithoutIndexRow) {
                    receipt.indexed.confirmed = true;
                }
                let receipt_id = receipt.identity.receipt_id.clone();
                trace.receipt_id = Some(receipt_id.clone());
                let stored = delivery.request;
                let unordered = (policy.ordered && !ordered).then(|| receipt.clone());
                // Request and receipt are written in one turn, so in one
                // commit; the acknowledgement leaves only once it is durable.
                if is_active(Mutation::AcknowledgeBeforeDurable) {
                    return Answer::Queued(ack(receipt_id, "queued"));
                }
                if let Err(message) = self.store_with(receipt, Some(&stored)) {
                    return Answer::Rejected(Problem::StorageUnavailable { message });
                }
                if let Some(receipt) = unordered {
                    self.note_unordered(&receipt);
                }
                if is_active(Mutation::QueueWithoutAlarm) {
                    return Answer::Queued(ack(receipt_id, "queued"));
                }
                // Durable, the delivery is sent whether or not it can be
                // acknowledged below (its sender then retries, and finds it).
                if let Some(epoch) = first_epoch {
                    *self.first_attempt.borrow_mut() = Some(FirstAttempt {
                        receipt_id: receipt_id.clone(),
                        epoch,
                        request: stored,
                    });
                }
                // Acknowledged once the alarm is set (SPEC §2b, v5): the
                // receipt and its alarm are the truth. The index row follows
                // the acknowledgement, and the alarm writes it again until
                // it lands.
                if let Err(message) = self.set_alarm(wake).await {
                    // The receipt is stored and its first attempt may be
                    // on its way: a retry of the sender with the same key
                    // finds it and re-arms the alarm (SPEC §6, v4).
                    return Answer::Rejected(Problem::NotAcknowledged { message });
                }
                if let Some(index) =
                    index.filter(|_| !is_active(Mutation::AcknowledgeWithoutIndexRow))
                {
                    // Held back only while nothing was planned or sent
                    // since (a duplicate during the alarm's write may
                    // have written the row and taken the attempt).
                    let still_first =
                        self.index_floor.get() == index.version() && self.has_first_attempt();
                    self.write_after_answer(AfterAnswer::Write(Box::new(index)));
                    if first_epoch.is_some() && still_first {
                        self.defer_row(shown_before);
                    }
                }
                if let Some(refused) = self.refuse_if_moved_on(&receipt_id) {
                    return refused;
                }
                trace.epoch = first_epoch;
                // To its sender the delivery is queued: accepted, not yet
                // delivered.
                Answer::Queued(ack(receipt_id, "queued"))
            }
        }
    }

    /// The refusal of an acknowledgement whose receipt is no longer held:
    /// a purge or an expiry may have taken it while its row was written,
    /// and another delivery stored a new life, which nothing says is
    /// listed. The sender retries instead.
    fn refuse_if_moved_on(&self, receipt_id: &str) -> Option<Answer> {
        let held = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .is_some_and(|receipt| receipt.identity.receipt_id == receipt_id)
        });
        (held != Ok(true)).then(|| {
            Answer::Rejected(Problem::NotAcknowledged {
                message: "the receipt changed while it was acknowledged".into(),
            })
        })
    }

    /// Whether an acknowledged delivery's first attempt waits for
    /// [`Engine::after_answer`].
    pub fn has_first_attempt(&self) -> bool {
        self.first_attempt.borrow().is_some()
    }

    /// The first attempt of the async delivery this object just accepted
    /// in flight: the adapter runs it once the acknowledgement has left. It
    /// forwards only while the receipt is still that attempt's, under its
    /// live lease; otherwise the alarm at the lease's end, or the sweep,
    /// has the delivery (a purge, a restart, a lease that ran out first).
    /// Answers whether it forwarded.
    ///
    /// The acceptance's row waits for the attempt, up to
    /// [`ROW_DEFERRED_MS`]: most attempts end sooner, and their outcome's
    /// row (none at all, for a delivery the origin took) is then the only
    /// write, so a storm the origin keeps up with costs the index shards
    /// nothing. An attempt still under way then is listed in flight.
    pub async fn after_answer(&self) -> bool {
        let attempt = std::pin::pin!(self.first_attempt());
        if !self.row_deferred() {
            return join(self.write_index_after_answer(), attempt).await.1;
        }
        let waited = std::pin::pin!(self.backend.sleep(ROW_DEFERRED_MS));
        match select(attempt, waited).await {
            Either::Left((forwarded, _)) => {
                // An attempt that planned no row of its own (it did not
                // run) leaves the acceptance's to write. One whose outcome
                // could not be stored leaves the receipt in flight and its
                // row unconfirmed: the alarm at the lease's end takes it
                // over and writes it.
                self.undefer_row();
                self.write_index_after_answer().await;
                forwarded
            }
            Either::Right(((), attempt)) => {
                self.undefer_row();
                join(self.write_index_after_answer(), attempt).await.1
            }
        }
    }

    /// Whether [`Engine::after_answer`] has anything to do.
    pub fn has_after_answer(&self) -> bool {
        self.has_first_attempt() || self.has_index_after_answer()
    }

    async fn first_attempt(&self) -> bool {
        let Some(first) = self.first_attempt.take() else {
            return false;
        };
        let now = self.backend.now_ms();
        let receipt = self.with_receipt(|receipt| {
            receipt.clone().filter(|receipt| {
                receipt.identity.receipt_id == first.receipt_id && receipt.epoch == first.epoch
            })
        });
        let Ok(Some(receipt)) = receipt else {
            return false;
        };
        let ReceiptState::InFlight { lease_expires_at } = receipt.state else {
            return false;
        };
        let terms = self.terms_of(&receipt);
        // The lease began at acceptance, and a takeover may follow its
        // end: the forward must end before it does, by the margin the
        // route keeps between its timeout and its lease. Its timeout is
        // shortened by the time the acknowledgement took; when that was
        // more than half of it, the alarm at the lease's end makes the
        // attempt instead, with the whole timeout.
        let margin = terms.lease_ms.saturating_sub(terms.origin_timeout_ms);
        let timeout_ms = terms
            .origin_timeout_ms
            .min(lease_expires_at.saturating_sub(margin).saturating_sub(now));
        if timeout_ms < terms.origin_timeout_ms / 2 || timeout_ms == 0 {
            // Not sent, so not in flight: queued for the alarm at once
            // (its attempt gets the whole timeout, and a new epoch).
            let mut queued = receipt;
            queued.unsend(first.epoch, now);
            let index = self.plan_index(&mut queued);
            if self.store(queued).is_ok() {
                let _ = join(self.set_alarm(now), self.write_index(index)).await;
            }
            return false;
        }
        let attempt = Attempt {
            epoch: first.epoch,
            takeover: false,
            permit: None,
            turn: None,
            // Written before the acknowledgement.
            index: None,
            started_at: now,
            timeout_ms,
            alarm_at_lease_end: true,
        };
        // A failure here is the alarm's: it is set at the lease's end.
        let _ = self
            .send_attempt(receipt, first.request, terms, attempt)
            .await;
        true
    }

    /// The operator's re-drive (SPEC §7): a dead, failed or (v3) queued
    /// async receipt is queued again at once, with a fresh schedule; its
    /// next forward gets a new epoch.
    pub async fn redrive(&self) -> Result<Receipt, Problem> {
        let storage = |message| Problem::StorageUnavailable { message };
        let now = self.backend.now_ms();
        let receipt = self
            .with_receipt(|receipt| receipt.clone())
            .map_err(storage)?
            .filter(|receipt| !receipt.is_expired(now))
            .ok_or(Problem::NotFound)?;
        let redrivable = receipt.delivery == DeliveryKind::Async
            && matches!(
                receipt.state,
                ReceiptState::Dead { .. }
                    | ReceiptState::Failed { .. }
                    | ReceiptState::Queued { .. }
            );
        if !redrivable {
            return Err(Problem::NotRedrivable {
                state: format!(
                    "{} ({})",
                    receipt.state_name(),
                    delivery_name(receipt.delivery)
                ),
            });
        }
        let mut receipt = receipt;
        let superseded = receipt.state_name() == "superseded";
        receipt.queue(now, now);
        let index = self.plan_index(&mut receipt);
        match superseded {
            // The operator asks for the forward a superseded delivery was
            // refused: it goes, marked stale (SPEC §12).
            true => {
                let mut request = self
                    .backend
                    .load_request()
                    .map_err(storage)?
                    .ok_or(Problem::NotFound)?;
                if let Some(ticket) = request.order.as_mut() {
                    ticket.skip_stale = false;
                }
                // Known stale when it was superseded: marked so even once
                // its entity's book has been forgotten.
                request.stale = true;
                self.store_with(receipt.clone(), Some(&request))
                    .map_err(storage)?;
            }
            false => self.store(receipt.clone()).map_err(storage)?,
        }
        // The row is written even if the alarm cannot be set: it is what
        // the sweep then wakes the delivery by (its old one, a dead
        // letter's, would not be due until its expiry).
        let (alarm, _) = join(self.set_alarm(now), self.write_index(index)).await;
        alarm.map_err(storage)?;
        self.emit_change("redriven", &receipt, Trace::default());
        Ok(receipt)
    }
}

/// How far ahead of the gateway's clock an event's `order_time` may be
/// and still order it (SPEC §12): clocks differ by seconds, not days.
pub const MAX_ORDER_TIME_AHEAD_MS: u64 = 86_400_000;

/// The longest origin timeout a first attempt is made with by the call
/// that accepted its delivery: it runs after that call has answered, and
/// an object that no client is waiting on may be evicted after about 70
/// seconds (the alarm handler that makes every other attempt has 15
/// minutes). A route with a longer timeout queues its deliveries for the
/// alarm.
const FIRST_ATTEMPT_MAX_TIMEOUT_MS: u64 = 60_000;

/// How long the acceptance's row waits for the first attempt's outcome
/// (see [`Engine::after_answer`]).
pub const ROW_DEFERRED_MS: u64 = 1_000;

/// The first attempt of a delivery accepted in flight: what
/// [`Engine::after_answer`] sends, from memory (the request needs no read).
pub(super) struct FirstAttempt {
    pub(super) receipt_id: String,
    pub(super) epoch: u64,
    pub(super) request: DeliveryRequest,
}

fn delivery_name(kind: DeliveryKind) -> &'static str {
    match kind {
        DeliveryKind::Sync => "sync",
        DeliveryKind::Async => "async",
    }
}
