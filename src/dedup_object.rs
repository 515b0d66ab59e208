//! The Durable Object: one per key. A thin adapter that gives the
//! [`Engine`] SQLite storage, alarms, timers and `fetch`, and answers the
//! gateway's [`ObjectCall`]s over RPC.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use futures::future::{select, Either};
use wasm_bindgen::prelude::*;
use worker::js_sys::{Array, Date as JsDate, Number, Uint8Array};
use worker::{
    durable_object, AbortController, Date, Delay, DurableObject, Env, Fetch, Request, Response,
    ScheduledTime, SqlStorageValue, State, Storage,
};

use crate::convert::{from_response_parts, to_request};
use crate::edge_http;
use crate::env::config_from_env;
use crate::log_sink;
use idemgate_core::answer::{render_problem, Answer};
use idemgate_core::decision_log::DecisionLog;
use idemgate_core::engine::{Backend, Engine, Policy, StorageOps};
use idemgate_core::object_call::{ObjectCall, ObjectOp, ObjectReply};
use idemgate_core::origin::OutboundRequest;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::{ForwardResult, HttpResponse, Receipt};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS receipt (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    record TEXT NOT NULL,
    body BLOB
)";

#[durable_object]
pub struct DedupObject {
    engine: Engine<DurableBackend>,
    env: Env,
}

pub struct DurableBackend {
    storage: Storage,
    /// Whether the receipt table is known to exist. A new object creates it
    /// with its first write, in the same commit, rather than on start: a
    /// separate commit per key would cost an fsync, and most objects see
    /// one first delivery and then only replays.
    has_table: Cell<bool>,
    /// Every storage operation of this object's lifetime, for the operator API.
    ops: Cell<StorageOps>,
}

impl DurableObject for DedupObject {
    fn new(state: State, env: Env) -> Self {
        DedupObject {
            engine: Engine::new(DurableBackend {
                storage: state.storage(),
                has_table: Cell::new(false),
                ops: Cell::default(),
            }),
            env,
        }
    }

    /// The gateway calls [`DedupObject::dispatch`] over RPC; nothing
    /// reaches the object by `fetch`.
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(message) = self.engine.on_alarm().await {
            worker::console_error!("idemgate: retention alarm failed: {message}");
        }
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl DedupObject {
    /// The object's RPC method: an [`ObjectCall`] as JSON and the body
    /// beside it; answers `[reply JSON, body]` (see [`ObjectReply`]).
    #[wasm_bindgen(js_name = dispatch)]
    pub async fn dispatch(&self, call: String, body: Uint8Array) -> Result<JsValue, JsValue> {
        let (response, replayable_until) = self.answer(&call, body.to_vec()).await;
        let (reply, body) = ObjectReply::encode(response, replayable_until);
        Ok(Array::of2(&reply.into(), &Uint8Array::from(body.as_slice())).into())
    }
}

impl DedupObject {
    async fn answer(&self, call: &str, body: Vec<u8>) -> (HttpResponse, Option<u64>) {
        let config = ObjectCall::from_json(call)
            .and_then(|call| config_from_env(&self.env).map(|config| (call, config)));
        let (call, config) = match config {
            Ok(parsed) => parsed,
            Err(problem) => return (render_problem(&problem), None),
        };
        self.engine.absorb(call.absorbed);
        match call.op {
            ObjectOp::ReadReceipt => (self.read_receipt(), None),
            ObjectOp::Purge => (self.purge(), None),
            op => match op.into_delivery(body) {
                Ok(delivery) => {
                    let answer = self.engine.deliver(delivery, &Policy::from(&*config)).await;
                    let replayable_until = match answer {
                        Answer::Replayed(_) => self.engine.replayable_until(),
                        _ => None,
                    };
                    (answer.render(), replayable_until)
                }
                Err(problem) => (render_problem(&problem), None),
            },
        }
    }

    fn purge(&self) -> HttpResponse {
        match self.engine.purge() {
            Ok(true) => HttpResponse {
                status: 204,
                headers: Vec::new(),
                body: Vec::new(),
            },
            Ok(false) => render_problem(&Problem::NotFound),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }

    fn read_receipt(&self) -> HttpResponse {
        match self.engine.receipt() {
            Ok(Some(receipt)) => HttpResponse {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: serde_json::to_vec(&ReceiptView {
                    receipt: &receipt,
                    object_storage_ops: self.engine.backend().ops.get(),
                })
                .expect("a receipt serializes"),
            },
            Ok(None) => render_problem(&Problem::NotFound),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }
}

/// The operator's view of a receipt: its fields, plus the storage
/// operations of the object's current lifetime (what deliveries cost).
#[derive(serde::Serialize)]
struct ReceiptView<'a> {
    #[serde(flatten)]
    receipt: &'a Receipt,
    object_storage_ops: StorageOps,
}

fn storage_error(error: worker::Error) -> String {
    error.to_string()
}

impl DurableBackend {
    fn table_exists(&self) -> Result<bool, String> {
        if !self.has_table.get() {
            let cursor = self
                .storage
                .sql()
                .exec(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipt'",
                    None,
                )
                .map_err(storage_error)?;
            self.has_table.set(cursor.raw().next().is_some());
        }
        Ok(self.has_table.get())
    }

    fn create_table(&self) -> Result<(), String> {
        if !self.has_table.get() {
            self.storage
                .sql()
                .exec(SCHEMA, None)
                .map_err(storage_error)?;
            self.has_table.set(true);
        }
        Ok(())
    }
}

impl Backend for DurableBackend {
    fn now_ms(&self) -> u64 {
        Date::now().as_millis()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        StorageOps::bump(&self.ops, |ops| ops.reads += 1);
        let selected = self
            .storage
            .sql()
            .exec("SELECT record, body FROM receipt WHERE id = 1", None);
        // An object that exists pays one query; only a failed one asks
        // whether the table is there (a new object creates it on first write).
        let cursor = match selected {
            Ok(cursor) => cursor,
            Err(_) if !self.table_exists()? => return Ok(None),
            Err(error) => return Err(storage_error(error)),
        };
        self.has_table.set(true);
        let Some(row) = cursor.raw().next() else {
            return Ok(None);
        };
        let row = row.map_err(storage_error)?;
        let (Some(SqlStorageValue::String(record)), body) = (row.first(), row.get(1)) else {
            return Err("the receipt row has no record".into());
        };
        let mut receipt: Receipt = serde_json::from_str(record)
            .map_err(|error| format!("the stored receipt does not parse: {error}"))?;
        if let (Some(stored), Some(SqlStorageValue::Blob(bytes))) =
            (receipt.stored_response_mut(), body)
        {
            stored.response.body = bytes.clone();
        }
        Ok(Some(receipt))
    }

    fn save(&self, receipt: &Receipt) -> Result<(), String> {
        StorageOps::bump(&self.ops, |ops| ops.writes += 1);
        let record = serde_json::to_string(receipt).map_err(|error| error.to_string())?;
        let body = match receipt.stored_response() {
            Some(stored) => SqlStorageValue::Blob(stored.response.body.clone()),
            None => SqlStorageValue::Null,
        };
        self.create_table()?;
        self.storage
            .sql()
            .exec(
                "INSERT INTO receipt (id, record, body) VALUES (1, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record, body = excluded.body",
                vec![SqlStorageValue::String(record), body],
            )
            .map(|_| ())
            .map_err(storage_error)
    }

    fn delete(&self) -> Result<(), String> {
        StorageOps::bump(&self.ops, |ops| ops.writes += 1);
        if !self.table_exists()? {
            return Ok(());
        }
        self.storage
            .sql()
            .exec("DELETE FROM receipt", None)
            .map(|_| ())
            .map_err(storage_error)
    }

    async fn set_alarm(&self, at_ms: u64) -> Result<(), String> {
        StorageOps::bump(&self.ops, |ops| ops.alarm_writes += 1);
        let at = JsDate::new(&Number::from(at_ms as f64));
        self.storage
            .set_alarm(ScheduledTime::new(at))
            .await
            .map_err(storage_error)
    }

    /// 53 random bits, so the token survives any JSON reader exactly.
    fn new_owner(&self) -> u64 {
        let mut bytes = [0u8; 8];
        if let Err(error) = getrandom::getrandom(&mut bytes) {
            // crypto.getRandomValues does not fail in workerd; if it ever
            // did, time still separates forwards of different eras.
            worker::console_error!("idemgate: no randomness for an owner token: {error}");
            return Date::now().as_millis();
        }
        u64::from_le_bytes(bytes) & ((1 << 53) - 1)
    }

    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult {
        let request = match to_request(&request) {
            Ok(request) => request,
            Err(error) => return ForwardResult::Unreachable(error.to_string()),
        };
        let controller = AbortController::default();
        let signal = controller.signal();
        let exchange = pin!(async {
            let mut response = Fetch::Request(request).send_with_signal(&signal).await?;
            let body = response.bytes().await?;
            Ok::<_, worker::Error>(from_response_parts(
                response.status_code(),
                response.headers(),
                body,
            ))
        });
        let timer = pin!(Delay::from(Duration::from_millis(timeout_ms)));
        match select(exchange, timer).await {
            Either::Left((Ok(response), _)) => ForwardResult::Answered(response),
            Either::Left((Err(error), _)) => ForwardResult::Unreachable(error.to_string()),
            Either::Right(_) => {
                controller.abort();
                ForwardResult::TimedOut
            }
        }
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        Delay::from(Duration::from_millis(ms))
    }

    fn log(&self, line: &DecisionLog) {
        log_sink::emit(line);
    }
}
