//! The receipt index in D1 (adapter; SPEC §7): the writes the Durable
//! Object makes on the transitions `idemgate_core::index` names, and the
//! operator's listing. Without the `IDEMGATE_INDEX` binding nothing is
//! written, and a listing is 500 `misconfigured`.

use serde::Deserialize;
use worker::wasm_bindgen::JsValue;
use worker::{D1Database, Env};

use idemgate_core::index::{list_query, Cursor, IndexRow, IndexUpdate, DELETE, PAGE_SIZE, UPSERT};
use idemgate_core::operator::Listing;
use idemgate_core::problem::Problem;

pub const INDEX_BINDING: &str = "IDEMGATE_INDEX";

fn database(env: &Env) -> Option<D1Database> {
    env.d1(INDEX_BINDING).ok()
}

/// D1 takes numbers, not BigInts: every integer here is far below 2^53.
fn number(value: u64) -> JsValue {
    JsValue::from_f64(value as f64)
}

fn text(value: Option<&str>) -> JsValue {
    value.map_or(JsValue::NULL, JsValue::from_str)
}

/// Applies one update; `Ok` when there is no index to write.
pub async fn write(env: &Env, update: IndexUpdate) -> Result<(), String> {
    let Some(database) = database(env) else {
        return Ok(());
    };
    let statement = match &update {
        IndexUpdate::Upsert(row) => database.prepare(UPSERT).bind(&[
            JsValue::from_str(&row.object),
            JsValue::from_str(&row.route),
            JsValue::from_str(&row.scope),
            JsValue::from_str(&row.key),
            text(row.path.as_deref()),
            text(row.tenant_sha256.as_deref()),
            JsValue::from_str(&row.receipt_id),
            JsValue::from_str(&row.state),
            number(row.attempts),
            row.last_status
                .map_or(JsValue::NULL, |status| number(status.into())),
            number(row.updated_at),
        ]),
        IndexUpdate::Delete { object } => {
            database.prepare(DELETE).bind(&[JsValue::from_str(object)])
        }
    };
    statement
        .map_err(|error| error.to_string())?
        .run()
        .await
        .map(|_| ())
        .map_err(|error| error.to_string())
}

/// A row as D1 returns it (integers as numbers).
#[derive(Deserialize)]
struct Row {
    object: String,
    route: String,
    scope: String,
    key: String,
    path: Option<String>,
    tenant_sha256: Option<String>,
    receipt_id: String,
    state: String,
    attempts: f64,
    last_status: Option<f64>,
    updated_at: f64,
}

/// One page of a listing, newest first, and the cursor of the next.
pub async fn list(
    env: &Env,
    listing: &Listing,
) -> Result<(Vec<IndexRow>, Option<Cursor>), Problem> {
    let database = database(env).ok_or_else(|| Problem::Misconfigured {
        variable: INDEX_BINDING.into(),
        reason: "the receipt index (a D1 binding) is required to list receipts by state".into(),
    })?;
    let unavailable = |error: worker::Error| Problem::StorageUnavailable {
        message: format!("the receipt index did not answer: {error}"),
    };
    let mut values = vec![
        JsValue::from_str(&listing.route),
        JsValue::from_str(&listing.state),
    ];
    if let Some(cursor) = &listing.cursor {
        values.push(number(cursor.updated_at));
        values.push(JsValue::from_str(&cursor.object));
    }
    let rows: Vec<Row> = database
        .prepare(list_query(listing.cursor.as_ref()))
        .bind(&values)
        .map_err(unavailable)?
        .all()
        .await
        .map_err(unavailable)?
        .results()
        .map_err(unavailable)?;
    let rows: Vec<IndexRow> = rows
        .into_iter()
        .map(|row| IndexRow {
            object: row.object,
            route: row.route,
            scope: row.scope,
            key: row.key,
            path: row.path,
            tenant_sha256: row.tenant_sha256,
            receipt_id: row.receipt_id,
            state: row.state,
            attempts: row.attempts as u64,
            last_status: row.last_status.map(|status| status as u16),
            updated_at: row.updated_at as u64,
        })
        .collect();
    let next = (rows.len() as u32 == PAGE_SIZE).then(|| {
        let last = rows.last().expect("a full page");
        Cursor {
            updated_at: last.updated_at,
            object: last.object.clone(),
        }
    });
    Ok((rows, next))
}
