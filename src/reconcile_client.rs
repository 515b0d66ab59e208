//! A route's reconciliation object, as the operator API and the Cron
//! Trigger reach it: one RPC call to the `ReconcileObject` named for the
//! route.

use worker::Env;

use idemgate_core::reconcile_runs::route_runs::ReconcileCall;
use idemgate_core::reconcile_runs::run::ReconcileLine;

use crate::env::config_from_env;
use crate::reconcile_object::RECONCILE_OBJECT_BINDING;
use crate::stats;

/// The object's answer: a status and a JSON body.
pub struct Answer {
    pub status: u16,
    pub body: serde_json::Value,
}

/// Sends `call` to `route`'s object. An error is an object that could not
/// be reached or did not answer.
pub async fn call(env: &Env, route: &str, call: ReconcileCall) -> Result<Answer, String> {
    stats::record(|stats| stats.object_requests += 1);
    let line = serde_json::to_string(&call).expect("a call serializes");
    let reply = crate::object_rpc::call(
        env,
        RECONCILE_OBJECT_BINDING,
        &format!("reconcile:{route}"),
        Some(route),
        &line,
        "reconciliation object",
    )
    .await?;
    let mut reply: serde_json::Value =
        serde_json::from_str(&reply).map_err(|error| error.to_string())?;
    Ok(Answer {
        status: reply["status"].as_u64().unwrap_or(500) as u16,
        body: reply["body"].take(),
    })
}

/// The Cron Trigger: each reconciled route's object, told the time has
/// come; each runs only if a run is due and none is running. A route
/// whose object cannot be reached is tried again on the next tick.
pub async fn tick_all(env: &Env) {
    let Ok(config) = config_from_env(env) else {
        return;
    };
    let routes = config
        .routes
        .iter()
        .filter(|route| route.reconcile.is_some())
        .map(|route| async move {
            if let Err(message) = call(env, &route.name, ReconcileCall::Tick).await {
                // Said and counted, so that a missing binding or an object
                // that cannot be reached does not stop reconciliation in
                // silence.
                crate::events::reconcile(
                    env,
                    &ReconcileLine {
                        event: "reconcile",
                        decision: "reconcile-failed",
                        route: route.name.clone(),
                        run_id: String::new(),
                        event_id: None,
                        event_type: None,
                        status: None,
                        problem: Some(format!(
                            "the route's reconciliation object could not be reached: {message}"
                        )),
                    },
                );
            }
        });
    futures::future::join_all(routes).await;
}
