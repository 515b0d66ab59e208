//! Counters the gateway keeps per isolate, so benchmarks count what a
//! delivery costs instead of estimating it. `GET /__idemgate/stats` (with
//! the admin token) shows them; under `wrangler dev` there is one isolate,
//! so they cover every request.

use std::cell::Cell;

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GatewayStats {
    /// Deduplicated requests that passed every check.
    pub deliveries: u64,
    /// Requests sent to a Durable Object (deliveries and operator calls).
    pub object_requests: u64,
    /// Replays answered from this isolate's cache, with no object request.
    pub cache_hits: u64,
}

thread_local! {
    static STATS: Cell<GatewayStats> = Cell::new(GatewayStats::default());
}

pub fn record(bump: impl FnOnce(&mut GatewayStats)) {
    STATS.with(|stats| {
        let mut current = stats.get();
        bump(&mut current);
        stats.set(current);
    });
}

pub fn snapshot() -> GatewayStats {
    STATS.with(Cell::get)
}
