//! Where decision events go (SPEC §9): every event is counted per route and
//! decision, written to Analytics Engine when the `IDEMGATE_METRICS`
//! binding exists, and logged when it changes a receipt or rejects a
//! delivery (or always, with `LOG_DUPLICATES=true`).

use worker::{AnalyticsEngineDataPointBuilder, Env};

use idemgate_core::decision_log::DecisionLog;

use crate::log_sink;
use crate::stats;

pub const METRICS_BINDING: &str = "IDEMGATE_METRICS";

pub fn emit(env: &Env, event: &DecisionLog, logged: bool) {
    let route = event.route.as_deref().unwrap_or("-");
    stats::record(|stats| {
        *stats
            .decisions
            .entry(route.to_string())
            .or_default()
            .entry(event.decision.to_string())
            .or_default() += 1;
        if logged {
            stats.log_lines += 1;
        }
    });
    if logged {
        log_sink::emit(event);
    }
    // Metrics must never fail a request: without the binding, or if the
    // write fails, nothing is written.
    if let Ok(dataset) = env.analytics_engine(METRICS_BINDING) {
        let written = AnalyticsEngineDataPointBuilder::new()
            .indexes([route])
            .add_blob(route)
            .add_blob(event.decision)
            .add_blob(event.reason.unwrap_or(""))
            .add_double(1)
            .add_double(event.origin_ms.unwrap_or(0) as f64)
            .add_double(event.duration_ms as f64)
            .add_double(event.status.map_or(0.0, f64::from))
            .add_double(if event.edge { 1 } else { 0 })
            .write_to(&dataset);
        if written.is_ok() {
            stats::record(|stats| stats.metric_points += 1);
        }
    }
}
