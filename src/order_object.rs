//! An entity's order (SPEC §12, v4): a Durable Object class of its own
//! (`OrderObject`, binding `ORDER_OBJECT`), one object per route, scope
//! and order key ([`idemgate_core::order::object_name`]). A thin adapter
//! around [`OrderBook`]: it keeps the book as one stored value (written
//! before any answer leaves), sets its alarm to the book's next moment,
//! wakes the key's objects the book names and tells the book what they
//! answer, and deletes itself once the book is forgotten.
//!
//! Why an object per entity rather than the route's flow coordinator: an
//! entity's deliveries are few and its book small, while a route's are
//! many; one object per route would put every ordered delivery of the
//! route through one object's single thread (docs/ordering.md has the
//! cost of each).

use std::cell::RefCell;

use futures::future::join_all;
use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, State, Storage,
};

use idemgate_core::answer::render_problem;
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::order::{AlarmStep, HolderStatus, OrderBook, OrderCall};
use idemgate_core::problem::Problem;

use crate::{edge_http, object_client};

pub const ORDER_OBJECT_BINDING: &str = "ORDER_OBJECT";
const BOOK_KEY: &str = "book";
const ROUTE_KEY: &str = "route";
/// Rounds of wakes one call or alarm sends: an answer may free the turn
/// for the next head, which is woken in the next round.
const WAKE_ROUNDS: usize = 4;

#[durable_object]
pub struct OrderObject {
    storage: Storage,
    env: Env,
    /// The book and its route, once read.
    loaded: RefCell<Option<(OrderBook, String)>>,
}

impl DurableObject for OrderObject {
    fn new(state: State, env: Env) -> Self {
        OrderObject {
            storage: state.storage(),
            env,
            loaded: RefCell::new(None),
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
        let now = Date::now().as_millis();
        self.load(None).await.map_err(worker::Error::RustError)?;
        let (step, wakes) = self.with_book(|book| (book.alarm(now), book.take_wakes()));
        if step == AlarmStep::Forget {
            self.storage.delete_all().await?;
            *self.loaded.borrow_mut() = None;
            return Response::empty();
        }
        self.save().await.map_err(worker::Error::RustError)?;
        self.send_wakes(wakes).await;
        self.set_alarm().await;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl OrderObject {
    /// The object's RPC method: an [`OrderCall`] from a key's object of
    /// `route`, as JSON; answers the [`OrderReply`]'s JSON, or an error
    /// the caller sees as an unreachable object.
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, route: String, line: String) -> Result<String, JsValue> {
        let answered = self.answer(&route, &line).await;
        answered.map_err(|message| JsValue::from_str(&message))
    }
}

impl OrderObject {
    async fn answer(&self, route: &str, line: &str) -> Result<String, String> {
        let call = OrderCall::decode(line)?;
        self.load(Some(route)).await?;
        let now = Date::now().as_millis();
        let (reply, wakes) = self.with_book(|book| (book.apply(&call, now), book.take_wakes()));
        // The turn is durable before the holder hears of it.
        if let Err(message) = self.save().await {
            *self.loaded.borrow_mut() = None;
            return Err(message);
        }
        // Woken before the answer leaves, and their answers told to the
        // book: a wake answers at once (it only moves the holder's alarm),
        // and what a lapsed turn's holder says decides who goes next.
        self.send_wakes(wakes).await;
        self.set_alarm().await;
        Ok(reply.encode())
    }

    /// Wakes `holders` and tells the book what each answered; the book may
    /// name the next head in turn.
    async fn send_wakes(&self, mut holders: Vec<String>) {
        let route = self
            .loaded
            .borrow()
            .as_ref()
            .map(|(_, route)| route.clone())
            .unwrap_or_default();
        for _ in 0..WAKE_ROUNDS {
            if holders.is_empty() {
                return;
            }
            let heard = wake_all(&self.env, &route, std::mem::take(&mut holders)).await;
            let now = Date::now().as_millis();
            holders = self.with_book(|book| {
                for (holder, status) in heard {
                    book.heard(&holder, status, now);
                }
                book.take_wakes()
            });
            if self.save().await.is_err() {
                return;
            }
        }
    }

    /// The alarm at the book's next moment.
    async fn set_alarm(&self) {
        let Some(next) = self.with_book(|book| book.next_alarm()) else {
            return;
        };
        // A date: `set_alarm` reads a bare number as an offset from now.
        let at = JsDate::new(&Number::from(next.max(Date::now().as_millis()) as f64));
        let _ = self.storage.set_alarm(ScheduledTime::new(at)).await;
    }

    async fn load(&self, route: Option<&str>) -> Result<(), String> {
        if self.loaded.borrow().is_some() {
            return Ok(());
        }
        let storage_error = |error: worker::Error| error.to_string();
        let book = match self
            .storage
            .get::<String>(BOOK_KEY)
            .await
            .map_err(storage_error)?
        {
            Some(json) => serde_json::from_str(&json).map_err(|error| error.to_string())?,
            None => OrderBook::default(),
        };
        let stored_route = self
            .storage
            .get::<String>(ROUTE_KEY)
            .await
            .map_err(storage_error)?;
        let route = match (stored_route, route) {
            (Some(stored), _) => stored,
            (None, Some(route)) => {
                self.storage
                    .put(ROUTE_KEY, route.to_string())
                    .await
                    .map_err(storage_error)?;
                route.to_string()
            }
            (None, None) => String::new(),
        };
        self.loaded.borrow_mut().get_or_insert((book, route));
        Ok(())
    }

    async fn save(&self) -> Result<(), String> {
        let json = self.with_book(|book| serde_json::to_string(book).expect("a book serializes"));
        crate::stats::record(|stats| stats.order_book_writes += 1);
        self.storage
            .put(BOOK_KEY, json)
            .await
            .map_err(|error| error.to_string())
    }

    fn with_book<T>(&self, f: impl FnOnce(&mut OrderBook) -> T) -> T {
        let mut loaded = self.loaded.borrow_mut();
        let (book, _) = loaded.get_or_insert_with(|| (OrderBook::default(), String::new()));
        f(book)
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
