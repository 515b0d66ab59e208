//! The deployment's alert book: what each route's conditions have shown,
//! which are firing and since when, and the outbox of alerts not yet
//! delivered. Pure: the alert object keeps it as one JSON value, feeds it
//! observations and the time, and sends what it says is due.
//!
//! A condition fires on its first sign (`dead`, `origin_busy`,
//! `misconfigured`, `reconcile`, `oldest_pending`), at the threshold of
//! 401s in five minutes (`signature_failures`), or once failures have
//! gone on for the threshold's seconds with no gap of an interval
//! (`origin_failures`). While it fires, at most one alert per interval
//! says how many signs came since the last. It clears when no sign came
//! for an interval (for `signature_failures`: when the five minutes hold
//! fewer than the threshold), and a `resolved` alert says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::message::{Alert, AlertState};
use super::{AlertsConfig, Condition, SIGNATURE_WINDOW_MS};

/// The most alerts the outbox holds: past it the oldest is dropped (and
/// counted), so a sink that is down for days cannot grow the object.
pub const MAX_OUTBOX: usize = 500;
/// How long an alert is retried before it is given up (and counted).
pub const GIVE_UP_AFTER_MS: u64 = 86_400_000;
const FIRST_RETRY_MS: u64 = 5_000;
/// The signature window's bucket: a second.
const WINDOW_BUCKET_MS: u64 = 1_000;
const LONGEST_RETRY_MS: u64 = 600_000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertBook {
    /// By route, then condition.
    conditions: BTreeMap<String, BTreeMap<Condition, ConditionState>>,
    outbox: Vec<Outgoing>,
    /// Alerts made so far: each one's id.
    made: u64,
    /// Alerts given up (retried for a day) or dropped (outbox full).
    pub given_up: u64,
    /// Alerts delivered.
    pub delivered: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct ConditionState {
    firing_since: Option<u64>,
    last_alert_at: u64,
    /// Signs since the last alert.
    unsent: u64,
    /// When the current run of signs began (no gap of an interval).
    run_since: u64,
    last_seen: u64,
    /// `signature_failures`: signs in the window, by time.
    window: Vec<(u64, u64)>,
}

/// One alert on its way to one sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    pub alert: Alert,
    /// Which of `ALERTS` it goes to.
    pub sink: usize,
    pub attempts: u32,
    pub next_at: u64,
    pub first_at: u64,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A route's condition as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConditionView {
    pub route: String,
    pub condition: &'static str,
    pub firing: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firing_since: Option<u64>,
    /// Signs since the last alert.
    pub count: u64,
    pub last_seen: u64,
}

impl AlertBook {
    /// `count` signs of `condition` on `route` at `now`.
    pub fn observe(
        &mut self,
        route: &str,
        condition: Condition,
        count: u64,
        detail: &str,
        now: u64,
        config: &AlertsConfig,
    ) {
        let state = self
            .conditions
            .entry(route.to_string())
            .or_default()
            .entry(condition)
            .or_default();
        if state.last_seen == 0 || now.saturating_sub(state.last_seen) >= config.interval_ms {
            state.run_since = now;
        }
        state.last_seen = now;
        state.unsent = state.unsent.saturating_add(count);
        if condition == Condition::SignatureFailures {
            // Counted per second, so the window holds at most 300 entries
            // however many signs come (SPEC §15, v5: a flood of forged
            // 401s must not grow the book).
            let second = now - now % WINDOW_BUCKET_MS;
            match state.window.last_mut() {
                Some((at, signs)) if *at == second => *signs = signs.saturating_add(count),
                _ => state.window.push((second, count)),
            }
            state
                .window
                .retain(|(at, _)| now.saturating_sub(*at) < SIGNATURE_WINDOW_MS);
        }
        let met = match condition {
            Condition::SignatureFailures => {
                window_sum(&state.window) >= config.thresholds.signature_failures
            }
            Condition::OriginFailures => {
                now.saturating_sub(state.run_since)
                    >= config
                        .thresholds
                        .origin_failures_seconds
                        .saturating_mul(1_000)
            }
            _ => condition.fires_at_once(),
        };
        let alert = match state.firing_since {
            None if met => {
                state.firing_since = Some(now);
                Some(AlertState::Firing)
            }
            Some(_) if now.saturating_sub(state.last_alert_at) >= config.interval_ms => {
                Some(AlertState::Firing)
            }
            _ => None,
        };
        if let Some(kind) = alert {
            let made = take_alert(state, route, condition, kind, detail, now, &mut self.made);
            self.queue(made, now, config);
        }
    }

    /// What the passing of time changes: interval updates of firing
    /// conditions, and `resolved` for those that cleared.
    pub fn tick(&mut self, now: u64, config: &AlertsConfig) {
        let mut alerts = Vec::new();
        for (route, conditions) in &mut self.conditions {
            for (condition, state) in conditions.iter_mut() {
                if *condition == Condition::SignatureFailures {
                    state
                        .window
                        .retain(|(at, _)| now.saturating_sub(*at) < SIGNATURE_WINDOW_MS);
                }
                let Some(_) = state.firing_since else {
                    continue;
                };
                let cleared = match condition {
                    Condition::SignatureFailures => {
                        window_sum(&state.window) < config.thresholds.signature_failures
                    }
                    _ => now.saturating_sub(state.last_seen) >= config.interval_ms,
                };
                // One message per route and condition per interval: a
                // `resolved` waits for the interval too, and carries the
                // count since the last.
                let due = now.saturating_sub(state.last_alert_at) >= config.interval_ms;
                let update_due = now >= update_at(*condition, state, config);
                let kind = match (cleared, due, update_due && state.unsent > 0) {
                    (true, true, _) => AlertState::Resolved,
                    (false, _, true) => AlertState::Firing,
                    _ => continue,
                };
                let detail = match kind {
                    AlertState::Resolved => "cleared",
                    AlertState::Firing => "still firing",
                };
                alerts.push(take_alert(
                    state,
                    route,
                    *condition,
                    kind,
                    detail,
                    now,
                    &mut self.made,
                ));
                if kind == AlertState::Resolved {
                    state.firing_since = None;
                }
            }
            // A condition that is quiet and not firing is forgotten.
            conditions.retain(|_, state| {
                state.firing_since.is_some()
                    || now.saturating_sub(state.last_seen)
                        < config.interval_ms.max(SIGNATURE_WINDOW_MS)
            });
        }
        self.conditions
            .retain(|_, conditions| !conditions.is_empty());
        for alert in alerts {
            self.queue(alert, now, config);
        }
    }

    fn queue(&mut self, alert: Alert, now: u64, config: &AlertsConfig) {
        for sink in 0..config.sinks.len() {
            self.outbox.push(Outgoing {
                alert: alert.clone(),
                sink,
                attempts: 0,
                next_at: now,
                first_at: now,
                last_error: None,
            });
        }
        while self.outbox.len() > MAX_OUTBOX {
            self.outbox.remove(0);
            self.given_up += 1;
        }
    }

    /// The alerts due to be sent at `now`; those retried for a day are
    /// given up first.
    pub fn due(&mut self, now: u64) -> Vec<Outgoing> {
        let before = self.outbox.len();
        self.outbox
            .retain(|outgoing| now.saturating_sub(outgoing.first_at) < GIVE_UP_AFTER_MS);
        self.given_up += (before - self.outbox.len()) as u64;
        self.outbox
            .iter()
            .filter(|outgoing| outgoing.next_at <= now)
            .cloned()
            .collect()
    }

    /// What became of attempts [`AlertBook::due`] handed out, each named
    /// by its alert's id and its sink (the outbox may have changed while
    /// they were sent): `Ok` delivered, `Err` to be retried later.
    pub fn sent(&mut self, results: Vec<(String, usize, Result<(), String>)>, now: u64) {
        for (id, sink, result) in results {
            let Some(index) = self
                .outbox
                .iter()
                .position(|outgoing| outgoing.alert.id == id && outgoing.sink == sink)
            else {
                continue;
            };
            match result {
                Ok(()) => {
                    self.outbox.remove(index);
                    self.delivered += 1;
                }
                Err(error) => {
                    let outgoing = &mut self.outbox[index];
                    outgoing.attempts += 1;
                    let delay = FIRST_RETRY_MS
                        .saturating_mul(1 << outgoing.attempts.min(16))
                        .min(LONGEST_RETRY_MS);
                    outgoing.next_at = now + delay / 2;
                    outgoing.last_error = Some(error.chars().take(200).collect());
                }
            }
        }
    }

    /// When the book next has something to do, if ever.
    pub fn next_wake(&self, config: &AlertsConfig) -> Option<u64> {
        let outbox = self.outbox.iter().map(|outgoing| outgoing.next_at);
        let conditions = self.conditions.values().flat_map(|conditions| {
            conditions.iter().flat_map(|(condition, state)| {
                let forget = state.last_seen + config.interval_ms.max(SIGNATURE_WINDOW_MS);
                if state.firing_since.is_none() {
                    return [Some(forget), None, None].into_iter().flatten();
                }
                let due = state.last_alert_at + config.interval_ms;
                let clears = clears_at(*condition, state, config).map(|at| at.max(due));
                let update = (state.unsent > 0).then(|| update_at(*condition, state, config));
                // A firing condition is forgotten only once resolved.
                [clears, update, None].into_iter().flatten()
            })
        });
        outbox.chain(conditions).min()
    }

    pub fn outbox_len(&self) -> usize {
        self.outbox.len()
    }

    /// Every route's conditions, firing first.
    pub fn view(&self) -> Vec<ConditionView> {
        let mut views: Vec<ConditionView> = self
            .conditions
            .iter()
            .flat_map(|(route, conditions)| {
                conditions
                    .iter()
                    .map(move |(condition, state)| ConditionView {
                        route: route.clone(),
                        condition: condition.name(),
                        firing: state.firing_since.is_some(),
                        firing_since: state.firing_since,
                        count: state.unsent,
                        last_seen: state.last_seen,
                    })
            })
            .collect();
        views.sort_by_key(|view| !view.firing);
        views
    }
}

/// When a firing condition clears if no further sign comes (for
/// signature failures, when the oldest sign in the window leaves it).
fn clears_at(condition: Condition, state: &ConditionState, config: &AlertsConfig) -> Option<u64> {
    match condition {
        Condition::SignatureFailures => {
            state.window.first().map(|(at, _)| at + SIGNATURE_WINDOW_MS)
        }
        _ => Some(state.last_seen + config.interval_ms),
    }
}

/// When a firing condition's interval update ("still firing", with the
/// count) goes: an interval after the last alert, or, where the condition
/// would clear within a tenth of an interval after that, when it clears,
/// so that a burst ending just after the interval's mark is told once, as
/// `resolved` with its count (not `firing` and `resolved` a moment apart).
/// Signs that keep coming delay it by a tenth of an interval at most.
fn update_at(condition: Condition, state: &ConditionState, config: &AlertsConfig) -> u64 {
    let due = state.last_alert_at + config.interval_ms;
    let grace = config.interval_ms / 10;
    match clears_at(condition, state, config) {
        Some(clears) if clears <= due + grace => clears.max(due),
        _ => due,
    }
}

fn window_sum(window: &[(u64, u64)]) -> u64 {
    window.iter().map(|(_, count)| count).sum()
}

fn take_alert(
    state: &mut ConditionState,
    route: &str,
    condition: Condition,
    kind: AlertState,
    detail: &str,
    now: u64,
    made: &mut u64,
) -> Alert {
    *made += 1;
    let alert = Alert {
        id: format!("alert_{now}_{made}"),
        condition,
        route: route.to_string(),
        state: kind,
        count: state.unsent,
        since: state.firing_since.unwrap_or(now),
        detail: detail.to_string(),
    };
    state.last_alert_at = now;
    state.unsent = 0;
    alert
}
