//! The receipt index as the worker reaches it (SPEC §7, §2b, §15 v5): a
//! route's rows in its `INDEX_SHARDS` shards ([`crate::index_shard`]); the
//! writes a key's object makes on the transitions
//! `idemgate_core::index` names, each to its shard; the operator's
//! listings, counts and summary, asked of every shard of the route (and of
//! a v4 deployment's D1 table while its rows move out) and merged
//! ([`idemgate_core::index::shard`]). Nothing here is shared by the
//! deployment's traffic: a delivery's write goes to one shard of its route.

use futures::future::join_all;
use serde::Deserialize;
use worker::{D1Database, Env};

use idemgate_core::index::shard::{merge_counts, merge_pages, IndexPlace, ShardQuery, StateCount};
use idemgate_core::index::sql::{self, Param};
use idemgate_core::index::{Cursor, IndexUpdate, IndexWrite, TableRow, BINDING as LEGACY_BINDING};
use idemgate_core::operator::redrive_filter::{self, BulkFilter};
use idemgate_core::operator::Listing;
use idemgate_core::problem::Problem;

use crate::env::config_from_env;
use crate::index_db::{IndexDb, INDEX_SHARD_BINDING};

/// What to tell an operator whose index is missing.
const REMEDY: &str = "bind the IndexShard Durable Object class as INDEX_SHARD (wrangler.toml [[durable_objects.bindings]] and its migration)";

/// A v4 deployment's D1 index, while it is bound.
pub fn legacy_database(env: &Env) -> Option<D1Database> {
    env.d1(LEGACY_BINDING).ok()
}

/// Whether the index's shards are bound.
pub fn has_shards(env: &Env) -> bool {
    env.durable_object(INDEX_SHARD_BINDING).is_ok()
}

fn unavailable(message: String) -> Problem {
    Problem::IndexUnavailable {
        message: format!("{message}; {REMEDY}"),
    }
}

fn bound(env: &Env) -> Result<(), Problem> {
    match has_shards(env) {
        true => Ok(()),
        false => Err(Problem::Misconfigured {
            variable: INDEX_SHARD_BINDING.into(),
            reason: format!("the receipt index is required here: {REMEDY}"),
        }),
    }
}

/// Applies one update in its shard. A write that changed nothing (the
/// row holds the same or a higher version) says so, with the row's
/// version.
pub async fn write(
    env: &Env,
    update: IndexUpdate,
    place: &IndexPlace,
) -> Result<IndexWrite, String> {
    if place.route.is_empty() {
        return Err("no route names the row's shard".into());
    }
    let db = IndexDb::Shard {
        env,
        route: &place.route,
        shard: place.shard,
    };
    write_in(&db, update).await
}

/// The end-to-end tests' hook: a write as a v4 deployment made it, into
/// D1 (the upgrade's test).
#[cfg(feature = "test-hooks")]
pub async fn write_legacy(env: &Env, update: IndexUpdate) -> Result<IndexWrite, String> {
    let database = legacy_database(env).ok_or("no D1 index is bound")?;
    write_in(&IndexDb::Legacy(&database), update).await
}

async fn write_in(db: &IndexDb<'_>, update: IndexUpdate) -> Result<IndexWrite, String> {
    let (query, params) = sql::write_of(&update);
    if db.run(&ShardQuery::new(query, &params)).await?.changes > 0 {
        return Ok(IndexWrite::Landed);
    }
    #[derive(Deserialize)]
    struct Version {
        version: u64,
    }
    let rows = db
        .run(&ShardQuery::new(
            sql::VERSION_OF,
            &[Param::Text(update.object())],
        ))
        .await?
        .read::<Version>()?;
    match rows.first() {
        Some(row) => Ok(IndexWrite::Outdated {
            row_version: row.version,
        }),
        None => Err("the index wrote nothing and holds no row".into()),
    }
}

/// The shards that may hold `route`'s rows: as many as `INDEX_SHARDS`
/// says, or as its shard 0 recorded it ever had, whichever is more.
async fn extent(env: &Env, route: &str) -> Result<u16, String> {
    let configured = config_from_env(env)
        .map(|config| config.index_shards)
        .unwrap_or(idemgate_core::index::shard::DEFAULT_SHARDS);
    #[derive(Deserialize)]
    struct Extent {
        shards: u16,
    }
    let first = IndexDb::Shard {
        env,
        route,
        shard: 0,
    };
    let recorded = first
        .run(&ShardQuery::new(sql::READ_EXTENT, &[]))
        .await?
        .read::<Extent>()?
        .first()
        .map_or(0, |extent| extent.shards);
    Ok(configured.max(recorded))
}

/// Runs `query` in every shard of `route` (and the old D1 table, while it
/// is bound): each one's rows as `T`s.
async fn ask_all<T: serde::de::DeserializeOwned>(
    env: &Env,
    route: &str,
    query: &ShardQuery,
) -> Result<Vec<Vec<T>>, Problem> {
    bound(env)?;
    let shards = extent(env, route).await.map_err(unavailable)?;
    let legacy = legacy_database(env);
    let mut places: Vec<IndexDb> = (0..shards)
        .map(|shard| IndexDb::Shard { env, route, shard })
        .collect();
    if let Some(database) = &legacy {
        places.push(IndexDb::Legacy(database));
    }
    let answers = join_all(places.iter().map(|db| async move {
        match db.run(query).await {
            Ok(rows) => rows.read::<T>(),
            // A deployment that bound D1 but never made its table.
            Err(message) if matches!(db, IndexDb::Legacy(_)) && sql::is_missing_table(&message) => {
                Ok(Vec::new())
            }
            Err(message) => Err(message),
        }
    }))
    .await;
    answers
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(unavailable)
}

/// One page of a listing, newest first, and the cursor of the next.
pub async fn list(
    env: &Env,
    listing: &Listing,
) -> Result<(Vec<TableRow>, Option<Cursor>), Problem> {
    let mut params = vec![Param::Text(&listing.route), Param::Text(&listing.state)];
    if let Some(cursor) = &listing.cursor {
        params.push(Param::Integer(cursor.updated_at));
        params.push(Param::Text(&cursor.object));
    }
    let query = ShardQuery::new(&sql::list(listing.cursor.as_ref()), &params);
    let pages = ask_all(env, &listing.route, &query).await?;
    Ok(merge_pages(pages))
}

/// Per route and state: how many receipts, and the oldest acceptance,
/// for every route of the configuration.
pub async fn summary(env: &Env) -> Result<Vec<StateCount>, Problem> {
    let config = config_from_env(env)?;
    let query = ShardQuery::new(sql::SUMMARY, &[]);
    let mut parts = Vec::new();
    for route in &config.routes {
        let counts: Vec<Vec<StateCount>> = ask_all(env, &route.name, &query).await?;
        // The old table holds every route's rows: only this route's count.
        parts.extend(counts.into_iter().map(|counts| {
            counts
                .into_iter()
                .filter(|count| count.route == route.name)
                .collect()
        }));
    }
    Ok(merge_counts(parts))
}

/// What health says of the index: whether its shards are bound, and how
/// many rows a v4 deployment's D1 table still holds (none: the binding
/// can go).
pub async fn health(env: &Env) -> (Result<(), String>, Option<Result<u64, String>>) {
    let shards = match has_shards(env) {
        true => Ok(()),
        false => Err(format!("the receipt index is missing: {REMEDY}")),
    };
    let legacy = match legacy_database(env) {
        None => None,
        Some(database) => {
            #[derive(Deserialize)]
            struct Count {
                count: u64,
            }
            let counted = IndexDb::Legacy(&database)
                .run(&ShardQuery::new(sql::LEGACY_COUNT, &[]))
                .await
                .and_then(|rows| rows.read::<Count>());
            Some(match counted {
                Ok(rows) => Ok(rows.first().map_or(0, |row| row.count)),
                // A deployment that bound D1 but never made the table.
                Err(message) if sql::is_missing_table(&message) => Ok(0),
                Err(message) => Err(message),
            })
        }
    };
    (shards, legacy)
}

/// When this version first ran against the D1 index (the third version's
/// upgrade, SPEC §3 v3), read once per isolate; `None` when there is no
/// D1 index or it did not answer.
pub async fn upgrade_since(env: &Env) -> Option<u64> {
    if let Some(known) = crate::isolate::with(|isolate| isolate.upgrade_since.get()) {
        return Some(known);
    }
    let database = legacy_database(env)?;
    let db = IndexDb::Legacy(&database);
    let now = worker::Date::now().as_millis();
    let name = idemgate_core::upgrade::SINCE;
    db.run(&ShardQuery::new(
        sql::META_FIRST,
        &[Param::Text(name), Param::Integer(now)],
    ))
    .await
    .ok()?;
    #[derive(Deserialize)]
    struct Value {
        value: f64,
    }
    let read = db
        .run(&ShardQuery::new(sql::META_READ, &[Param::Text(name)]))
        .await
        .ok()?
        .read::<Value>()
        .ok()?;
    let since = read.first()?.value as u64;
    crate::isolate::with(|isolate| isolate.upgrade_since.set(Some(since)));
    Some(since)
}

/// One page of a re-drive's filter (route, state, acceptance time), newest
/// first, and the cursor of the next (SPEC §7, v4).
pub async fn list_filtered(
    env: &Env,
    filter: &BulkFilter,
) -> Result<(Vec<TableRow>, Option<Cursor>), Problem> {
    let query = ShardQuery::new(
        &redrive_filter::list_sql(filter),
        &redrive_filter::params(filter),
    );
    let pages = ask_all(env, &filter.listing.route, &query).await?;
    Ok(merge_pages(pages))
}

/// How many rows a re-drive's filter names (a dry run's count).
pub async fn count_filtered(env: &Env, filter: &BulkFilter) -> Result<u64, Problem> {
    #[derive(Deserialize)]
    struct Count {
        count: f64,
    }
    let params: Vec<Param> = redrive_filter::params(filter).into_iter().take(4).collect();
    let query = ShardQuery::new(redrive_filter::COUNT_SQL, &params);
    let counts: Vec<Vec<Count>> = ask_all(env, &filter.listing.route, &query).await?;
    Ok(counts
        .iter()
        .flatten()
        .map(|count| count.count as u64)
        .sum())
}
