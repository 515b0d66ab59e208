//! The Durable Object: one per key. A thin adapter that gives the
//! [`Engine`] SQLite storage, alarms, timers, `fetch`, the D1 index and the
//! event sink, and answers the gateway's [`ObjectCall`]s over RPC.

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use wasm_bindgen::prelude::*;
use worker::js_sys::{Array, Date as JsDate, Number, Uint8Array};
use worker::{
    durable_object, Date, Delay, DurableObject, Env, Request, Response, ScheduledTime,
    SqlStorageValue, State, Storage,
};

use idemgate_core::answer::{render_problem, Answer};
use idemgate_core::decision_log::DecisionLog;
use idemgate_core::delivery::DeliveryRequest;
use idemgate_core::engine::{Backend, Engine, Policy, StorageOps};
use idemgate_core::flow::{FlowCall, FlowLimits, PermitReply, PermitRequest};
use idemgate_core::index::{IndexUpdate, IndexWrite};
use idemgate_core::object_call::{ObjectCall, ObjectOp, ObjectReply, Reply};
use idemgate_core::operator::view::ReceiptView;
use idemgate_core::origin::OutboundRequest;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::{ForwardResult, HttpResponse, Receipt};
use idemgate_core::signature::Secret;
use idemgate_core::single_use::{decide_claim, Claim, ClaimDecision};

use crate::edge_http;
use crate::env::config_from_env;
use crate::events;
use crate::flow_client;
use crate::receipt_index;

/// A signed transmission's claim, in the object named for it (never a
/// key's object): see `idemgate_core::single_use`.
const CLAIM_TABLE: &str = "CREATE TABLE IF NOT EXISTS single_use (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    claimant TEXT NOT NULL,
    until INTEGER NOT NULL
)";

/// The receipt and the stored response's body; `deletable_at` lets the
/// alarm expire a receipt without parsing it.
const RECEIPT_TABLE: &str = "CREATE TABLE IF NOT EXISTS receipt (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    record TEXT NOT NULL,
    body BLOB,
    deletable_at INTEGER,
    request TEXT,
    request_body BLOB
)";

#[durable_object]
pub struct DedupObject {
    /// Shared with the first attempt of an accepted async delivery, which
    /// runs after the call that accepted it has answered.
    engine: Rc<Engine<DurableBackend>>,
    state: State,
    env: Env,
}

pub struct DurableBackend {
    storage: Storage,
    env: Env,
    /// Whether the tables are known to exist. A new object creates them
    /// with its first write, in the same commit, rather than on start: a
    /// separate commit per key would cost an fsync, and most objects see
    /// one first delivery and then only replays.
    has_tables: Cell<bool>,
    /// Whether an earlier version's request table holds the request.
    legacy_request: Cell<bool>,
    /// Every storage operation of this object's lifetime, for the operator API.
    ops: Cell<StorageOps>,
}

impl DurableObject for DedupObject {
    fn new(state: State, env: Env) -> Self {
        DedupObject {
            engine: Rc::new(Engine::new(DurableBackend {
                storage: state.storage(),
                env: env.clone(),
                has_tables: Cell::new(false),
                legacy_request: Cell::new(false),
                ops: Cell::default(),
            })),
            state,
            env,
        }
    }

    /// The gateway calls [`DedupObject::dispatch`] over RPC; nothing
    /// reaches the object by `fetch`.
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Retention and async deliveries. A storage failure is an error, so
    /// the runtime runs the alarm again (with backoff).
    async fn alarm(&self) -> worker::Result<Response> {
        self.engine
            .on_alarm()
            .await
            .map_err(worker::Error::RustError)?;
        // An object with no receipt may hold a transmission's claim, which
        // goes once it can no longer matter.
        if let Ok(None) = self.engine.receipt() {
            self.expire_claim()
                .await
                .map_err(worker::Error::RustError)?;
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
        let bytes = body.to_vec();
        drop(body);
        let reply = self.answer(&call, bytes).await;
        if self.engine.has_first_attempt() {
            // An async delivery accepted in flight: its first attempt runs
            // once this answer (the acknowledgement) has left. Should the
            // object die first, the alarm at the lease's end takes it over.
            let engine = self.engine.clone();
            let attempt = worker::wasm_bindgen_futures::future_to_promise(async move {
                engine.after_answer().await;
                Ok(JsValue::UNDEFINED)
            });
            // The promise runs either way; the runtime's waitUntil (which
            // `State::wait_until` unwraps) may only keep it company.
            let _ = self.state.as_raw().wait_until(&attempt);
        }
        let (reply, body) = ObjectReply::encode(reply);
        Ok(Array::of2(&reply.into(), &Uint8Array::from(body.as_slice())).into())
    }
}

impl DedupObject {
    async fn answer(&self, call: &str, body: Vec<u8>) -> Reply {
        let call = match ObjectCall::from_json(call) {
            Ok(call) => call,
            Err(problem) => return reply(render_problem(&problem)),
        };
        self.engine.absorb(call.absorbed);
        let object = call.object.clone();
        match call.op {
            ObjectOp::ReadReceipt => reply(self.read_receipt()),
            ObjectOp::Purge { force, receipt_id } => {
                reply(self.purge(&object, force, receipt_id.as_deref()).await)
            }
            ObjectOp::Redrive { receipt_id } => reply(self.redrive(receipt_id.as_deref()).await),
            ObjectOp::Wake => reply(self.wake(&object).await),
            ObjectOp::ClaimOnce { claimant, until } => {
                reply(self.claim_once(&claimant, until).await)
            }
            ObjectOp::PermitReady => reply(match self.engine.permit_ready().await {
                Ok(()) => empty(204),
                Err(message) => render_problem(&Problem::StorageUnavailable { message }),
            }),
            ObjectOp::Deliver { .. } => {
                let policy = match self.route_policy(&call.route) {
                    Ok(policy) => policy,
                    Err(problem) => return reply(render_problem(&problem)),
                };
                let delivery = match call.into_delivery(body) {
                    Ok(delivery) => delivery,
                    Err(problem) => return reply(render_problem(&problem)),
                };
                let answer = match delivery.if_known {
                    true => self.engine.deliver_if_known(delivery, &policy).await,
                    false => Some(self.engine.deliver(delivery, &policy).await),
                };
                let Some(answer) = answer else {
                    return Reply {
                        unknown_key: true,
                        ..reply(empty(204))
                    };
                };
                let replayable_until = match answer {
                    Answer::Replayed(_) => self.engine.replayable_until(),
                    _ => None,
                };
                Reply {
                    replayable_until,
                    ..reply(answer.render())
                }
            }
        }
    }

    /// A signed transmission claimed for `claimant` (a key's object) until
    /// `until`: 204 when it is that key's, 409 when another key's (a
    /// transmission replayed with another body).
    async fn claim_once(&self, claimant: &str, until: u64) -> HttpResponse {
        let now = Date::now().as_millis();
        let decided = self.read_claim().and_then(|existing| {
            let decision = decide_claim(existing.as_ref(), claimant, now);
            if decision == ClaimDecision::Take {
                self.claims()
                    .exec(
                        "INSERT INTO single_use (id, claimant, until) VALUES (1, ?, ?)
                         ON CONFLICT (id) DO UPDATE SET claimant = excluded.claimant, until = excluded.until",
                        Some(vec![claimant.to_string().into(), integer(until)]),
                    )
                    .map_err(storage_error)?;
            }
            Ok(decision)
        });
        match decided {
            Ok(ClaimDecision::Take) => {
                let at = JsDate::new(&Number::from(until as f64));
                // Without its alarm the claim only stays longer (a row).
                let _ = self.state.storage().set_alarm(ScheduledTime::new(at)).await;
                empty(204)
            }
            Ok(ClaimDecision::Held) => empty(204),
            Ok(ClaimDecision::Refused) => empty(409),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }

    fn claims(&self) -> worker::SqlStorage {
        self.state.storage().sql()
    }

    fn read_claim(&self) -> Result<Option<Claim>, String> {
        self.claims()
            .exec(CLAIM_TABLE, None)
            .map_err(storage_error)?;
        let cursor = self
            .claims()
            .exec("SELECT claimant, until FROM single_use WHERE id = 1", None)
            .map_err(storage_error)?;
        let row = cursor.raw().next().transpose().map_err(storage_error)?;
        Ok(match row.as_deref() {
            Some([SqlStorageValue::String(claimant), SqlStorageValue::Integer(until)]) => {
                Some(Claim {
                    claimant: claimant.clone(),
                    until: *until as u64,
                })
            }
            _ => None,
        })
    }

    /// Deletes a claim that ran out (and the object with it).
    async fn expire_claim(&self) -> Result<(), String> {
        let exists = self
            .claims()
            .exec(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'single_use'",
                None,
            )
            .map_err(storage_error)?
            .raw()
            .next()
            .is_some();
        if !exists {
            return Ok(());
        }
        let now = Date::now().as_millis();
        match self.read_claim()? {
            Some(claim) if claim.until > now => {
                let at = JsDate::new(&Number::from(claim.until as f64));
                self.state
                    .storage()
                    .set_alarm(ScheduledTime::new(at))
                    .await
                    .map_err(storage_error)
            }
            _ => self
                .state
                .storage()
                .delete_all()
                .await
                .map_err(storage_error),
        }
    }

    /// The policy of a delivery's route, which must exist and be valid.
    fn route_policy(&self, route: &str) -> Result<Policy, Problem> {
        let config = config_from_env(&self.env)?;
        config
            .route(route)
            .map(Policy::from)
            .ok_or_else(|| Problem::Misconfigured {
                variable: format!("ROUTES.{route}"),
                reason: "the gateway named a route this object does not know".into(),
            })
    }

    /// Only the life `expected` names, if it names one: checked and acted
    /// on in one turn, with no await between.
    async fn purge(&self, object: &str, force: bool, expected: Option<&str>) -> HttpResponse {
        if let Err(problem) = self.engine.check_life(expected) {
            return render_problem(&problem);
        }
        match self.engine.purge(object, force).await {
            Ok(true) => empty(204),
            Ok(false) => render_problem(&Problem::NotFound),
            Err(problem) => render_problem(&problem),
        }
    }

    async fn redrive(&self, expected: Option<&str>) -> HttpResponse {
        if let Err(problem) = self.engine.check_life(expected) {
            return render_problem(&problem);
        }
        match self.engine.redrive().await {
            Ok(receipt) => self.receipt_view(202, &receipt),
            Err(problem) => render_problem(&problem),
        }
    }

    async fn wake(&self, object: &str) -> HttpResponse {
        match self.engine.wake(object).await {
            Ok(()) => empty(204),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }

    fn read_receipt(&self) -> HttpResponse {
        match self.engine.receipt() {
            Ok(Some(receipt)) => self.receipt_view(200, &receipt),
            Ok(None) => render_problem(&Problem::NotFound),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }

    /// The operator's view: the receipt, its stored request while kept,
    /// and the storage operations of the object's current lifetime.
    fn receipt_view(&self, status: u16, receipt: &Receipt) -> HttpResponse {
        let request = match receipt.is_pending() || receipt.state_name() == "dead" {
            true => self.engine.backend().load_request().ok().flatten(),
            false => None,
        };
        let config = config_from_env(&self.env).ok();
        let masked = config
            .as_ref()
            .and_then(|config| config.route(&receipt.identity.route))
            .map(|route| route.masked_headers());
        let view = ReceiptView::of(
            receipt,
            request.as_ref(),
            self.engine.backend().ops.get(),
            masked.as_deref(),
        );
        HttpResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(&view).expect("a receipt view serializes"),
        }
    }
}

fn reply(response: HttpResponse) -> Reply {
    Reply {
        response,
        replayable_until: None,
        unknown_key: false,
    }
}

fn empty(status: u16) -> HttpResponse {
    HttpResponse {
        status,
        headers: Vec::new(),
        body: Vec::new(),
    }
}

fn storage_error(error: worker::Error) -> String {
    error.to_string()
}

impl DurableBackend {
    fn exec(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<worker::SqlCursor, String> {
        self.storage
            .sql()
            .exec(query, Some(values))
            .map_err(storage_error)
    }

    fn tables_exist(&self) -> Result<bool, String> {
        if !self.has_tables.get() {
            let cursor = self.exec(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipt'",
                Vec::new(),
            )?;
            self.has_tables.set(cursor.raw().next().is_some());
        }
        Ok(self.has_tables.get())
    }

    fn create_tables(&self) -> Result<(), String> {
        if !self.has_tables.get() {
            self.exec(RECEIPT_TABLE, Vec::new())?;
            // An object an earlier version created lacks later columns.
            let columns = self.exec("SELECT name FROM pragma_table_info('receipt')", Vec::new())?;
            let present: Vec<String> = columns
                .raw()
                .flatten()
                .filter_map(|row| match row.first() {
                    Some(SqlStorageValue::String(name)) => Some(name.clone()),
                    _ => None,
                })
                .collect();
            for (column, kind) in [
                ("deletable_at", "INTEGER"),
                ("request", "TEXT"),
                ("request_body", "BLOB"),
            ] {
                if !present.iter().any(|name| name == column) {
                    self.exec(
                        &format!("ALTER TABLE receipt ADD COLUMN {column} {kind}"),
                        Vec::new(),
                    )?;
                }
            }
            self.has_tables.set(true);
        }
        Ok(())
    }

    /// A row's record and blob, if the row exists.
    fn select(&self, query: &str) -> Result<Option<StoredRow>, String> {
        let cursor = match self.exec(query, Vec::new()) {
            Ok(cursor) => cursor,
            // An object that exists pays one query; only a failed one asks
            // whether the tables are there (a new object creates them on
            // first write).
            Err(_) if !self.tables_exist()? => return Ok(None),
            Err(error) => return Err(error),
        };
        self.has_tables.set(true);
        let Some(row) = cursor.raw().next() else {
            return Ok(None);
        };
        let row = row.map_err(storage_error)?;
        match (row.first(), row.get(1)) {
            (Some(SqlStorageValue::String(record)), Some(SqlStorageValue::Blob(body))) => {
                Ok(Some((record.clone(), Some(body.clone()))))
            }
            (Some(SqlStorageValue::String(record)), _) => Ok(Some((record.clone(), None))),
            _ => Err("the stored row has no record".into()),
        }
    }
}

/// A stored row: its JSON record and its blob.
type StoredRow = (String, Option<Vec<u8>>);

/// SQLite integers are signed 64-bit; idemgate's times are far below 2^63.
fn integer(value: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(value as i64)
}

impl Backend for DurableBackend {
    fn now_ms(&self) -> u64 {
        Date::now().as_millis()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        StorageOps::bump(&self.ops, |ops| ops.reads += 1);
        let Some((record, body)) = self.select("SELECT record, body FROM receipt WHERE id = 1")?
        else {
            return Ok(None);
        };
        let mut receipt: Receipt = serde_json::from_str(&record)
            .map_err(|error| format!("the stored receipt does not parse: {error}"))?;
        if let (Some(stored), Some(body)) = (receipt.stored_response_mut(), body) {
            stored.response.body = body;
        }
        Ok(Some(receipt))
    }

    fn save(&self, receipt: &Receipt, request: Option<&DeliveryRequest>) -> Result<(), String> {
        StorageOps::bump(&self.ops, |ops| ops.writes += 1);
        let record = serde_json::to_string(receipt).map_err(|error| error.to_string())?;
        let body = match receipt.stored_response() {
            Some(stored) => SqlStorageValue::Blob(stored.response.body.clone()),
            None => SqlStorageValue::Null,
        };
        let deletable_at = receipt
            .deletable_at()
            .map_or(SqlStorageValue::Null, integer);
        self.create_tables()?;
        // One row write: the request rides in the receipt's row (an object
        // of an earlier version may still hold it in its own table).
        let values = vec![SqlStorageValue::String(record), body, deletable_at];
        let written = match (request, receipt.keeps_request()) {
            (Some(request), _) => {
                let record = serde_json::to_string(request).map_err(|error| error.to_string())?;
                let mut values = values;
                values.push(SqlStorageValue::String(record));
                values.push(SqlStorageValue::Blob(request.body.clone()));
                self.exec(
                    "INSERT INTO receipt (id, record, body, deletable_at, request, request_body)
                     VALUES (1, ?, ?, ?, ?, ?)
                     ON CONFLICT (id) DO UPDATE SET record = excluded.record, body = excluded.body,
                     deletable_at = excluded.deletable_at, request = excluded.request,
                     request_body = excluded.request_body",
                    values,
                )
            }
            (None, true) => self.exec(
                "INSERT INTO receipt (id, record, body, deletable_at) VALUES (1, ?, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record, body = excluded.body,
                 deletable_at = excluded.deletable_at",
                values,
            ),
            (None, false) => self.exec(
                "INSERT INTO receipt (id, record, body, deletable_at) VALUES (1, ?, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record, body = excluded.body,
                 deletable_at = excluded.deletable_at, request = NULL, request_body = NULL",
                values,
            ),
        };
        written?;
        if !receipt.keeps_request() && self.legacy_request.get() {
            self.exec("DELETE FROM request", Vec::new())?;
            self.legacy_request.set(false);
        }
        Ok(())
    }

    fn load_request(&self) -> Result<Option<DeliveryRequest>, String> {
        StorageOps::bump(&self.ops, |ops| ops.reads += 1);
        // In the receipt's row; an object of an earlier version (no such
        // column yet) kept it in its own table.
        let in_row = self
            .exec(
                "SELECT request, request_body FROM receipt WHERE id = 1",
                Vec::new(),
            )
            .ok()
            .and_then(|cursor| cursor.raw().next())
            .and_then(Result::ok)
            .and_then(|row| match (row.first(), row.get(1)) {
                (Some(SqlStorageValue::String(record)), Some(SqlStorageValue::Blob(body))) => {
                    Some((record.clone(), Some(body.clone())))
                }
                (Some(SqlStorageValue::String(record)), _) => Some((record.clone(), None)),
                _ => None,
            });
        let row = match in_row {
            Some(row) => Some(row),
            None => {
                // No such table in an object this version created.
                let legacy = self
                    .select("SELECT record, body FROM request WHERE id = 1")
                    .ok()
                    .flatten();
                self.legacy_request.set(legacy.is_some());
                legacy
            }
        };
        let Some((record, body)) = row else {
            return Ok(None);
        };
        let mut request: DeliveryRequest = serde_json::from_str(&record)
            .map_err(|error| format!("the stored request does not parse: {error}"))?;
        request.body = body.unwrap_or_default();
        Ok(Some(request))
    }

    async fn delete_all(&self) -> Result<bool, String> {
        StorageOps::bump(&self.ops, |ops| ops.writes += 1);
        let existed = self.tables_exist()?
            && self
                .exec("SELECT 1 FROM receipt WHERE id = 1", Vec::new())?
                .raw()
                .next()
                .is_some();
        // `deleteAll` frees every row, the tables and (at this
        // compatibility date) the alarm.
        self.has_tables.set(false);
        self.storage.delete_all().await.map_err(storage_error)?;
        Ok(existed)
    }

    fn stored_deletable_at(&self) -> Result<Option<u64>, String> {
        if !self.tables_exist()? {
            return Ok(None);
        }
        // A first version's table has no `deletable_at` until this adds it.
        self.has_tables.set(false);
        self.create_tables()?;
        let cursor = self.exec(
            "SELECT deletable_at, record FROM receipt WHERE id = 1",
            Vec::new(),
        )?;
        let row = cursor.raw().next().transpose().map_err(storage_error)?;
        Ok(match row.as_deref() {
            Some([SqlStorageValue::Integer(at), ..]) => Some(*at as u64),
            Some([_, SqlStorageValue::String(record), ..]) => {
                Receipt::deletable_at_of_unparsed(record)
            }
            _ => None,
        })
    }

    async fn set_alarm(&self, at_ms: u64) -> Result<(), String> {
        StorageOps::bump(&self.ops, |ops| ops.alarm_writes += 1);
        #[cfg(feature = "test-hooks")]
        if crate::test_hooks::alarms_dropped(&self.env) {
            return Ok(());
        }
        let at = JsDate::new(&Number::from(at_ms as f64));
        self.storage
            .set_alarm(ScheduledTime::new(at))
            .await
            .map_err(storage_error)
    }

    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult {
        edge_http::send_forward(request, timeout_ms).await
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        Delay::from(Duration::from_millis(ms))
    }

    fn random(&self) -> u64 {
        let mut bytes = [0u8; 8];
        // crypto.getRandomValues does not fail in workerd; if it ever did,
        // retries would lose their jitter, nothing more.
        let _ = getrandom::getrandom(&mut bytes);
        u64::from_le_bytes(bytes)
    }

    fn new_receipt_id(&self, now_ms: u64) -> String {
        let mut random = [0u8; 10];
        let _ = getrandom::getrandom(&mut random);
        uuid::Builder::from_unix_timestamp_millis(now_ms, &random)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    fn emit(&self, event: &DecisionLog, logged: bool) {
        events::emit(&self.env, event, logged);
    }

    async fn index(&self, update: IndexUpdate) -> Result<IndexWrite, String> {
        StorageOps::bump(&self.ops, |ops| ops.index_writes += 1);
        receipt_index::write(&self.env, update).await
    }

    async fn acquire_permit(
        &self,
        route: &str,
        request: PermitRequest,
    ) -> Result<PermitReply, String> {
        let reply = flow_client::call(&self.env, route, &FlowCall::Acquire(request)).await?;
        PermitReply::decode(&reply)
    }

    async fn release_permit(&self, route: &str, holder: &str, grant: u64, limits: FlowLimits) {
        let release = FlowCall::Release {
            holder: holder.to_string(),
            grant,
            limits,
        };
        // A release that fails leaves the permit to its lease.
        let _ = flow_client::call(&self.env, route, &release).await;
    }

    fn secret(&self, name: &str) -> Option<Secret> {
        crate::env::lookup(&self.env, name)
            .filter(|value| !value.is_empty())
            .map(Secret::new)
    }

    fn route_policy(&self, route: &str) -> Option<Policy> {
        let config = config_from_env(&self.env).ok()?;
        config.route(route).map(Policy::from)
    }
}
