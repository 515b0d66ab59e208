//! The terms an async delivery was accepted with (SPEC §2b, v3): kept in
//! its receipt, so that a later change of its route (flipped to `sync`,
//! edited, or removed) neither shortens its retries nor drops it.

use serde::{Deserialize, Serialize};

use super::StatusSet;

/// A day, in milliseconds: how long before a dead letter expires its
/// coming expiry is announced.
pub const DAY_MS: u64 = 86_400_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncTerms {
    /// Delays before each retry, in milliseconds (before jitter).
    pub retry_schedule_ms: Vec<u64>,
    /// Non-2xx statuses that make the receipt dead at once.
    #[serde(default)]
    pub give_up: StatusSet,
    /// How long a completed receipt is kept.
    pub retention_ms: u64,
    /// How long a dead letter waits for the operator.
    pub dead_retention_ms: u64,
    pub origin_timeout_ms: u64,
    pub lease_ms: u64,
    pub max_stored_response_bytes: u64,
    /// The name of the secret that signs each attempt (`FORWARD_SECRET`,
    /// or the route's), never its value: it is read at every attempt, so a
    /// rotated secret applies to pending deliveries too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_secret: Option<String>,
}

impl Default for AsyncTerms {
    /// SPEC §8's defaults: the terms of an async receipt stored before
    /// receipts kept their own, whose route no longer says.
    fn default() -> AsyncTerms {
        AsyncTerms {
            retry_schedule_ms: [10, 60, 300, 1_800, 7_200, 21_600, 43_200, 86_400, 86_400]
                .iter()
                .map(|seconds| seconds * 1_000)
                .collect(),
            give_up: StatusSet::default(),
            retention_ms: 259_200_000,
            dead_retention_ms: 2_592_000_000,
            origin_timeout_ms: 10_000,
            lease_ms: 15_000,
            max_stored_response_bytes: 65_536,
            forward_secret: Some("FORWARD_SECRET".into()),
        }
    }
}
