//! A route's reconciliation (SPEC §11, v4): a Durable Object class of its
//! own (`ReconcileObject`, binding `RECONCILE_OBJECT`), one object per
//! route with `reconcile`, named for it. A host ([`idemgate_core::host`])
//! of the route's [`RouteRuns`] (its cursor, its lock and its last runs,
//! one JSON value in the object's storage): a call begins a run in one
//! step of the book, the run goes against the provider's API and the
//! keys' objects ([`idemgate_core::reconcile_runs::run::run`]), and a second
//! step records it. The Cron Trigger ticks it; when a run stops at its
//! limits, the object's alarm starts the next one from the cursor.

use wasm_bindgen::prelude::*;
use worker::{durable_object, Date, DurableObject, Env, Request, Response, State};

use idemgate_core::answer::render_problem;
use idemgate_core::config::RouteConfig;
use idemgate_core::delivery::{Delivery, Identity};
use idemgate_core::host::value::{ValueStorage, ValueStore};
use idemgate_core::host::Host;
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::origin::OutboundRequest;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::ForwardResult;
use idemgate_core::reconcile::{ApiRequest, ApiResponse};
use idemgate_core::reconcile_runs::route_runs::{Begun, ReconcileCall, RouteRuns};
use idemgate_core::reconcile_runs::run::{
    self, KeyAnswer, Presence, ReconcileLine, RunBackend, Trigger, RUN_LIMITS,
};

use crate::env::config_from_env;
use crate::object_storage::KeyValues;
use crate::{edge_http, events, object_client};

pub const RECONCILE_OBJECT_BINDING: &str = "RECONCILE_OBJECT";
const STATE_KEY: &str = "runs";
const ROUTE_KEY: &str = "route";
/// How long one API request may take.
const API_TIMEOUT_MS: u64 = 10_000;

#[durable_object]
pub struct ReconcileObject {
    env: Env,
    host: Host<RouteRuns, ValueStore<KeyValues>>,
}

impl DurableObject for ReconcileObject {
    fn new(state: State, env: Env) -> Self {
        let storage = KeyValues {
            storage: state.storage(),
            on_write: || {},
        };
        ReconcileObject {
            env,
            host: Host::new(ValueStore {
                storage,
                key: STATE_KEY,
            }),
        }
    }

    /// Calls come over RPC ([`ReconcileObject::call`]).
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// The next run of an unfinished window, or a scheduled one.
    async fn alarm(&self) -> worker::Result<Response> {
        self.host.alarm_rang();
        let storage = &self.host.store().storage;
        let route = storage
            .get(ROUTE_KEY)
            .await
            .map_err(worker::Error::RustError)?
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
        if call == ReconcileCall::Status {
            let view = self.host.read(|runs| runs.view(route_name, now)).await?;
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
        // The check and the lock are one step, stored before the run.
        let (begun, _) = self.host.call(&call, now).await?;
        let trigger = match begun {
            Begun::Run(trigger) => trigger,
            Begun::NotNow { running } => {
                return Ok(reply(
                    if running { 409 } else { 204 },
                    serde_json::json!({ "running": running }),
                ))
            }
        };
        let record = self.run(route, trigger).await?;
        self.host
            .store()
            .storage
            .put(ROUTE_KEY, route.name.clone())
            .await?;
        Ok(reply(200, serde_json::to_value(record).unwrap_or_default()))
    }

    /// Runs `route` from the book's cursor, then records the run in the
    /// book (the second step).
    async fn run(&self, route: &RouteConfig, trigger: Trigger) -> Result<run::RunRecord, String> {
        let config = route.reconcile.as_ref().expect("a reconciled route");
        let (cursor, asked) = self
            .host
            .read(|runs| (runs.cursor.clone(), runs.asked.clone()))
            .await?;
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
        let ended_at = ended.record.ended_at;
        self.host
            .step(ended_at, |runs| {
                runs.remember_asked(&ended.asked, ended_at, config);
                runs.finish(ended.record, ended.cursor, ended.retry_after_ms, config)
            })
            .await?;
        Ok(record)
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
            via: None,
        };
        match edge_http::send_forward(outbound, API_TIMEOUT_MS, None).await {
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
