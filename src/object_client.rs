//! The gateway's side of the key's Durable Object (adapter): one RPC call
//! per delivery or operator request, and the duplicates this isolate
//! absorbed for the key, told to its object with the next call.

use std::cell::RefCell;
use std::collections::HashMap;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::js_sys::{Array, Promise, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;
use worker::Env;

use crate::stats;
use idemgate_core::object_call::{ObjectCall, ObjectOp, ObjectReply};
use idemgate_core::problem::Problem;
use idemgate_core::receipt::HttpResponse;

pub const DEDUP_OBJECT_BINDING: &str = "DEDUP_OBJECT";

#[wasm_bindgen]
extern "C" {
    /// A stub of `DedupObject`, seen through the RPC method it exports.
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type DedupObjectStub;

    #[wasm_bindgen(method, catch)]
    fn dispatch(this: &DedupObjectStub, call: &str, body: &Uint8Array) -> Result<Promise, JsValue>;
}

/// Sends `op` (with `body`) to the object named `object_name`; answers its
/// response and, for a stored complete replay, how long it may be replayed.
pub async fn call(
    env: &Env,
    object_name: &str,
    op: ObjectOp,
    body: &[u8],
) -> Result<(HttpResponse, Option<u64>), Problem> {
    let unavailable = |message: String| Problem::StorageUnavailable {
        message: format!("the key's Durable Object did not answer: {message}"),
    };
    stats::record(|stats| stats.object_requests += 1);
    let call = ObjectCall {
        absorbed: take_absorbed(object_name),
        op,
    };
    let stub: DedupObjectStub = env
        .durable_object(DEDUP_OBJECT_BINDING)
        .and_then(|namespace| namespace.get_by_name(object_name))
        .map_err(|error| unavailable(error.to_string()))?
        .into_rpc();
    let exchange = async {
        let promise = stub.dispatch(&call.to_json(), &Uint8Array::from(body))?;
        let reply: Array = JsFuture::from(promise).await?.dyn_into()?;
        let json = reply.get(0).as_string().unwrap_or_default();
        let body = reply.get(1).dyn_into::<Uint8Array>()?.to_vec();
        Ok::<_, JsValue>((json, body))
    };
    let (json, body) = exchange
        .await
        .map_err(|error| unavailable(worker::Error::from(error).to_string()))?;
    ObjectReply::decode(&json, body).map_err(unavailable)
}

/// Counts a duplicate this isolate absorbed for `object_name`.
pub fn count_absorbed(object_name: &str) {
    ABSORBED.with(|absorbed| {
        let mut absorbed = absorbed.borrow_mut();
        if absorbed.len() < MAX_PENDING_ABSORBED || absorbed.contains_key(object_name) {
            *absorbed.entry(object_name.to_string()).or_default() += 1;
        }
    });
}

fn take_absorbed(object_name: &str) -> u64 {
    ABSORBED
        .with(|absorbed| absorbed.borrow_mut().remove(object_name))
        .unwrap_or(0)
}

/// Duplicates absorbed here and not yet told to their object; past this
/// many objects, further counts are dropped (the count is approximate).
const MAX_PENDING_ABSORBED: usize = 4_096;

thread_local! {
    static ABSORBED: RefCell<HashMap<String, u64>> = RefCell::new(HashMap::new());
}
