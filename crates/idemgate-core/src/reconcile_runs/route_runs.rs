//! What a route's reconciliation object keeps between runs: the cursor
//! of an unfinished window, the lock, when the next run is due, the back-off,
//! the last runs' records and the last day's counts by the hour; and what
//! the object is asked over RPC.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::run::{Asked, Cursor, RunRecord};
use crate::reconcile::{ReconcileConfig, KEPT_RUNS};

/// How long the lock holds if its run never ends (an evicted object): a
/// run's 25 s, and the longest a key's object may hold its last call (a
/// sync forward, bounded by `ORIGIN_TIMEOUT_MS`, at most 300 s), with a
/// margin. A lock that ran out under a live run would let a second run of
/// the route ask for the same re-sends.
pub const LOCK_MS: u64 = 360_000;

/// What a route's reconciliation object keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteRuns {
    #[serde(default)]
    pub cursor: Option<Cursor>,
    /// Newest first, at most [`KEPT_RUNS`].
    #[serde(default)]
    pub runs: VecDeque<RunRecord>,
    /// A run holds the lock until then (ms).
    #[serde(default)]
    pub locked_until: u64,
    /// When the next scheduled run is due (ms).
    #[serde(default)]
    pub next_run_at: u64,
    /// The current back-off after a 429 or 5xx (ms); 0 when none.
    #[serde(default)]
    pub backoff_ms: u64,
    /// The last 24 hours' counts, by the hour the runs started in (the
    /// hour since the epoch), newest first.
    #[serde(default)]
    pub hours: VecDeque<(u64, DayCounts)>,
    /// Events asked to be re-sent, by id, and when: kept for the lookback.
    #[serde(default)]
    pub asked: Asked,
}

/// At most this many asked events are kept (the oldest go first): one
/// stored value holds them.
pub const MAX_ASKED: usize = 5_000;

/// The shortest and longest back-off after a 429 or a 5xx.
const BACKOFF_MIN_MS: u64 = 60_000;
const BACKOFF_MAX_MS: u64 = 3_600_000;
/// How soon a run that stopped at its limits is followed by the next.
pub const CONTINUE_AFTER_MS: u64 = 1_000;

impl RouteRuns {
    /// Whether a scheduled run may start at `now`.
    pub fn due(&self, now: u64) -> bool {
        now >= self.next_run_at && now >= self.locked_until
    }

    pub fn locked(&self, now: u64) -> bool {
        now < self.locked_until
    }

    /// Takes the lock for a run starting at `now`.
    /// Keeps the events a run asked to be re-sent at `now`, and forgets
    /// those asked before the lookback.
    pub fn remember_asked(&mut self, asked: &[String], now: u64, config: &ReconcileConfig) {
        for id in asked {
            self.asked.insert(id.clone(), now);
        }
        let horizon = now.saturating_sub(config.lookback_seconds.saturating_mul(1_000));
        self.asked.retain(|_, at| *at >= horizon);
        if self.asked.len() > MAX_ASKED {
            let mut times: Vec<u64> = self.asked.values().copied().collect();
            times.sort_unstable();
            let cut = times[self.asked.len() - MAX_ASKED];
            self.asked.retain(|_, at| *at >= cut);
        }
    }

    pub fn lock(&mut self, now: u64) {
        self.locked_until = now.saturating_add(LOCK_MS);
    }

    /// Records an ended run: keeps its cursor, frees the lock, and sets
    /// when the next run is due.
    pub fn finish(
        &mut self,
        record: RunRecord,
        cursor: Option<Cursor>,
        retry_after_ms: Option<u64>,
        config: &ReconcileConfig,
    ) {
        let now = record.ended_at;
        self.locked_until = 0;
        self.cursor = cursor;
        self.next_run_at = match &record.error {
            Some(error) if error.backs_off() => {
                self.backoff_ms = (self.backoff_ms * 2)
                    .clamp(BACKOFF_MIN_MS, BACKOFF_MAX_MS)
                    .max(retry_after_ms.unwrap_or(0).min(BACKOFF_MAX_MS));
                now + self.backoff_ms
            }
            _ => {
                self.backoff_ms = 0;
                match self.cursor.is_some() && record.error.is_none() {
                    true => now + CONTINUE_AFTER_MS,
                    false => record.started_at + config.every_seconds * 1_000,
                }
            }
        };
        self.count_in_its_hour(&record);
        self.runs.push_front(record);
        self.runs.truncate(KEPT_RUNS);
    }

    /// Adds a run to the counts of the hour it started in; only the last
    /// 24 hours' are kept (more runs than the 50 kept records may fall in
    /// a day).
    fn count_in_its_hour(&mut self, run: &RunRecord) {
        let hour = run.started_at / HOUR_MS;
        if !self.hours.iter().any(|(kept, _)| *kept == hour) {
            self.hours.push_front((hour, DayCounts::default()));
        }
        let (_, counts) = self
            .hours
            .iter_mut()
            .find(|(kept, _)| *kept == hour)
            .expect("pushed above");
        counts.runs += 1;
        counts.listed += run.listed;
        counts.already_received += run.already_received;
        counts.filled += run.filled;
        counts.failed += run.failed;
        counts.failed_runs += u64::from(run.error.is_some());
        self.hours
            .retain(|(kept, _)| hour.saturating_sub(*kept) < 24);
    }

    /// The counts of the runs that started in the 24 hours before `now`,
    /// by the hour (the oldest hour counts whole).
    pub fn last_day(&self, now: u64) -> DayCounts {
        let hour = now / HOUR_MS;
        self.hours
            .iter()
            .filter(|(started, _)| hour.saturating_sub(*started) < 24)
            .fold(DayCounts::default(), |mut day, (_, counts)| {
                day.runs += counts.runs;
                day.listed += counts.listed;
                day.already_received += counts.already_received;
                day.filled += counts.filled;
                day.failed += counts.failed;
                day.failed_runs += counts.failed_runs;
                day
            })
    }
}

const HOUR_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCounts {
    pub runs: u64,
    pub listed: u64,
    pub already_received: u64,
    pub filled: u64,
    pub failed: u64,
    pub failed_runs: u64,
}

/// What a route's reconciliation object is asked, over RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileCall {
    /// The Cron Trigger: run if a run is due and none is running.
    Tick,
    /// The operator: run now, unless one is running.
    RunNow,
    /// The operator: the last runs and the cursor.
    Status,
}

impl RouteRuns {
    /// What `GET /__idemgate/reconcile?route=R` answers (SPEC §11).
    pub fn view(&self, route: &str, now: u64) -> serde_json::Value {
        serde_json::json!({
            "route": route,
            "running": self.locked(now),
            "cursor": self.cursor,
            "next_run_at": self.next_run_at,
            "last_day": self.last_day(now),
            "runs": self.runs,
        })
    }

    /// A route's line in the summary: its last run and the last day's counts.
    pub fn summary(&self, now: u64) -> serde_json::Value {
        serde_json::json!({
            "last_run": self.runs.front(),
            "last_day": self.last_day(now),
        })
    }
}

/// What a call found: a run to make now (the route is locked for it), or
/// none (one is running, or none is due).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begun {
    Run(super::run::Trigger),
    NotNow { running: bool },
}

impl RouteRuns {
    /// The check and the lock, in one step: a tick runs when a run is due
    /// and none is running; the operator's call whenever none is running.
    pub fn begin(&mut self, call: ReconcileCall, now: u64) -> Begun {
        let start = match call {
            ReconcileCall::Tick => self.due(now),
            ReconcileCall::RunNow => !self.locked(now),
            ReconcileCall::Status => false,
        };
        if !start {
            return Begun::NotNow {
                running: self.locked(now),
            };
        }
        self.lock(now);
        Begun::Run(match call {
            ReconcileCall::RunNow => super::run::Trigger::Operator,
            _ => super::run::Trigger::Schedule,
        })
    }
}

/// A route's reconciliation object is a host of its runs, kept as one
/// value. Its alarm is a tick, which the object runs as a call: a run is
/// I/O between two steps of the book (begin, then finish).
impl crate::host::Book for RouteRuns {
    type Call = ReconcileCall;
    type Reply = Begun;
    type Changes = String;

    fn apply(&mut self, call: &ReconcileCall, now: u64) -> Begun {
        self.begin(*call, now)
    }

    fn alarm(&mut self, _now: u64) -> crate::host::AlarmStep {
        crate::host::AlarmStep::Keep
    }

    /// The next run's time, once the run under way (which holds the
    /// lock) has recorded it.
    fn next_alarm(&self) -> Option<u64> {
        (self.next_run_at > 0 && self.locked_until == 0).then_some(self.next_run_at)
    }

    fn take_wakes(&mut self) -> Vec<String> {
        Vec::new()
    }

    fn take_changes(&mut self) -> String {
        serde_json::to_string(self).expect("runs serialize")
    }
}
