//! Sends the audit chain's head as a checkpoint to the `json` sinks of
//! `ALERTS` (SPEC §13, v5; the rules are
//! [`idemgate_core::audit::checkpoint`]'s), from the audit object's alarm.

use worker::Env;

use idemgate_core::audit::checkpoint::Checkpoint;
use idemgate_core::receipt::ForwardResult;

use crate::edge_http;

/// A sink gets this long to answer.
const SINK_TIMEOUT_MS: u64 = 10_000;

/// Sends `checkpoint` to every `json` sink; `true` when each answered 2xx
/// (or alerting is off, or has no `json` sink: nothing to anchor to).
pub async fn send(env: &Env, checkpoint: &Checkpoint) -> bool {
    let Ok(Some(config)) = crate::alerts::config(env) else {
        return true;
    };
    let now_seconds = worker::Date::now().as_millis() / 1_000;
    let mut delivered = true;
    for sink in &config.sinks {
        let secret = sink
            .secret
            .as_ref()
            .and_then(|name| env.secret(name).ok())
            .map(|secret| secret.to_string());
        let Some(request) = checkpoint.request(sink, secret.as_deref(), now_seconds) else {
            continue;
        };
        delivered &= match request {
            Ok(request) => matches!(
                edge_http::send_forward(request, SINK_TIMEOUT_MS, None).await,
                ForwardResult::Answered(response) if (200..300).contains(&response.status)
            ),
            Err(_) => false,
        };
    }
    delivered
}
