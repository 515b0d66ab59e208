//! A route's flow coordinator, as the keys' objects and the operator API
//! reach it: one RPC call to the `FlowCoordinator` object named for the
//! route.

use wasm_bindgen::prelude::*;
use worker::js_sys::Promise;
use worker::wasm_bindgen_futures::JsFuture;
use worker::Env;

use idemgate_core::flow::{coordinator_name, FlowCall};

use crate::stats;

pub const FLOW_COORDINATOR_BINDING: &str = "FLOW_COORDINATOR";

#[wasm_bindgen]
extern "C" {
    /// A stub of `FlowCoordinator`, seen through the RPC method it exports.
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type FlowCoordinatorStub;

    #[wasm_bindgen(method, catch)]
    fn call(this: &FlowCoordinatorStub, route: &str, line: &str) -> Result<Promise, JsValue>;
}

/// Sends `call` to `route`'s coordinator; answers its reply's line. An
/// error is a coordinator that could not be reached or did not answer.
pub async fn call(env: &Env, route: &str, call: &FlowCall) -> Result<String, String> {
    stats::record(|stats| stats.object_requests += 1);
    let stub: FlowCoordinatorStub = env
        .durable_object(FLOW_COORDINATOR_BINDING)
        .and_then(|namespace| namespace.get_by_name(&coordinator_name(route)))
        .map_err(|error| error.to_string())?
        .into_rpc();
    let promise = stub
        .call(route, &call.encode())
        .map_err(|error| worker::Error::from(error).to_string())?;
    let reply = JsFuture::from(promise)
        .await
        .map_err(|error| worker::Error::from(error).to_string())?;
    reply
        .as_string()
        .ok_or_else(|| "the coordinator answered no line".to_string())
}
