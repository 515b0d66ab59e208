//! Alerts (SPEC §13, v4; §15, v5): a Durable Object class
//! (`AlertObject`, binding `ALERT_OBJECT`), one object per route (named
//! `alerts:<route>`) and one for the deployment's own condition (`alerts`),
//! each keeping its alert book ([`idemgate_core::alerts::book`]) as one
//! JSON value. Isolates and objects send each what they observed of its
//! route ([`crate::alerts`]); its alarm sends what is due to the sinks of
//! `ALERTS`, signing each attempt afresh, and wakes again when the book
//! next has something to do. Nothing here is on a delivery's path, and a
//! flood on one route is kept by that route's object alone.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, State, Storage,
};

use idemgate_core::alerts::book::AlertBook;
use idemgate_core::alerts::{self, AlertsConfig};
use idemgate_core::answer::render_problem;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::ForwardResult;

use crate::alerts::AlertCall;
use crate::edge_http;

const BOOK_KEY: &str = "book";
/// How long a sink may take to answer.
const SINK_TIMEOUT_MS: u64 = 5_000;

#[durable_object]
pub struct AlertObject {
    storage: Storage,
    env: Env,
    book: RefCell<Option<AlertBook>>,
}

impl DurableObject for AlertObject {
    fn new(state: State, env: Env) -> Self {
        AlertObject {
            storage: state.storage(),
            env,
            book: RefCell::new(None),
        }
    }

    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Sends what is due, and sleeps until the book's next moment.
    async fn alarm(&self) -> worker::Result<Response> {
        self.answer(AlertCall::Tick)
            .await
            .map_err(worker::Error::RustError)?;
        self.send_due().await.map_err(worker::Error::RustError)?;
        self.wake_later().await.map_err(worker::Error::RustError)?;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl AlertObject {
    /// The object's RPC method: an [`AlertCall`] as JSON; answers JSON.
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, line: String) -> Result<String, JsValue> {
        let call: AlertCall =
            serde_json::from_str(&line).map_err(|error| JsValue::from_str(&error.to_string()))?;
        let answer = self
            .answer(call)
            .await
            .map_err(|message| JsValue::from_str(&message))?;
        self.wake_later()
            .await
            .map_err(|message| JsValue::from_str(&message))?;
        Ok(answer)
    }
}

impl AlertObject {
    fn config(&self) -> Option<AlertsConfig> {
        crate::alerts::config(&self.env).ok().flatten()
    }

    async fn answer(&self, call: AlertCall) -> Result<String, String> {
        self.load().await?;
        let now = Date::now().as_millis();
        let Some(config) = self.config() else {
            return Ok(serde_json::json!({ "configured": false }).to_string());
        };
        let view = self.with_book(|book| {
            match &call {
                AlertCall::Observe(observations) => {
                    for seen in observations {
                        book.observe(
                            &seen.route,
                            seen.condition,
                            seen.count,
                            &seen.detail,
                            now,
                            &config,
                        );
                    }
                }
                AlertCall::Tick => book.tick(now, &config),
                AlertCall::View => {}
            }
            serde_json::json!({
                "configured": true,
                "conditions": book.view(),
                "outbox": book.outbox_len(),
                "delivered": book.delivered,
                "given_up": book.given_up,
            })
        });
        if call != AlertCall::View {
            self.save().await?;
        }
        Ok(view.to_string())
    }

    /// Sends every alert due now, one sink at a time; the book learns what
    /// was delivered and what waits for a retry.
    async fn send_due(&self) -> Result<(), String> {
        let Some(config) = self.config() else {
            return Ok(());
        };
        let now = Date::now().as_millis();
        let due = self.with_book(|book| book.due(now));
        let mut results = Vec::with_capacity(due.len());
        for outgoing in due {
            let position = outgoing.sink.min(config.sinks.len() - 1);
            let sink = &config.sinks[position];
            let secret = sink
                .secret
                .as_ref()
                .and_then(|name| self.env.secret(name).ok())
                .map(|secret| secret.to_string());
            let result = match outgoing.alert.request(sink, secret.as_deref(), now / 1_000) {
                Err(error) => Err(error),
                Ok(request) => match edge_http::send_forward(request, SINK_TIMEOUT_MS).await {
                    ForwardResult::Answered(response) if (200..300).contains(&response.status) => {
                        Ok(())
                    }
                    ForwardResult::Answered(response) => {
                        Err(format!("answered {}", response.status))
                    }
                    ForwardResult::TimedOut => Err("timed out".into()),
                    ForwardResult::Unreachable(message) => Err(message),
                },
            };
            // The runtime's message may quote the URL: the book keeps it,
            // and the operator's page shows it.
            let result =
                result.map_err(|error| alerts::scrub_sink_error(&error, position, &sink.url));
            results.push((outgoing.alert.id.clone(), outgoing.sink, result));
        }
        let after = Date::now().as_millis();
        self.with_book(|book| book.sent(results, after));
        self.save().await
    }

    /// The alarm at the book's next moment (now, if an alert is due).
    async fn wake_later(&self) -> Result<(), String> {
        let Some(config) = self.config() else {
            return Ok(());
        };
        let Some(next) = self.with_book(|book| book.next_wake(&config)) else {
            return Ok(());
        };
        // A date: `set_alarm` reads a bare number as an offset from now.
        let at = JsDate::new(&Number::from(next.max(Date::now().as_millis()) as f64));
        self.storage
            .set_alarm(ScheduledTime::new(at))
            .await
            .map_err(|error| error.to_string())
    }

    async fn load(&self) -> Result<(), String> {
        if self.book.borrow().is_some() {
            return Ok(());
        }
        let stored = self
            .storage
            .get::<String>(BOOK_KEY)
            .await
            .map_err(|error| error.to_string())?;
        let book = match stored {
            Some(json) => serde_json::from_str(&json).map_err(|error| error.to_string())?,
            None => AlertBook::default(),
        };
        self.book.borrow_mut().get_or_insert(book);
        Ok(())
    }

    async fn save(&self) -> Result<(), String> {
        let json = self.with_book(|book| serde_json::to_string(book).expect("a book serializes"));
        self.storage
            .put(BOOK_KEY, json)
            .await
            .map_err(|error| error.to_string())
    }

    fn with_book<T>(&self, f: impl FnOnce(&mut AlertBook) -> T) -> T {
        f(self
            .book
            .borrow_mut()
            .get_or_insert_with(AlertBook::default))
    }
}
