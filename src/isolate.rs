//! What one isolate keeps between the requests it serves, in one place.
//! Every part is a cache or a count: the runtime may evict an isolate at
//! any moment, so none of it is the truth, and each part says what is
//! lost with it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use idemgate_core::config::Config;
use idemgate_core::problem::Problem;
use idemgate_core::replay_cache::ReplayCache;

use crate::events::Metrics;
use crate::public_key::Certificate;
use crate::stats::GatewayStats;

#[derive(Default)]
pub struct Isolate {
    /// The configuration, parsed on first use: an isolate's `env` never
    /// changes (new variables or secrets mean a new deployment, so new
    /// isolates), and parsing it on every request cost about 5% of a
    /// replay.
    pub config: RefCell<Option<Result<Rc<Config>, Problem>>>,
    /// Stored, complete replays this isolate answers alone.
    pub replays: RefCell<ReplayCache>,
    /// Counters for `/__idemgate/stats` and the benchmarks.
    pub stats: RefCell<GatewayStats>,
    /// Duplicates absorbed here, by object, not yet told to their object
    /// (lost with the isolate: the receipts' counts are approximate).
    pub absorbed: RefCell<HashMap<String, u64>>,
    /// Signing certificates by URL (PayPal's), fetched at most once a day.
    pub certificates: RefCell<HashMap<String, Certificate>>,
    /// When this version first ran against the index, once read.
    pub upgrade_since: Cell<Option<u64>>,
    /// The Analytics Engine dataset and the points batched for it.
    pub metrics: RefCell<Metrics>,
}

thread_local! {
    static ISOLATE: Isolate = Isolate::default();
}

/// Runs `f` on this isolate's state.
pub fn with<T>(f: impl FnOnce(&Isolate) -> T) -> T {
    ISOLATE.with(f)
}

/// Runs `f` on this isolate's replays.
pub fn with_replays<T>(f: impl FnOnce(&mut ReplayCache) -> T) -> T {
    with(|isolate| f(&mut isolate.replays.borrow_mut()))
}
