//! The Durable Object: one per key. A thin adapter that gives the
//! [`Engine`] SQLite storage, alarms, timers and `fetch`.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use futures::future::{select, Either};
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, AbortController, Date, Delay, DurableObject, Env, Fetch, Method, Request,
    Response, ScheduledTime, SqlStorageValue, State, Storage,
};

use crate::answer::{render_problem, Answer};
use crate::canonical::Fingerprint;
use crate::convert::{from_response_parts, header_list, to_request, to_response};
use crate::decision_log::DecisionLog;
use crate::edge_cache::REPLAYABLE_UNTIL_HEADER;
use crate::engine::{Backend, Delivery, Engine, Policy, StorageOps};
use crate::env::config_from_env;
use crate::headers;
use crate::key::{IdempotencyKey, KeySource};
use crate::origin::OutboundRequest;
use crate::problem::Problem;
use crate::receipt::{ForwardResult, Receipt};

/// Headers on the gateway's request to the object. The gateway strips any
/// inbound `x-idemgate-*` header first, so a sender cannot set them.
pub const KEY_HEADER: &str = "x-idemgate-key";
pub const FINGERPRINT_HEADER: &str = "x-idemgate-fingerprint";
pub const SCOPE_HEADER: &str = "x-idemgate-scope";
/// Duplicates the calling isolate absorbed for this key since it last
/// called; added to the receipt's `duplicates`.
pub const ABSORBED_HEADER: &str = "x-idemgate-absorbed";
/// Marks an operator request (read or purge the receipt), not a delivery.
pub const OPERATOR_HEADER: &str = "x-idemgate-operator";

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
    /// Every storage operation of this object's lifetime, for the operator API.
    ops: Cell<StorageOps>,
}

impl DurableObject for DedupObject {
    fn new(state: State, env: Env) -> Self {
        let storage = state.storage();
        if let Err(error) = storage.sql().exec(SCHEMA, None) {
            worker::console_error!("idemgate: creating the receipt table failed: {error}");
        }
        DedupObject {
            engine: Engine::new(DurableBackend {
                storage,
                ops: Cell::default(),
            }),
            env,
        }
    }

    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        let config = match config_from_env(&self.env) {
            Ok(config) => config,
            Err(problem) => return to_response(render_problem(&problem)),
        };
        if let Some(count) = request.headers().get(ABSORBED_HEADER)? {
            self.engine.absorb(count.parse().unwrap_or(0));
        }
        if request.headers().has(OPERATOR_HEADER)? {
            return self.operate(&request);
        }
        let delivery = match read_delivery(&mut request).await? {
            Ok(delivery) => delivery,
            Err(problem) => return to_response(render_problem(&problem)),
        };
        let answer = self.engine.deliver(delivery, &Policy::from(&config)).await;
        let mut response = answer.render();
        if let (Answer::Replayed(_), Some(until)) = (&answer, self.engine.replayable_until()) {
            response
                .headers
                .push((REPLAYABLE_UNTIL_HEADER.into(), until.to_string()));
        }
        to_response(response)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(message) = self.engine.on_alarm().await {
            worker::console_error!("idemgate: retention alarm failed: {message}");
        }
        Response::empty()
    }
}

impl DedupObject {
    fn operate(&self, request: &Request) -> worker::Result<Response> {
        let unavailable =
            |message| to_response(render_problem(&Problem::StorageUnavailable { message }));
        match request.method() {
            Method::Delete => match self.engine.purge() {
                Ok(true) => Ok(Response::empty()?.with_status(204)),
                Ok(false) => to_response(render_problem(&Problem::NotFound)),
                Err(message) => unavailable(message),
            },
            _ => match self.engine.receipt() {
                Ok(Some(receipt)) => Response::from_json(&ReceiptView {
                    receipt: &receipt,
                    object_storage_ops: self.engine.backend().ops.get(),
                }),
                Ok(None) => to_response(render_problem(&Problem::NotFound)),
                Err(message) => unavailable(message),
            },
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

/// The delivery the gateway admitted: key and fingerprint from its headers,
/// the rest is the request to forward.
async fn read_delivery(request: &mut Request) -> worker::Result<Result<Delivery, Problem>> {
    let list = header_list(request.headers());
    let key = headers::get(&list, KEY_HEADER)
        .and_then(|raw| IdempotencyKey::parse(raw, &KeySource::BodySha256).ok());
    let fingerprint = headers::get(&list, FINGERPRINT_HEADER).and_then(Fingerprint::from_hex);
    let scope = headers::get(&list, SCOPE_HEADER).map(str::to_string);
    let (Some(key), Some(fingerprint), Some(scope)) = (key, fingerprint, scope) else {
        return Ok(Err(Problem::Misconfigured {
            variable: "DEDUP_OBJECT",
            reason: "the object was called without a key, fingerprint and scope".into(),
        }));
    };
    let body = request.bytes().await?;
    Ok(Ok(Delivery {
        scope,
        key,
        fingerprint,
        request: OutboundRequest {
            method: request.method().to_string(),
            url: request.url()?.to_string(),
            headers: headers::for_origin(&list),
            body,
        },
    }))
}

fn storage_error(error: worker::Error) -> String {
    error.to_string()
}

impl Backend for DurableBackend {
    fn now_ms(&self) -> u64 {
        Date::now().as_millis()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        StorageOps::bump(&self.ops, |ops| ops.reads += 1);
        let cursor = self
            .storage
            .sql()
            .exec("SELECT record, body FROM receipt WHERE id = 1", None)
            .map_err(storage_error)?;
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
        self.storage
            .sql()
            .exec("DELETE FROM receipt", None)
            .map(|_| ())
            .map_err(storage_error)
    }

    async fn scheduled_alarm(&self) -> Result<Option<u64>, String> {
        StorageOps::bump(&self.ops, |ops| ops.alarm_reads += 1);
        self.storage
            .get_alarm()
            .await
            .map(|at| at.map(|ms| ms as u64))
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
        worker::console_log!("{}", line.to_json());
    }
}
