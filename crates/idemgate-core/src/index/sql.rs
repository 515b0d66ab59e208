//! The index's SQL: its schema (the repository's migrations, which the
//! worker also runs on first use) and every query the adapter sends. Each
//! query's parameters are listed beside it, in order.

use super::{Cursor, IndexUpdate, PAGE_SIZE};

/// The schema's statements, one each, in order: the repository's
/// migrations (`wrangler d1 migrations apply` runs them) without their
/// comments, which the worker runs when it finds no table, so a
/// deployment that forgot the command still has its index. Every one is
/// idempotent (`IF NOT EXISTS`, `INSERT OR IGNORE`); a test checks they
/// are the migrations' statements.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS receipts ( object TEXT PRIMARY KEY, route TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, path TEXT, tenant_sha256 TEXT, receipt_id TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, updated_at INTEGER NOT NULL )",
    "CREATE INDEX IF NOT EXISTS receipts_by_state ON receipts (route, state, updated_at DESC, object DESC)",
    "CREATE TABLE IF NOT EXISTS receipt_index ( object TEXT PRIMARY KEY, route TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, path TEXT, tenant_sha256 TEXT, receipt_id TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, next_wake_at INTEGER, accepted_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, version INTEGER NOT NULL )",
    "CREATE INDEX IF NOT EXISTS receipt_index_by_state ON receipt_index (route, state, updated_at DESC, object DESC)",
    "CREATE INDEX IF NOT EXISTS receipt_index_by_wake ON receipt_index (next_wake_at) WHERE next_wake_at IS NOT NULL",
    "INSERT OR IGNORE INTO receipt_index (object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, next_wake_at, accepted_at, updated_at, version) SELECT object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, updated_at, updated_at, updated_at, 0 FROM receipts",
    "CREATE TABLE IF NOT EXISTS idemgate_meta ( name TEXT PRIMARY KEY, value INTEGER NOT NULL )",
];

/// A shard's schema (SPEC §15, v5): the index's table and its two
/// indexes, as D1 has them; a shard never held the first version's table
/// or the upgrade's record.
pub fn shard_schema() -> [&'static str; 4] {
    [SCHEMA[2], SCHEMA[3], SCHEMA[4], SHARD_EXTENT]
}

/// Shard 0 of a route records how many shards the route has had at most
/// (each shard says so when it is made), so that listings visit every
/// shard that may hold a row after `INDEX_SHARDS` is lowered.
pub const SHARD_EXTENT: &str = "CREATE TABLE IF NOT EXISTS shard_extent \
     (id INTEGER PRIMARY KEY CHECK (id = 1), shards INTEGER NOT NULL)";

/// A shard's word that the route has at least that many. Parameter: the
/// count.
pub const RECORD_EXTENT: &str = "INSERT INTO shard_extent (id, shards) VALUES (1, ?1) \
     ON CONFLICT (id) DO UPDATE SET shards = MAX(shards, excluded.shards)";

/// How many shards the route has had at most.
pub const READ_EXTENT: &str = "SELECT shards FROM shard_extent WHERE id = 1";

pub fn schema() -> Vec<String> {
    SCHEMA
        .iter()
        .map(|statement| statement.to_string())
        .collect()
}

/// Whether a D1 error says the index's table is missing.
pub fn is_missing_table(message: &str) -> bool {
    message.contains("no such table")
}

/// Writes a row unless a write of a higher (or equal) version landed.
/// Parameters: the row's fields in the column order below.
pub const UPSERT: &str = "INSERT INTO receipt_index \
     (object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, \
     next_wake_at, accepted_at, updated_at, version) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) \
     ON CONFLICT (object) DO UPDATE SET route = excluded.route, scope = excluded.scope, \
     key = excluded.key, path = excluded.path, tenant_sha256 = excluded.tenant_sha256, \
     receipt_id = excluded.receipt_id, state = excluded.state, attempts = excluded.attempts, \
     last_status = excluded.last_status, next_wake_at = excluded.next_wake_at, \
     accepted_at = excluded.accepted_at, updated_at = excluded.updated_at, \
     version = excluded.version \
     WHERE excluded.version > receipt_index.version";

/// A tombstone: the row says `gone` and is never woken, unless a higher
/// version landed. Parameters: object, version, time.
pub const REMOVE: &str = "INSERT INTO receipt_index \
     (object, route, scope, key, receipt_id, state, attempts, next_wake_at, accepted_at, updated_at, version) \
     VALUES (?1, '', '', '', '', 'gone', 0, NULL, ?3, ?3, ?2) \
     ON CONFLICT (object) DO UPDATE SET state = 'gone', next_wake_at = NULL, \
     updated_at = excluded.updated_at, version = excluded.version \
     WHERE excluded.version > receipt_index.version";

/// A parameter's value as a statement binds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param<'a> {
    Text(&'a str),
    Integer(u64),
    Null,
}

/// The statement that applies `update`, and its parameters in order: the
/// one place a row's fields meet the columns' order.
pub fn write_of(update: &IndexUpdate) -> (&'static str, Vec<Param<'_>>) {
    match update {
        IndexUpdate::Upsert(row) => (
            UPSERT,
            vec![
                Param::Text(&row.identity.object),
                Param::Text(&row.identity.route),
                Param::Text(&row.identity.scope),
                Param::Text(row.identity.key.as_str()),
                row.identity
                    .path
                    .as_deref()
                    .map_or(Param::Null, Param::Text),
                (row.identity.tenant_sha256.as_deref()).map_or(Param::Null, Param::Text),
                Param::Text(&row.identity.receipt_id),
                Param::Text(&row.state),
                Param::Integer(row.attempts),
                (row.last_status.map(u64::from)).map_or(Param::Null, Param::Integer),
                row.next_wake_at.map_or(Param::Null, Param::Integer),
                Param::Integer(row.accepted_at),
                Param::Integer(row.updated_at),
                Param::Integer(row.version),
            ],
        ),
        IndexUpdate::Remove {
            object,
            version,
            at,
        } => (
            REMOVE,
            vec![
                Param::Text(object),
                Param::Integer(*version),
                Param::Integer(*at),
            ],
        ),
    }
}

/// SQLite, D1's engine, runs the same statements in the native tests.
#[cfg(test)]
impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value, ValueRef};
        Ok(match *self {
            Param::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Param::Integer(number) => ToSqlOutput::Owned(Value::Integer(number as i64)),
            Param::Null => ToSqlOutput::Owned(Value::Null),
        })
    }
}

/// The sweep backs off a row whose wake failed, unless the object wrote
/// it since (its version moved on). Parameters: object, the new wake
/// time, the version the sweep read.
pub const BACK_OFF: &str = "UPDATE receipt_index SET next_wake_at = ?2 \
     WHERE object = ?1 AND version = ?3 AND next_wake_at IS NOT NULL";

/// The version an object's row holds (a write that changed nothing lost
/// to it). Parameter: the object.
pub const VERSION_OF: &str = "SELECT version FROM receipt_index WHERE object = ?1";

/// The listing: rows of a route in a state, newest first, after a
/// cursor. Parameters: route, state, then the cursor's two.
pub fn list(cursor: Option<&Cursor>) -> String {
    let after = if cursor.is_some() {
        " AND (updated_at < ?3 OR (updated_at = ?3 AND object < ?4))"
    } else {
        ""
    };
    format!(
        "SELECT {COLUMNS} FROM receipt_index WHERE route = ?1 AND state = ?2{after} \
         ORDER BY updated_at DESC, object DESC LIMIT {PAGE_SIZE}"
    )
}

/// Every column of a row, in [`super::IndexRow`]'s order.
pub const COLUMNS: &str = "object, route, scope, key, path, tenant_sha256, receipt_id, state, \
     attempts, last_status, next_wake_at, accepted_at, updated_at, version";

/// Rows whose object has work overdue, oldest first: what the sweep wakes.
/// Parameters: the time before which work is overdue, the page's size.
pub const OVERDUE: &str = "SELECT object, route, updated_at, version FROM receipt_index \
     WHERE next_wake_at IS NOT NULL AND next_wake_at <= ?1 AND state != 'gone' \
     ORDER BY next_wake_at LIMIT ?2";

/// Tombstones old enough that no write still in flight can be older.
/// Parameter: the time before which they go.
pub const FORGET_TOMBSTONES: &str =
    "DELETE FROM receipt_index WHERE state = 'gone' AND updated_at < ?1";

/// The earliest wake a live row waits for: when a shard's alarm is due
/// (plus the sweep's grace).
pub const NEXT_WAKE: &str = "SELECT MIN(next_wake_at) AS at FROM receipt_index \
     WHERE next_wake_at IS NOT NULL AND state != 'gone'";

/// A row whose object was woken and did not write it again holds no
/// receipt's row here (the object's row is in another shard, or it has
/// none): it becomes a tombstone, unless the object wrote it since.
/// Parameters: object, the version the sweep read.
pub const TOMBSTONE_UNCHANGED: &str = "UPDATE receipt_index SET state = 'gone', \
     next_wake_at = NULL WHERE object = ?1 AND version = ?2 AND state != 'gone'";

/// The old table's rows still to move into the shards (an upgrade from
/// the D1 index, SPEC §15 v5), the most overdue first; a row whose wake
/// failed was backed off behind the others. Parameter: the page's size.
pub const LEGACY_PAGE: &str = "SELECT object, route, updated_at, version FROM receipt_index \
     WHERE state != 'gone' ORDER BY COALESCE(next_wake_at, 0) LIMIT ?1";

/// How many rows the old table still holds.
pub const LEGACY_COUNT: &str = "SELECT COUNT(*) AS count FROM receipt_index WHERE state != 'gone'";

/// Records when this version first ran, once. Parameters: the name
/// ([`crate::upgrade::SINCE`]), now.
pub const META_FIRST: &str = "INSERT OR IGNORE INTO idemgate_meta (name, value) VALUES (?1, ?2)";

/// Reads a recorded fact. Parameter: its name.
pub const META_READ: &str = "SELECT value FROM idemgate_meta WHERE name = ?1";

/// Per route and listable state: how many, and the oldest acceptance.
pub const SUMMARY: &str = "SELECT route, state, COUNT(*) AS count, MIN(accepted_at) AS oldest \
     FROM receipt_index WHERE state != 'gone' GROUP BY route, state";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::GONE;

    /// The migrations' statements: comments dropped, split at `;`.
    fn migrations_statements() -> Vec<String> {
        [
            include_str!("../../../../migrations/0001_receipts.sql"),
            include_str!("../../../../migrations/0002_receipt_index.sql"),
            include_str!("../../../../migrations/0003_meta.sql"),
        ]
        .iter()
        .flat_map(|migration| {
            let code: String = migration
                .lines()
                .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
                .collect::<Vec<_>>()
                .join("\n");
            code.split(';')
                .map(|statement| statement.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|statement| !statement.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
    }

    #[test]
    fn the_schema_is_the_migrations_statements() {
        let statements = schema();
        assert_eq!(statements, migrations_statements());
        assert_eq!(statements.len(), 7, "{statements:#?}");
        assert!(statements
            .iter()
            .all(|statement| statement.contains("IF NOT EXISTS")
                || statement.starts_with("INSERT OR IGNORE")));
        assert!(statements[2].starts_with("CREATE TABLE IF NOT EXISTS receipt_index ("));
        assert!(
            !statements.iter().any(|statement| statement.contains("--")),
            "comments are dropped"
        );
        assert!(statements[5].contains("FROM receipts"));
    }

    #[test]
    fn tombstones_are_never_listed_or_woken() {
        assert!(OVERDUE.contains("state != 'gone'"));
        assert!(SUMMARY.contains("state != 'gone'"));
        assert!(REMOVE.contains(&format!("'{GONE}'")));
        assert!(!super::super::LISTABLE_STATES.contains(&GONE));
    }

    #[test]
    fn listings_page_after_their_cursor() {
        let cursor = Cursor {
            updated_at: 1,
            object: "a".repeat(64),
        };
        assert!(list(Some(&cursor)).contains("?4"));
        assert!(!list(None).contains("?3"));
    }
}
