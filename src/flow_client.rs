//! A route's flow coordinators, as the keys' objects and the operator API
//! reach them: one RPC call to the `FlowCoordinator` object that a
//! holder's key hashes to among the route's `FLOW_SHARDS` (SPEC §15, v5),
//! sent that coordinator's share of the limits.

use worker::Env;

use idemgate_core::flow::{shard_coordinator_name, FlowCall, FlowStatus};

use crate::stats;

pub const FLOW_COORDINATOR_BINDING: &str = "FLOW_COORDINATOR";

/// Sends `call` to the coordinator of `route` it belongs to (a permit's
/// holder's; the first for a status); answers its reply's line. An error
/// is a coordinator that could not be reached or did not answer.
pub async fn call(env: &Env, route: &str, call: &FlowCall) -> Result<String, String> {
    let (shard, call) = match call {
        FlowCall::Acquire(request) => {
            let (shard, limits) = request.limits.share(&request.holder);
            let mut request = request.clone();
            request.limits = limits;
            (shard, FlowCall::Acquire(request))
        }
        FlowCall::Release {
            holder,
            grant,
            limits,
        } => {
            let (shard, limits) = limits.share(holder);
            let release = FlowCall::Release {
                holder: holder.clone(),
                grant: *grant,
                limits,
            };
            (shard, release)
        }
        FlowCall::Status => (0, FlowCall::Status),
    };
    call_shard(env, route, shard, &call).await
}

async fn call_shard(env: &Env, route: &str, shard: u16, call: &FlowCall) -> Result<String, String> {
    stats::record(|stats| stats.object_requests += 1);
    crate::object_rpc::call(
        env,
        FLOW_COORDINATOR_BINDING,
        &shard_coordinator_name(route, shard),
        Some(route),
        &call.encode(),
        "coordinator",
    )
    .await
}

/// The route's flow control as the operator sees it: every coordinator's
/// permits and waiters, summed, and the oldest wait of any.
pub async fn status(env: &Env, route: &str, shards: u16) -> Result<FlowStatus, String> {
    let asked = (0..shards.max(1)).map(|shard| async move {
        let reply = call_shard(env, route, shard, &FlowCall::Status).await?;
        FlowStatus::decode(&reply)
    });
    let mut total = FlowStatus::default();
    for status in futures::future::join_all(asked).await {
        let status = status?;
        total.permits_in_use += status.permits_in_use;
        total.waiting += status.waiting;
        total.oldest_wait_ms = total.oldest_wait_ms.max(status.oldest_wait_ms);
    }
    Ok(total)
}
