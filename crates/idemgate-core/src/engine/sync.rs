//! SPEC §2 with the sender waiting: the first delivery is forwarded, and
//! duplicates wait for its outcome, conflict or are acknowledged.

use futures::channel::oneshot;
use futures::future::{select, Either};

use super::forward::{Forward, Forwarded};
use super::permits::{ForwardClaim, HeldPermit};
use super::{settle, Backend, Engine, Policy};
use crate::answer::{Answer, Settled};
use crate::canonical::Fingerprint;
use crate::config::InFlightPolicy;
use crate::decision_log::Trace;
use crate::delivery::Delivery;
use crate::mutation::{is_active, Mutation};
use crate::problem::Problem;
use crate::receipt::{
    decide, retry_after_secs, Decision, DeliveryKind, ForwardResult, Receipt, Recorded,
};

impl<B: Backend> Engine<B> {
    pub(super) async fn answer_sync(
        &self,
        mut delivery: Delivery,
        policy: &Policy,
        trace: &mut Trace,
    ) -> Answer {
        let wait_deadline = self.backend.now_ms().saturating_add(policy.wait_ms);
        let mut counted = false;
        // A waiting duplicate holds no copy of its body (SPEC §2: hundreds
        // may wait on one key); one that wakes without an outcome is told
        // to retry rather than forward.
        let mut body_dropped = false;
        // With flow control, the permit is asked for first and the
        // decision made again with it in hand: the receipt may have moved
        // on while the coordinator answered.
        let mut held: Option<(HeldPermit, ForwardClaim<'_, B>)> = None;
        loop {
            // Again on each turn: a reconciled receipt may have been
            // written while this delivery waited (SPEC §11).
            self.compare_by_event_id(&mut delivery);
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
                let known = receipt
                    .as_ref()
                    .map(|receipt| (receipt.epoch, receipt.identity.receipt_id.clone()));
                (decision, stored, known)
            });
            let (decision, stored, known) = match decided {
                Ok(decided) => decided,
                Err(message) => return Answer::Rejected(Problem::StorageUnavailable { message }),
            };
            // A duplicate in flight waits for the forward at this epoch.
            let waiting_on = known.as_ref().map_or(0, |(epoch, _)| *epoch);
            if let Some((epoch, receipt_id)) = known {
                trace.epoch = Some(epoch);
                trace.receipt_id = Some(receipt_id);
            }
            if !matches!(decision, Decision::Forward { .. }) {
                if let Some((permit, claim)) = held.take() {
                    drop(claim);
                    self.release(Some(permit)).await;
                }
            }
            match decision {
                Decision::Forward { .. } if body_dropped => {
                    return Answer::Rejected(Problem::InFlight {
                        retry_after_secs: 1,
                    })
                }
                Decision::Forward { .. } if policy.flow.is_some() && held.is_none() => {
                    let limits = policy.flow.expect("limits");
                    if self.forward_claimed() {
                        self.wait_for_forward_claim().await;
                        continue;
                    }
                    let identity = &delivery.identity;
                    match self
                        .permit_for_sync(
                            &identity.route,
                            &identity.object,
                            limits,
                            policy.lease_ms,
                            policy.origin_timeout_ms,
                        )
                        .await
                    {
                        Ok(permit) => held = Some(permit),
                        Err(busy) => return busy,
                    }
                }
                Decision::Forward { takeover } => {
                    trace.takeover = takeover;
                    return self.forward_sync(delivery, policy, trace, held).await;
                }
                Decision::Mismatch => return Answer::Rejected(Problem::FingerprintMismatch),
                Decision::Replay => {
                    let mut stored = stored.expect("a completed receipt has a response");
                    if is_active(Mutation::CorruptReplayBody) {
                        stored.response.body.push(b'!');
                    }
                    return Answer::Replayed(stored);
                }
                Decision::InFlight { lease_expires_at } => {
                    counted = true;
                    let retry_after_secs = retry_after_secs(lease_expires_at, now);
                    let conflict = Answer::Rejected(Problem::InFlight { retry_after_secs });
                    match policy.in_flight {
                        InFlightPolicy::Conflict => return conflict,
                        InFlightPolicy::Ack => return Answer::Acknowledged,
                        InFlightPolicy::Wait if is_active(Mutation::AcknowledgeWhileWaiting) => {
                            return Answer::Acknowledged
                        }
                        // The wait ran out (a live lease ends later, or
                        // the decision would not be in flight): nothing
                        // is left to wait for, so never spin in place.
                        InFlightPolicy::Wait if wait_deadline.min(lease_expires_at) <= now => {
                            return conflict
                        }
                        InFlightPolicy::Wait if self.waiting() >= policy.max_waiters => {
                            return conflict
                        }
                        InFlightPolicy::Wait => {
                            delivery.request.body = Vec::new();
                            body_dropped = true;
                            // Wake at the outcome, at the wait deadline, or when
                            // the lease ends; then decide again.
                            let until = wait_deadline.min(lease_expires_at);
                            let waited = self.wait_for_outcome(
                                &delivery.fingerprint,
                                waiting_on,
                                until.saturating_sub(now),
                            );
                            if let Some(settled) = waited.await {
                                return Answer::Waited(settled);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Duplicates waiting now.
    fn waiting(&self) -> usize {
        let mut waiters = self.waiters.borrow_mut();
        waiters.retain(|(_, _, waiter)| !waiter.is_canceled());
        waiters.len()
    }

    async fn wait_for_outcome(
        &self,
        fingerprint: &Fingerprint,
        epoch: u64,
        ms: u64,
    ) -> Option<Settled> {
        let (sender, receiver) = oneshot::channel();
        self.waiters
            .borrow_mut()
            .push((fingerprint.clone(), epoch, sender));
        let timeout = std::pin::pin!(self.backend.sleep(ms));
        match select(receiver, timeout).await {
            Either::Left((Ok(settled), _)) => Some(settled),
            _ => None,
        }
    }

    async fn forward_sync(
        &self,
        delivery: Delivery,
        policy: &Policy,
        trace: &mut Trace,
        held: Option<(HeldPermit, ForwardClaim<'_, B>)>,
    ) -> Answer {
        let now = self.backend.now_ms();
        let (permit, claim) = match held {
            Some((permit, claim)) => (Some(permit), Some(claim)),
            None => (None, None),
        };
        let timeout_ms = match permit
            .as_ref()
            .map(|held| held.timeout_ms(now, policy.origin_timeout_ms))
        {
            None => policy.origin_timeout_ms,
            Some(Some(timeout_ms)) => timeout_ms,
            Some(None) => {
                // The grant came back after most of its lease had passed
                // at the coordinator: given back unused, nothing stored.
                drop(claim);
                self.release(permit).await;
                return Answer::Rejected(Problem::OriginBusy {
                    retry_after_secs: 1,
                });
            }
        };
        let previous = match self.with_receipt(Option::take) {
            Ok(previous) => previous,
            Err(message) => {
                drop(claim);
                self.release(permit).await;
                return Answer::Rejected(Problem::StorageUnavailable { message });
            }
        };
        let mut receipt = match previous {
            Some(receipt) if !receipt.is_expired(now) => receipt,
            expired => {
                let mut receipt = self.new_receipt(
                    delivery.identity.clone(),
                    delivery.fingerprint.clone(),
                    DeliveryKind::Sync,
                    expired.as_ref(),
                    policy,
                );
                receipt.batch = delivery.request.batch.clone();
                receipt
            }
        };
        let epoch = if trace.takeover && is_active(Mutation::ReuseEpochOnTakeover) {
            receipt.epoch
        } else {
            self.new_epoch(&receipt, now)
        };
        receipt.begin_forward(epoch, now, policy.lease_ms, policy.retention_ms);
        let index = self.plan_index(&mut receipt);
        // The forward settles within its lease, and the receipt then
        // expires a retention later: an alarm set past both fires once,
        // to delete, instead of early and again.
        let wake = receipt.expires_at.saturating_add(policy.lease_ms);
        trace.epoch = Some(epoch);
        trace.receipt_id = Some(receipt.identity.receipt_id.clone());
        // The receipt is durable before anything is sent: a restart after
        // this point never forgets that the key was accepted.
        let stored = self.store(receipt);
        // In flight now (or not stored): deliveries that waited for the
        // permit decide again.
        drop(claim);
        if let Err(message) = stored {
            self.release(permit).await;
            return Answer::Rejected(Problem::StorageUnavailable { message });
        }
        let request = delivery.request.to_origin(
            &delivery.identity,
            epoch,
            policy.forward_secret.as_ref().map(|secret| secret.expose()),
            now / 1000,
        );
        // The lease counts from the send: the alarm is set alongside it,
        // not awaited before it. So is the index row, which the outcome
        // never waits for (a later write's version wins over it).
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
                alongside: self.ensure_retention_alarm(wake),
                after_send: || {},
                record_policy: &|random| policy.record_policy(random),
            })
            .await;
        trace.origin_ms = Some(origin_ms);
        let completed = match recorded {
            Some(recorded) => recorded == Recorded::Completed,
            None => {
                matches!(&result, ForwardResult::Answered(response) if policy.retryable.completes(response.status))
            }
        };
        let settled = settle(result, completed, policy.origin_timeout_ms);
        // A forward whose key was taken over answers only its own caller:
        // the waiters belong to the newer forward and get its outcome. And
        // only waiters of this payload, and of this forward: after a purge
        // (which may come while this one writes its outcome and its index
        // row), a new forward may carry another payload, or the same, and
        // its outcome is not theirs, nor this one theirs.
        let stale = is_active(Mutation::WakeWaitersOfStaleForward);
        if recorded.is_some() || stale {
            let epoch = (!stale).then_some(epoch);
            self.wake_waiters(&delivery.fingerprint, epoch, &settled);
        }
        Answer::Forwarded(settled)
    }

    /// Answers the waiters of `fingerprint` that wait for the forward at
    /// `epoch` (`None`: at any).
    fn wake_waiters(&self, fingerprint: &Fingerprint, epoch: Option<u64>, settled: &Settled) {
        let waiting = std::mem::take(&mut *self.waiters.borrow_mut());
        let (answered, still_waiting): (Vec<_>, Vec<_>) =
            waiting.into_iter().partition(|(payload, waited_on, _)| {
                payload == fingerprint && epoch.is_none_or(|epoch| epoch == *waited_on)
            });
        *self.waiters.borrow_mut() = still_waiting;
        for (_, _, waiter) in answered {
            let _ = waiter.send(settled.clone());
        }
    }

    /// A sync receipt's alarm serves retention only: it is set once per
    /// object lifetime and reschedules itself until the receipt is due. It
    /// is set without asking whether one exists: whatever alarm it
    /// replaces, the new one serves the receipt as it now is.
    async fn ensure_retention_alarm(&self, at_ms: u64) {
        if !self.alarm_known.get() && self.backend.set_alarm(at_ms).await.is_ok() {
            self.alarm_known.set(true);
        }
    }
}
