//! The audit log's writer (SPEC §13, v4): a Durable Object class of its
//! own (`AuditLog`, binding `AUDIT_LOG`), one object per deployment, so
//! one writer keeps the chain in `seq` order. Its SQLite holds the chain
//! (`audit_entry`, one row per entry, never deleted: kept at least 400
//! days, in fact for the deployment's life) and the intents of acts under
//! way (`audit_intent`). Each call's reads and writes run in one turn
//! with no await between them, so they commit together and no two
//! appends see the same head. The chain's rules are
//! [`idemgate_core::audit`]'s.

use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, SqlStorageValue,
    State, Storage,
};

use idemgate_core::answer::render_problem;
use idemgate_core::audit::checkpoint::{Checkpoint, CheckpointSchedule};
use idemgate_core::audit::{
    next_intent_id, AuditCall, Begun, Chain, Entry, Head, Intent, Page, SETTLE_AFTER_MS,
};
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
        self.settle(now).map_err(worker::Error::RustError)?;
        let head = self.head().map_err(worker::Error::RustError)?;
        let mut schedule = self.schedule().map_err(worker::Error::RustError)?;
        if schedule.due(head.seq, now) {
            let sent = crate::audit_checkpoint::send(&self.env, &Checkpoint::of(&head, now)).await;
            // Not delivered everywhere: tried again a minute on.
            schedule.sent(if sent { head.seq } else { schedule.sent_seq }, now);
            self.keep_schedule(schedule)
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
        let changes = matches!(call, AuditCall::Begin { .. } | AuditCall::Finish { .. });
        let answer = self
            .answer(call)
            .map_err(|message| JsValue::from_str(&message))?;
        if changes {
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
    /// One call, in one turn (no await): its reads and writes commit
    /// together.
    fn answer(&self, call: AuditCall) -> Result<String, String> {
        for table in TABLES {
            self.exec(table, Vec::new())?;
        }
        let now = Date::now().as_millis();
        self.settle(now)?;
        match call {
            AuditCall::Begin { intent, fail } => {
                if fail {
                    return Err("the audit log refused the write (test hook)".into());
                }
                let counter = self
                    .rows(
                        "SELECT value FROM audit_counter WHERE name = 'intent'",
                        Vec::new(),
                    )?
                    .first()
                    .and_then(|row| number(row.first()?));
                let highest_open = self
                    .rows("SELECT COALESCE(MAX(id), 0) FROM audit_intent", Vec::new())?
                    .first()
                    .and_then(|row| number(row.first()?))
                    .unwrap_or(0);
                let id = next_intent_id(counter, self.head()?.seq, highest_open);
                self.exec(
                    "INSERT INTO audit_counter (name, value) VALUES ('intent', ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                    vec![integer(id)],
                )?;
                self.exec(
                    "INSERT INTO audit_intent (id, at, actor, action, route, target) VALUES (?, ?, ?, ?, ?, ?)",
                    vec![
                        integer(id),
                        integer(intent.at),
                        intent.actor.into(),
                        intent.action.into(),
                        intent.route.into(),
                        intent.target.into(),
                    ],
                )?;
                Ok(json(&Begun { intent_id: id }))
            }
            AuditCall::Finish {
                intent_id,
                result,
                fail,
            } => {
                if fail {
                    return Err("the audit log refused the write (test hook)".into());
                }
                let intent = self
                    .intents("WHERE id = ?", vec![integer(intent_id)])?
                    .into_iter()
                    .next();
                match intent {
                    Some((id, intent)) => Ok(json(&self.append(id, &intent, &result)?)),
                    // Settled already (as `unknown`): it is in the chain.
                    None => Err(format!("intent {intent_id} is no longer open")),
                }
            }
            AuditCall::Head => Ok(json(&self.head()?)),
            AuditCall::Page {
                routes,
                before,
                limit,
            } => {
                let mut query = format!("SELECT {ENTRY_COLUMNS} FROM audit_entry WHERE seq < ?");
                let mut values = vec![integer(before.unwrap_or(i64::MAX as u64))];
                if let Some(routes) = routes {
                    let marks = vec!["?"; routes.len()].join(", ");
                    query.push_str(&format!(" AND route IN ({marks})"));
                    values.extend(routes.into_iter().map(SqlStorageValue::from));
                }
                query.push_str(" ORDER BY seq DESC LIMIT ?");
                values.push(integer(limit.into()));
                let entries = self.entries(&query, values)?;
                Ok(json(&Page {
                    cursor: Page::cursor_of(&entries, limit),
                    entries,
                    head: self.head()?,
                }))
            }
            AuditCall::Export { after, limit } => {
                let entries = self.entries(
                    &format!(
                        "SELECT {ENTRY_COLUMNS} FROM audit_entry WHERE seq > ? ORDER BY seq LIMIT ?"
                    ),
                    vec![integer(after), integer(limit.into())],
                )?;
                Ok(json(&Page {
                    cursor: Page::cursor_of(&entries, limit),
                    entries,
                    head: self.head()?,
                }))
            }
        }
    }

    /// Appends the intent `id` as the next entry, and closes the intent.
    fn append(&self, id: u64, intent: &Intent, result: &str) -> Result<Entry, String> {
        let mut chain = Chain::restore(self.head()?);
        let entry = chain.append(intent, result);
        self.store(id, &entry)?;
        Ok(entry)
    }

    /// Stores `entry` and closes the intent `id` it came from.
    fn store(&self, id: u64, entry: &Entry) -> Result<(), String> {
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

    /// Intents older than [`SETTLE_AFTER_MS`] become entries whose result
    /// is `unknown`: the act may have happened, so it is on record.
    fn settle(&self, now: u64) -> Result<(), String> {
        for table in TABLES {
            self.exec(table, Vec::new())?;
        }
        let stale = self.intents(
            "WHERE at < ? ORDER BY id",
            vec![integer(now.saturating_sub(SETTLE_AFTER_MS))],
        )?;
        if stale.is_empty() {
            return Ok(());
        }
        let mut chain = Chain::restore(self.head()?);
        for (id, entry) in chain.settle(&stale, now) {
            self.store(id, &entry)?;
        }
        Ok(())
    }

    /// The alarm at the next moment there is work: the oldest open
    /// intent's settling, or the next checkpoint.
    async fn arm(&self) {
        let oldest_intent = self
            .rows("SELECT MIN(at) FROM audit_intent", Vec::new())
            .ok()
            .and_then(|rows| number(rows.first()?.first()?))
            .map(|at| at + SETTLE_AFTER_MS + 1_000);
        let checkpoint = match (self.head(), self.schedule()) {
            (Ok(head), Ok(schedule)) => schedule.next_at(head.seq),
            _ => None,
        };
        let now = Date::now().as_millis();
        if let Some(next) = [oldest_intent, checkpoint].into_iter().flatten().min() {
            let _ = self.storage.set_alarm(alarm_at(next.max(now))).await;
        }
    }

    /// When a checkpoint was last sent, and of which head.
    fn schedule(&self) -> Result<CheckpointSchedule, String> {
        let value = |name: &str| -> Result<u64, String> {
            Ok(self
                .rows(
                    "SELECT value FROM audit_counter WHERE name = ?",
                    vec![name.into()],
                )?
                .first()
                .and_then(|row| number(row.first()?))
                .unwrap_or(0))
        };
        Ok(CheckpointSchedule {
            sent_at: value("checkpoint_at")?,
            sent_seq: value("checkpoint_seq")?,
        })
    }

    fn keep_schedule(&self, schedule: CheckpointSchedule) -> Result<(), String> {
        for (name, value) in [
            ("checkpoint_at", schedule.sent_at),
            ("checkpoint_seq", schedule.sent_seq),
        ] {
            self.exec(
                "INSERT INTO audit_counter (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                vec![name.into(), integer(value)],
            )?;
        }
        Ok(())
    }

    fn head(&self) -> Result<Head, String> {
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

/// A reply as its line.
fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("a reply serializes")
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
