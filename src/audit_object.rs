//! The audit log's writer (SPEC §13, v4): a Durable Object class of its
//! own (`AuditLog`, binding `AUDIT_LOG`), one object per deployment, so
//! one writer keeps the chain in `seq` order. Its SQLite holds the chain
//! (`audit_entry`, one row per entry, never deleted: kept at least 400
//! days, in fact for the deployment's life), the intents of acts under
//! way (`audit_intent`) and the counters (`audit_counter`). What a call
//! or the alarm does is the core's ([`idemgate_core::audit::writer`]);
//! here are its rows as SQL ([`SqlRows`]) and the RPC and alarm that
//! forward to it. Each call's reads and writes run in one turn with no
//! await between them, so they commit together and no two appends see
//! the same head.

use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, SqlStorageValue,
    State, Storage,
};

use idemgate_core::answer::render_problem;
use idemgate_core::audit::rows::AuditRows;
use idemgate_core::audit::writer::Writer;
use idemgate_core::audit::{AuditCall, Entry, Head, Intent};
use idemgate_core::problem::Problem;

use crate::edge_http;

pub const AUDIT_LOG_BINDING: &str = "AUDIT_LOG";

const TABLES: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS audit_entry (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, route TEXT NOT NULL, target TEXT NOT NULL, result TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS audit_intent (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, route TEXT NOT NULL, target TEXT NOT NULL)",
    // The last intent id handed out: ids are never reused.
    "CREATE TABLE IF NOT EXISTS audit_counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
];

const ENTRY_COLUMNS: &str = "seq, at, actor, action, route, target, result, prev_hash, hash";

#[durable_object]
pub struct AuditLog {
    storage: Storage,
    env: Env,
}

impl DurableObject for AuditLog {
    fn new(state: State, env: Env) -> Self {
        AuditLog {
            storage: state.storage(),
            env,
        }
    }

    /// Calls come over RPC ([`AuditLog::call`]).
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Settles intents whose act never reported its result, and sends the
    /// head's checkpoint when one is due.
    async fn alarm(&self) -> worker::Result<Response> {
        let now = Date::now().as_millis();
        let due = self
            .writer()
            .and_then(|mut writer| writer.alarm(now))
            .map_err(worker::Error::RustError)?;
        if let Some(due) = due {
            let sent = crate::audit_checkpoint::send(&self.env, &due.checkpoint).await;
            Writer::new(self.rows())
                .checkpoint_sent(due, sent, now)
                .map_err(worker::Error::RustError)?;
        }
        self.arm().await;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl AuditLog {
    /// The object's RPC method: an [`AuditCall`] as JSON; answers its
    /// reply as JSON, or an error the caller sees as a failed write.
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, line: String) -> Result<String, JsValue> {
        let call: AuditCall =
            serde_json::from_str(&line).map_err(|error| JsValue::from_str(&error.to_string()))?;
        let writes = call.writes();
        // One call, in one turn (no await): its reads and writes commit
        // together.
        let answer = self
            .writer()
            .and_then(|mut writer| writer.answer(call, Date::now().as_millis()))
            .map_err(|message| JsValue::from_str(&message))?;
        if writes {
            // An intent is settled as `unknown` if its result never comes,
            // and a new head goes out as a checkpoint. Best effort: the
            // intent is durable, so the act goes ahead, and every later
            // call settles what is due too.
            self.arm().await;
        }
        Ok(answer)
    }
}

impl AuditLog {
    fn rows(&self) -> SqlRows<'_> {
        SqlRows {
            storage: &self.storage,
        }
    }

    /// The core's writer over this object's rows, its tables made.
    fn writer(&self) -> Result<Writer<SqlRows<'_>>, String> {
        let rows = self.rows();
        for table in TABLES {
            rows.exec(table, Vec::new())?;
        }
        Ok(Writer::new(rows))
    }

    /// The alarm at the writer's next moment.
    async fn arm(&self) {
        let now = Date::now().as_millis();
        if let Some(next) = Writer::new(self.rows()).next_alarm(now) {
            let _ = self.storage.set_alarm(alarm_at(next)).await;
        }
    }
}

/// The writer's rows in the object's SQLite: each operation one statement.
struct SqlRows<'a> {
    storage: &'a Storage,
}

impl AuditRows for SqlRows<'_> {
    fn head(&mut self) -> Result<Head, String> {
        let rows = self.rows(
            "SELECT seq, hash FROM audit_entry ORDER BY seq DESC LIMIT 1",
            Vec::new(),
        )?;
        Ok(rows
            .first()
            .and_then(|row| {
                Some(Head {
                    seq: number(row.first()?)?,
                    hash: text(row.get(1)?)?,
                })
            })
            .unwrap_or_default())
    }

    fn newest(
        &mut self,
        before: u64,
        routes: Option<&[String]>,
        limit: u32,
    ) -> Result<Vec<Entry>, String> {
        let mut query = format!("SELECT {ENTRY_COLUMNS} FROM audit_entry WHERE seq < ?");
        let mut values = vec![integer(before)];
        if let Some(routes) = routes {
            let marks = vec!["?"; routes.len()].join(", ");
            query.push_str(&format!(" AND route IN ({marks})"));
            values.extend(routes.iter().cloned().map(SqlStorageValue::from));
        }
        query.push_str(" ORDER BY seq DESC LIMIT ?");
        values.push(integer(limit.into()));
        self.entries(&query, values)
    }

    fn oldest(&mut self, after: u64, limit: u32) -> Result<Vec<Entry>, String> {
        self.entries(
            &format!("SELECT {ENTRY_COLUMNS} FROM audit_entry WHERE seq > ? ORDER BY seq LIMIT ?"),
            vec![integer(after), integer(limit.into())],
        )
    }

    fn append(&mut self, id: u64, entry: &Entry) -> Result<(), String> {
        self.exec(
            &format!(
                "INSERT INTO audit_entry ({ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            vec![
                integer(entry.seq),
                integer(entry.at),
                entry.actor.clone().into(),
                entry.action.clone().into(),
                entry.route.clone().into(),
                entry.target.clone().into(),
                entry.result.clone().into(),
                entry.prev_hash.clone().into(),
                entry.hash.clone().into(),
            ],
        )?;
        self.exec("DELETE FROM audit_intent WHERE id = ?", vec![integer(id)])?;
        // Each entry's place in the chain also leaves the deployment, in
        // the log stream (SPEC §13, v5): a chain rewritten later disagrees
        // with it.
        crate::log_sink::emit_text(
            &serde_json::json!({
                "event": "idemgate.audit",
                "seq": entry.seq,
                "hash": entry.hash,
                "at": entry.at,
                "action": entry.action,
                "route": entry.route,
            })
            .to_string(),
        );
        Ok(())
    }

    fn open(&mut self, id: u64, intent: &Intent) -> Result<(), String> {
        self.exec(
            "INSERT INTO audit_intent (id, at, actor, action, route, target) VALUES (?, ?, ?, ?, ?, ?)",
            vec![
                integer(id),
                integer(intent.at),
                intent.actor.clone().into(),
                intent.action.clone().into(),
                intent.route.clone().into(),
                intent.target.clone().into(),
            ],
        )?;
        Ok(())
    }

    fn intent(&mut self, id: u64) -> Result<Option<Intent>, String> {
        let intents = self.intents("WHERE id = ?", vec![integer(id)])?;
        Ok(intents.into_iter().next().map(|(_, intent)| intent))
    }

    fn opened_before(&mut self, at: u64) -> Result<Vec<(u64, Intent)>, String> {
        self.intents("WHERE at < ? ORDER BY id", vec![integer(at)])
    }

    fn highest_open(&mut self) -> Result<u64, String> {
        Ok(self
            .value("SELECT COALESCE(MAX(id), 0) FROM audit_intent", Vec::new())?
            .unwrap_or(0))
    }

    fn oldest_open_at(&mut self) -> Result<Option<u64>, String> {
        self.value("SELECT MIN(at) FROM audit_intent", Vec::new())
    }

    fn counter(&mut self, name: &str) -> Result<Option<u64>, String> {
        self.value(
            "SELECT value FROM audit_counter WHERE name = ?",
            vec![name.into()],
        )
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<(), String> {
        self.exec(
            "INSERT INTO audit_counter (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            vec![name.into(), integer(value)],
        )?;
        Ok(())
    }
}

impl SqlRows<'_> {
    fn intents(
        &self,
        condition: &str,
        values: Vec<SqlStorageValue>,
    ) -> Result<Vec<(u64, Intent)>, String> {
        let rows = self.rows(
            &format!("SELECT id, at, actor, action, route, target FROM audit_intent {condition}"),
            values,
        )?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                Some((
                    number(row.first()?)?,
                    Intent {
                        at: number(row.get(1)?)?,
                        actor: text(row.get(2)?)?,
                        action: text(row.get(3)?)?,
                        route: text(row.get(4)?)?,
                        target: text(row.get(5)?)?,
                    },
                ))
            })
            .collect())
    }

    fn entries(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<Vec<Entry>, String> {
        let rows = self.rows(query, values)?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                Some(Entry {
                    seq: number(row.first()?)?,
                    at: number(row.get(1)?)?,
                    actor: text(row.get(2)?)?,
                    action: text(row.get(3)?)?,
                    route: text(row.get(4)?)?,
                    target: text(row.get(5)?)?,
                    result: text(row.get(6)?)?,
                    prev_hash: text(row.get(7)?)?,
                    hash: text(row.get(8)?)?,
                })
            })
            .collect())
    }

    /// The first column of the first row, as a number.
    fn value(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<Option<u64>, String> {
        Ok(self
            .rows(query, values)?
            .first()
            .and_then(|row| number(row.first()?)))
    }

    fn rows(
        &self,
        query: &str,
        values: Vec<SqlStorageValue>,
    ) -> Result<Vec<Vec<SqlStorageValue>>, String> {
        let cursor = self.exec(query, values)?;
        Ok(cursor.raw().filter_map(Result::ok).collect())
    }

    fn exec(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<worker::SqlCursor, String> {
        self.storage
            .sql()
            .exec(query, Some(values))
            .map_err(|error| error.to_string())
    }
}

/// The alarm's time: a date, as `set_alarm` reads a bare number as an
/// offset from now.
fn alarm_at(at: u64) -> ScheduledTime {
    ScheduledTime::new(JsDate::new(&Number::from(at as f64)))
}

fn integer(value: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(value as i64)
}

fn number(value: &SqlStorageValue) -> Option<u64> {
    match value {
        SqlStorageValue::Integer(value) => u64::try_from(*value).ok(),
        SqlStorageValue::Float(value) => Some(*value as u64),
        _ => None,
    }
}

fn text(value: &SqlStorageValue) -> Option<String> {
    match value {
        SqlStorageValue::String(value) => Some(value.clone()),
        _ => None,
    }
}
