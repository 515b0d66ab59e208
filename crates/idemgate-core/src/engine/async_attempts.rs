//! SPEC §2b's attempts: the alarm of an async receipt (attempt, wait,
//! warn of a dead letter's expiry, expire), each attempt's permit and
//! in-flight write, and what its outcome makes of the receipt. An attempt
//! is stored in flight before it is sent, so a crash mid-forward only
//! delays the delivery until its lease ends.

use futures::future::join;

use super::forward::{Forward, Forwarded};
use super::order::{self, AttemptTurn, HeldTurn};
use super::permits::{AttemptPermit, HeldPermit};
use super::{Backend, Engine};
use crate::decision_log::Trace;
use crate::delivery::DeliveryRequest;
use crate::flow::LATE_GRANT_RETRY_MS;
use crate::index::IndexUpdate;
use crate::order::Outcome;
use crate::receipt::{
    delivered, next_async_step, AsyncStep, AsyncTerms, ForwardResult, Receipt, ReceiptState,
    RecordPolicy, Recorded, RetryableStatuses,
};

impl<B: Backend> Engine<B> {
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

    /// A delivery that ends without a forward: dead, when it can never be
    /// sent as stored; or (v4) superseded, stale on a route that skips
    /// stale deliveries. Kept for the operator (`DEAD_RETENTION_SECONDS`),
    /// listed, and re-drivable.
    pub(super) async fn end_unsent(
        &self,
        mut receipt: Receipt,
        now: u64,
        terms: &AsyncTerms,
        superseded: bool,
    ) -> Result<(), String> {
        receipt.state = ReceiptState::Dead {
            dead_at: now,
            expiry_warned: false,
            superseded,
        };
        receipt.expires_at = now.saturating_add(terms.dead_retention_ms);
        let index = self.plan_index(&mut receipt);
        let wake = receipt.next_wake();
        self.store(receipt.clone())?;
        self.set_alarm(wake).await?;
        self.write_index(index).await;
        self.emit_change(receipt.state_name(), &receipt, Trace::default());
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
            return self.end_unsent(receipt, now, &terms, false).await;
        };
        self.woken.set(false);
        // An ordered delivery's turn first (SPEC §12, v4), then its flow
        // permit: a permit, the route's to share, is never held waiting
        // for one entity's order.
        let mut turn = self
            .turn_for_attempt(&receipt, stored.order.as_ref(), &terms)
            .await;
        if matches!(turn, AttemptTurn::WaitUntil(_)) && self.woken.take() {
            // The order object's wake overtook its own answer.
            turn = self
                .turn_for_attempt(&receipt, stored.order.as_ref(), &terms)
                .await;
        }
        let needs_permit = match &turn {
            AttemptTurn::WaitUntil(_) => false,
            AttemptTurn::Held(held) => !(held.stale && held.skip_stale),
            AttemptTurn::Unordered => true,
        };
        let mut asked = AttemptPermit::Unlimited;
        if needs_permit {
            asked = self.permit_for_attempt(&receipt).await;
            if matches!(asked, AttemptPermit::WaitUntil(_)) && self.woken.take() {
                // The coordinator's wake overtook its own answer (it
                // reserved a permit for this object after answering
                // "queued"), and the wake found this attempt under way:
                // the permit is ours to claim now, rather than when the
                // queued answer said to ask.
                asked = self.permit_for_attempt(&receipt).await;
            }
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
            if let AttemptTurn::Held(held) = turn {
                let now = self.backend.now_ms();
                self.give_back_turn(Some(held), Outcome::RetryAt(now)).await;
            }
            return Ok(());
        }
        let turn = match turn {
            AttemptTurn::Unordered => None,
            AttemptTurn::Held(held) if held.stale && held.skip_stale => {
                drop(starting);
                return self.supersede(receipt, held, &terms).await;
            }
            AttemptTurn::Held(held) => Some(held),
            AttemptTurn::WaitUntil(at) => {
                let waited = self.wait_for_turn(receipt, at).await;
                drop(starting);
                if waited.is_ok() && self.woken.get() {
                    return self.set_alarm(self.backend.now_ms()).await;
                }
                return waited;
            }
        };
        let permit = match asked {
            AttemptPermit::Unlimited => None,
            AttemptPermit::Held(permit) => Some(permit),
            AttemptPermit::WaitUntil(at) => {
                // The entity keeps its place: the book holds later ones
                // behind this delivery until it asks again.
                let waited = self.wait_for_permit(receipt, at).await;
                self.give_back_turn(turn, Outcome::RetryAt(at)).await;
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
        let permit_timeout = permit
            .as_ref()
            .map(|held| held.timeout_ms(now, terms.origin_timeout_ms));
        let turn_timeout = turn
            .as_ref()
            .map(|held| held.timeout_ms(now, terms.origin_timeout_ms));
        let timeout_ms = match (permit_timeout, turn_timeout) {
            (Some(None), _) | (_, Some(None)) => None,
            (permit, turn) => Some(
                [permit.flatten(), turn.flatten()]
                    .into_iter()
                    .flatten()
                    .fold(terms.origin_timeout_ms, u64::min),
            ),
        };
        let timeout_ms = match timeout_ms {
            Some(timeout_ms) => timeout_ms,
            None => {
                // The grant came back after most of its lease had passed
                // at the coordinator (which may have counted it back in
                // and granted the slot again): it goes back unused. The
                // wait is stored first, in the turn of the check above:
                // during the release's call, a purge or a new life may
                // come, which the old receipt must not be written over.
                let retry_at = now.saturating_add(LATE_GRANT_RETRY_MS);
                let waited = self.wait_for_permit(receipt, retry_at).await;
                drop(starting);
                self.release(permit).await;
                self.give_back_turn(turn, Outcome::RetryAt(retry_at)).await;
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
            self.give_back_turn(turn, Outcome::RetryAt(now)).await;
            return Err(message);
        }
        let attempt = Attempt {
            epoch,
            takeover,
            permit,
            turn,
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
    pub(super) async fn send_attempt(
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
            turn,
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
        let mut stored = stored;
        // Older than what the origin has of its entity: it says so, under
        // the signature (SPEC §12). A superseded delivery re-driven was
        // stored stale, and stays so whatever the book still remembers.
        stored.stale |= turn.as_ref().is_some_and(|held| held.stale);
        let request = stored.to_origin(
            &receipt.identity,
            epoch,
            forward_secret.as_ref().map(|secret| secret.expose()),
            now / 1000,
        );
        let Forwarded {
            result,
            recorded,
            origin_ms,
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
        let ended_at = self.backend.now_ms();
        let origin_accepted =
            matches!(&result, ForwardResult::Answered(answer) if delivered(answer.status));
        self.give_back_turn(turn, order::outcome_of(recorded, origin_accepted, ended_at))
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
}

/// An attempt that has not yet stored its receipt in flight.
struct Starting<'a>(&'a std::cell::Cell<bool>);

/// An attempt whose receipt is stored in flight, about to be sent.
pub(super) struct Attempt {
    pub(super) epoch: u64,
    /// Of an expired lease.
    pub(super) takeover: bool,
    pub(super) permit: Option<HeldPermit>,
    /// The entity's turn, on an ordered route (SPEC §12).
    pub(super) turn: Option<HeldTurn>,
    /// The in-flight row, written alongside the send.
    pub(super) index: Option<IndexUpdate>,
    pub(super) started_at: u64,
    /// When the forward gives up: before the lease ends.
    pub(super) timeout_ms: u64,
    /// Whether the alarm is set at this attempt's lease's end (a first
    /// attempt's); otherwise the alarm that started it has fired.
    pub(super) alarm_at_lease_end: bool,
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}
