//! SPEC §2b: a first delivery is stored whole and acknowledged once it is
//! durable; the object's alarm delivers it to the origin, one forward at a
//! time, retrying on the route's schedule until it completes or is dead.
//! Alarms survive restarts and deploys, and the alarm is always set to the
//! receipt's next step before a forward is sent, so a crash mid-forward
//! only delays the delivery until its lease ends.

use futures::future::join;

use super::forward::{Forward, Forwarded};
use super::permits::{AttemptPermit, HeldPermit};
use super::{Backend, Engine, Policy};
use crate::answer::{Ack, Answer};
use crate::config::Delivery as DeliveryMode;
use crate::decision_log::Trace;
use crate::delivery::{Delivery, DeliveryRequest};
use crate::flow::LATE_GRANT_RETRY_MS;
use crate::index::IndexUpdate;
use crate::mutation::{is_active, Mutation};
use crate::problem::Problem;
use crate::receipt::{
    decide_async, next_async_step, retry_after_secs, AsyncDecision, AsyncStep, DeliveryKind,
    Receipt, ReceiptState, Recorded,
};
use crate::receipt::{AsyncTerms, RecordPolicy, RetryableStatuses};

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
                // Its index row may never have landed (its first
                // acknowledgement was refused for that): write it first.
                if !indexed && !self.reconcile_index(&delivery.identity.object).await {
                    return Answer::Rejected(Problem::NotAcknowledged {
                        message: "the receipt index did not take its row".into(),
                    });
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
                // Without flow control the accepting call makes the first
                // attempt itself, once its acknowledgement has left
                // (`after_answer`): the receipt is accepted already in
                // flight, in the same write, and the alarm waits at the
                // lease's end, where it takes the delivery over if this
                // object dies mid-forward. A limited route queues the
                // delivery for its permit instead.
                let terms = self.terms_of(&receipt);
                let first_epoch = match policy.flow {
                    None if terms.origin_timeout_ms <= FIRST_ATTEMPT_MAX_TIMEOUT_MS => {
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
                let index = self.plan_index(&mut receipt);
                let receipt_id = receipt.identity.receipt_id.clone();
                trace.receipt_id = Some(receipt_id.clone());
                let stored = delivery.request;
                // Request and receipt are written in one turn, so in one
                // commit; the acknowledgement leaves only once it is durable.
                if is_active(Mutation::AcknowledgeBeforeDurable) {
                    return Answer::Queued(ack(receipt_id, "queued"));
                }
                if let Err(message) = self.store_with(receipt, Some(&stored)) {
                    return Answer::Rejected(Problem::StorageUnavailable { message });
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
                // Acknowledged only once the alarm is set and the index row
                // (which the sweep reads, should alarms fail) is written.
                let index = match is_active(Mutation::AcknowledgeWithoutIndexRow) {
                    true => None,
                    false => index,
                };
                let (alarm, indexed) = join(self.set_alarm(wake), self.write_index(index)).await;
                if let Err(message) = alarm {
                    // The receipt is stored and its first attempt may be
                    // on its way: a retry of the sender with the same key
                    // finds it and re-arms the alarm (SPEC §6, v4).
                    return Answer::Rejected(Problem::NotAcknowledged { message });
                }
                if !indexed {
                    return Answer::Rejected(Problem::NotAcknowledged {
                        message: "the receipt index did not take its row".into(),
                    });
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
    pub async fn after_answer(&self) -> bool {
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

    /// The alarm of an async receipt: attempt its delivery, wait for its
    /// next step, announce a dead letter's coming expiry, or expire it. A
    /// delivery woken by its coordinator is attempted now, whenever its
    /// wait for the permit would have ended.
    pub(super) async fn advance_async(&self, receipt: Receipt) -> Result<(), String> {
        let now = self.backend.now_ms();
        let woken = receipt.waiting_for_permit_since.is_some() && self.woken.get();
        let step = match next_async_step(&receipt, now) {
            AsyncStep::WaitUntil(at) if woken => match next_async_step(&receipt, u64::MAX) {
                attempt @ AsyncStep::Attempt { takeover: false } => attempt,
                _ => AsyncStep::WaitUntil(at),
            },
            step => step,
        };
        match step {
            AsyncStep::Expire => self.expire(receipt).await,
            AsyncStep::WaitUntil(at) => self.set_alarm(at).await,
            AsyncStep::WarnExpiry => self.warn_expiry(receipt).await,
            AsyncStep::Attempt { takeover } => self.attempt(receipt, takeover).await,
        }
    }

    /// The terms `receipt` is delivered by: its own, or, for one stored
    /// before receipts kept them, its route's as they are now (SPEC §8's
    /// defaults when the route is gone).
    pub(super) fn terms_of(&self, receipt: &Receipt) -> AsyncTerms {
        receipt.terms.clone().unwrap_or_else(|| {
            self.backend
                .route_policy(&receipt.identity.route)
                .and_then(|policy| policy.async_terms())
                .unwrap_or_default()
        })
    }

    /// A dead letter expires within a day: logged and counted once, so an
    /// operator who missed its death hears of it before it is gone.
    /// Its index row moves with it to the expiry: left at the warning, it
    /// would be overdue, and every dead letter would be swept once a day
    /// before its expiry (in a burst after an outage, ahead of real work).
    async fn warn_expiry(&self, mut receipt: Receipt) -> Result<(), String> {
        if let ReceiptState::Dead { expiry_warned, .. } = &mut receipt.state {
            *expiry_warned = true;
        }
        let expires_at = receipt.expires_at;
        let index = self.plan_index(&mut receipt);
        self.store(receipt.clone())?;
        self.emit_change("dead_expiring", &receipt, Trace::default());
        let (alarm, _) = join(self.set_alarm(expires_at), self.write_index(index)).await;
        alarm
    }

    /// One forward of the stored delivery (SPEC §2b): a new epoch, the
    /// lease and the alarm for its end written before it is sent, then the
    /// outcome: completed, retried on the schedule, or dead.
    async fn attempt(&self, receipt: Receipt, takeover: bool) -> Result<(), String> {
        // The alarm, the sweep's wake and the coordinator's may each start
        // an attempt; while one asks for its permit (before its receipt is
        // in flight), the others leave it.
        if self.attempting.replace(true) {
            return Ok(());
        }
        let starting = Starting(&self.attempting);
        self.attempt_once(receipt, takeover, starting).await
    }

    /// A delivery that can never be sent as stored: dead at once, kept for
    /// the operator (`DEAD_RETENTION_SECONDS`) and listed as dead.
    async fn dead_for_good(
        &self,
        mut receipt: Receipt,
        now: u64,
        terms: &AsyncTerms,
    ) -> Result<(), String> {
        receipt.state = ReceiptState::Dead {
            dead_at: now,
            expiry_warned: false,
        };
        receipt.expires_at = now.saturating_add(terms.dead_retention_ms);
        let index = self.plan_index(&mut receipt);
        let wake = receipt.next_wake();
        self.store(receipt.clone())?;
        self.set_alarm(wake).await?;
        self.write_index(index).await;
        self.emit_change("dead", &receipt, Trace::default());
        Ok(())
    }

    async fn attempt_once(
        &self,
        mut receipt: Receipt,
        takeover: bool,
        starting: Starting<'_>,
    ) -> Result<(), String> {
        let now = self.backend.now_ms();
        let terms = self.terms_of(&receipt);
        receipt.terms = Some(terms.clone());
        let Some(stored) = self.backend.load_request()? else {
            // Cannot happen while the receipt is pending; if storage lost
            // the request, the delivery is dead rather than retried forever.
            return self.dead_for_good(receipt, now, &terms).await;
        };
        self.woken.set(false);
        let mut asked = self.permit_for_attempt(&receipt).await;
        if matches!(asked, AttemptPermit::WaitUntil(_)) && self.woken.take() {
            // The coordinator's wake overtook its own answer (it reserved a
            // permit for this object after answering "queued"), and the
            // wake found this attempt under way: the permit is ours to
            // claim now, rather than when the queued answer said to ask.
            asked = self.permit_for_attempt(&receipt).await;
        }
        // The receipt may have moved on while the coordinator answered (a
        // purge and a new delivery's life, a re-drive): this attempt then
        // writes nothing, its wait included (it would store the old life
        // over the new one), and a permit goes back unused.
        let unchanged = self.with_receipt(|stored| {
            stored.as_ref().is_some_and(|stored| {
                stored.identity.receipt_id == receipt.identity.receipt_id
                    && stored.state == receipt.state
                    && stored.epoch == receipt.epoch
            })
        });
        if unchanged != Ok(true) {
            if let AttemptPermit::Held(permit) = asked {
                self.release(Some(permit)).await;
            }
            return Ok(());
        }
        let permit = match asked {
            AttemptPermit::Unlimited => None,
            AttemptPermit::Held(permit) => Some(permit),
            AttemptPermit::WaitUntil(at) => {
                let waited = self.wait_for_permit(receipt, at).await;
                drop(starting);
                if waited.is_ok() && self.woken.get() {
                    // The wake came while the wait was being written, and
                    // found this attempt under way: its alarm is now.
                    return self.set_alarm(self.backend.now_ms()).await;
                }
                return waited;
            }
        };
        let now = self.backend.now_ms();
        let timeout_ms = match permit
            .as_ref()
            .map(|held| held.timeout_ms(now, terms.origin_timeout_ms))
        {
            None => terms.origin_timeout_ms,
            Some(Some(timeout_ms)) => timeout_ms,
            Some(None) => {
                // The grant came back after most of its lease had passed
                // at the coordinator (which may have counted it back in
                // and granted the slot again): it goes back unused. The
                // wait is stored first, in the turn of the check above:
                // during the release's call, a purge or a new life may
                // come, which the old receipt must not be written over.
                let waited = self
                    .wait_for_permit(receipt, now.saturating_add(LATE_GRANT_RETRY_MS))
                    .await;
                drop(starting);
                self.release(permit).await;
                return waited;
            }
        };
        self.note_wait(&receipt, now);
        let epoch = self.new_epoch(&receipt, now);
        receipt.begin_forward(epoch, now, terms.lease_ms, terms.retention_ms);
        // The alarm is not moved to the lease's end (a write per delivery):
        // if this object dies mid-forward, the runtime runs the alarm that
        // started the attempt again, or the sweep wakes it at the in-flight
        // row's wake; either finds the lease and waits it out.
        let index = self.plan_index(&mut receipt);
        let in_flight = self.store(receipt.clone());
        drop(starting);
        if let Err(message) = in_flight {
            self.release(permit).await;
            return Err(message);
        }
        let attempt = Attempt {
            epoch,
            takeover,
            permit,
            index,
            started_at: now,
            timeout_ms,
            alarm_at_lease_end: false,
        };
        self.send_attempt(receipt, stored, terms, attempt).await
    }

    /// Sends the stored delivery as `attempt`, whose receipt is stored in
    /// flight at its epoch, and records the outcome: completed, retried on
    /// the schedule, or dead.
    async fn send_attempt(
        &self,
        receipt: Receipt,
        stored: DeliveryRequest,
        terms: AsyncTerms,
        attempt: Attempt,
    ) -> Result<(), String> {
        let Attempt {
            epoch,
            takeover,
            permit,
            index,
            started_at: now,
            timeout_ms,
            alarm_at_lease_end,
        } = attempt;
        // Read now, so a rotated secret signs pending deliveries too.
        let forward_secret = terms
            .forward_secret
            .as_deref()
            .and_then(|name| self.backend.secret(name));
        let request = stored.to_origin(
            &receipt.identity,
            epoch,
            forward_secret.as_ref().map(|secret| secret.expose()),
            now / 1000,
        );
        let Forwarded {
            recorded,
            origin_ms,
            ..
        } = self
            .forward_and_record(Forward {
                epoch,
                request,
                timeout_ms,
                started_at: now,
                index,
                permit,
                alongside: async {},
                // The alarm that started this attempt has fired: none is
                // set now (a first attempt's waits at its lease's end).
                after_send: || {
                    if !alarm_at_lease_end {
                        self.alarm_known.set(false);
                    }
                },
                record_policy: &|random| RecordPolicy {
                    retryable: RetryableStatuses::default(),
                    retention_ms: terms.retention_ms,
                    max_stored_response_bytes: terms.max_stored_response_bytes,
                    random,
                },
            })
            .await;
        let Some(recorded) = recorded else {
            // Purged meanwhile, or the outcome could not be written (then
            // the alarm's retry, or the sweep, takes the delivery over).
            return self.ensure_pending_alarm();
        };
        let decision = match (recorded, takeover) {
            (Recorded::Completed, true) => "taken_over",
            (Recorded::Completed, false) => "forwarded",
            (Recorded::Dead, _) => "dead",
            _ => "failed",
        };
        if let Ok(Some(receipt)) = self.with_receipt(|receipt| receipt.clone()) {
            self.emit_change(
                decision,
                &receipt,
                Trace {
                    origin_ms: Some(origin_ms),
                    ..Trace::default()
                },
            );
            // Kept a day or less: its coming expiry is announced with it.
            if let ReceiptState::Dead {
                expiry_warned: true,
                ..
            } = receipt.state
            {
                self.emit_change("dead_expiring", &receipt, Trace::default());
            }
        }
        self.ensure_pending_alarm()
    }

    /// A pending delivery with no alarm known to be set would never be
    /// attempted again: the alarm handler fails instead, so the runtime
    /// runs it again and it sets one.
    fn ensure_pending_alarm(&self) -> Result<(), String> {
        let pending = self
            .with_receipt(|receipt| receipt.as_ref().is_some_and(|r| r.deletable_at().is_none()))
            .unwrap_or(false);
        if pending && !self.alarm_known.get() {
            return Err("the pending delivery's next alarm could not be set".into());
        }
        Ok(())
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
        receipt.queue(now, now);
        let index = self.plan_index(&mut receipt);
        self.store(receipt.clone()).map_err(storage)?;
        // The row is written even if the alarm cannot be set: it is what
        // the sweep then wakes the delivery by (its old one, a dead
        // letter's, would not be due until its expiry).
        let (alarm, _) = join(self.set_alarm(now), self.write_index(index)).await;
        alarm.map_err(storage)?;
        self.emit_change("redriven", &receipt, Trace::default());
        Ok(receipt)
    }
}

/// The longest origin timeout a first attempt is made with by the call
/// that accepted its delivery: it runs after that call has answered, and
/// an object that no client is waiting on may be evicted after about 70
/// seconds (the alarm handler that makes every other attempt has 15
/// minutes). A route with a longer timeout queues its deliveries for the
/// alarm.
const FIRST_ATTEMPT_MAX_TIMEOUT_MS: u64 = 60_000;

/// An attempt that has not yet stored its receipt in flight.
struct Starting<'a>(&'a std::cell::Cell<bool>);

/// An attempt whose receipt is stored in flight, about to be sent.
struct Attempt {
    epoch: u64,
    /// Of an expired lease.
    takeover: bool,
    permit: Option<HeldPermit>,
    /// The in-flight row, written alongside the send.
    index: Option<IndexUpdate>,
    started_at: u64,
    /// When the forward gives up: before the lease ends.
    timeout_ms: u64,
    /// Whether the alarm is set at this attempt's lease's end (a first
    /// attempt's); otherwise the alarm that started it has fired.
    alarm_at_lease_end: bool,
}

/// The first attempt of a delivery accepted in flight: what
/// [`Engine::after_answer`] sends, from memory (the request needs no read).
pub(super) struct FirstAttempt {
    pub(super) receipt_id: String,
    pub(super) epoch: u64,
    pub(super) request: DeliveryRequest,
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

fn delivery_name(kind: DeliveryKind) -> &'static str {
    match kind {
        DeliveryKind::Sync => "sync",
        DeliveryKind::Async => "async",
    }
}
