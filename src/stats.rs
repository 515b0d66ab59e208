//! Counters the isolate keeps, so benchmarks count what a delivery costs
//! instead of estimating it, and an operator sees decisions per route
//! (SPEC §9). `GET /__idemgate/stats` (with the admin token) shows them;
//! under `wrangler dev` there is one isolate, so they cover every request.

use crate::isolate::GatewayStats;

pub fn record(bump: impl FnOnce(&mut GatewayStats)) {
    crate::isolate::with(|isolate| bump(&mut isolate.stats.borrow_mut()));
}

pub fn snapshot() -> GatewayStats {
    crate::isolate::with(|isolate| isolate.stats.borrow().clone())
}
