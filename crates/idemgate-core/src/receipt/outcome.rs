//! What a forward's result makes of its receipt: completed, failed,
//! retried on the schedule, or dead (SPEC §2, §2b).

use super::{
    delivered, retry_delay, DeliveryKind, ForwardResult, Receipt, ReceiptState, RetryableStatuses,
    StoredResponse, DAY_MS,
};

/// The recorded outcome belongs to a forward that no longer owns the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub current_epoch: u64,
}

/// The receipt's outcome after a forward, as its callers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Completed,
    Failed,
    /// Async: failed, and retried at this time.
    Retrying {
        at: u64,
    },
    /// Async: failed, and the schedule is used up or the origin's status
    /// is one to give up on.
    Dead,
}

impl Receipt {
    /// Records how the forward at `epoch` ended. Refused when that forward
    /// no longer owns the receipt (a later forward took it over, it already
    /// ended, or the key was purged or expired and is in flight again at a
    /// higher epoch), so a late answer never overwrites a newer attempt.
    /// A sync receipt settles by `policy`; an async one by its own terms.
    pub fn record(
        &mut self,
        epoch: u64,
        result: &ForwardResult,
        policy: &RecordPolicy,
        now: u64,
    ) -> Result<Recorded, Stale> {
        let owns = matches!(self.state, ReceiptState::InFlight { .. }) && self.epoch == epoch;
        if !owns {
            return Err(Stale {
                current_epoch: self.epoch,
            });
        }
        if let Some(attempt) = self.attempts.iter_mut().rev().find(|a| a.epoch == epoch) {
            attempt.ended_at = Some(now);
            match result {
                ForwardResult::Answered(response) => attempt.status = Some(response.status),
                ForwardResult::TimedOut => attempt.error = Some("timeout".into()),
                ForwardResult::Unreachable(message) => {
                    attempt.error = Some(format!("unreachable: {message}"))
                }
            }
        }
        let recorded = match self.delivery {
            DeliveryKind::Sync => self.settle_sync(result, policy, now),
            DeliveryKind::Async => self.settle_async(result, policy.random, now),
        };
        self.updated_at = now;
        Ok(recorded)
    }

    /// SPEC §2: a status `RETRYABLE_STATUSES` names, a timeout or a
    /// network error fails the receipt (the next delivery forwards again);
    /// any other answer completes it.
    fn settle_sync(&mut self, result: &ForwardResult, policy: &RecordPolicy, now: u64) -> Recorded {
        self.expires_at = now.saturating_add(policy.retention_ms);
        match result {
            ForwardResult::Answered(response) if policy.retryable.completes(response.status) => {
                self.complete(response, policy.max_stored_response_bytes, now);
                Recorded::Completed
            }
            _ => {
                self.state = ReceiptState::Failed {
                    failed_at: now,
                    next_attempt_at: None,
                };
                Recorded::Failed
            }
        }
    }

    /// SPEC §2b (v3): only a 2xx delivers; a status `GIVE_UP_STATUSES`
    /// names ends the receipt dead at once; anything else is retried after
    /// the schedule's next delay, and dead when the schedule is used up.
    /// The terms are the receipt's own, as it was accepted.
    fn settle_async(&mut self, result: &ForwardResult, random: u64, now: u64) -> Recorded {
        let terms = self.terms.clone().unwrap_or_default();
        let give_up = match result {
            ForwardResult::Answered(response) if delivered(response.status) => {
                self.complete(response, terms.max_stored_response_bytes, now);
                self.expires_at = now.saturating_add(terms.retention_ms);
                return Recorded::Completed;
            }
            ForwardResult::Answered(response) => terms.give_up.contains(response.status),
            ForwardResult::TimedOut | ForwardResult::Unreachable(_) => false,
        };
        let retry = match give_up {
            true => None,
            false => retry_delay(&terms.retry_schedule_ms, self.schedule_step, random),
        };
        match retry {
            Some(delay) => {
                let at = now.saturating_add(delay);
                self.schedule_step += 1;
                self.state = ReceiptState::Failed {
                    failed_at: now,
                    next_attempt_at: Some(at),
                };
                self.expires_at = now.saturating_add(terms.retention_ms);
                Recorded::Retrying { at }
            }
            None => {
                self.expires_at = now.saturating_add(terms.dead_retention_ms);
                // A bound of a day or less is announced at once.
                let expiry_warned = self.expires_at.saturating_sub(DAY_MS) <= now;
                self.state = ReceiptState::Dead {
                    dead_at: now,
                    expiry_warned,
                    superseded: false,
                };
                Recorded::Dead
            }
        }
    }

    fn complete(&mut self, response: &crate::receipt::HttpResponse, max_body_bytes: u64, now: u64) {
        self.state = ReceiptState::Completed {
            completed_at: now,
            response: StoredResponse::keep(response, max_body_bytes),
        };
    }
}

/// What recording an outcome needs besides the result: the route's sync
/// settings (an async receipt follows its own terms), and random bits for
/// the jitter of an async retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPolicy {
    pub retryable: RetryableStatuses,
    pub retention_ms: u64,
    pub max_stored_response_bytes: u64,
    pub random: u64,
}
