//! What an isolate (or a Durable Object) tells the alert objects: signs of
//! trouble noted as decision events happen ([`note`]), summed per route and
//! condition, and sent after the request's answer ([`flush`], under
//! `waitUntil`), never on a delivery's path: one call to each route's own
//! alert object (SPEC §15, v5), so that a flood on one route neither slows
//! nor silences another's alerts; the deployment's own condition (a route
//! that fails to load) goes to an object of its own. While one flush is on
//! its way, new signs wait for the next, so a storm of 401s costs one call
//! per route at a time per isolate, not one per request. Signs noted in an isolate that is evicted before its next
//! flush are lost: an alert is a nudge to a person, the receipts and logs
//! are the record.

use std::collections::BTreeMap;

use wasm_bindgen::JsValue;
use worker::js_sys::Promise;
use worker::Env;

use futures::future::{select, Either};
pub use idemgate_core::alerts::kept::{AlertCall, Observation};
use idemgate_core::alerts::{self, AlertsConfig, Condition, SEND_BOUND_MS};
use idemgate_core::index::owed::{OwedView, RowReport};

pub const ALERT_OBJECT_BINDING: &str = "ALERT_OBJECT";
/// How long health waits for a route's alert object.
const HEALTH_BOUND_MS: u64 = 2_000;
/// The deployment's object's name (the one object of earlier versions).
pub const ALERT_OBJECT_NAME: &str = "alerts";

/// The object that keeps `route`'s signs of `condition`: the route's own,
/// or the deployment's for a route that failed to load.
fn object_for(route: &str, condition: Condition) -> String {
    match condition {
        Condition::Misconfigured => ALERT_OBJECT_NAME.to_string(),
        _ => route_object(route),
    }
}

fn route_object(route: &str) -> String {
    format!("{ALERT_OBJECT_NAME}:{route}")
}
/// `ALERTS` and its companions, read once per isolate; `Ok(None)` when
/// alerting is off; `Err` says what is wrong (health shows it).
pub fn config(env: &Env) -> Result<Option<AlertsConfig>, String> {
    crate::isolate::with(|isolate| {
        isolate
            .alerts
            .config
            .borrow_mut()
            .get_or_insert_with(|| {
                let lookup = |name: &str| crate::env::lookup(env, name);
                alerts::parse(lookup).map_err(|(variable, reason)| format!("{variable} {reason}"))
            })
            .clone()
    })
}

/// A sign of `condition` on `route`, if alerting is on.
pub fn note(env: &Env, route: &str, condition: Condition, detail: &str) {
    if !matches!(config(env), Ok(Some(_))) {
        return;
    }
    crate::isolate::with(|isolate| {
        let mut pending = isolate.alerts.pending.borrow_mut();
        let entry = pending
            .entry((route.to_string(), condition))
            .or_insert((0, String::new()));
        entry.0 += 1;
        entry.1 = detail.chars().take(200).collect();
    });
}

/// A key object's word on its receipt's index row, for health (SPEC
/// §2b, v5): kept whether or not alerting is on, the last word per
/// receipt.
pub fn note_row(report: RowReport) {
    crate::isolate::with(|isolate| {
        isolate
            .alerts
            .rows
            .borrow_mut()
            .insert(report.receipt_id.clone(), report);
    });
}

/// Whether signs wait to be sent.
pub fn pending() -> bool {
    crate::isolate::with(|isolate| {
        (!isolate.alerts.pending.borrow().is_empty() || !isolate.alerts.rows.borrow().is_empty())
            && !isolate
                .alerts
                .sending
                .get()
                .is_held(worker::Date::now().as_millis())
    })
}

/// Sends the signs noted so far to the alert object, and those noted
/// meanwhile after them; one call at a time per isolate, each bounded by
/// [`SEND_BOUND_MS`] (a call that hangs, or whose `waitUntil` was
/// cancelled, frees the isolate's gate when the bound is over). A failed
/// call is dropped (logged): the signs go on coming while the trouble
/// lasts.
pub async fn flush(env: Env) {
    let taken_at = worker::Date::now().as_millis();
    let taken = crate::isolate::with(|isolate| {
        let mut gate = isolate.alerts.sending.get();
        let taken = gate.try_take(taken_at);
        isolate.alerts.sending.set(gate);
        taken
    });
    if !taken {
        return;
    }
    loop {
        let mut by_object: BTreeMap<String, Vec<Observation>> = BTreeMap::new();
        let mut rows_by_object: BTreeMap<String, Vec<RowReport>> = BTreeMap::new();
        crate::isolate::with(|isolate| {
            for (_, report) in std::mem::take(&mut *isolate.alerts.rows.borrow_mut()) {
                rows_by_object
                    .entry(route_object(&report.route))
                    .or_default()
                    .push(report);
            }
            for ((route, condition), (count, detail)) in
                std::mem::take(&mut *isolate.alerts.pending.borrow_mut())
            {
                by_object
                    .entry(object_for(&route, condition))
                    .or_default()
                    .push(Observation {
                        route,
                        condition,
                        count,
                        detail,
                    });
            }
        });
        if by_object.is_empty() && rows_by_object.is_empty() {
            break;
        }
        let calls = by_object
            .into_iter()
            .map(|(name, observations)| (name, AlertCall::Observe(observations)))
            .chain(
                rows_by_object
                    .into_iter()
                    .map(|(name, rows)| (name, AlertCall::Rows(rows))),
            );
        // Each object apart, at once: one that hangs or fails costs the
        // others nothing.
        let sends = calls.map(|(name, call)| {
            let env = &env;
            async move {
                let sent = call_object(env, &name, &call);
                let bound = worker::Delay::from(std::time::Duration::from_millis(SEND_BOUND_MS));
                let answered = match select(Box::pin(sent), bound).await {
                    Either::Left((answered, _)) => answered.map(|_| ()),
                    Either::Right(_) => Err("the alert object did not answer in time".to_string()),
                };
                if let Err(message) = answered {
                    crate::log_sink::emit_text(
                        &serde_json::json!({"event": "idemgate.alerts", "object": name, "error": message})
                            .to_string(),
                    );
                }
            }
        });
        futures::future::join_all(sends).await;
        if worker::Date::now().as_millis() >= taken_at.saturating_add(SEND_BOUND_MS) {
            // Past its bound another flush may hold the gate: leave the
            // rest to it.
            break;
        }
    }
    crate::isolate::with(|isolate| {
        let mut gate = isolate.alerts.sending.get();
        gate.release(taken_at);
        isolate.alerts.sending.set(gate);
    });
}

/// The deployment's alert objects: each route's and its own.
fn objects(env: &Env) -> Vec<String> {
    let mut names = vec![ALERT_OBJECT_NAME.to_string()];
    if let Ok(config) = crate::env::config_from_env(env) {
        names.extend(config.routes.iter().map(|route| route_object(&route.name)));
    }
    names
}

/// Every alert object's book as the operator sees it: their conditions
/// together, their outboxes and counts summed.
pub async fn view(env: &Env) -> Result<serde_json::Value, String> {
    let names = objects(env);
    let views = futures::future::join_all(
        names
            .iter()
            .map(|name| call_object(env, name, &AlertCall::View)),
    )
    .await;
    let mut conditions = Vec::new();
    let (mut outbox, mut delivered, mut given_up) = (0, 0, 0);
    for view in views {
        let view = view?;
        conditions.extend(view["conditions"].as_array().cloned().unwrap_or_default());
        outbox += view["outbox"].as_u64().unwrap_or(0);
        delivered += view["delivered"].as_u64().unwrap_or(0);
        given_up += view["given_up"].as_u64().unwrap_or(0);
    }
    Ok(serde_json::json!({
        "conditions": conditions,
        "outbox": outbox,
        "delivered": delivered,
        "given_up": given_up,
    }))
}

/// One call to the alert object `name`; its JSON answer.
async fn call_object(env: &Env, name: &str, call: &AlertCall) -> Result<serde_json::Value, String> {
    let line = serde_json::to_string(call).expect("a call serializes");
    let answer =
        crate::object_rpc::call(env, ALERT_OBJECT_BINDING, name, None, &line, "alert object")
            .await?;
    serde_json::from_str(&answer).map_err(|error| error.to_string())
}

/// The receipts whose index row has not landed, over every route (SPEC
/// §2b, v5): the count, and the `named` oldest.
pub async fn owed_rows(env: &Env, named: usize) -> Result<OwedView, String> {
    let config =
        crate::env::config_from_env(env).map_err(|_| "the configuration is refused".to_string())?;
    let names: Vec<String> = config
        .routes
        .iter()
        .map(|route| route_object(&route.name))
        .collect();
    // Each within a bound: a stuck object makes health say
    // `unavailable`, never hang.
    let views = futures::future::join_all(names.iter().map(|name| async move {
        let asked = Box::pin(call_object(env, name, &AlertCall::OwedRows));
        let bound = worker::Delay::from(std::time::Duration::from_millis(HEALTH_BOUND_MS));
        match select(asked, bound).await {
            Either::Left((view, _)) => view,
            Either::Right(_) => Err(format!("{name} did not answer in time")),
        }
    }))
    .await;
    let mut merged = Vec::with_capacity(views.len());
    for view in views {
        let view: OwedView = serde_json::from_value(view?).map_err(|error| error.to_string())?;
        merged.push(view);
    }
    Ok(OwedView::merge(merged, named))
}

/// The Cron Trigger's minute: every alert object's clock moves on even
/// when its alarm was lost.
pub async fn tick(env: &Env) {
    let Ok(Some(config)) = config(env) else {
        return;
    };
    note_oldest_pending(env, &config).await;
    let names = objects(env);
    futures::future::join_all(
        names
            .iter()
            .map(|name| call_object(env, name, &AlertCall::Tick)),
    )
    .await;
}

/// `oldest_pending`: each route whose oldest pending async delivery (queued,
/// in flight or failed, by the index) has waited longer than its
/// threshold, once a minute.
async fn note_oldest_pending(env: &Env, config: &AlertsConfig) {
    let Ok(counts) = crate::receipt_index::summary(env).await else {
        return;
    };
    let now = worker::Date::now().as_millis();
    let threshold_ms = config
        .thresholds
        .oldest_pending_seconds
        .saturating_mul(1_000);
    let mut oldest: BTreeMap<&str, u64> = BTreeMap::new();
    let pending = |state: &str| idemgate_core::index::PENDING_STATES.contains(&state);
    for count in counts.iter().filter(|count| pending(&count.state)) {
        if let Some(at) = count.oldest {
            let entry = oldest.entry(count.route.as_str()).or_insert(u64::MAX);
            *entry = (*entry).min(at as u64);
        }
    }
    for (route, at) in oldest {
        let age_ms = now.saturating_sub(at);
        if age_ms > threshold_ms {
            let detail = format!(
                "the oldest pending delivery has waited {} s",
                age_ms / 1_000
            );
            note(env, route, Condition::OldestPending, &detail);
        }
    }
}

/// Sends pending signs from a Durable Object, after its answer; `keep`
/// is the object's `waitUntil`, which keeps it company.
pub fn flush_from_object(env: &Env, keep: impl FnOnce(&Promise)) {
    if !pending() {
        return;
    }
    let env = env.clone();
    let sent = worker::wasm_bindgen_futures::future_to_promise(async move {
        flush(env).await;
        Ok(JsValue::UNDEFINED)
    });
    keep(&sent);
}
