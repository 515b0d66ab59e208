//! A route's flow coordinator, as the keys' objects and the operator API
//! reach it: one RPC call to the `FlowCoordinator` object named for the
//! route.

use worker::Env;

use idemgate_core::flow::{coordinator_name, FlowCall};

use crate::stats;

pub const FLOW_COORDINATOR_BINDING: &str = "FLOW_COORDINATOR";

/// Sends `call` to `route`'s coordinator; answers its reply's line. An
/// error is a coordinator that could not be reached or did not answer.
pub async fn call(env: &Env, route: &str, call: &FlowCall) -> Result<String, String> {
    stats::record(|stats| stats.object_requests += 1);
    crate::object_rpc::call(
        env,
        FLOW_COORDINATOR_BINDING,
        &coordinator_name(route),
        Some(route),
        &call.encode(),
        "coordinator",
    )
    .await
}
