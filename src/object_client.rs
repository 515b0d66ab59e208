//! The gateway's side of the key's Durable Object (adapter): one RPC call
//! per delivery or operator request, and the duplicates this isolate
//! absorbed for the key, told to its object with the next call.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::js_sys::{Array, Promise, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Env};

use idemgate_core::object_call::{call_failure, ObjectCall, ObjectOp, ObjectReply, Reply};
use idemgate_core::problem::Problem;

use crate::stats;

pub const DEDUP_OBJECT_BINDING: &str = "DEDUP_OBJECT";

#[wasm_bindgen]
extern "C" {
    /// A stub of `DedupObject`, seen through the RPC method it exports.
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type DedupObjectStub;

    #[wasm_bindgen(method, catch)]
    fn dispatch(this: &DedupObjectStub, call: &str, body: &Uint8Array) -> Result<Promise, JsValue>;
}

/// Sends `call` (with `body`) to the object it names; answers its reply:
/// the response and, for a stored complete replay, how long it may be
/// replayed.
///
/// A failure before the call leaves is `storage-unavailable` (nothing was
/// forwarded); a delivery whose call fails after it left is
/// `outcome-unknown` (the object may have forwarded it: SPEC §6).
pub async fn call(env: &Env, mut call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem> {
    let delivery = call.op.is_delivery();
    let before_sending = |message: String| call_failure(delivery, false, message);
    let after_sending = |message: String| call_failure(delivery, true, message);
    stats::record(|stats| {
        stats.object_requests += 1;
        *stats
            .requests_by_class
            .entry(DEDUP_OBJECT_BINDING.to_string())
            .or_default() += 1;
    });
    call.absorbed = take_absorbed(&call.object);
    let stub: DedupObjectStub = env
        .durable_object(DEDUP_OBJECT_BINDING)
        .and_then(|namespace| namespace.get_by_name(&call.object))
        .map_err(|error| before_sending(error.to_string()))?
        .into_rpc();
    // The body crosses into JavaScript once; the Rust copy goes before
    // the call is awaited.
    let js_body = Uint8Array::from(body.as_slice());
    drop(body);
    let promise = stub
        .dispatch(&call.to_json(), &js_body)
        .map_err(|error| before_sending(worker::Error::from(error).to_string()))?;
    drop(js_body);
    let exchange = async {
        let reply: Array = JsFuture::from(promise).await?.dyn_into()?;
        let json = reply.get(0).as_string().unwrap_or_default();
        let body = reply.get(1).dyn_into::<Uint8Array>()?.to_vec();
        Ok::<_, JsValue>((json, body))
    };
    let (json, body) = exchange
        .await
        .map_err(|error| after_sending(worker::Error::from(error).to_string()))?;
    ObjectReply::decode(&json, body).map_err(after_sending)
}

/// Counts a duplicate this isolate absorbed for `object_name`.
pub fn count_absorbed(object_name: &str) {
    crate::isolate::with(|isolate| {
        let mut absorbed = isolate.absorbed.borrow_mut();
        if absorbed.len() < MAX_PENDING_ABSORBED || absorbed.contains_key(object_name) {
            *absorbed.entry(object_name.to_string()).or_default() += 1;
        }
    });
}

fn take_absorbed(object_name: &str) -> u64 {
    crate::isolate::with(|isolate| isolate.absorbed.borrow_mut().remove(object_name)).unwrap_or(0)
}

/// Duplicates absorbed here and not yet told to their object; past this
/// many objects, further counts are dropped (the count is approximate).
const MAX_PENDING_ABSORBED: usize = 4_096;

/// An operator's call to a key's object: its answer as the runtime's
/// response, or the problem of an object that could not be reached.
pub(crate) async fn ask_object(
    env: &Env,
    route: String,
    object: String,
    op: ObjectOp,
) -> Result<web_sys::Response, Problem> {
    let request = ObjectCall {
        route,
        object,
        absorbed: 0,
        op,
    };
    let reply = call(env, request, Vec::new()).await?;
    crate::edge_http::response(&reply.response).map_err(|error| Problem::StorageUnavailable {
        message: error.to_string(),
    })
}
