//! A route's reconciliation (SPEC §11, v4): a Durable Object class of its
//! own (`ReconcileObject`, binding `RECONCILE_OBJECT`), one object per
//! route with `reconcile`, named for it. It holds the route's cursor, its
//! lock and its last runs (one JSON value in the object's storage), and
//! runs [`idemgate_core::reconcile::run::run`] against the provider's API
//! and the keys' objects. The Cron Trigger ticks it; when a run stops at
//! its limits, the object's alarm starts the next one from the cursor.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, State, Storage,
};

use idemgate_core::answer::render_problem;
use idemgate_core::config::RouteConfig;
use idemgate_core::delivery::{Delivery, Identity};
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::origin::OutboundRequest;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::ForwardResult;
use idemgate_core::reconcile::route_runs::{ReconcileCall, RouteRuns};
use idemgate_core::reconcile::run::{
    self, KeyAnswer, Presence, ReconcileLine, RunBackend, Trigger, RUN_LIMITS,
};
use idemgate_core::reconcile::{ApiRequest, ApiResponse};

use crate::env::config_from_env;
use crate::{edge_http, events, object_client};

pub const RECONCILE_OBJECT_BINDING: &str = "RECONCILE_OBJECT";
const STATE_KEY: &str = "runs";
/// How long one API request may take.
const API_TIMEOUT_MS: u64 = 10_000;

#[durable_object]
pub struct ReconcileObject {
    storage: Storage,
    env: Env,
    /// The route's runs as storage holds them, once read.
    runs: RefCell<Option<RouteRuns>>,
}

impl DurableObject for ReconcileObject {
    fn new(state: State, env: Env) -> Self {
        ReconcileObject {
            storage: state.storage(),
            env,
            runs: RefCell::new(None),
        }
    }

    /// Calls come over RPC ([`ReconcileObject::call`]).
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// The next run of an unfinished window, or a scheduled one.
    async fn alarm(&self) -> worker::Result<Response> {
        let route = self
            .storage
            .get::<String>("route")
            .await?
            .unwrap_or_default();
        let ticked = self.answer(&route, ReconcileCall::Tick).await;
        crate::alerts::flush_from_object(&self.env, |_| {});
        ticked.map_err(worker::Error::RustError)?;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl ReconcileObject {
    /// The object's RPC method: a [`ReconcileCall`] for `route` as JSON;
    /// answers a JSON line (`{"status": ..., "body": ...}`).
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, route: String, line: String) -> Result<String, JsValue> {
        let call: ReconcileCall =
            serde_json::from_str(&line).map_err(|error| JsValue::from_str(&error.to_string()))?;
        let answer = self.answer(&route, call).await;
        crate::alerts::flush_from_object(&self.env, |_| {});
        answer.map_err(|message| JsValue::from_str(&message))
    }
}

impl ReconcileObject {
    async fn answer(&self, route_name: &str, call: ReconcileCall) -> Result<String, String> {
        let now = Date::now().as_millis();
        self.load().await?;
        if call == ReconcileCall::Status {
            let view = self.with_runs(|runs| runs.view(route_name, now));
            return Ok(reply(200, view));
        }
        let config = config_from_env(&self.env).map_err(|problem| problem.detail())?;
        let Some(route) = config
            .route(route_name)
            .filter(|route| route.reconcile.is_some())
        else {
            return Ok(reply(
                404,
                serde_json::json!({ "error": "no reconciled route of that name" }),
            ));
        };
        // The check and the lock are one turn: no await between them.
        let start = self.with_runs(|runs| {
            let start = match call {
                ReconcileCall::Tick => runs.due(now),
                _ => !runs.locked(now),
            };
            if start {
                runs.lock(now);
            }
            start
        });
        if !start {
            let running = self.with_runs(|runs| runs.locked(now));
            return Ok(reply(
                if running { 409 } else { 204 },
                serde_json::json!({ "running": running }),
            ));
        }
        self.save(route_name).await?;
        let trigger = match call {
            ReconcileCall::RunNow => Trigger::Operator,
            _ => Trigger::Schedule,
        };
        let record = self.run(route, trigger).await;
        self.save(route_name).await?;
        let next = self.with_runs(|runs| runs.next_run_at);
        // A date: `set_alarm` reads a bare number as an offset from now.
        let at = JsDate::new(&Number::from(next as f64));
        self.storage
            .set_alarm(ScheduledTime::new(at))
            .await
            .map_err(|error| error.to_string())?;
        Ok(reply(200, serde_json::to_value(record).unwrap_or_default()))
    }

    async fn run(&self, route: &RouteConfig, trigger: Trigger) -> run::RunRecord {
        let config = route.reconcile.as_ref().expect("a reconciled route");
        let (cursor, asked) = self.with_runs(|runs| (runs.cursor.clone(), runs.asked.clone()));
        let backend = WorkerRun {
            env: &self.env,
            route,
        };
        let ended = run::run(
            &backend,
            route,
            config,
            run::Remembered {
                cursor,
                asked: &asked,
            },
            new_run_id(),
            trigger,
            RUN_LIMITS,
        )
        .await;
        let record = ended.record.clone();
        self.with_runs(|runs| {
            runs.remember_asked(&ended.asked, ended.record.ended_at, config);
            runs.finish(ended.record, ended.cursor, ended.retry_after_ms, config)
        });
        record
    }

    async fn load(&self) -> Result<(), String> {
        if self.runs.borrow().is_some() {
            return Ok(());
        }
        let stored = self
            .storage
            .get::<String>(STATE_KEY)
            .await
            .map_err(|error| error.to_string())?;
        let runs = match stored {
            Some(json) => serde_json::from_str(&json).map_err(|error| error.to_string())?,
            None => RouteRuns::default(),
        };
        self.runs.borrow_mut().get_or_insert(runs);
        Ok(())
    }

    async fn save(&self, route: &str) -> Result<(), String> {
        let json = self.with_runs(|runs| serde_json::to_string(runs).expect("runs serialize"));
        self.storage
            .put(STATE_KEY, json)
            .await
            .map_err(|error| error.to_string())?;
        self.storage
            .put("route", route.to_string())
            .await
            .map_err(|error| error.to_string())
    }

    fn with_runs<T>(&self, f: impl FnOnce(&mut RouteRuns) -> T) -> T {
        f(self
            .runs
            .borrow_mut()
            .get_or_insert_with(RouteRuns::default))
    }
}

fn reply(status: u16, body: serde_json::Value) -> String {
    serde_json::json!({ "status": status, "body": body }).to_string()
}

fn new_run_id() -> String {
    let mut random = [0u8; 10];
    let _ = getrandom::getrandom(&mut random);
    uuid::Builder::from_unix_timestamp_millis(Date::now().as_millis(), &random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// The run's world: the provider's API by `fetch`, the keys' objects by RPC.
struct WorkerRun<'a> {
    env: &'a Env,
    route: &'a RouteConfig,
}

impl RunBackend for WorkerRun<'_> {
    fn now_ms(&self) -> u64 {
        Date::now().as_millis()
    }

    async fn call_api(&self, request: ApiRequest) -> Result<ApiResponse, String> {
        let outbound = OutboundRequest {
            method: request.method.to_string(),
            url: request.url,
            headers: request.headers,
            body: request.body.map(String::into_bytes).unwrap_or_default(),
        };
        match edge_http::send_forward(outbound, API_TIMEOUT_MS).await {
            ForwardResult::Answered(response) => Ok(ApiResponse {
                status: response.status,
                headers: response.headers,
                body: response.body,
            }),
            ForwardResult::TimedOut => Err("timed out".into()),
            ForwardResult::Unreachable(message) => Err(message),
        }
    }

    async fn deliver(&self, mut delivery: Delivery) -> Result<KeyAnswer, String> {
        let body = std::mem::take(&mut delivery.request.body);
        let reply = object_client::call(self.env, ObjectCall::deliver(delivery, 0), body)
            .await
            .map_err(|problem| problem.detail())?;
        Ok(match (reply.already_received, reply.response.status) {
            (true, _) => KeyAnswer::AlreadyReceived,
            (false, 200..=299) => KeyAnswer::Filled,
            (false, status) => KeyAnswer::Failed(format!("answered {status}")),
        })
    }

    async fn presence(&self, identity: &Identity) -> Result<Presence, String> {
        let call = ObjectCall {
            route: self.route.name.clone(),
            object: identity.object.clone(),
            absorbed: 0,
            op: ObjectOp::HasReceipt,
        };
        let reply = object_client::call(self.env, call, Vec::new())
            .await
            .map_err(|problem| problem.detail())?;
        match reply.response.status {
            200 => Ok(Presence::Arrived),
            404 => Ok(Presence::Absent),
            409 => Ok(Presence::Failed),
            status => Err(format!("answered {status}")),
        }
    }

    fn log(&self, line: &ReconcileLine) {
        events::reconcile(self.env, line);
    }
}
