//! The receipt index in shards (SPEC §15, v5): a route's rows live in
//! `INDEX_SHARDS` Durable Objects of their own (SQLite, the same table and
//! statements as [`super::sql`]), a receipt's row in the shard its object
//! hashes to, so that no one database takes every write of the deployment.
//! A receipt remembers its shard ([`crate::receipt::Indexed::shard`]), so a
//! change of `INDEX_SHARDS` never strands its row; listings visit every
//! shard of the route and merge their pages here.

use std::collections::BTreeMap;

use super::{Cursor, TableRow, PAGE_SIZE};

/// `INDEX_SHARDS`' default and bounds.
pub const DEFAULT_SHARDS: u16 = 16;
pub const MAX_SHARDS: u16 = 256;

/// The shard `object` (a key's object name: 64 hex digits of a hash) goes
/// to among `shards`.
pub fn shard_of(object: &str, shards: u16) -> u16 {
    let prefix = object.get(..8).unwrap_or(object);
    let hashed = u32::from_str_radix(prefix, 16).unwrap_or_else(|_| {
        // Not a hash (a test's name): any stable spread will do.
        object.bytes().fold(0u32, |hash, byte| {
            hash.wrapping_mul(31).wrapping_add(byte.into())
        })
    });
    (hashed % u32::from(shards.max(1))) as u16
}

/// The shard's Durable Object name: one per route and number.
pub fn shard_name(route: &str, shard: u16) -> String {
    format!("index:{shard}:{route}")
}

/// Where a row is written: its route's shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPlace {
    pub route: String,
    pub shard: u16,
}

/// One page of a listing from the pages of every shard (each newest
/// first, after the same cursor, at most [`PAGE_SIZE`]): the newest
/// [`PAGE_SIZE`] rows of all of them, an object shown once (its highest
/// version: during an upgrade the old table and a shard may both hold
/// it), and the cursor of the next page when any rows may remain.
pub fn merge_pages(pages: Vec<Vec<TableRow>>) -> (Vec<TableRow>, Option<Cursor>) {
    let more_behind = pages.iter().any(|page| page.len() as u32 >= PAGE_SIZE);
    let mut newest: BTreeMap<String, TableRow> = BTreeMap::new();
    for row in pages.into_iter().flatten() {
        match newest.get(&row.object) {
            Some(kept) if kept.version >= row.version => {}
            _ => {
                newest.insert(row.object.clone(), row);
            }
        }
    }
    let mut rows: Vec<TableRow> = newest.into_values().collect();
    rows.sort_by(|a, b| (b.updated_at, &b.object).cmp(&(a.updated_at, &a.object)));
    let cut = rows.len() > PAGE_SIZE as usize;
    rows.truncate(PAGE_SIZE as usize);
    let next = ((cut || more_behind) && !rows.is_empty()).then(|| {
        let last = rows.last().expect("not empty");
        Cursor {
            updated_at: last.updated_at,
            object: last.object.clone(),
        }
    });
    (rows, next)
}

/// Per route and state: how many rows, and the oldest acceptance.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct StateCount {
    pub route: String,
    pub state: String,
    pub count: f64,
    pub oldest: Option<f64>,
}

/// The summary of every shard (and the old table), summed.
pub fn merge_counts(parts: Vec<Vec<StateCount>>) -> Vec<StateCount> {
    let mut summed: BTreeMap<(String, String), StateCount> = BTreeMap::new();
    for count in parts.into_iter().flatten() {
        let entry = summed
            .entry((count.route.clone(), count.state.clone()))
            .or_insert(StateCount {
                count: 0.0,
                oldest: None,
                ..count.clone()
            });
        entry.count += count.count;
        entry.oldest = match (entry.oldest, count.oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    summed.into_values().collect()
}

#[cfg(test)]
mod tests;

/// A statement a shard runs for its route (the index's own SQL, from
/// [`super::sql`] and the operator's filters): the line its RPC takes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardQuery {
    /// The shard's number among its route's, so that a new shard can
    /// record the route's extent ([`super::sql::RECORD_EXTENT`]).
    #[serde(default)]
    pub shard: u16,
    pub sql: String,
    /// Text, integer or null, in order.
    pub params: Vec<serde_json::Value>,
}

impl ShardQuery {
    pub fn new(sql: &str, params: &[super::sql::Param<'_>]) -> ShardQuery {
        use super::sql::Param;
        ShardQuery {
            shard: 0,
            sql: sql.to_string(),
            params: params
                .iter()
                .map(|param| match *param {
                    Param::Text(text) => serde_json::Value::from(text),
                    Param::Integer(number) => serde_json::Value::from(number),
                    Param::Null => serde_json::Value::Null,
                })
                .collect(),
        }
    }
}

/// What a statement gave: its rows, column by name, and how many rows it
/// changed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardRows {
    pub rows: Vec<serde_json::Map<String, serde_json::Value>>,
    pub changes: u64,
}

impl ShardRows {
    /// The rows as `T`s.
    pub fn read<T: serde::de::DeserializeOwned>(self) -> Result<Vec<T>, String> {
        self.rows
            .into_iter()
            .map(|row| serde_json::from_value(serde_json::Value::Object(row)))
            .collect::<Result<_, _>>()
            .map_err(|error| error.to_string())
    }
}
