//! Where the receipt index's statements run: a route's shard (SPEC §15,
//! v5; over RPC, or the shard's own SQLite when it sweeps itself), or the
//! D1 database a v4 deployment kept its rows in, while they move out. The
//! same statements ([`idemgate_core::index::sql`]) run in each.

use worker::wasm_bindgen::JsValue;
use worker::{D1Database, Env, Storage};

use idemgate_core::index::shard::{shard_name, ShardQuery, ShardRows};

use crate::stats;

pub use idemgate_core::index::SHARD_BINDING as INDEX_SHARD_BINDING;

pub enum IndexDb<'a> {
    /// A route's shard, over RPC.
    Shard {
        env: &'a Env,
        route: &'a str,
        shard: u16,
    },
    /// The shard's own SQLite.
    Local(&'a Storage),
    /// The v4 D1 index.
    Legacy(&'a D1Database),
}

impl IndexDb<'_> {
    pub async fn run(&self, query: &ShardQuery) -> Result<ShardRows, String> {
        match self {
            IndexDb::Shard { env, route, shard } => {
                stats::record(|stats| stats.object_requests += 1);
                let query = ShardQuery {
                    shard: *shard,
                    ..query.clone()
                };
                let line = serde_json::to_string(&query).expect("a query serializes");
                let answer = crate::object_rpc::call(
                    env,
                    INDEX_SHARD_BINDING,
                    &shard_name(route, *shard),
                    Some(route),
                    &line,
                    "index shard",
                )
                .await?;
                serde_json::from_str(&answer).map_err(|error| error.to_string())
            }
            IndexDb::Local(storage) => run_local(storage, query),
            IndexDb::Legacy(database) => {
                let values: Vec<JsValue> = query.params.iter().map(js_value).collect();
                let result = database
                    .prepare(&query.sql)
                    .bind(&values)
                    .map_err(|error| error.to_string())?
                    .all()
                    .await
                    .map_err(|error| error.to_string())?;
                let changes = result
                    .meta()
                    .ok()
                    .flatten()
                    .and_then(|meta| meta.changes)
                    .unwrap_or(0) as u64;
                let rows = result.results().map_err(|error| error.to_string())?;
                Ok(ShardRows { rows, changes })
            }
        }
    }
}

/// Runs `query` in a shard's SQLite (synchronous, in the object's turn).
pub fn run_local(storage: &Storage, query: &ShardQuery) -> Result<ShardRows, String> {
    let values: Vec<JsValue> = query.params.iter().map(js_value).collect();
    let cursor = storage
        .sql()
        .exec_raw(&query.sql, Some(values))
        .map_err(|error| error.to_string())?;
    let rows = cursor
        .to_array::<serde_json::Map<String, serde_json::Value>>()
        .map_err(|error| error.to_string())?;
    Ok(ShardRows {
        rows,
        changes: cursor.rows_written() as u64,
    })
}

/// A parameter as SQLite takes it: text, a number (every integer here is
/// far below 2^53), or null.
fn js_value(value: &serde_json::Value) -> JsValue {
    match value {
        serde_json::Value::String(text) => JsValue::from_str(text),
        serde_json::Value::Number(number) => JsValue::from_f64(number.as_f64().unwrap_or(0.0)),
        _ => JsValue::NULL,
    }
}
