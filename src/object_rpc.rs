//! The one shape of RPC the worker's small objects share (the alert
//! object, the audit log, a route's flow coordinator and reconciliation
//! object): an object found by name in its binding, one `call` method
//! that takes a JSON line (and, for a route's object, the route first),
//! and a line back.

use wasm_bindgen::prelude::*;
use worker::js_sys::Promise;
use worker::wasm_bindgen_futures::JsFuture;
use worker::Env;

#[wasm_bindgen]
extern "C" {
    /// A stub of any of those objects, seen through its `call` method.
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type LineObjectStub;

    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_line(this: &LineObjectStub, line: &str) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch, js_name = call)]
    fn call_route_line(this: &LineObjectStub, route: &str, line: &str) -> Result<Promise, JsValue>;
}

/// `line` to the object `name` of `binding`, with `route` first when the
/// object is a route's; its answer's line. An error is an object that
/// could not be reached or did not answer (`what` names it).
pub async fn call(
    env: &Env,
    binding: &str,
    name: &str,
    route: Option<&str>,
    line: &str,
    what: &str,
) -> Result<String, String> {
    crate::stats::record(|stats| {
        *stats
            .requests_by_class
            .entry(binding.to_string())
            .or_default() += 1;
        *stats
            .requests_by_object
            .entry(format!("{binding} {name}"))
            .or_default() += 1;
    });
    let stub: LineObjectStub = env
        .durable_object(binding)
        .and_then(|namespace| namespace.get_by_name(name))
        .map_err(|error| error.to_string())?
        .into_rpc();
    let promise = match route {
        Some(route) => stub.call_route_line(route, line),
        None => stub.call_line(line),
    }
    .map_err(|error| worker::Error::from(error).to_string())?;
    JsFuture::from(promise)
        .await
        .map_err(|error| worker::Error::from(error).to_string())?
        .as_string()
        .ok_or_else(|| format!("the {what} answered no line"))
}
