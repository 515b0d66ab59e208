//! What one isolate keeps between the requests it serves, in one place:
//! the state and its types; the modules that use a part import it from
//! here (and this file imports none of them). Every part is a cache or a
//! count: the runtime may evict an isolate at any moment, so none of it is
//! the truth, and each part says what is lost with it.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use idemgate_core::access::AccessKey;
use idemgate_core::alerts::{AlertsConfig, Condition, SendGate};
use idemgate_core::config::Config;
use idemgate_core::index::owed::RowReport;
use idemgate_core::problem::Problem;
use idemgate_core::replay_cache::ReplayCache;
use idemgate_core::signature::plaid::KeyCache;

use serde::Serialize;
use worker::AnalyticsEngineDataset;

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
    /// Plaid's webhook verification keys, and the key ids Plaid refused
    /// (lost with the isolate: the next delivery asks Plaid again).
    pub plaid_keys: RefCell<KeyCache>,
    /// When this version first ran against the index, once read.
    pub upgrade_since: Cell<Option<u64>>,
    /// The Analytics Engine dataset and the points batched for it.
    pub metrics: RefCell<Metrics>,
    /// `ALERTS` as read, and the signs not yet sent ([`crate::alerts`]).
    pub alerts: Alerts,
    /// The Access team's signing keys ([`crate::access`]), fetched at most
    /// once a minute (lost with the isolate: fetched again).
    pub access_keys: RefCell<AccessKeys>,
}

/// The Access team's keys as this isolate holds them: the team they are
/// of, when they were fetched, and the keys.
#[derive(Default)]
pub struct AccessKeys {
    pub kept: Option<(String, u64, Vec<AccessKey>)>,
}

/// What an isolate keeps for the alert object: signs noted since the last
/// call (lost with the isolate: an alert is a nudge, the receipts and logs
/// are the record).
#[derive(Default)]
pub struct Alerts {
    /// `ALERTS` and its companions, parsed on first use.
    pub config: RefCell<Option<Result<Option<AlertsConfig>, String>>>,
    /// Signs by route and condition: how many, and the last one's detail.
    pub pending: RefCell<BTreeMap<(String, Condition), (u64, String)>>,
    /// Key objects' word on their rows, by receipt id, the last word kept
    /// (SPEC §2b, v5): sent to their route's object, whether or not
    /// alerting is on.
    pub rows: RefCell<BTreeMap<String, RowReport>>,
    /// Whether a call to the alert object is on its way, within its
    /// bound.
    pub sending: Cell<SendGate>,
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

/// The isolate's counters (`crate::stats` bumps and shows them).
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
    /// Calls key objects made to order objects (a turn asked, an outcome
    /// told).
    pub order_calls: u64,
    /// Times an order object stored its book.
    pub order_book_writes: u64,
    /// Key objects an order object woke.
    pub order_wakes: u64,
    /// Requests sent to Durable Objects, by binding (SPEC §15, v5: what
    /// each class takes per delivery, the capacity table's figures).
    pub requests_by_class: BTreeMap<String, u64>,
    /// Requests to each object of a class shared by many keys (every class
    /// but the keys' own), by binding and name: the busiest one is what
    /// saturates first.
    pub requests_by_object: BTreeMap<String, u64>,
}

/// A certificate's key, as this isolate keeps it.
pub struct Certificate {
    pub spki: Vec<u8>,
    pub fetched_at: u64,
    pub used_at: u64,
}

/// What an isolate keeps for Analytics Engine ([`crate::isolate`]).
#[derive(Default)]
pub struct Metrics {
    /// The dataset, looked up once (`None` inside: no binding).
    pub dataset: Option<Option<AnalyticsEngineDataset>>,
    /// Tallies not yet written, by route, then decision (lost with the
    /// isolate: at most [`crate::events::BATCH_MS`] of counts).
    pub counts: HashMap<String, HashMap<&'static str, Tally>>,
    pub since: u64,
}

/// What one batched point sums.
#[derive(Default, Clone, Copy)]
pub struct Tally {
    pub count: u64,
    pub origin_ms: u64,
    pub duration_ms: u64,
}
