//! A route's flow coordinator, as the keys' objects and the operator API
//! reach it: one RPC call to the object named for the route.

use worker::Env;

use idemgate_core::flow::{coordinator_name, FlowCall};
use idemgate_core::object_call::{ObjectCall, ObjectOp};

use crate::object_client;

/// Sends `call` to `route`'s coordinator; answers its reply's line. An
/// error is a coordinator that could not be reached or did not answer.
pub async fn call(env: &Env, route: &str, call: &FlowCall) -> Result<String, String> {
    let call = ObjectCall {
        route: route.to_string(),
        object: coordinator_name(route),
        absorbed: 0,
        op: ObjectOp::Flow {
            call: call.encode(),
        },
    };
    let reply = object_client::call(env, call, Vec::new())
        .await
        .map_err(|problem| problem.detail())?;
    match reply.response.status {
        200 => String::from_utf8(reply.response.body).map_err(|error| error.to_string()),
        status => Err(format!("the coordinator answered {status}")),
    }
}
