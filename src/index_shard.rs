//! A shard of a route's receipt index (SPEC §15, v5): a Durable Object
//! class of its own (`IndexShard`, binding `INDEX_SHARD`), `INDEX_SHARDS`
//! per route ([`idemgate_core::index::shard`]), keeping the index's table
//! in its SQLite. Its RPC runs one of the index's statements for the
//! route's objects and the operator API ([`crate::index_db`]); its alarm,
//! set at the earliest wake its rows wait for, wakes the objects whose
//! next step is overdue ([`crate::sweep`]): the sweep's safety net, shard
//! by shard, with no table shared by the deployment.

use std::cell::Cell;

use wasm_bindgen::prelude::*;
use worker::js_sys::{Date as JsDate, Number};
use worker::{durable_object, Date, DurableObject, Env, Request, Response, ScheduledTime, State};

use idemgate_core::answer::render_problem;
use idemgate_core::index::shard::ShardQuery;
use idemgate_core::index::sql::{self, Param};
use idemgate_core::problem::Problem;
use idemgate_core::sweep::GRACE_MS;

use crate::edge_http;
use crate::index_db::{run_local, IndexDb};

/// Whether this shard has told shard 0 of its route that it exists.
const EXTENT_RECORDED_KEY: &str = "extent_recorded";
/// How long after a failure to tell shard 0 the next write tries again.
const EXTENT_RETRY_MS: u64 = 1_000;

/// The end-to-end tests' hook: a shard told to fail refuses every call
/// until told to answer again.
#[cfg(feature = "test-hooks")]
pub const TEST_FAIL: &str = "test:fail";
#[cfg(feature = "test-hooks")]
pub const TEST_ANSWER: &str = "test:answer";
#[cfg(feature = "test-hooks")]
const TEST_FAIL_KEY: &str = "test_fail";

#[durable_object]
pub struct IndexShard {
    state: State,
    env: Env,
    schema_ready: Cell<bool>,
    /// Whether shard 0 knows of this shard (see `record_extent`): held
    /// while it is told, so that a burst of first writes tells it once.
    extent_recorded: futures::lock::Mutex<bool>,
    /// When telling shard 0 last failed: the writes queued behind that
    /// attempt fail at once for a second rather than each wait its turn
    /// (their objects write them again).
    extent_failed_at: Cell<Option<u64>>,
    /// The alarm this instance set: moved only when a row wants it sooner.
    alarm_at: Cell<Option<u64>>,
}

impl DurableObject for IndexShard {
    fn new(state: State, env: Env) -> Self {
        IndexShard {
            state,
            env,
            schema_ready: Cell::new(false),
            extent_recorded: futures::lock::Mutex::new(false),
            extent_failed_at: Cell::new(None),
            alarm_at: Cell::new(None),
        }
    }

    async fn fetch(&self, _request: Request) -> worker::Result<Response> {
        edge_http::response(&render_problem(&Problem::NotFound)).map(Response::from)
    }

    /// Wakes the objects of overdue rows, then sleeps until the next.
    async fn alarm(&self) -> worker::Result<Response> {
        self.alarm_at.set(None);
        self.ensure_schema().map_err(worker::Error::RustError)?;
        let storage = self.state.storage();
        let more = crate::sweep::sweep_index(&self.env, &IndexDb::Local(&storage)).await;
        match more {
            true => self.set_alarm(Date::now().as_millis() + 1_000).await,
            false => self.arm().await,
        }
        .map_err(worker::Error::RustError)?;
        Response::empty()
    }
}

#[wasm_bindgen(
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys
)]
impl IndexShard {
    /// The object's RPC method: one statement ([`ShardQuery`] as JSON) for
    /// `route`'s index; answers its rows ([`idemgate_core::index::shard::ShardRows`]).
    #[wasm_bindgen(js_name = call)]
    pub async fn call(&self, route: String, line: String) -> Result<String, JsValue> {
        let answered = self.answer(&route, &line).await;
        answered.map_err(|message| JsValue::from_str(&message))
    }
}

impl IndexShard {
    async fn answer(&self, route: &str, line: &str) -> Result<String, String> {
        #[cfg(feature = "test-hooks")]
        if let Some(answer) = self.test_hook(line).await? {
            return Ok(answer);
        }
        let query: ShardQuery = serde_json::from_str(line).map_err(|error| error.to_string())?;
        if !self.schema_ready.get() && query.shard > 0 {
            self.record_extent(route, query.shard).await?;
        }
        self.ensure_schema()?;
        let rows = run_local(&self.state.storage(), &query)?;
        if rows.changes > 0 {
            // A row may wait for a wake sooner than the alarm.
            self.arm().await?;
        }
        Ok(serde_json::to_string(&rows).expect("rows serialize"))
    }

    /// Tells the route's shard 0 that the route has at least this many
    /// shards, before this shard holds a row: once in the shard's life
    /// (its storage remembers), not once per instance.
    async fn record_extent(&self, route: &str, shard: u16) -> Result<(), String> {
        let mut recorded = self.extent_recorded.lock().await;
        if *recorded {
            return Ok(());
        }
        let now = worker::Date::now().as_millis();
        if self
            .extent_failed_at
            .get()
            .is_some_and(|at| now.saturating_sub(at) < EXTENT_RETRY_MS)
        {
            return Err("the route's shard 0 did not answer a moment ago".into());
        }
        let storage = self.state.storage();
        if storage
            .get::<bool>(EXTENT_RECORDED_KEY)
            .await
            .ok()
            .flatten()
            == Some(true)
        {
            *recorded = true;
            return Ok(());
        }
        let extent = ShardQuery::new(sql::RECORD_EXTENT, &[Param::Integer(u64::from(shard) + 1)]);
        let told = IndexDb::Shard {
            env: &self.env,
            route,
            shard: 0,
        }
        .run(&extent)
        .await;
        if let Err(message) = told {
            self.extent_failed_at.set(Some(now));
            return Err(message);
        }
        storage
            .put(EXTENT_RECORDED_KEY, true)
            .await
            .map_err(|error| error.to_string())?;
        *recorded = true;
        Ok(())
    }

    fn ensure_schema(&self) -> Result<(), String> {
        if self.schema_ready.get() {
            return Ok(());
        }
        for statement in sql::shard_schema() {
            run_local(&self.state.storage(), &ShardQuery::new(statement, &[]))?;
        }
        self.schema_ready.set(true);
        Ok(())
    }

    /// Sets the alarm at the earliest wake a live row waits for, past the
    /// sweep's grace (the object's own alarm normally does the work), if
    /// that is sooner than the alarm set.
    async fn arm(&self) -> Result<(), String> {
        #[derive(serde::Deserialize)]
        struct Next {
            at: Option<u64>,
        }
        let next = run_local(&self.state.storage(), &ShardQuery::new(sql::NEXT_WAKE, &[]))?
            .read::<Next>()?
            .into_iter()
            .next()
            .and_then(|next| next.at);
        let Some(at) = next else {
            return Ok(());
        };
        let due = at.saturating_add(GRACE_MS);
        if self.alarm_at.get().is_some_and(|set| set <= due) {
            return Ok(());
        }
        self.set_alarm(due.max(Date::now().as_millis())).await
    }

    async fn set_alarm(&self, at: u64) -> Result<(), String> {
        // A date: `set_alarm` reads a bare number as an offset from now.
        let date = JsDate::new(&Number::from(at as f64));
        self.state
            .storage()
            .set_alarm(ScheduledTime::new(date))
            .await
            .map_err(|error| error.to_string())?;
        self.alarm_at.set(Some(at));
        Ok(())
    }

    #[cfg(feature = "test-hooks")]
    async fn test_hook(&self, line: &str) -> Result<Option<String>, String> {
        let storage = self.state.storage();
        let put = |failing: bool| storage.put(TEST_FAIL_KEY, failing);
        match line {
            TEST_FAIL => put(true).await.map_err(|error| error.to_string())?,
            TEST_ANSWER => put(false).await.map_err(|error| error.to_string())?,
            _ => {
                let failing = storage.get::<bool>(TEST_FAIL_KEY).await.ok().flatten();
                return match failing == Some(true) {
                    true => Err("the index shard is failing (test hook)".into()),
                    false => Ok(None),
                };
            }
        }
        Ok(Some("{}".into()))
    }
}
