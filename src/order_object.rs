//! An entity's order (SPEC §12, v4): a Durable Object class of its own
//! (`OrderObject`, binding `ORDER_OBJECT`), one object per route, scope
//! and order key ([`idemgate_core::order::object_name`]). A host of the
//! core's [`OrderBook`] ([`idemgate_core::host`]), kept as one stored value:
//! this class forwards its RPC and alarm to the host, wakes the key's
//! objects the book names, and tells the book what they answer.
//!
//! Why an object per entity rather than the route's flow coordinator: an
//! entity's deliveries are few and its book small, while a route's are
//! many; one object per route would put every ordered delivery of the
//! route through one object's single thread (docs/ordering.md has the
//! cost of each).

use std::cell::RefCell;

use futures::future::join_all;
use wasm_bindgen::prelude::*;
use worker::{durable_object, Date, DurableObject, Env, Request, Response, State};

use idemgate_core::answer::render_problem;
use idemgate_core::host::value::{ValueStorage, ValueStore};
use idemgate_core::host::Host;
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::order::{HolderStatus, OrderBook, OrderCall};
use idemgate_core::problem::Problem;

use crate::object_storage::KeyValues;
use crate::{edge_http, object_client};

pub const ORDER_OBJECT_BINDING: &str = "ORDER_OBJECT";
const BOOK_KEY: &str = "book";
const ROUTE_KEY: &str = "route";
/// Rounds of wakes one call or alarm sends: an answer may free the turn
/// for the next head, which is woken in the next round.
const WAKE_ROUNDS: usize = 4;

#[durable_object]
pub struct OrderObject {
    host: Host<OrderBook, ValueStore<KeyValues>>,
    env: Env,
    /// The route the entity is of (its wakes' route), once known.
    route: RefCell<Option<String>>,
}

impl DurableObject for OrderObject {
    fn new(state: State, env: Env) -> Self {
        let storage = KeyValues {
            storage: state.storage(),
            on_write: || crate::stats::record(|stats| stats.order_book_writes += 1),
        };
        OrderObject {
            host: Host::new(ValueStore {
                storage,
                key: BOOK_KEY,
            }),
            env,
            route: RefCell::new(None),
        }
    }

    /// Order calls come over RPC ([`OrderObject::call`]).
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Leases that lapsed are asked about, a head whose hold is over is
    /// woken, and a forgotten book deletes the object. A storage failure
    /// is an error, so the runtime runs the alarm again.
    async fn alarm(&self) -> worker::Result<Response> {
        let route = self.route(None).await.map_err(worker::Error::RustError)?;
        let wakes = self
            .host
            .alarm(Date::now().as_millis())
            .await
            .map_err(worker::Error::RustError)?;
        self.send_wakes(&route, wakes).await;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl OrderObject {
    /// The object's RPC method: an [`OrderCall`] from a key's object of
    /// `route`, as JSON; answers the reply's JSON, or an error the caller
    /// sees as an unreachable object.
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, route: String, line: String) -> Result<String, JsValue> {
        let answered = self.answer(&route, &line).await;
        answered.map_err(|message| JsValue::from_str(&message))
    }
}

impl OrderObject {
    async fn answer(&self, route: &str, line: &str) -> Result<String, String> {
        let call = OrderCall::decode(line)?;
        let route = self.route(Some(route)).await?;
        // The turn is durable before the holder hears of it.
        let (reply, wakes) = self.host.call(&call, Date::now().as_millis()).await?;
        // Woken before the answer leaves, and their answers told to the
        // book: a wake answers at once (it only moves the holder's alarm),
        // and what a lapsed turn's holder says decides who goes next.
        self.send_wakes(&route, wakes).await;
        Ok(reply.encode())
    }

    /// Wakes `holders` and tells the book what each answered; the book may
    /// name the next head in turn.
    async fn send_wakes(&self, route: &str, mut holders: Vec<String>) {
        for _ in 0..WAKE_ROUNDS {
            if holders.is_empty() {
                return;
            }
            let heard = wake_all(&self.env, route, std::mem::take(&mut holders)).await;
            let now = Date::now().as_millis();
            let told = self.host.step(now, |book| {
                for (holder, status) in heard {
                    book.heard(&holder, status, now);
                }
            });
            match told.await {
                Ok(((), next)) => holders = next,
                Err(_) => return,
            }
        }
    }

    /// The route this entity is of: stored with its first call.
    async fn route(&self, given: Option<&str>) -> Result<String, String> {
        if let Some(route) = self.route.borrow().clone() {
            return Ok(route);
        }
        let storage = &self.host.store().storage;
        let route = match (storage.get(ROUTE_KEY).await?, given) {
            (Some(stored), _) => stored,
            (None, Some(route)) => {
                // Not the book: not counted as the book's write.
                storage
                    .storage
                    .put(ROUTE_KEY, route.to_string())
                    .await
                    .map_err(|error| error.to_string())?;
                route.to_string()
            }
            (None, None) => String::new(),
        };
        *self.route.borrow_mut() = Some(route.clone());
        Ok(route)
    }
}

/// Wakes each holder at once; answers what each said of its delivery (a
/// holder that could not be reached says nothing, and is asked again).
async fn wake_all(env: &Env, route: &str, holders: Vec<String>) -> Vec<(String, HolderStatus)> {
    crate::stats::record(|stats| stats.order_wakes += holders.len() as u64);
    let calls = holders.into_iter().map(|holder| async move {
        let call = ObjectCall {
            route: route.to_string(),
            object: holder.clone(),
            absorbed: 0,
            op: ObjectOp::OrderReady,
        };
        let reply = object_client::call(env, call, Vec::new()).await.ok()?;
        let status = std::str::from_utf8(&reply.response.body).ok()?;
        Some((holder, HolderStatus::decode(status).ok()?))
    });
    join_all(calls).await.into_iter().flatten().collect()
}
