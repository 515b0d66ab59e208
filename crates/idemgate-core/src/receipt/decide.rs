//! The decision tables of SPEC §2 and §2b: what a delivery gets from its
//! key's receipt, when a lease ends, the epoch of a new forward, and what
//! an async receipt's alarm does next.

use super::{DeliveryKind, Receipt, ReceiptState};
use crate::canonical::Fingerprint;
use crate::mutation::{is_active, Mutation};

/// The epoch of a new forward: above the key's latest (`previous`), and
/// above every epoch the key had in an earlier life, which no storage
/// remembers after a purge or retention. Epochs are microseconds of the
/// clock when they can be: within a life each forward adds at least one,
/// and a new life starts from the clock, past every forward of the lives
/// before it (a later millisecond; within the same one, the object still
/// in memory remembers its last epoch, and an object takes more than a
/// millisecond to restart). Until the year 2255 they stay below 2^53, so
/// JSON readers and JavaScript origins read them exactly.
pub fn next_epoch(previous: u64, now_ms: u64) -> u64 {
    if is_active(Mutation::EpochRestartsEachLife) {
        return previous + 1;
    }
    previous.saturating_add(1).max(now_ms.saturating_mul(1_000))
}

/// What a sync delivery gets, given the receipt of its key (SPEC §2's table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward with a new epoch; `takeover` when an expired lease is taken over.
    Forward { takeover: bool },
    /// Answer from the stored response.
    Replay,
    /// Same key, different payload: 422, never forwarded.
    Mismatch,
    /// The first delivery is still in flight: the `IN_FLIGHT` policy decides.
    InFlight { lease_expires_at: u64 },
}

/// What an async delivery gets (SPEC §2b).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsyncDecision {
    /// A first delivery: store it whole, queue it, acknowledge it.
    Accept,
    /// A duplicate in any state: the same acknowledgement, nothing forwarded.
    Duplicate,
    Mismatch,
    /// A sync forward of the key (from before its route became async) is
    /// still running: not acknowledged, since it may yet fail.
    InFlight {
        lease_expires_at: u64,
    },
}

pub fn decide(receipt: Option<&Receipt>, fingerprint: &Fingerprint, now: u64) -> Decision {
    let Some(receipt) = receipt.filter(|receipt| !receipt.is_expired(now)) else {
        return Decision::Forward { takeover: false };
    };
    if &receipt.fingerprint != fingerprint && !is_active(Mutation::SkipFingerprintCheck) {
        return Decision::Mismatch;
    }
    match &receipt.state {
        ReceiptState::InFlight { lease_expires_at } if !lease_expired(*lease_expires_at, now) => {
            Decision::InFlight {
                lease_expires_at: *lease_expires_at,
            }
        }
        ReceiptState::InFlight { .. } => Decision::Forward { takeover: true },
        ReceiptState::Completed { .. } if is_active(Mutation::ForwardCompleted) => {
            Decision::Forward { takeover: false }
        }
        ReceiptState::Completed { .. } => Decision::Replay,
        ReceiptState::Failed { .. } if is_active(Mutation::FailedStaysInFlight) => {
            Decision::InFlight {
                lease_expires_at: u64::MAX,
            }
        }
        // A sync route never leaves a receipt queued or dead; if its route
        // became sync, the key is forwarded like a failed one.
        ReceiptState::Failed { .. } | ReceiptState::Queued { .. } | ReceiptState::Dead { .. } => {
            Decision::Forward { takeover: false }
        }
    }
}

pub fn decide_async(
    receipt: Option<&Receipt>,
    fingerprint: &Fingerprint,
    now: u64,
) -> AsyncDecision {
    match receipt.filter(|receipt| !receipt.is_expired(now)) {
        None => AsyncDecision::Accept,
        Some(receipt) if &receipt.fingerprint != fingerprint => AsyncDecision::Mismatch,
        // A key its route left unfinished while it was sync: acknowledging
        // it as a duplicate would tell the sender it is done when nothing
        // will ever deliver it. It is accepted (stored, queued) instead.
        Some(receipt) if receipt.delivery == DeliveryKind::Sync => match receipt.state {
            ReceiptState::Completed { .. } => AsyncDecision::Duplicate,
            ReceiptState::InFlight { lease_expires_at }
                if !lease_expired(lease_expires_at, now) =>
            {
                AsyncDecision::InFlight { lease_expires_at }
            }
            _ => AsyncDecision::Accept,
        },
        Some(_) => AsyncDecision::Duplicate,
    }
}

/// A lease ends at `lease_expires_at`: from that millisecond on, another
/// delivery may take the key over.
pub fn lease_expired(lease_expires_at: u64, now: u64) -> bool {
    if is_active(Mutation::IgnoreLiveLease) {
        return true;
    }
    now >= lease_expires_at
}

/// What the alarm of an async receipt does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsyncStep {
    /// Forward the stored delivery now (`takeover` of an expired lease).
    Attempt { takeover: bool },
    /// Nothing to do before this time.
    WaitUntil(u64),
    /// A dead letter's expiry is a day away (or less): announce it.
    WarnExpiry,
    /// Settled and past retention: delete it.
    Expire,
}

pub fn next_async_step(receipt: &Receipt, now: u64) -> AsyncStep {
    match &receipt.state {
        ReceiptState::Queued { next_attempt_at }
        | ReceiptState::Failed {
            next_attempt_at: Some(next_attempt_at),
            ..
        } => {
            if now >= *next_attempt_at {
                AsyncStep::Attempt { takeover: false }
            } else {
                AsyncStep::WaitUntil(*next_attempt_at)
            }
        }
        ReceiptState::InFlight { lease_expires_at } => {
            if lease_expired(*lease_expires_at, now) {
                AsyncStep::Attempt { takeover: true }
            } else {
                AsyncStep::WaitUntil(*lease_expires_at)
            }
        }
        ReceiptState::Completed { .. }
        | ReceiptState::Dead { .. }
        | ReceiptState::Failed {
            next_attempt_at: None,
            ..
        } => match receipt.expiry_warning_at() {
            _ if now >= receipt.expires_at => AsyncStep::Expire,
            Some(at) if now >= at => AsyncStep::WarnExpiry,
            Some(at) => AsyncStep::WaitUntil(at),
            None => AsyncStep::WaitUntil(receipt.expires_at),
        },
    }
}

/// The delay before retry number `step` (0-based) of `schedule`, with
/// `random` spreading it by up to 10% either way; `None` when the schedule
/// is used up (the receipt is then dead).
pub fn retry_delay(schedule: &[u64], step: u32, random: u64) -> Option<u64> {
    let base = *schedule.get(step as usize)?;
    // base x (90..=110)%: delays are at most 7 days, so no overflow.
    Some(base * (90 + random % 21) / 100)
}

/// Seconds a caller should wait before retrying a key in flight: until its
/// lease ends, rounded up, and at least one.
pub fn retry_after_secs(lease_expires_at: u64, now: u64) -> u64 {
    lease_expires_at.saturating_sub(now).div_ceil(1000).max(1)
}
