//! What a forward's result makes of its receipt: completed, failed,
//! retried on the schedule, or dead (SPEC §2, §2b).

use super::{
    retry_delay, DeliveryKind, ForwardResult, Receipt, ReceiptState, RetryableStatuses,
    StoredResponse,
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
    /// Async: failed, and the schedule is used up.
    Dead,
}

impl Receipt {
    /// Records how the forward at `epoch` ended. Refused when that forward
    /// no longer owns the receipt (a later forward took it over, it already
    /// ended, or the key was purged or expired and is in flight again at a
    /// higher epoch), so a late answer never overwrites a newer attempt.
    /// An async receipt that failed is scheduled again from `retry`
    /// (schedule and random bits), or dead.
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
        let completed = matches!(
            result,
            ForwardResult::Answered(response) if policy.retryable.completes(response.status)
        );
        let recorded = match (result, completed, self.delivery) {
            (ForwardResult::Answered(response), true, _) => {
                self.state = ReceiptState::Completed {
                    completed_at: now,
                    response: StoredResponse::keep(response, policy.max_stored_response_bytes),
                };
                Recorded::Completed
            }
            (_, _, DeliveryKind::Sync) => {
                self.state = ReceiptState::Failed {
                    failed_at: now,
                    next_attempt_at: None,
                };
                Recorded::Failed
            }
            (_, _, DeliveryKind::Async) => {
                match retry_delay(&policy.retry_schedule_ms, self.schedule_step, policy.random) {
                    Some(delay) => {
                        let at = now.saturating_add(delay);
                        self.schedule_step += 1;
                        self.state = ReceiptState::Failed {
                            failed_at: now,
                            next_attempt_at: Some(at),
                        };
                        Recorded::Retrying { at }
                    }
                    None => {
                        self.state = ReceiptState::Dead { dead_at: now };
                        Recorded::Dead
                    }
                }
            }
        };
        self.updated_at = now;
        self.expires_at = now.saturating_add(policy.retention_ms);
        Ok(recorded)
    }
}

/// What recording an outcome needs besides the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPolicy {
    pub retryable: RetryableStatuses,
    pub retention_ms: u64,
    pub max_stored_response_bytes: u64,
    /// Async: the retry schedule's delays, and random bits for jitter.
    pub retry_schedule_ms: Vec<u64>,
    pub random: u64,
}
