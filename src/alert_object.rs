//! Alerts (SPEC §13, v4; §15, v5): a Durable Object class
//! (`AlertObject`, binding `ALERT_OBJECT`), one object per route (named
//! `alerts:<route>`) and one for the deployment's own condition (`alerts`),
//! each a host ([`idemgate_core::host`]) of its alert book
//! ([`idemgate_core::alerts::kept::KeptAlerts`]), kept as one stored value.
//! Isolates and objects send each what they observed of its route
//! ([`crate::alerts`]); its alarm sends what is due to the sinks of
//! `ALERTS`, signing each attempt afresh. Nothing here is on a delivery's
//! path, and a flood on one route is kept by that route's object alone.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;
use worker::{durable_object, Date, DurableObject, Env, Request, Response, State};

use idemgate_core::alerts::kept::{not_configured, AlertCall, KeptAlerts};
use idemgate_core::alerts::{self, AlertsConfig};
use idemgate_core::answer::render_problem;
use idemgate_core::host::value::ValueStore;
use idemgate_core::host::Host;
use idemgate_core::index::owed::OwedRows;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::ForwardResult;

use crate::edge_http;
use crate::object_storage::KeyValues;

const BOOK_KEY: &str = "book";
/// The owed rows a route names to health at most.
pub const OWED_NAMED_IN_HEALTH: usize = 20;
/// How long a sink may take to answer.
const SINK_TIMEOUT_MS: u64 = 5_000;

#[durable_object]
pub struct AlertObject {
    host: Host<KeptAlerts, ValueStore<KeyValues>>,
    /// The route's receipts whose index row has not landed, in memory:
    /// their objects say so again at every repair.
    owed: RefCell<OwedRows>,
    env: Env,
}

impl DurableObject for AlertObject {
    fn new(state: State, env: Env) -> Self {
        let storage = KeyValues {
            storage: state.storage(),
            on_write: || {},
        };
        AlertObject {
            host: Host::new(ValueStore {
                storage,
                key: BOOK_KEY,
            }),
            owed: RefCell::new(OwedRows::default()),
            env,
        }
    }

    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// The time passed; what is due goes out, and the book sleeps until
    /// its next moment. A storage failure is an error, so the runtime runs
    /// the alarm again.
    async fn alarm(&self) -> worker::Result<Response> {
        self.host.alarm_rang();
        let Some(config) = self.config() else {
            return Response::empty();
        };
        let now = Date::now().as_millis();
        let tick = (AlertCall::Tick, config.clone());
        self.host
            .call(&tick, now)
            .await
            .map_err(worker::Error::RustError)?;
        self.send_due(&config)
            .await
            .map_err(worker::Error::RustError)?;
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
        let answered = self.answer(&line).await;
        answered.map_err(|message| JsValue::from_str(&message))
    }
}

impl AlertObject {
    fn config(&self) -> Option<AlertsConfig> {
        crate::alerts::config(&self.env).ok().flatten()
    }

    async fn answer(&self, line: &str) -> Result<String, String> {
        let call: AlertCall = serde_json::from_str(line).map_err(|error| error.to_string())?;
        let now = Date::now().as_millis();
        match &call {
            AlertCall::Rows(reports) => {
                self.owed.borrow_mut().report(reports, now);
                return Ok("{}".to_string());
            }
            AlertCall::OwedRows => {
                let view = self.owed.borrow_mut().view(now, OWED_NAMED_IN_HEALTH);
                return serde_json::to_string(&view).map_err(|error| error.to_string());
            }
            _ => {}
        }
        let Some(config) = self.config() else {
            return Ok(not_configured().to_string());
        };
        let view = match call {
            // A read: nothing is stored.
            AlertCall::View => self.host.read(KeptAlerts::view).await?,
            call => {
                let (view, _) = self
                    .host
                    .call(&(call, config), Date::now().as_millis())
                    .await?;
                view
            }
        };
        Ok(view.to_string())
    }

    /// Sends every alert due now, one sink at a time; the book learns what
    /// was delivered and what waits for a retry.
    async fn send_due(&self, config: &AlertsConfig) -> Result<(), String> {
        let now = Date::now().as_millis();
        let (due, _) = self.host.step(now, |kept| kept.book.due(now)).await?;
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
                Ok(request) => {
                    match edge_http::send_forward(request, SINK_TIMEOUT_MS, None).await {
                        ForwardResult::Answered(response)
                            if (200..300).contains(&response.status) =>
                        {
                            Ok(())
                        }
                        ForwardResult::Answered(response) => {
                            Err(format!("answered {}", response.status))
                        }
                        ForwardResult::TimedOut => Err("timed out".into()),
                        ForwardResult::Unreachable(message) => Err(message),
                    }
                }
            };
            // The runtime's message may quote the URL: the book keeps it,
            // and the operator's page shows it.
            let result =
                result.map_err(|error| alerts::scrub_sink_error(&error, position, &sink.url));
            results.push((outgoing.alert.id.clone(), outgoing.sink, result));
        }
        let after = Date::now().as_millis();
        self.host
            .step(after, |kept| kept.book.sent(results, after))
            .await?;
        Ok(())
    }
}
