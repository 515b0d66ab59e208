//! The receipt of one key and the decision tables of SPEC §2 and §2b, as
//! pure data and pure functions: no storage, no clock, no network.

use serde::{Deserialize, Serialize};

use crate::canonical::Fingerprint;
use crate::headers::{self, HeaderList};
use crate::mutation::{is_active, Mutation};

/// At most this many attempts are kept on a receipt; older ones are dropped.
pub const MAX_ATTEMPTS_KEPT: usize = 16;

/// An HTTP response as data: what the origin answered, or what is replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: HeaderList,
    /// Kept out of the receipt's JSON: storage holds it as a blob beside it.
    #[serde(skip)]
    pub body: Vec<u8>,
}

/// The response a `completed` receipt replays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    #[serde(flatten)]
    pub response: HttpResponse,
    /// Length of the origin's body.
    pub body_bytes: usize,
    /// False when the body was over `MAX_STORED_RESPONSE_BYTES` and was not
    /// kept: a replay then has the status and headers and an empty body.
    pub body_stored: bool,
}

impl StoredResponse {
    /// What of `response` is kept: no hop-by-hop headers, no `Set-Cookie`,
    /// and the body only up to `max_body_bytes`.
    pub fn keep(response: &HttpResponse, max_body_bytes: u64) -> StoredResponse {
        let body_bytes = response.body.len();
        let body_stored = body_bytes as u64 <= max_body_bytes;
        StoredResponse {
            response: HttpResponse {
                status: response.status,
                headers: headers::for_replay(&response.headers),
                body: if body_stored {
                    response.body.clone()
                } else {
                    Vec::new()
                },
            },
            body_bytes,
            body_stored,
        }
    }
}

/// `RETRYABLE_STATUSES`: origin statuses that mean the forward failed (and
/// is retried) rather than completed (and replayed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryableStatuses(Vec<(u16, u16)>);

impl Default for RetryableStatuses {
    fn default() -> RetryableStatuses {
        RetryableStatuses::parse("408,425,429,500-599").expect("the default parses")
    }
}

impl RetryableStatuses {
    /// `408,425,429,500-599`: statuses and inclusive ranges, 100 to 599.
    pub fn parse(text: &str) -> Result<RetryableStatuses, String> {
        let status = |text: &str| {
            text.trim()
                .parse::<u16>()
                .ok()
                .filter(|status| (100..=599).contains(status))
                .ok_or_else(|| format!("{:?} is not a status from 100 to 599", text.trim()))
        };
        text.split(',')
            .map(|entry| match entry.split_once('-') {
                Some((low, high)) => {
                    let (low, high) = (status(low)?, status(high)?);
                    if low > high {
                        return Err(format!("{:?} is an empty range", entry.trim()));
                    }
                    Ok((low, high))
                }
                None => status(entry).map(|status| (status, status)),
            })
            .collect::<Result<Vec<_>, String>>()
            .map(RetryableStatuses)
    }

    pub fn contains(&self, status: u16) -> bool {
        self.0
            .iter()
            .any(|(low, high)| (*low..=*high).contains(&status))
    }

    /// Whether an origin answer of `status` completes a receipt (SPEC §2).
    pub fn completes(&self, status: u16) -> bool {
        !self.contains(status)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ReceiptState {
    /// Async: accepted and durable, waiting for its next attempt.
    Queued {
        next_attempt_at: u64,
    },
    InFlight {
        lease_expires_at: u64,
    },
    Completed {
        completed_at: u64,
        response: StoredResponse,
    },
    /// The latest forward failed; an async receipt says when it is retried.
    Failed {
        failed_at: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next_attempt_at: Option<u64>,
    },
    /// Async: every delay of the schedule was used, and the last attempt failed.
    Dead {
        dead_at: u64,
    },
}

/// How the receipt's deliveries reach the origin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryKind {
    #[default]
    Sync,
    Async,
}

/// One forward to the origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub epoch: u64,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub status: Option<u16>,
    pub error: Option<String>,
}

/// Which key a receipt is, as the operator sees it: enough to read, purge
/// or re-drive it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Identity {
    pub receipt_id: String,
    pub route: String,
    /// The name of the Durable Object that holds the receipt.
    pub object: String,
    /// The scope id (64 hex digits), as forwarded in `Idempotency-Scope`.
    pub scope: String,
    pub key: String,
    /// The normalised path, under path scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_sha256: Option<String>,
}

/// The durable record of one key. Times are milliseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    #[serde(flatten)]
    pub identity: Identity,
    #[serde(flatten)]
    pub state: ReceiptState,
    pub delivery: DeliveryKind,
    pub fingerprint: Fingerprint,
    /// Fencing number of the latest forward (0 before the first): greater
    /// than that of every earlier forward of the key, across lives.
    pub epoch: u64,
    pub first_seen_at: u64,
    pub updated_at: u64,
    /// When a settled receipt may be deleted (`RETENTION_SECONDS` after its
    /// last write). A pending async receipt is never deleted.
    pub expires_at: u64,
    /// Deliveries this receipt absorbed (replays and in-flight duplicates).
    pub duplicates: u64,
    pub attempts: Vec<Attempt>,
    /// Async: delays of the retry schedule used since it was last queued.
    #[serde(default)]
    pub schedule_step: u32,
    /// The state the receipt index (D1) shows for this receipt, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexed: Option<String>,
}

/// How one forward ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardResult {
    Answered(HttpResponse),
    TimedOut,
    Unreachable(String),
}

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

/// The recorded outcome belongs to a forward that no longer owns the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub current_epoch: u64,
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
        } => {
            if now >= receipt.expires_at {
                AsyncStep::Expire
            } else {
                AsyncStep::WaitUntil(receipt.expires_at)
            }
        }
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
    /// A new receipt for `identity`; its state is set by the caller's next step.
    pub fn new(
        identity: Identity,
        fingerprint: Fingerprint,
        delivery: DeliveryKind,
        state: ReceiptState,
        now: u64,
        retention_ms: u64,
    ) -> Receipt {
        Receipt {
            identity,
            state,
            delivery,
            fingerprint,
            epoch: 0,
            first_seen_at: now,
            updated_at: now,
            expires_at: now.saturating_add(retention_ms),
            duplicates: 0,
            attempts: Vec::new(),
            schedule_step: 0,
            indexed: None,
        }
    }

    /// Starts a forward at `epoch`: in flight until `lease_expires_at`.
    /// The receipt is written with this state before anything is sent.
    pub fn begin_forward(&mut self, epoch: u64, now: u64, lease_ms: u64, retention_ms: u64) {
        self.attempts.push(Attempt {
            epoch,
            started_at: now,
            ended_at: None,
            status: None,
            error: None,
        });
        if self.attempts.len() > MAX_ATTEMPTS_KEPT {
            self.attempts.remove(0);
        }
        self.epoch = epoch;
        self.state = ReceiptState::InFlight {
            lease_expires_at: now.saturating_add(lease_ms),
        };
        self.updated_at = now;
        self.expires_at = now.saturating_add(retention_ms);
    }

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

    /// Async: queue the receipt for an attempt at `at` with a fresh schedule
    /// (a first delivery, or an operator's re-drive).
    pub fn queue(&mut self, at: u64, now: u64) {
        self.state = ReceiptState::Queued {
            next_attempt_at: at,
        };
        self.schedule_step = 0;
        self.updated_at = now;
    }

    /// When a record the first version stored may be deleted: its
    /// `expires_at`, or its lease's end if later. It no longer parses as a
    /// receipt, and its object is never reached again (v2 names objects
    /// differently), so without this its storage would be kept forever.
    /// A record with a delivery kind is this version's: its deletable
    /// time is stored beside it, and where that is empty (a pending async
    /// delivery) it is kept, whatever its `expires_at` says.
    pub fn deletable_at_of_unparsed(record: &str) -> Option<u64> {
        let value: serde_json::Value = serde_json::from_str(record).ok()?;
        if value.get("delivery").is_some() {
            return None;
        }
        let expires_at = value.get("expires_at")?.as_u64()?;
        let lease_end = value
            .get("lease_expires_at")
            .and_then(serde_json::Value::as_u64);
        Some(expires_at.max(lease_end.unwrap_or(0)))
    }

    /// When the receipt may be deleted, if ever: a sync receipt in flight is
    /// kept while its lease is live; a pending async delivery is never lost.
    pub fn deletable_at(&self) -> Option<u64> {
        match (&self.state, self.delivery) {
            (ReceiptState::InFlight { .. }, DeliveryKind::Async)
            | (ReceiptState::Queued { .. }, DeliveryKind::Async)
            | (
                ReceiptState::Failed {
                    next_attempt_at: Some(_),
                    ..
                },
                DeliveryKind::Async,
            ) => None,
            (ReceiptState::InFlight { lease_expires_at }, DeliveryKind::Sync) => {
                Some(self.expires_at.max(*lease_expires_at))
            }
            _ => Some(self.expires_at),
        }
    }

    /// Past retention, and not protected by a live lease or a pending delivery.
    pub fn is_expired(&self, now: u64) -> bool {
        self.deletable_at().is_some_and(|at| now >= at)
    }

    /// When the receipt next needs its alarm: an attempt, a lease end, or
    /// its expiry.
    pub fn next_wake(&self) -> u64 {
        match (&self.state, self.delivery) {
            (ReceiptState::Queued { next_attempt_at }, _)
            | (
                ReceiptState::Failed {
                    next_attempt_at: Some(next_attempt_at),
                    ..
                },
                _,
            ) => *next_attempt_at,
            (ReceiptState::InFlight { lease_expires_at }, DeliveryKind::Async) => *lease_expires_at,
            _ => self.deletable_at().unwrap_or(self.expires_at),
        }
    }

    pub fn state_name(&self) -> &'static str {
        self.state.name()
    }

    /// The stored response, when the receipt is completed.
    pub fn stored_response(&self) -> Option<&StoredResponse> {
        match &self.state {
            ReceiptState::Completed { response, .. } => Some(response),
            _ => None,
        }
    }

    pub fn stored_response_mut(&mut self) -> Option<&mut StoredResponse> {
        match &mut self.state {
            ReceiptState::Completed { response, .. } => Some(response),
            _ => None,
        }
    }

    /// The origin status of the latest attempt that got one.
    pub fn last_status(&self) -> Option<u16> {
        self.attempts
            .iter()
            .rev()
            .find_map(|attempt| attempt.status)
    }
}

impl ReceiptState {
    pub fn name(&self) -> &'static str {
        match self {
            ReceiptState::Queued { .. } => "queued",
            ReceiptState::InFlight { .. } => "in_flight",
            ReceiptState::Completed { .. } => "completed",
            ReceiptState::Failed { .. } => "failed",
            ReceiptState::Dead { .. } => "dead",
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = 15_000;
    const RETENTION: u64 = 60_000;
    const NOW: u64 = 1_700_000_000_000;

    fn fp(text: &str) -> Fingerprint {
        Fingerprint::of_bytes(text.as_bytes())
    }

    fn answered(status: u16) -> ForwardResult {
        ForwardResult::Answered(HttpResponse {
            status,
            headers: vec![
                ("content-type".into(), "text/plain".into()),
                ("set-cookie".into(), "session=secret".into()),
            ],
            body: b"ok".to_vec(),
        })
    }

    /// A completed receipt as the first version stored it (from its README).
    const V1_RECORD: &str = r#"{"state":"completed","completed_at":1795979799428,
        "response":{"status":201,"headers":[["content-type","application/json"]],"body_bytes":352,"body_stored":true},
        "fingerprint":"c2b11e657e12fd177359627ca89412018e2274d0873cfbfcf1fc50f685582e9e","epoch":1,
        "first_seen_at":1795979799421,"updated_at":1795979799428,"expires_at":1796238999428,"duplicates":1,
        "attempts":[{"epoch":1,"started_at":1795979799421,"ended_at":1795979799428,"status":201,"error":null}],
        "scope":"dad9e5138d4055834414d144ca33d00d53c427a139bce63c4260a270ebc0a18d"}"#;

    #[test]
    fn a_first_version_receipt_does_not_parse_but_still_expires() {
        assert!(serde_json::from_str::<Receipt>(V1_RECORD).is_err());
        assert_eq!(
            Receipt::deletable_at_of_unparsed(V1_RECORD),
            Some(1_796_238_999_428)
        );
        let in_flight =
            r#"{"state":"in_flight","lease_expires_at":9000,"owner":7,"expires_at":5000}"#;
        assert_eq!(Receipt::deletable_at_of_unparsed(in_flight), Some(9000));
        assert_eq!(Receipt::deletable_at_of_unparsed("{\"state\""), None);
        // This version's pending async delivery is never freed this way,
        // however long past its expires_at (a long retry, a re-drive).
        let pending =
            r#"{"state":"queued","next_attempt_at":9000,"delivery":"async","expires_at":5000}"#;
        assert_eq!(Receipt::deletable_at_of_unparsed(pending), None);
        assert_eq!(
            Receipt::deletable_at_of_unparsed(r#"{"expires_at":"soon"}"#),
            None
        );
    }

    #[test]
    fn the_last_status_is_that_of_the_latest_attempt_that_got_one() {
        let mut receipt = in_flight(NOW);
        assert_eq!(receipt.last_status(), None);
        receipt
            .record(receipt.epoch, &answered(503), &policy(), NOW + 1)
            .unwrap();
        assert_eq!(receipt.last_status(), Some(503));
        receipt.begin_forward(
            next_epoch(receipt.epoch, NOW + 2),
            NOW + 2,
            LEASE,
            RETENTION,
        );
        assert_eq!(
            receipt.last_status(),
            Some(503),
            "the attempt in flight has none yet"
        );
        receipt
            .record(receipt.epoch, &ForwardResult::TimedOut, &policy(), NOW + 3)
            .unwrap();
        assert_eq!(receipt.last_status(), Some(503), "a timeout has none");
        receipt.begin_forward(
            next_epoch(receipt.epoch, NOW + 4),
            NOW + 4,
            LEASE,
            RETENTION,
        );
        receipt
            .record(receipt.epoch, &answered(201), &policy(), NOW + 5)
            .unwrap();
        assert_eq!(receipt.last_status(), Some(201));
    }

    #[test]
    fn the_stored_body_goes_back_into_a_completed_receipt_only() {
        let mut receipt = in_flight(NOW);
        assert!(receipt.stored_response_mut().is_none());
        receipt
            .record(receipt.epoch, &answered(201), &policy(), NOW + 1)
            .unwrap();
        // Storage keeps the body beside the record; loading puts it back.
        receipt.stored_response_mut().unwrap().response.body = b"from storage".to_vec();
        assert_eq!(
            receipt.stored_response().unwrap().response.body,
            b"from storage"
        );
    }

    fn policy() -> RecordPolicy {
        RecordPolicy {
            retryable: RetryableStatuses::default(),
            retention_ms: RETENTION,
            max_stored_response_bytes: 1024,
            retry_schedule_ms: vec![10_000, 60_000],
            random: 10, // no jitter: 90 + 10 = 100%
        }
    }

    fn receipt(delivery: DeliveryKind) -> Receipt {
        Receipt::new(
            Identity::default(),
            fp("a"),
            delivery,
            ReceiptState::Queued {
                next_attempt_at: NOW,
            },
            NOW,
            RETENTION,
        )
    }

    /// A sync receipt in flight at epoch 1, forwarded at `now`.
    fn in_flight(now: u64) -> Receipt {
        let mut receipt = receipt(DeliveryKind::Sync);
        receipt.begin_forward(1, now, LEASE, RETENTION);
        receipt
    }

    fn ended(status: u16) -> Receipt {
        let mut receipt = in_flight(NOW);
        receipt
            .record(1, &answered(status), &policy(), NOW + 100)
            .unwrap();
        receipt
    }

    #[test]
    fn no_receipt_forwards() {
        assert_eq!(
            decide(None, &fp("a"), NOW),
            Decision::Forward { takeover: false }
        );
    }

    #[test]
    fn an_expired_receipt_is_a_new_key_whatever_its_payload() {
        let receipt = ended(200);
        for payload in ["a", "other"] {
            assert_eq!(
                decide(Some(&receipt), &fp(payload), NOW + 100 + RETENTION),
                Decision::Forward { takeover: false }
            );
        }
        assert_eq!(
            decide(Some(&receipt), &fp("a"), NOW + 99 + RETENTION),
            Decision::Replay
        );
    }

    #[test]
    fn the_lease_ends_exactly_at_lease_expires_at() {
        let receipt = in_flight(NOW);
        let end = NOW + LEASE;
        assert_eq!(
            decide(Some(&receipt), &fp("a"), end - 1),
            Decision::InFlight {
                lease_expires_at: end
            },
            "live one millisecond before"
        );
        assert_eq!(
            decide(Some(&receipt), &fp("a"), end),
            Decision::Forward { takeover: true },
            "taken over at the end itself"
        );
        assert!(!lease_expired(end, end - 1));
        assert!(lease_expired(end, end));
    }

    #[test]
    fn completed_replays_and_failed_forwards_again() {
        assert_eq!(
            decide(Some(&ended(201)), &fp("a"), NOW + 200),
            Decision::Replay
        );
        assert_eq!(
            decide(Some(&ended(503)), &fp("a"), NOW + 200),
            Decision::Forward { takeover: false }
        );
    }

    #[test]
    fn a_different_fingerprint_is_a_mismatch_in_every_state() {
        let live = in_flight(NOW);
        let mut expired_lease = in_flight(NOW);
        expired_lease.expires_at = u64::MAX;
        for (receipt, now) in [
            (live, NOW + 1),
            (expired_lease, NOW + LEASE + 1),
            (ended(200), NOW + 200),
            (ended(500), NOW + 200),
        ] {
            assert_eq!(decide(Some(&receipt), &fp("b"), now), Decision::Mismatch);
        }
    }

    #[test]
    fn a_live_lease_outlives_retention() {
        let mut receipt = receipt(DeliveryKind::Sync);
        receipt.begin_forward(1, 0, 10_000, 3_000);
        assert!(!receipt.is_expired(5_000));
        assert!(matches!(
            decide(Some(&receipt), &fp("a"), 5_000),
            Decision::InFlight { .. }
        ));
        assert!(!receipt.is_expired(9_999));
        assert!(receipt.is_expired(10_000));
    }

    #[test]
    fn epochs_rise_within_a_life_and_across_lives() {
        assert_eq!(next_epoch(0, NOW), NOW * 1_000);
        assert_eq!(
            next_epoch(NOW * 1_000, NOW),
            NOW * 1_000 + 1,
            "the same millisecond"
        );
        assert_eq!(next_epoch(NOW * 1_000 + 7, NOW + 1), (NOW + 1) * 1_000);
        // A purge forgets the receipt: the next life starts from the clock,
        // above every epoch of the life before.
        let before_purge = next_epoch(next_epoch(0, NOW), NOW);
        assert!(next_epoch(0, NOW + 1) > before_purge);
        assert!(
            next_epoch(0, 4_102_444_800_000) < 1 << 53,
            "below 2^53 in 2100"
        );
        assert_eq!(next_epoch(u64::MAX, u64::MAX), u64::MAX, "never wraps");
    }

    #[test]
    fn retryable_statuses_decide_the_outcome() {
        let default = RetryableStatuses::default();
        for status in [200, 201, 204, 301, 302, 400, 401, 402, 404, 409, 422] {
            assert!(default.completes(status), "{status}");
        }
        for status in [408, 425, 429, 500, 502, 503, 504, 599] {
            assert!(!default.completes(status), "{status}");
        }
        let strict = RetryableStatuses::parse("401, 404,408,425,429,500-599").unwrap();
        assert!(!strict.completes(401) && !strict.completes(404) && strict.completes(403));
        for bad in ["", "5xx", "99", "600", "500-499", "1-2-3"] {
            assert!(RetryableStatuses::parse(bad).is_err(), "{bad}");
        }
        let single = RetryableStatuses::parse("409-409").unwrap();
        assert!(!single.completes(409) && single.completes(408) && single.completes(410));
        let mut receipt = in_flight(NOW);
        let strict_policy = RecordPolicy {
            retryable: strict,
            ..policy()
        };
        assert_eq!(
            receipt.record(1, &answered(404), &strict_policy, NOW + 1),
            Ok(Recorded::Failed)
        );
        assert_eq!(receipt.state_name(), "failed");
    }

    #[test]
    fn recording_an_answer_completes_or_fails() {
        assert_eq!(ended(200).state_name(), "completed");
        assert_eq!(ended(409).state_name(), "completed");
        assert_eq!(ended(429).state_name(), "failed");
        let mut receipt = in_flight(NOW);
        receipt
            .record(1, &ForwardResult::TimedOut, &policy(), NOW + 10)
            .unwrap();
        assert_eq!(receipt.state_name(), "failed");
        assert_eq!(receipt.attempts[0].error.as_deref(), Some("timeout"));
        assert_eq!(receipt.expires_at, NOW + 10 + RETENTION);
    }

    #[test]
    fn set_cookie_is_never_stored() {
        let stored = ended(201).stored_response().unwrap().clone();
        assert_eq!(
            stored.response.headers,
            vec![("content-type".to_string(), "text/plain".to_string())]
        );
    }

    #[test]
    fn a_late_answer_of_a_taken_over_forward_is_stale() {
        let mut receipt = in_flight(NOW);
        receipt.begin_forward(2, NOW + LEASE, LEASE, RETENTION);
        assert_eq!(receipt.attempts.len(), 2);
        let stale = receipt.record(1, &answered(200), &policy(), NOW + LEASE + 5);
        assert_eq!(stale, Err(Stale { current_epoch: 2 }));
        assert_eq!(receipt.state_name(), "in_flight");
        receipt
            .record(2, &answered(201), &policy(), NOW + LEASE + 6)
            .unwrap();
        assert_eq!(receipt.stored_response().unwrap().response.status, 201);
        assert_eq!(receipt.attempts[0].status, None);
        assert_eq!(receipt.attempts[1].status, Some(201));
    }

    #[test]
    fn a_late_answer_from_before_a_purge_is_stale() {
        // The key was purged while epoch E was in flight, and is in flight
        // again: the new life's epoch is higher, so E no longer owns it.
        let old = next_epoch(0, NOW);
        let mut again = receipt(DeliveryKind::Sync);
        again.begin_forward(next_epoch(0, NOW + 500), NOW + 500, LEASE, RETENTION);
        assert!(again
            .record(old, &answered(500), &policy(), NOW + 600)
            .is_err());
        assert_eq!(again.state_name(), "in_flight");
    }

    #[test]
    fn recording_twice_is_stale() {
        let mut receipt = ended(200);
        assert!(receipt
            .record(1, &answered(500), &policy(), NOW + 200)
            .is_err());
        assert_eq!(receipt.state_name(), "completed");
    }

    #[test]
    fn large_bodies_are_not_stored() {
        let mut receipt = in_flight(NOW);
        let tight = RecordPolicy {
            max_stored_response_bytes: 1,
            ..policy()
        };
        receipt.record(1, &answered(200), &tight, NOW + 1).unwrap();
        let stored = receipt.stored_response().unwrap();
        assert!(!stored.body_stored);
        assert_eq!(stored.body_bytes, 2);
        assert!(stored.response.body.is_empty());
    }

    #[test]
    fn attempts_are_bounded_and_history_kept_across_forwards() {
        let mut receipt = in_flight(0);
        receipt.duplicates = 7;
        for epoch in 2..=40 {
            receipt
                .record(epoch - 1, &answered(503), &policy(), epoch)
                .unwrap();
            receipt.begin_forward(epoch, epoch, LEASE, RETENTION);
        }
        assert_eq!(receipt.attempts.len(), MAX_ATTEMPTS_KEPT);
        assert_eq!(receipt.attempts.last().unwrap().epoch, 40);
        assert_eq!(receipt.duplicates, 7);
        assert_eq!(receipt.first_seen_at, NOW);
    }

    #[test]
    fn async_failures_follow_the_schedule_then_die() {
        let mut receipt = receipt(DeliveryKind::Async);
        assert_eq!(receipt.deletable_at(), None, "queued: never deleted");
        assert_eq!(
            next_async_step(&receipt, NOW),
            AsyncStep::Attempt { takeover: false }
        );
        receipt.begin_forward(1, NOW, LEASE, RETENTION);
        assert_eq!(receipt.deletable_at(), None);
        assert_eq!(
            next_async_step(&receipt, NOW + 1),
            AsyncStep::WaitUntil(NOW + LEASE)
        );
        assert_eq!(
            receipt.record(1, &answered(503), &policy(), NOW + 10),
            Ok(Recorded::Retrying {
                at: NOW + 10 + 10_000
            })
        );
        assert_eq!(receipt.deletable_at(), None, "failed with a retry ahead");
        assert_eq!(
            next_async_step(&receipt, NOW + 10_009),
            AsyncStep::WaitUntil(NOW + 10_010)
        );
        assert_eq!(
            next_async_step(&receipt, NOW + 10_010),
            AsyncStep::Attempt { takeover: false }
        );
        receipt.begin_forward(2, NOW + 10_010, LEASE, RETENTION);
        assert_eq!(
            receipt.record(2, &ForwardResult::TimedOut, &policy(), NOW + 10_020),
            Ok(Recorded::Retrying {
                at: NOW + 10_020 + 60_000
            })
        );
        receipt.begin_forward(3, NOW + 70_020, LEASE, RETENTION);
        assert_eq!(
            receipt.record(3, &answered(500), &policy(), NOW + 70_030),
            Ok(Recorded::Dead)
        );
        assert_eq!(receipt.state_name(), "dead");
        assert_eq!(receipt.deletable_at(), Some(NOW + 70_030 + RETENTION));
        receipt.queue(NOW + 80_000, NOW + 80_000);
        assert_eq!((receipt.state_name(), receipt.schedule_step), ("queued", 0));
    }

    #[test]
    fn an_async_lease_left_by_a_crash_is_taken_over_by_the_alarm() {
        let mut receipt = receipt(DeliveryKind::Async);
        receipt.begin_forward(1, NOW, LEASE, RETENTION);
        assert_eq!(
            next_async_step(&receipt, NOW + LEASE),
            AsyncStep::Attempt { takeover: true }
        );
        assert!(
            !receipt.is_expired(u64::MAX),
            "an accepted delivery is never forgotten"
        );
    }

    #[test]
    fn async_duplicates_share_the_acknowledgement() {
        let receipt = receipt(DeliveryKind::Async);
        assert_eq!(decide_async(None, &fp("a"), NOW), AsyncDecision::Accept);
        assert_eq!(
            decide_async(Some(&receipt), &fp("a"), NOW),
            AsyncDecision::Duplicate
        );
        assert_eq!(
            decide_async(Some(&receipt), &fp("b"), NOW),
            AsyncDecision::Mismatch
        );
    }

    #[test]
    fn a_key_left_unfinished_by_a_sync_route_is_accepted_when_it_becomes_async() {
        let live = in_flight(NOW);
        assert_eq!(
            decide_async(Some(&live), &fp("a"), NOW + LEASE - 1),
            AsyncDecision::InFlight {
                lease_expires_at: NOW + LEASE
            },
            "its sync forward may yet fail: no acknowledgement"
        );
        assert_eq!(
            decide_async(Some(&live), &fp("a"), NOW + LEASE),
            AsyncDecision::Accept,
            "a forward cut short"
        );
        let failed = ended(503);
        assert_eq!(
            decide_async(Some(&failed), &fp("a"), NOW + 200),
            AsyncDecision::Accept
        );
        let completed = ended(201);
        assert_eq!(
            decide_async(Some(&completed), &fp("a"), NOW + 200),
            AsyncDecision::Duplicate,
            "the origin has it"
        );
        assert_eq!(
            decide_async(Some(&failed), &fp("b"), NOW + 200),
            AsyncDecision::Mismatch
        );
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let schedule = [10_000];
        let delays: Vec<u64> = (0..21)
            .map(|random| retry_delay(&schedule, 0, random).unwrap())
            .collect();
        assert_eq!(delays.iter().min(), Some(&9_000));
        assert_eq!(delays.iter().max(), Some(&11_000));
        assert_eq!(retry_delay(&schedule, 1, 0), None);
        assert_eq!(
            retry_delay(&[7 * 86_400_000], 0, u64::MAX),
            Some(7 * 86_400_000 * 105 / 100)
        );
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(10_000, 8_500), 2);
        assert_eq!(retry_after_secs(10_000, 10_000), 1);
        assert_eq!(retry_after_secs(10_000, 20_000), 1);
    }

    #[test]
    fn receipt_json_names_the_state_and_leaves_the_body_out() {
        let json = serde_json::to_value(ended(200)).unwrap();
        assert_eq!(json["state"], "completed");
        assert_eq!(json["response"]["status"], 200);
        assert_eq!(json["delivery"], "sync");
        assert!(json["response"].get("body").is_none());
        let back: Receipt = serde_json::from_value(json).unwrap();
        assert_eq!(back.epoch, 1);
    }
}
