//! The scheduled sweep's I/O (SPEC §2b, v3; the plan is
//! `idemgate_core::sweep`): a Cron Trigger every minute reads the receipt
//! index for overdue objects and wakes each over RPC, a few at a time.

use futures::StreamExt;
use worker::Env;

use idemgate_core::decision_log::DecisionLog;
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::sweep::{retry_wake_at, Sweep, SweepReport, WAKES_AT_ONCE};

use crate::env::config_from_env;
use crate::events;
use crate::object_client;
use crate::receipt_index;

pub async fn run(env: &Env) -> SweepReport {
    let now = worker::Date::now().as_millis();
    let limit = match config_from_env(env) {
        Ok(config) => config.sweep_limit,
        Err(_) => idemgate_core::sweep::DEFAULT_LIMIT,
    };
    let sweep = Sweep::at(now, limit);
    let overdue = match receipt_index::overdue(env, sweep.overdue_before, sweep.limit).await {
        Ok(overdue) => overdue,
        Err(message) => {
            log_failure(env, &message);
            return SweepReport::default();
        }
    };
    let wakes = overdue.iter().map(|due| async move {
        let call = ObjectCall {
            route: due.route.clone(),
            object: due.object.clone(),
            absorbed: 0,
            op: ObjectOp::Wake,
        };
        let answer = object_client::call(env, call, Vec::new()).await;
        (
            due,
            matches!(answer, Ok(reply) if reply.response.status < 300),
        )
    });
    let answers: Vec<_> = futures::stream::iter(wakes)
        .buffer_unordered(WAKES_AT_ONCE)
        .collect()
        .await;
    let woken = answers.iter().filter(|(_, woken)| *woken).count();
    // A row whose wake failed goes behind the others, so rows that always
    // fail never hold every run's page.
    let failed: Vec<_> = answers
        .iter()
        .filter(|(_, woken)| !*woken)
        .map(|(due, _)| (*due, retry_wake_at(now, due.updated_at)))
        .collect();
    if let Err(message) = receipt_index::back_off(env, &failed).await {
        log_failure(env, &message);
    }
    if let Err(message) =
        receipt_index::forget_tombstones(env, sweep.forget_tombstones_before).await
    {
        log_failure(env, &message);
    }
    let report = SweepReport::of(overdue.len(), woken, sweep.limit);
    if report.overdue > 0 {
        let mut line = DecisionLog::new("sweep", 0);
        line.swept = Some(report);
        events::emit(env, &line, true);
    }
    report
}

fn log_failure(env: &Env, message: &str) {
    let mut line = DecisionLog::new("sweep_failed", 0);
    // The index's error is not logged: the log never holds a value.
    let _ = message;
    line.reason = Some("storage-unavailable");
    events::emit(env, &line, true);
}
