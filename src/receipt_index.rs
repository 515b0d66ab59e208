//! The receipt index in D1 (adapter; SPEC §7, §2b): the writes the Durable
//! Object makes on the transitions `idemgate_core::index` names, the
//! operator's listing and summary, and the sweep's query. Its statements
//! are `idemgate_core::index::sql`'s. A missing table is created on first
//! use (the migrations' own statements, all idempotent), so a deployment
//! that forgot `wrangler d1 migrations apply` still has its index.

use serde::Deserialize;
use worker::wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Env};

use idemgate_core::index::sql;
use idemgate_core::index::{
    Cursor, IndexUpdate, IndexWrite, TableRow, BINDING as INDEX_BINDING, PAGE_SIZE,
};
use idemgate_core::operator::Listing;
use idemgate_core::problem::Problem;

/// What to tell an operator whose index is missing.
const REMEDY: &str = "bind a D1 database as IDEMGATE_INDEX (wrangler.toml [[d1_databases]]) and run `wrangler d1 migrations apply IDEMGATE_INDEX`";

pub fn database(env: &Env) -> Option<D1Database> {
    env.d1(INDEX_BINDING).ok()
}

/// D1 takes numbers, not BigInts: every integer here is far below 2^53.
fn number(value: u64) -> JsValue {
    JsValue::from_f64(value as f64)
}

fn bound_value(param: sql::Param) -> JsValue {
    match param {
        sql::Param::Text(text) => JsValue::from_str(text),
        sql::Param::Integer(value) => number(value),
        sql::Param::Null => JsValue::NULL,
    }
}

fn message(error: worker::Error) -> String {
    error.to_string()
}

/// Runs the schema's statements (idempotent), creating the index.
pub async fn create_schema(database: &D1Database) -> Result<(), String> {
    let statements = sql::schema()
        .into_iter()
        .map(|statement| database.prepare(statement))
        .collect();
    database
        .batch(statements)
        .await
        .map(|_| ())
        .map_err(message)
}

/// Runs `statement`, creating the schema first if its table is missing.
async fn run_creating(
    database: &D1Database,
    statement: impl Fn() -> Result<D1PreparedStatement, String>,
) -> Result<worker::D1Result, String> {
    match statement()?.all().await {
        Err(error) if sql::is_missing_table(&error.to_string()) => {
            create_schema(database).await?;
            statement()?.all().await.map_err(message)
        }
        other => other.map_err(message),
    }
}

/// Applies one update; an error when there is no index to write (an async
/// delivery is never acknowledged without its row). A write that changed
/// nothing (D1's `changes` is 0: the row holds the same or a higher
/// version) says so, with the row's version.
pub async fn write(env: &Env, update: IndexUpdate) -> Result<IndexWrite, String> {
    let database = database(env).ok_or(REMEDY)?;
    let (query, params) = sql::write_of(&update);
    let values: Vec<JsValue> = params.into_iter().map(bound_value).collect();
    let statement = || database.prepare(query).bind(&values).map_err(message);
    let result = run_creating(&database, statement).await?;
    let changes = result.meta().ok().flatten().and_then(|meta| meta.changes);
    if changes != Some(0) {
        return Ok(IndexWrite::Landed);
    }
    #[derive(Deserialize)]
    struct Version {
        version: u64,
    }
    let row: Option<Version> = database
        .prepare(sql::VERSION_OF)
        .bind(&[JsValue::from_str(update.object())])
        .map_err(message)?
        .first(None)
        .await
        .map_err(message)?;
    match row {
        Some(row) => Ok(IndexWrite::Outdated {
            row_version: row.version,
        }),
        None => Err("the index wrote nothing and holds no row".into()),
    }
}

fn unavailable(message: String) -> Problem {
    Problem::IndexUnavailable {
        message: format!("{message}; {REMEDY}"),
    }
}

fn bound(env: &Env) -> Result<D1Database, Problem> {
    database(env).ok_or_else(|| Problem::Misconfigured {
        variable: INDEX_BINDING.into(),
        reason: format!("the receipt index is required here: {REMEDY}"),
    })
}

/// One page of a listing, newest first, and the cursor of the next.
pub async fn list(
    env: &Env,
    listing: &Listing,
) -> Result<(Vec<TableRow>, Option<Cursor>), Problem> {
    let database = bound(env)?;
    let mut values = vec![
        JsValue::from_str(&listing.route),
        JsValue::from_str(&listing.state),
    ];
    if let Some(cursor) = &listing.cursor {
        values.push(number(cursor.updated_at));
        values.push(JsValue::from_str(&cursor.object));
    }
    let query = sql::list(listing.cursor.as_ref());
    let result = run_creating(&database, || {
        database.prepare(&query).bind(&values).map_err(message)
    })
    .await
    .map_err(unavailable)?;
    let rows: Vec<TableRow> = result
        .results()
        .map_err(|error| unavailable(message(error)))?;
    let next = (rows.len() as u32 == PAGE_SIZE).then(|| {
        let last = rows.last().expect("a full page");
        Cursor {
            updated_at: last.updated_at,
            object: last.object.clone(),
        }
    });
    Ok((rows, next))
}

/// Objects with work overdue before `before`, oldest first, at most `limit`.
/// A row the sweep found overdue.
#[derive(Deserialize)]
pub struct Due {
    pub object: String,
    pub route: String,
    /// When its object last wrote the row (the sweep's back-off never
    /// changes it).
    pub updated_at: u64,
    pub version: u64,
}

pub async fn overdue(env: &Env, before: u64, limit: u32) -> Result<Vec<Due>, String> {
    let database = database(env).ok_or(REMEDY)?;
    let result = run_creating(&database, || {
        database
            .prepare(sql::OVERDUE)
            .bind(&[number(before), number(limit.into())])
            .map_err(message)
    })
    .await?;
    result.results().map_err(message)
}

/// Moves each failed row's wake to its time (one batch), unless its
/// object wrote the row since the sweep read it.
pub async fn back_off(env: &Env, rows: &[(&Due, u64)]) -> Result<(), String> {
    if rows.is_empty() {
        return Ok(());
    }
    let database = database(env).ok_or(REMEDY)?;
    let statements = rows
        .iter()
        .map(|(due, at)| {
            database.prepare(sql::BACK_OFF).bind(&[
                JsValue::from_str(&due.object),
                number(*at),
                number(due.version),
            ])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(message)?;
    database
        .batch(statements)
        .await
        .map(|_| ())
        .map_err(message)
}

/// Drops tombstones written before `before`.
pub async fn forget_tombstones(env: &Env, before: u64) -> Result<(), String> {
    let database = database(env).ok_or(REMEDY)?;
    run_creating(&database, || {
        database
            .prepare(sql::FORGET_TOMBSTONES)
            .bind(&[number(before)])
            .map_err(message)
    })
    .await
    .map(|_| ())
}

/// Per route and state: how many receipts, and the oldest acceptance.
#[derive(Debug, Deserialize)]
pub struct StateCount {
    pub route: String,
    pub state: String,
    pub count: f64,
    pub oldest: Option<f64>,
}

pub async fn summary(env: &Env) -> Result<Vec<StateCount>, Problem> {
    let database = bound(env)?;
    let result = run_creating(&database, || Ok(database.prepare(sql::SUMMARY)))
        .await
        .map_err(unavailable)?;
    result
        .results()
        .map_err(|error| unavailable(message(error)))
}

/// When this version first ran against the index (recorded the first
/// time it is asked), read once per isolate; `None` when there is no index
/// or it did not answer.
pub async fn upgrade_since(env: &Env) -> Option<u64> {
    if let Some(known) = crate::isolate::with(|isolate| isolate.upgrade_since.get()) {
        return Some(known);
    }
    let database = database(env)?;
    let now = number(worker::Date::now().as_millis());
    let name = JsValue::from_str(idemgate_core::upgrade::SINCE);
    run_creating(&database, || {
        database
            .prepare(sql::META_FIRST)
            .bind(&[name.clone(), now.clone()])
            .map_err(message)
    })
    .await
    .ok()?;
    let read = run_creating(&database, || {
        database
            .prepare(sql::META_READ)
            .bind(std::slice::from_ref(&name))
            .map_err(message)
    })
    .await
    .ok()?;
    #[derive(Deserialize)]
    struct Value {
        value: f64,
    }
    let since = read.results::<Value>().ok()?.first()?.value as u64;
    crate::isolate::with(|isolate| isolate.upgrade_since.set(Some(since)));
    Some(since)
}

/// What health says of the index: `ok`, or what is wrong and what to run.
pub async fn health(env: &Env) -> Result<(), String> {
    let database = database(env).ok_or(REMEDY)?;
    run_creating(&database, || {
        Ok(database.prepare("SELECT 1 FROM receipt_index LIMIT 1"))
    })
    .await
    .map(|_| ())
}

/// One page of a re-drive's filter (route, state, acceptance time), newest
/// first, and the cursor of the next (SPEC §7, v4).
pub async fn list_filtered(
    env: &Env,
    filter: &idemgate_core::operator::redrive_filter::BulkFilter,
) -> Result<(Vec<TableRow>, Option<Cursor>), Problem> {
    use idemgate_core::operator::redrive_filter::{list_sql, params};
    let database = bound(env)?;
    let values: Vec<JsValue> = params(filter).into_iter().map(bound_value).collect();
    let query = list_sql(filter);
    let result = run_creating(&database, || {
        database.prepare(&query).bind(&values).map_err(message)
    })
    .await
    .map_err(unavailable)?;
    let rows: Vec<TableRow> = result
        .results()
        .map_err(|error| unavailable(message(error)))?;
    let next = (rows.len() as u32 == PAGE_SIZE).then(|| {
        let last = rows.last().expect("a full page");
        Cursor {
            updated_at: last.updated_at,
            object: last.object.clone(),
        }
    });
    Ok((rows, next))
}

/// How many rows a re-drive's filter names (a dry run's count).
pub async fn count_filtered(
    env: &Env,
    filter: &idemgate_core::operator::redrive_filter::BulkFilter,
) -> Result<u64, Problem> {
    use idemgate_core::operator::redrive_filter::{params, COUNT_SQL};
    let database = bound(env)?;
    let values: Vec<JsValue> = params(filter)
        .into_iter()
        .take(4)
        .map(bound_value)
        .collect();
    let result = run_creating(&database, || {
        database.prepare(COUNT_SQL).bind(&values).map_err(message)
    })
    .await
    .map_err(unavailable)?;
    #[derive(Deserialize)]
    struct Count {
        count: f64,
    }
    let rows: Vec<Count> = result
        .results()
        .map_err(|error| unavailable(message(error)))?;
    Ok(rows.first().map_or(0, |row| row.count as u64))
}
