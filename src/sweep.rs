//! The sweep's I/O (SPEC §2b, v3; §15, v5; the plan is
//! `idemgate_core::sweep`): each index shard's alarm wakes the objects of
//! its overdue rows, a few at a time; the Cron Trigger moves a v4
//! deployment's D1 rows into the shards, by waking their objects (each
//! writes its row into its shard) and retiring the old row.

use futures::StreamExt;
use serde::Deserialize;
use worker::Env;

use idemgate_core::decision_log::DecisionLog;
use idemgate_core::index::shard::ShardQuery;
use idemgate_core::index::sql::{self, Param};
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::sweep::{retry_wake_at, Sweep, SweepReport, WAKES_AT_ONCE};

use crate::env::config_from_env;
use crate::events;
use crate::index_db::IndexDb;
use crate::object_client;

/// A row the sweep found due.
#[derive(Deserialize)]
struct Due {
    object: String,
    route: String,
    /// When its object last wrote the row (the sweep's back-off never
    /// changes it).
    updated_at: u64,
    version: u64,
}

fn limit(env: &Env) -> u32 {
    match config_from_env(env) {
        Ok(config) => config.sweep_limit,
        Err(_) => idemgate_core::sweep::DEFAULT_LIMIT,
    }
}

/// One shard's sweep: wakes the objects of its overdue rows (at most
/// `SWEEP_LIMIT`); whether more may be overdue.
pub async fn sweep_index(env: &Env, db: &IndexDb<'_>) -> bool {
    let now = worker::Date::now().as_millis();
    let sweep = Sweep::at(now, limit(env));
    let query = ShardQuery::new(
        sql::OVERDUE,
        &[
            Param::Integer(sweep.overdue_before),
            Param::Integer(sweep.limit.into()),
        ],
    );
    let overdue = match db.run(&query).await.and_then(|rows| rows.read::<Due>()) {
        Ok(overdue) => overdue,
        Err(message) => {
            log_failure(env, &message);
            return false;
        }
    };
    let woken = wake_and_settle(env, db, &overdue, now).await;
    let forget = ShardQuery::new(
        sql::FORGET_TOMBSTONES,
        &[Param::Integer(sweep.forget_tombstones_before)],
    );
    if let Err(message) = db.run(&forget).await {
        log_failure(env, &message);
    }
    report(env, SweepReport::of(overdue.len(), woken, sweep.limit));
    overdue.len() as u32 >= sweep.limit
}

/// The Cron Trigger's run: a page of a v4 deployment's D1 rows moved into
/// the shards (nothing when no D1 index is bound).
pub async fn run(env: &Env) -> SweepReport {
    let Some(database) = crate::receipt_index::legacy_database(env) else {
        return SweepReport::default();
    };
    let db = IndexDb::Legacy(&database);
    let now = worker::Date::now().as_millis();
    let limit = limit(env);
    let page = ShardQuery::new(sql::LEGACY_PAGE, &[Param::Integer(limit.into())]);
    let due = match db.run(&page).await.and_then(|rows| rows.read::<Due>()) {
        Ok(due) => due,
        Err(message) => {
            log_failure(env, &message);
            return SweepReport::default();
        }
    };
    let woken = wake_and_settle(env, &db, &due, now).await;
    let report = SweepReport::of(due.len(), woken, limit);
    self::report(env, report);
    report
}

/// Wakes each row's object; a woken object writes its row where it keeps
/// it, so a row it left as read holds no receipt's row here (it is in
/// another shard, or there is none) and becomes a tombstone. A row whose
/// wake failed goes behind the others, so rows that always fail never
/// hold every run's page. Answers how many were woken.
async fn wake_and_settle(env: &Env, db: &IndexDb<'_>, due: &[Due], now: u64) -> usize {
    let wakes = due.iter().map(|row| async move {
        let call = ObjectCall {
            route: row.route.clone(),
            object: row.object.clone(),
            absorbed: 0,
            op: ObjectOp::Wake,
        };
        let answer = object_client::call(env, call, Vec::new()).await;
        (
            row,
            matches!(answer, Ok(reply) if reply.response.status < 300),
        )
    });
    let answers: Vec<_> = futures::stream::iter(wakes)
        .buffer_unordered(WAKES_AT_ONCE)
        .collect()
        .await;
    let mut woken = 0;
    for (row, ok) in answers {
        let version = Param::Integer(row.version);
        let settle = match ok {
            true => {
                woken += 1;
                ShardQuery::new(
                    sql::TOMBSTONE_UNCHANGED,
                    &[Param::Text(&row.object), version],
                )
            }
            false => ShardQuery::new(
                sql::BACK_OFF,
                &[
                    Param::Text(&row.object),
                    Param::Integer(retry_wake_at(now, row.updated_at)),
                    version,
                ],
            ),
        };
        if let Err(message) = db.run(&settle).await {
            log_failure(env, &message);
        }
    }
    woken
}

fn report(env: &Env, report: SweepReport) {
    if report.overdue > 0 {
        let mut line = DecisionLog::new("sweep", 0);
        line.swept = Some(report);
        events::emit(env, &line, true);
    }
}

fn log_failure(env: &Env, message: &str) {
    let mut line = DecisionLog::new("sweep_failed", 0);
    // The index's error is not logged: the log never holds a value.
    let _ = message;
    line.reason = Some("storage-unavailable");
    events::emit(env, &line, true);
}
