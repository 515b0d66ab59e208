//! Counters the isolate keeps, so benchmarks count what a delivery costs
//! instead of estimating it, and an operator sees decisions per route
//! (SPEC §9). `GET /__idemgate/stats` (with the admin token) shows them;
//! under `wrangler dev` there is one isolate, so they cover every request.

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GatewayStats {
    /// Deduplicated requests that passed every check.
    pub deliveries: u64,
    /// Requests sent to a Durable Object (deliveries and operator calls).
    pub object_requests: u64,
    /// Replays answered from this isolate's cache, with no object request.
    pub cache_hits: u64,
    /// Of those, byte-identical retries found before their body was parsed.
    pub fast_cache_hits: u64,
    /// Decision events (SPEC §9) by route, then decision.
    pub decisions: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// Decision events written as log lines.
    pub log_lines: u64,
    /// Data points written to Analytics Engine.
    pub metric_points: u64,
    /// Rows written by flow coordinators (SQLite's own count).
    pub coordinator_rows_written: u64,
    /// Alarms flow coordinators set.
    pub coordinator_alarm_writes: u64,
    /// Reservations that ran out unclaimed (a lost or late wake): a
    /// permit idle for `CLAIM_MS`.
    pub coordinator_claims_expired: u64,
}

pub fn record(bump: impl FnOnce(&mut GatewayStats)) {
    crate::isolate::with(|isolate| bump(&mut isolate.stats.borrow_mut()));
}

pub fn snapshot() -> GatewayStats {
    crate::isolate::with(|isolate| isolate.stats.borrow().clone())
}
