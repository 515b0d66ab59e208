//! A route's flow coordinator (SPEC §2, v3): a Durable Object class of
//! its own (`FlowCoordinator`, binding `FLOW_COORDINATOR`), one object per
//! route, named for it ([`coordinator_name`]). A host
//! ([`idemgate_core::host`]) of the core's
//! [`idemgate_core::flow::Coordinator`], kept as rows in the object's SQLite
//! (written in the turn that changed them, so before any answer leaves);
//! the class forwards its RPC and alarm to the host and wakes each key's
//! object whose permit it reserved. The rows, read and written, are in
//! [`FlowRows`].
//!
//! Wakes go out together and never hold an answer: a key's object answers
//! a wake by moving its own alarm, so no call of the coordinator waits on
//! another key's forward.

use std::cell::RefCell;

use futures::future::join_all;
use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{
    durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, SqlStorageValue,
    State, Storage,
};

use idemgate_core::answer::render_problem;
use idemgate_core::flow::{
    coordinator_name, Changes, Coordinator, FlowCall, FlowLimits, Meta, Permit, Step, Waiter,
};
use idemgate_core::host::{Host, Store};
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::problem::Problem;

use crate::{edge_http, object_client, stats};

/// Keyed tables are `WITHOUT ROWID`, and rows change in place (an upsert,
/// not `INSERT OR REPLACE`'s delete and insert): SQLite counts, and
/// Cloudflare bills, each b-tree a change touches as a row written.
const TABLES: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS flow_permit (holder TEXT PRIMARY KEY, grant_number INTEGER NOT NULL, expires_at INTEGER NOT NULL, reserved INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS flow_waiter (holder TEXT PRIMARY KEY, accepted_at INTEGER NOT NULL, enqueued_at INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS flow_meta (id INTEGER PRIMARY KEY CHECK (id = 1), route TEXT NOT NULL, tokens INTEGER NOT NULL, refilled_at INTEGER NOT NULL, next_grant INTEGER NOT NULL, max_in_flight INTEGER, rate_thousandths INTEGER)",
];

#[durable_object]
pub struct FlowCoordinator {
    state: State,
    env: Env,
    host: Host<Coordinator, FlowRows>,
}

impl DurableObject for FlowCoordinator {
    fn new(state: State, env: Env) -> Self {
        FlowCoordinator {
            host: Host::new(FlowRows {
                storage: state.storage(),
                route: RefCell::new(None),
                limits: RefCell::new(FlowLimits::default()),
            }),
            state,
            env,
        }
    }

    /// Flow calls come over RPC ([`FlowCoordinator::call`]).
    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Leases that ended come back; waiters get what is free. A storage
    /// failure is an error, so the runtime runs the alarm again.
    async fn alarm(&self) -> worker::Result<Response> {
        let wakes = self
            .host
            .alarm(Date::now().as_millis())
            .await
            .map_err(worker::Error::RustError)?;
        let route = self.host.store().route();
        send_wakes(&self.env, &route, wakes).await;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl FlowCoordinator {
    /// The object's RPC method: a flow call from a key's object or the
    /// operator API, as its line ([`FlowCall::encode`]); answers the
    /// reply's line, or an error the caller sees as an unreachable
    /// coordinator.
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, route: String, line: String) -> Result<String, JsValue> {
        let answered = self.answer(&route, &line).await;
        answered.map_err(|message| JsValue::from_str(&message))
    }
}

impl FlowCoordinator {
    async fn answer(&self, route: &str, line: &str) -> Result<String, String> {
        let call = FlowCall::decode(line)?;
        // What a first read restores the coordinator with, if it must.
        self.host
            .store()
            .expect(route, Coordinator::limits_of(&call));
        let (reply, wakes) = self.host.call(&call, Date::now().as_millis()).await?;
        if !wakes.is_empty() {
            // The answer leaves now; the wakes follow it. A lost wake
            // costs only time: the holder asks again on its own.
            let env = self.env.clone();
            let route = self.host.store().route();
            let sent = worker::wasm_bindgen_futures::future_to_promise(async move {
                send_wakes(&env, &route, wakes).await;
                Ok(JsValue::UNDEFINED)
            });
            let _ = self.state.as_raw().wait_until(&sent);
        }
        Ok(reply)
    }
}

/// Wakes each holder whose permit was reserved, all at once.
async fn send_wakes(env: &Env, route: &str, holders: Vec<String>) {
    let calls = holders.into_iter().map(|holder| {
        let call = ObjectCall {
            route: route.to_string(),
            object: holder,
            absorbed: 0,
            op: ObjectOp::PermitReady,
        };
        debug_assert_ne!(call.object, coordinator_name(route));
        object_client::call(env, call, Vec::new())
    });
    join_all(calls).await;
}

/// The coordinator's rows in the object's SQLite: its permits, its
/// waiters and one row of the rest. Keyed tables are `WITHOUT ROWID`, and
/// rows change in place (an upsert), as [`TABLES`] says why.
pub struct FlowRows {
    storage: Storage,
    /// The route's name: the stored one, or the first call's.
    route: RefCell<Option<String>>,
    /// The limits the latest call carries, which a first read restores
    /// the coordinator with.
    limits: RefCell<FlowLimits>,
}

impl FlowRows {
    fn expect(&self, route: &str, limits: FlowLimits) {
        self.route
            .borrow_mut()
            .get_or_insert_with(|| route.to_string());
        *self.limits.borrow_mut() = limits;
    }

    fn route(&self) -> String {
        self.route.borrow().clone().unwrap_or_default()
    }
}

impl Store<Coordinator> for FlowRows {
    async fn load(&self) -> Result<Coordinator, String> {
        for table in TABLES {
            self.exec(table, Vec::new())?;
        }
        let rows = |query: &str| -> Result<Vec<Vec<SqlStorageValue>>, String> {
            let cursor = self.exec(query, Vec::new())?;
            Ok(cursor.raw().filter_map(Result::ok).collect())
        };
        let permits = rows("SELECT holder, grant_number, expires_at, reserved FROM flow_permit")?
            .iter()
            .filter_map(|row| {
                Some(Permit {
                    holder: text(row.first()?)?,
                    grant: number(row.get(1)?)?,
                    expires_at: number(row.get(2)?)?,
                    reserved: number(row.get(3)?)? == 1,
                })
            })
            .collect();
        let waiters = rows("SELECT holder, accepted_at, enqueued_at FROM flow_waiter")?
            .iter()
            .filter_map(|row| {
                Some(Waiter {
                    holder: text(row.first()?)?,
                    accepted_at: number(row.get(1)?)?,
                    enqueued_at: number(row.get(2)?)?,
                })
            })
            .collect();
        let meta = rows(
            "SELECT route, tokens, refilled_at, next_grant, max_in_flight, rate_thousandths FROM flow_meta",
        )?;
        let stored = meta.first().and_then(|row| {
            let meta = Meta {
                tokens: number(row.get(1)?)?,
                refilled_at: number(row.get(2)?)?,
                next_grant: number(row.get(3)?)?,
                limits: FlowLimits {
                    max_in_flight: row.get(4).and_then(number).map(|max| max as u32),
                    rate_thousandths: row.get(5).and_then(number),
                    shards: 1,
                },
            };
            Some((text(row.first()?)?, meta))
        });
        let meta = match stored {
            Some((name, meta)) => {
                *self.route.borrow_mut() = Some(name);
                Some(meta)
            }
            None => None,
        };
        let now = Date::now().as_millis();
        let limits = *self.limits.borrow();
        Ok(Coordinator::restore(permits, waiters, meta, limits, now))
    }

    async fn save(&self, step: Step) -> Result<(), String> {
        stats::record(|stats| stats.coordinator_claims_expired += step.claims_expired);
        self.write(&self.route(), step.changes)
    }

    /// A coordinator is never forgotten.
    async fn forget(&self) -> Result<(), String> {
        Ok(())
    }

    async fn set_alarm(&self, at: u64) -> Result<(), String> {
        let date = JsDate::new(&Number::from(at as f64));
        self.storage
            .set_alarm(ScheduledTime::new(date))
            .await
            .map_err(|error| error.to_string())?;
        stats::record(|stats| stats.coordinator_alarm_writes += 1);
        Ok(())
    }
}

impl FlowRows {
    fn write(&self, route: &str, changes: Changes) -> Result<(), String> {
        for holder in changes.permits_removed {
            self.write_row(
                "DELETE FROM flow_permit WHERE holder = ?",
                vec![holder.into()],
            )?;
        }
        for permit in changes.permits {
            self.write_row(
                "INSERT INTO flow_permit (holder, grant_number, expires_at, reserved) VALUES (?, ?, ?, ?) ON CONFLICT (holder) DO UPDATE SET grant_number = excluded.grant_number, expires_at = excluded.expires_at, reserved = excluded.reserved",
                vec![
                    permit.holder.into(),
                    integer(permit.grant),
                    integer(permit.expires_at),
                    integer(permit.reserved as u64),
                ],
            )?;
        }
        for holder in changes.waiters_removed {
            self.write_row(
                "DELETE FROM flow_waiter WHERE holder = ?",
                vec![holder.into()],
            )?;
        }
        for waiter in changes.waiters {
            self.write_row(
                "INSERT INTO flow_waiter (holder, accepted_at, enqueued_at) VALUES (?, ?, ?) ON CONFLICT (holder) DO UPDATE SET accepted_at = excluded.accepted_at, enqueued_at = excluded.enqueued_at",
                vec![
                    waiter.holder.into(),
                    integer(waiter.accepted_at),
                    integer(waiter.enqueued_at),
                ],
            )?;
        }
        if let Some(meta) = changes.meta {
            let optional = |value: Option<u64>| value.map_or(SqlStorageValue::Null, integer);
            self.write_row(
                "INSERT INTO flow_meta (id, route, tokens, refilled_at, next_grant, max_in_flight, rate_thousandths) VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET route = excluded.route, tokens = excluded.tokens, refilled_at = excluded.refilled_at, next_grant = excluded.next_grant, max_in_flight = excluded.max_in_flight, rate_thousandths = excluded.rate_thousandths",
                vec![
                    route.to_string().into(),
                    integer(meta.tokens),
                    integer(meta.refilled_at),
                    integer(meta.next_grant),
                    optional(meta.limits.max_in_flight.map(u64::from)),
                    optional(meta.limits.rate_thousandths),
                ],
            )?;
        }
        Ok(())
    }

    /// Runs a statement that changes rows, counting the rows SQLite says
    /// it wrote (what Cloudflare bills), for the benchmark's cost figures.
    fn write_row(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<(), String> {
        let written = self.exec(query, values)?.rows_written() as u64;
        stats::record(|stats| stats.coordinator_rows_written += written);
        Ok(())
    }

    fn exec(&self, query: &str, values: Vec<SqlStorageValue>) -> Result<worker::SqlCursor, String> {
        self.storage
            .sql()
            .exec(query, Some(values))
            .map_err(|error| error.to_string())
    }
}

fn integer(value: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(value as i64)
}

fn number(value: &SqlStorageValue) -> Option<u64> {
    match value {
        SqlStorageValue::Integer(value) => u64::try_from(*value).ok(),
        _ => None,
    }
}

fn text(value: &SqlStorageValue) -> Option<String> {
    match value {
        SqlStorageValue::String(value) => Some(value.clone()),
        _ => None,
    }
}
