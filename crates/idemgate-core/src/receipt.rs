//! The receipt of one key and the decision table of SPEC §2, as pure data
//! and pure functions: no storage, no clock, no network.

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ReceiptState {
    InFlight {
        lease_expires_at: u64,
        /// Random token of the forward that holds the lease. Epochs restart
        /// at 1 once a key is new again (purge, retention), so only the
        /// token tells a late answer of an old forward from the current one.
        owner: u64,
    },
    Completed {
        completed_at: u64,
        response: StoredResponse,
    },
    Failed {
        failed_at: u64,
    },
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    #[serde(flatten)]
    pub state: ReceiptState,
    pub fingerprint: Fingerprint,
    /// Fencing number of the latest forward: 1 for the first, +1 for each later one.
    pub epoch: u64,
    pub first_seen_at: u64,
    pub updated_at: u64,
    pub expires_at: u64,
    /// Deliveries this receipt absorbed (replays and in-flight duplicates).
    pub duplicates: u64,
    pub attempts: Vec<Attempt>,
    /// The key's scope hash, so that an alarm can say which key expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// How one forward ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardResult {
    Answered(HttpResponse),
    TimedOut,
    Unreachable(String),
}

/// SPEC §2: 2xx, 3xx and 4xx other than 408, 425 and 429 complete a receipt.
pub fn completes(status: u16) -> bool {
    (200..500).contains(&status) && !matches!(status, 408 | 425 | 429)
}

/// What a delivery gets, given the receipt of its key (SPEC §2's table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward with this epoch; `takeover` when an expired lease is taken over.
    Forward { epoch: u64, takeover: bool },
    /// Answer from the stored response.
    Replay,
    /// Same key, different payload: 422, never forwarded.
    Mismatch,
    /// The first delivery is still in flight: the `IN_FLIGHT` policy decides.
    InFlight { lease_expires_at: u64 },
}

/// The recorded outcome belongs to a forward whose lease was taken over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub current_epoch: u64,
}

pub fn decide(receipt: Option<&Receipt>, fingerprint: &Fingerprint, now: u64) -> Decision {
    let Some(receipt) = receipt.filter(|receipt| !receipt.is_expired(now)) else {
        return Decision::Forward {
            epoch: 1,
            takeover: false,
        };
    };
    if &receipt.fingerprint != fingerprint && !is_active(Mutation::SkipFingerprintCheck) {
        return Decision::Mismatch;
    }
    match &receipt.state {
        ReceiptState::InFlight {
            lease_expires_at, ..
        } if now < *lease_expires_at && !is_active(Mutation::IgnoreLiveLease) => {
            Decision::InFlight {
                lease_expires_at: *lease_expires_at,
            }
        }
        ReceiptState::InFlight { .. } => Decision::Forward {
            epoch: if is_active(Mutation::ReuseEpochOnTakeover) {
                receipt.epoch
            } else {
                receipt.epoch + 1
            },
            takeover: true,
        },
        ReceiptState::Completed { .. } if is_active(Mutation::ForwardCompleted) => {
            Decision::Forward {
                epoch: receipt.epoch + 1,
                takeover: false,
            }
        }
        ReceiptState::Completed { .. } => Decision::Replay,
        ReceiptState::Failed { .. } if is_active(Mutation::FailedStaysInFlight) => {
            Decision::InFlight {
                lease_expires_at: u64::MAX,
            }
        }
        ReceiptState::Failed { .. } => Decision::Forward {
            epoch: receipt.epoch + 1,
            takeover: false,
        },
    }
}

/// Seconds a caller should wait before retrying a key in flight: until its
/// lease ends, rounded up, and at least one.
pub fn retry_after_secs(lease_expires_at: u64, now: u64) -> u64 {
    lease_expires_at.saturating_sub(now).div_ceil(1000).max(1)
}

impl Receipt {
    /// The receipt written, before anything is sent, for a forward at
    /// `epoch`. A live previous receipt keeps its history.
    pub fn begin_forward(
        previous: Option<Receipt>,
        fingerprint: Fingerprint,
        epoch: u64,
        owner: u64,
        now: u64,
        lease_ms: u64,
        retention_ms: u64,
    ) -> Receipt {
        let previous = previous.filter(|receipt| !receipt.is_expired(now));
        let (first_seen_at, duplicates, mut attempts) = match previous {
            Some(receipt) => (receipt.first_seen_at, receipt.duplicates, receipt.attempts),
            None => (now, 0, Vec::new()),
        };
        attempts.push(Attempt {
            epoch,
            started_at: now,
            ended_at: None,
            status: None,
            error: None,
        });
        if attempts.len() > MAX_ATTEMPTS_KEPT {
            attempts.remove(0);
        }
        Receipt {
            state: ReceiptState::InFlight {
                lease_expires_at: now + lease_ms,
                owner,
            },
            fingerprint,
            epoch,
            first_seen_at,
            updated_at: now,
            expires_at: now + retention_ms,
            duplicates,
            attempts,
            scope: None,
        }
    }

    /// Records how the forward holding token `owner` ended. Refused when
    /// that forward no longer owns the receipt (a later forward took it
    /// over, it already ended, or the key was purged or expired and is in
    /// flight again), so a late answer never overwrites a newer attempt.
    pub fn record(
        &mut self,
        owner: u64,
        result: &ForwardResult,
        now: u64,
        retention_ms: u64,
        max_stored_body_bytes: u64,
    ) -> Result<(), Stale> {
        let owns = matches!(
            self.state,
            ReceiptState::InFlight { owner: holder, .. } if holder == owner
        );
        if !owns {
            return Err(Stale {
                current_epoch: self.epoch,
            });
        }
        let epoch = self.epoch;
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
        self.state = match result {
            ForwardResult::Answered(response) if completes(response.status) => {
                ReceiptState::Completed {
                    completed_at: now,
                    response: StoredResponse::keep(response, max_stored_body_bytes),
                }
            }
            _ => ReceiptState::Failed { failed_at: now },
        };
        self.updated_at = now;
        self.expires_at = now + retention_ms;
        Ok(())
    }

    /// Past retention, and not protected by a live lease.
    pub fn is_expired(&self, now: u64) -> bool {
        now >= self.expires_at && !self.lease_is_live(now)
    }

    pub fn lease_is_live(&self, now: u64) -> bool {
        matches!(self.state, ReceiptState::InFlight { lease_expires_at, .. } if now < lease_expires_at)
    }

    /// When this receipt may next need attention: its lease end or its expiry.
    pub fn next_deadline(&self) -> u64 {
        match self.state {
            ReceiptState::InFlight {
                lease_expires_at, ..
            } => lease_expires_at.max(self.expires_at),
            _ => self.expires_at,
        }
    }

    pub fn state_name(&self) -> &'static str {
        match self.state {
            ReceiptState::InFlight { .. } => "in_flight",
            ReceiptState::Completed { .. } => "completed",
            ReceiptState::Failed { .. } => "failed",
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = 15_000;
    const RETENTION: u64 = 60_000;

    fn fp(text: &str) -> Fingerprint {
        Fingerprint::of_bytes(text.as_bytes())
    }

    fn answered(status: u16) -> ForwardResult {
        ForwardResult::Answered(HttpResponse {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: b"ok".to_vec(),
        })
    }

    fn in_flight(now: u64) -> Receipt {
        Receipt::begin_forward(None, fp("a"), 1, 11, now, LEASE, RETENTION)
    }

    fn ended(status: u16) -> Receipt {
        let mut receipt = in_flight(0);
        receipt
            .record(11, &answered(status), 100, RETENTION, 1024)
            .unwrap();
        receipt
    }

    #[test]
    fn no_receipt_forwards_at_epoch_one() {
        assert_eq!(
            decide(None, &fp("a"), 0),
            Decision::Forward {
                epoch: 1,
                takeover: false
            }
        );
    }

    #[test]
    fn expired_receipt_is_a_new_key() {
        let receipt = ended(200);
        assert_eq!(
            decide(Some(&receipt), &fp("a"), 100 + RETENTION),
            Decision::Forward {
                epoch: 1,
                takeover: false
            }
        );
        assert_eq!(
            decide(Some(&receipt), &fp("other"), 100 + RETENTION),
            Decision::Forward {
                epoch: 1,
                takeover: false
            }
        );
    }

    #[test]
    fn in_flight_with_live_lease_applies_the_policy() {
        let receipt = in_flight(1_000);
        assert_eq!(
            decide(Some(&receipt), &fp("a"), 1_001),
            Decision::InFlight {
                lease_expires_at: 1_000 + LEASE
            }
        );
    }

    #[test]
    fn in_flight_with_expired_lease_is_taken_over_with_the_next_epoch() {
        let receipt = in_flight(1_000);
        assert_eq!(
            decide(Some(&receipt), &fp("a"), 1_000 + LEASE),
            Decision::Forward {
                epoch: 2,
                takeover: true
            }
        );
    }

    #[test]
    fn completed_replays() {
        assert_eq!(decide(Some(&ended(201)), &fp("a"), 200), Decision::Replay);
    }

    #[test]
    fn failed_forwards_again_with_the_next_epoch() {
        assert_eq!(
            decide(Some(&ended(503)), &fp("a"), 200),
            Decision::Forward {
                epoch: 2,
                takeover: false
            }
        );
    }

    #[test]
    fn a_different_fingerprint_is_a_mismatch_in_every_state() {
        let live = in_flight(0);
        let mut expired_lease = in_flight(0);
        expired_lease.expires_at = u64::MAX;
        for (receipt, now) in [
            (live, 1),
            (expired_lease, LEASE + 1),
            (ended(200), 200),
            (ended(500), 200),
        ] {
            assert_eq!(decide(Some(&receipt), &fp("b"), now), Decision::Mismatch);
        }
    }

    #[test]
    fn a_live_lease_outlives_retention() {
        let receipt = Receipt::begin_forward(None, fp("a"), 1, 11, 0, 10_000, 3_000);
        assert!(!receipt.is_expired(5_000));
        assert!(matches!(
            decide(Some(&receipt), &fp("a"), 5_000),
            Decision::InFlight { .. }
        ));
        assert!(receipt.is_expired(10_000));
    }

    #[test]
    fn outcome_classification() {
        for status in [200, 201, 204, 301, 302, 400, 401, 402, 404, 409, 422] {
            assert!(completes(status), "{status}");
        }
        for status in [408, 425, 429, 500, 502, 503, 504, 100] {
            assert!(!completes(status), "{status}");
        }
    }

    #[test]
    fn recording_an_answer_completes_or_fails() {
        assert_eq!(ended(200).state_name(), "completed");
        assert_eq!(ended(409).state_name(), "completed");
        assert_eq!(ended(429).state_name(), "failed");
        let mut receipt = in_flight(0);
        receipt
            .record(11, &ForwardResult::TimedOut, 10, RETENTION, 0)
            .unwrap();
        assert_eq!(receipt.state_name(), "failed");
        assert_eq!(receipt.attempts[0].error.as_deref(), Some("timeout"));
        assert_eq!(receipt.expires_at, 10 + RETENTION);
    }

    #[test]
    fn a_late_answer_from_a_taken_over_forward_is_stale() {
        let first = in_flight(0);
        let mut taken_over =
            Receipt::begin_forward(Some(first), fp("a"), 2, 22, LEASE, LEASE, RETENTION);
        assert_eq!(taken_over.attempts.len(), 2);
        let stale = taken_over.record(11, &answered(200), LEASE + 5, RETENTION, 1024);
        assert_eq!(stale, Err(Stale { current_epoch: 2 }));
        assert_eq!(taken_over.state_name(), "in_flight");
        taken_over
            .record(22, &answered(201), LEASE + 6, RETENTION, 1024)
            .unwrap();
        assert_eq!(taken_over.stored_response().unwrap().response.status, 201);
        assert_eq!(taken_over.attempts[0].status, None);
        assert_eq!(taken_over.attempts[1].status, Some(201));
    }

    #[test]
    fn a_late_answer_from_before_a_purge_is_stale_despite_the_same_epoch() {
        // The key was purged while epoch 1 was in flight, and is in flight
        // at epoch 1 again under a new owner.
        let mut again = Receipt::begin_forward(None, fp("a"), 1, 99, 500, LEASE, RETENTION);
        assert!(again
            .record(11, &answered(500), 600, RETENTION, 1024)
            .is_err());
        assert_eq!(again.state_name(), "in_flight");
    }

    #[test]
    fn recording_twice_is_stale() {
        let mut receipt = ended(200);
        assert!(receipt
            .record(11, &answered(500), 200, RETENTION, 1024)
            .is_err());
        assert_eq!(receipt.state_name(), "completed");
    }

    #[test]
    fn large_bodies_are_not_stored() {
        let mut receipt = in_flight(0);
        receipt.record(11, &answered(200), 1, RETENTION, 1).unwrap();
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
                .record(epoch + 9, &answered(503), epoch, RETENTION, 0)
                .unwrap();
            receipt = Receipt::begin_forward(
                Some(receipt),
                fp("a"),
                epoch,
                epoch + 10,
                epoch,
                LEASE,
                RETENTION,
            );
        }
        assert_eq!(receipt.attempts.len(), MAX_ATTEMPTS_KEPT);
        assert_eq!(receipt.attempts.last().unwrap().epoch, 40);
        assert_eq!(receipt.duplicates, 7);
        assert_eq!(receipt.first_seen_at, 0);
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
        assert!(json["response"].get("body").is_none());
        let back: Receipt = serde_json::from_value(json).unwrap();
        assert_eq!(back.epoch, 1);
    }
}
