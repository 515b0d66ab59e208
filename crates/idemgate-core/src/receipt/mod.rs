//! The receipt of one key (SPEC §2, §2b), as pure data and pure
//! functions: no storage, no clock, no network.
//!
//! - [`decide`]: the decision tables, leases and epochs;
//! - [`outcome`]: what a forward's result makes of the receipt;
//! - [`statuses`]: the status sets configuration names;
//! - [`terms`]: what an async delivery was accepted with.

mod decide;
mod indexed;
mod outcome;
mod record;
mod statuses;
mod terms;
#[cfg(test)]
mod tests;

pub use decide::*;
pub use indexed::Indexed;
pub use outcome::*;
pub use statuses::*;
pub use terms::*;

pub use crate::delivery::Identity;

use serde::{Deserialize, Serialize};

use crate::canonical::Fingerprint;
use crate::headers::{self, HeaderList};

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

impl HttpResponse {
    /// A status alone: no headers, no body.
    pub fn empty(status: u16) -> HttpResponse {
        HttpResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
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

#[derive(Debug, Clone, PartialEq, Eq)]
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
        next_attempt_at: Option<u64>,
    },
    /// Async: the last attempt failed and the schedule is used up, or the
    /// origin answered a status to give up on. Kept for the operator until
    /// `expires_at`; `expiry_warned` once its coming expiry was announced.
    Dead {
        dead_at: u64,
        expiry_warned: bool,
        /// (v4) Ended without a forward as stale, on a route with
        /// `on_stale = "skip"` (SPEC §12): named `superseded`, and kept,
        /// listed and re-driven as a dead letter is.
        superseded: bool,
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

/// The durable record of one key. Times are milliseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The stored form's version: [`RECORD_VERSION`] for a receipt written
    /// now; a record without one was written by the second version.
    pub record_version: u32,
    pub identity: Identity,
    pub state: ReceiptState,
    pub delivery: DeliveryKind,
    pub fingerprint: Fingerprint,
    /// Fencing number of the latest forward (0 before the first): greater
    /// than that of every earlier forward of the key, across lives.
    pub epoch: u64,
    pub first_seen_at: u64,
    pub updated_at: u64,
    /// When a settled receipt may be deleted (`RETENTION_SECONDS` after its
    /// last write; `DEAD_RETENTION_SECONDS` after an async one died). A
    /// pending async receipt is never deleted.
    pub expires_at: u64,
    /// Deliveries this receipt absorbed (replays and in-flight duplicates).
    pub duplicates: u64,
    pub attempts: Vec<Attempt>,
    /// Async: delays of the retry schedule used since it was last queued.
    pub schedule_step: u32,
    /// Async: the terms it was accepted with (none in a record of the
    /// second version, whose route's current settings then apply).
    pub terms: Option<AsyncTerms>,
    /// What the receipt index shows for this receipt.
    pub indexed: Indexed,
    /// Async: since when its next attempt waits for a flow-control permit
    /// (SPEC §2, v3); a wait is not an attempt.
    pub waiting_for_permit_since: Option<u64>,
    /// The batch whose event began this life (SPEC §4, v4), if it came in
    /// one: the operator sees which request brought it.
    pub batch: Option<String>,
}

/// The version of the stored record this code writes. The second version's
/// records (no `record_version`) still parse; the first version's do not,
/// and are only expired ([`Receipt::deletable_at_of_unparsed`]).
pub const RECORD_VERSION: u32 = 3;

/// How one forward ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardResult {
    Answered(HttpResponse),
    TimedOut,
    Unreachable(String),
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
            record_version: RECORD_VERSION,
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
            terms: None,
            indexed: Indexed::default(),
            waiting_for_permit_since: None,
            batch: None,
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
        self.waiting_for_permit_since = None;
        self.state = ReceiptState::InFlight {
            lease_expires_at: now.saturating_add(lease_ms),
        };
        self.updated_at = now;
        self.expires_at = now.saturating_add(retention_ms);
    }

    /// Async: the forward begun at `epoch` was never sent (its lease ran
    /// short before it could be): its attempt is forgotten and the receipt
    /// queued for an attempt at once, which takes a new epoch. The epoch
    /// stays as the floor of the next one.
    pub fn unsend(&mut self, epoch: u64, now: u64) {
        if self
            .attempts
            .last()
            .is_some_and(|attempt| attempt.epoch == epoch && attempt.ended_at.is_none())
        {
            self.attempts.pop();
        }
        self.state = ReceiptState::Queued {
            next_attempt_at: now,
        };
        self.updated_at = now;
    }

    /// Async: the next attempt waits for a flow-control permit until `at`
    /// (when it asks again, unless woken first); its schedule is kept. A
    /// receipt whose lease ended (its attempt's outcome unknown) is queued.
    pub fn wait_for_permit(&mut self, at: u64, now: u64) {
        match &mut self.state {
            ReceiptState::Queued { next_attempt_at }
            | ReceiptState::Failed {
                next_attempt_at: Some(next_attempt_at),
                ..
            } => *next_attempt_at = at,
            _ => {
                self.state = ReceiptState::Queued {
                    next_attempt_at: at,
                }
            }
        }
        self.waiting_for_permit_since.get_or_insert(now);
        self.updated_at = now;
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

    /// An async delivery not yet completed or dead: it must never be lost.
    pub fn is_pending(&self) -> bool {
        self.deletable_at().is_none()
    }

    /// Whether its stored request is kept: an async delivery's, until it
    /// completes (a dead letter keeps it for its re-drive).
    pub fn keeps_request(&self) -> bool {
        self.delivery == DeliveryKind::Async
            && !matches!(self.state, ReceiptState::Completed { .. })
    }

    /// When a pending delivery's next attempt is due (the lease's end while
    /// one is in flight): what the sweep looks for.
    pub fn next_attempt_at(&self) -> Option<u64> {
        self.is_pending().then(|| self.next_wake())
    }

    /// When a dead letter's coming expiry is announced, unless it was: a
    /// day before it, or at once when it is kept a day or less.
    pub fn expiry_warning_at(&self) -> Option<u64> {
        match self.state {
            ReceiptState::Dead {
                dead_at,
                expiry_warned: false,
                ..
            } => Some(self.expires_at.saturating_sub(DAY_MS).max(dead_at)),
            _ => None,
        }
    }

    /// Past retention, and not protected by a live lease or a pending delivery.
    pub fn is_expired(&self, now: u64) -> bool {
        self.deletable_at().is_some_and(|at| now >= at)
    }

    /// When the receipt next needs its alarm: an attempt, a lease end, a
    /// dead letter's expiry warning, or its expiry.
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
            _ => self
                .expiry_warning_at()
                .or(self.deletable_at())
                .unwrap_or(self.expires_at),
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
            ReceiptState::Dead {
                superseded: true, ..
            } => "superseded",
            ReceiptState::Dead { .. } => "dead",
        }
    }
}
