//! The key's Durable Object's storage and I/O as the [`Engine`] sees them
//! ([`Backend`]): the receipt and its request in the object's SQLite, its
//! alarm, timers, `fetch` to the origin, the route's index shards, the
//! flow coordinator, secrets and the event sink.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use worker::js_sys::{Date as JsDate, Number};
use worker::{Date, Delay, Env, ScheduledTime, SqlStorageValue, Storage};

use idemgate_core::decision_log::DecisionLog;
use idemgate_core::delivery::DeliveryRequest;
use idemgate_core::engine::{Backend, Policy, StorageOps};
use idemgate_core::flow::{FlowCall, FlowLimits, PermitReply, PermitRequest};
use idemgate_core::index::shard::IndexPlace;
use idemgate_core::index::{IndexUpdate, IndexWrite};
use idemgate_core::order::{OrderCall, OrderReply};
use idemgate_core::origin::OutboundRequest;
use idemgate_core::problem::Problem;
use idemgate_core::receipt::{ForwardResult, Receipt};
use idemgate_core::signature::Secret;

use crate::edge_http;
use crate::env::config_from_env;
use crate::events;
use crate::flow_client;
use crate::receipt_index;

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

/// What this object knows of its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tables {
    /// Not asked yet: it may be an earlier version's, lacking columns.
    Unknown,
    /// Known absent (a new object): created whole.
    Absent,
    /// Known present, with every column.
    Present,
}

pub struct DurableBackend {
    pub(crate) storage: Storage,
    pub(crate) env: Env,
    /// Whether the table is known to exist. A new object creates it with
    /// its first write, in the same commit, rather than on start: a
    /// separate commit per key would cost an fsync, and most objects see
    /// one first delivery and then only replays.
    pub(crate) tables: Cell<Tables>,
    /// Whether an earlier version's request table holds the request.
    pub(crate) legacy_request: Cell<bool>,
    /// Every storage operation of this object's lifetime, for the operator API.
    pub(crate) ops: Cell<StorageOps>,
}

impl DurableBackend {
    fn exec(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<worker::SqlCursor, String> {
        self.storage
            .sql()
            .exec(query, Some(values))
            .map_err(storage_error)
    }

    fn tables_exist(&self) -> Result<bool, String> {
        if self.tables.get() != Tables::Present {
            let cursor = self.exec(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipt'",
                Vec::new(),
            )?;
            let found = cursor.raw().next().is_some();
            self.tables.set(match found {
                true => Tables::Present,
                false => Tables::Absent,
            });
            return Ok(found);
        }
        Ok(true)
    }

    fn create_tables(&self) -> Result<(), String> {
        if self.tables.get() == Tables::Absent {
            // Created whole, in the first write's commit: no columns to check.
            self.exec(RECEIPT_TABLE, Vec::new())?;
            self.tables.set(Tables::Present);
        }
        if self.tables.get() == Tables::Unknown {
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
            self.tables.set(Tables::Present);
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
        self.tables.set(Tables::Present);
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
pub(crate) fn integer(value: u64) -> SqlStorageValue {
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
        self.tables.set(Tables::Unknown);
        self.storage.delete_all().await.map_err(storage_error)?;
        Ok(existed)
    }

    fn stored_deletable_at(&self) -> Result<Option<u64>, String> {
        if !self.tables_exist()? {
            return Ok(None);
        }
        // A first version's table has no `deletable_at` until this adds it.
        self.tables.set(Tables::Unknown);
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
        let fetcher = match &request.via {
            None => None,
            Some(name) => match edge_http::fetcher(&self.env, name) {
                Ok(fetcher) => Some(fetcher),
                Err(message) => return ForwardResult::Unreachable(message),
            },
        };
        edge_http::send_forward(request, timeout_ms, fetcher.as_ref()).await
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

    fn report_row(&self, report: idemgate_core::index::owed::RowReport) {
        crate::alerts::note_row(report);
    }

    async fn index(&self, update: IndexUpdate, place: &IndexPlace) -> Result<IndexWrite, String> {
        StorageOps::bump(&self.ops, |ops| ops.index_writes += 1);
        #[cfg(feature = "test-hooks")]
        if crate::test_hooks::v4_index(&self.env) {
            return receipt_index::write_legacy(&self.env, update).await;
        }
        receipt_index::write(&self.env, update, place).await
    }

    fn index_shards(&self) -> u16 {
        config_from_env(&self.env)
            .map(|config| config.index_shards)
            .unwrap_or(idemgate_core::index::shard::DEFAULT_SHARDS)
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

    async fn order_call(&self, object: &str, call: OrderCall) -> Result<OrderReply, String> {
        let route = idemgate_core::order::route_of(object).unwrap_or_default();
        crate::stats::record(|stats| stats.order_calls += 1);
        let reply = crate::object_rpc::call(
            &self.env,
            crate::order_object::ORDER_OBJECT_BINDING,
            object,
            Some(route),
            &call.encode(),
            "order object",
        )
        .await?;
        OrderReply::decode(&reply)
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

    fn delivery_policy(&self, route: &str) -> Result<Policy, Problem> {
        let config = config_from_env(&self.env)?;
        config
            .route(route)
            .map(Policy::from)
            .ok_or_else(|| Problem::Misconfigured {
                variable: format!("ROUTES.{route}"),
                reason: "the gateway named a route this object does not know".into(),
            })
    }

    fn storage_ops(&self) -> StorageOps {
        self.ops.get()
    }
}

pub(crate) fn storage_error(error: worker::Error) -> String {
    error.to_string()
}
