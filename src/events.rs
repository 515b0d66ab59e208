//! Where decision events go (SPEC §9): every event is counted per route and
//! decision, written to Analytics Engine when the `IDEMGATE_METRICS`
//! binding exists, and logged when it changes a receipt or rejects a
//! delivery (or always, with `LOG_DUPLICATES=true`).
//!
//! Absorbed duplicates are the bulk of the traffic and say nothing but
//! "one more", and a delivery that went well says little more: their
//! counts (and summed origin and decision times) are written as one data
//! point per route and decision (`double1` = the count) at most every
//! [`BATCH_MS`], instead of one point each
//! ([`DecisionLog::is_routine`]). That makes a replay cost no JavaScript
//! call for metrics and a thousand deliveries one billed point; an isolate
//! evicted before its next event loses its last unwritten batch (the log
//! lines, the receipts and `/__idemgate/stats` still count them). Failures,
//! dead letters and rejections keep a point each.

use worker::{AnalyticsEngineDataPointBuilder, AnalyticsEngineDataset, Env};

use idemgate_core::alerts::Condition;
use idemgate_core::decision_log::DecisionLog;
use idemgate_core::reconcile_runs::run::ReconcileLine;

use crate::alerts;
use crate::isolate::Tally;
use crate::log_sink;
use crate::stats;

pub const METRICS_BINDING: &str = "IDEMGATE_METRICS";
/// Longest time absorbed duplicates wait to be written as one point.
pub const BATCH_MS: u64 = 10_000;

fn with_dataset(env: &Env, write: impl FnOnce(&AnalyticsEngineDataset)) {
    crate::isolate::with(|isolate| {
        let mut metrics = isolate.metrics.borrow_mut();
        let dataset = metrics
            .dataset
            .get_or_insert_with(|| env.analytics_engine(METRICS_BINDING).ok());
        if let Some(dataset) = dataset {
            write(dataset);
        }
    });
}

/// One decision event.
pub fn emit(env: &Env, event: &DecisionLog, logged: bool) {
    let route = event.route.as_deref().unwrap_or("-");
    count_locally(route, event.decision, logged);
    if let Some(condition) = Condition::of_decision(event.decision, event.reason) {
        let detail = match (event.reason, event.origin_status.or(event.status)) {
            (Some(reason), _) => format!("{} {reason}", event.decision),
            (None, Some(status)) => format!("{} (status {status})", event.decision),
            (None, None) => event.decision.to_string(),
        };
        alerts::note(env, route, condition, &detail);
    }
    if logged {
        log_sink::emit(event);
    }
    if event.is_routine() {
        let tally = Tally {
            count: 1,
            origin_ms: event.origin_ms.unwrap_or(0),
            duration_ms: event.duration_ms,
        };
        batch(
            env,
            route,
            event.decision,
            tally,
            worker::Date::now().as_millis(),
        );
        return;
    }
    // Metrics must never fail a request: without the binding, or if the
    // write fails, nothing is written.
    with_dataset(env, |dataset| {
        let written = AnalyticsEngineDataPointBuilder::new()
            .indexes([route])
            .add_blob(route)
            .add_blob(event.decision)
            .add_blob(event.reason.unwrap_or(""))
            .add_double(1)
            .add_double(event.origin_ms.unwrap_or(0) as f64)
            .add_double(event.duration_ms as f64)
            .add_double(event.status.map_or(0.0, f64::from))
            .write_to(dataset);
        if written.is_ok() {
            stats::record(|stats| stats.metric_points += 1);
        }
    });
}

/// A reconciliation event (SPEC §11): `reconciled` per filled event,
/// `reconcile-failed` per failed run (and `reconcile-event-failed` per
/// event that was not filled), each logged, counted and a metrics point.
pub fn reconcile(env: &Env, line: &ReconcileLine) {
    count_locally(&line.route, line.decision, true);
    if matches!(line.decision, "reconciled" | "reconcile-failed") {
        alerts::note(env, &line.route, Condition::Reconcile, line.decision);
    }
    log_sink::emit_text(&serde_json::to_string(line).expect("a line serializes"));
    with_dataset(env, |dataset| {
        let written = AnalyticsEngineDataPointBuilder::new()
            .indexes([line.route.as_str()])
            .add_blob(line.route.as_str())
            .add_blob(line.decision)
            .add_blob("")
            .add_double(1)
            .add_double(0)
            .add_double(0)
            .add_double(line.status.map_or(0.0, f64::from))
            .write_to(dataset);
        if written.is_ok() {
            stats::record(|stats| stats.metric_points += 1);
        }
    });
}

/// A duplicate the isolate answered alone at `now`, after `duration_ms`:
/// counted, batched, not logged.
pub fn absorbed_at_edge(
    env: &Env,
    route: &str,
    decision: &'static str,
    now: u64,
    duration_ms: u64,
) {
    count_locally(route, decision, false);
    let tally = Tally {
        count: 1,
        origin_ms: 0,
        duration_ms,
    };
    batch(env, route, decision, tally, now);
}

fn count_locally(route: &str, decision: &'static str, logged: bool) {
    stats::record(|stats| {
        match stats.decisions.get_mut(route) {
            Some(decisions) => *decisions.entry(decision).or_default() += 1,
            None => {
                stats
                    .decisions
                    .entry(route.to_string())
                    .or_default()
                    .insert(decision, 1);
            }
        }
        if logged {
            stats.log_lines += 1;
        }
    });
}

fn batch(env: &Env, route: &str, decision: &'static str, tally: Tally, now: u64) {
    let due = crate::isolate::with(|isolate| {
        let mut batch = isolate.metrics.borrow_mut();
        let decisions = match batch.counts.get_mut(route) {
            Some(decisions) => decisions,
            None => batch.counts.entry(route.to_string()).or_default(),
        };
        let sum = decisions.entry(decision).or_default();
        sum.count += tally.count;
        sum.origin_ms += tally.origin_ms;
        sum.duration_ms += tally.duration_ms;
        if batch.since == 0 {
            batch.since = now;
        }
        (now.saturating_sub(batch.since) >= BATCH_MS).then(|| {
            batch.since = now;
            std::mem::take(&mut batch.counts)
        })
    });
    let Some(counts) = due else { return };
    with_dataset(env, |dataset| {
        let points = counts.iter().flat_map(|(route, decisions)| {
            decisions
                .iter()
                .map(move |(decision, count)| (route, *decision, *count))
        });
        for (route, decision, tally) in points {
            let written = AnalyticsEngineDataPointBuilder::new()
                .indexes([route.as_str()])
                .add_blob(route.as_str())
                .add_blob(decision)
                .add_blob("")
                .add_double(tally.count as f64)
                .add_double(tally.origin_ms as f64)
                .add_double(tally.duration_ms as f64)
                .write_to(dataset);
            if written.is_ok() {
                stats::record(|stats| stats.metric_points += 1);
            }
        }
    });
}
