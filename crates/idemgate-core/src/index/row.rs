//! The index's rows as plain data: what one row holds, the writes that
//! change it, and what a receipt remembers of its row. Apart from
//! [`super`]'s rules so that the receipt can keep an [`Indexed`] without
//! the index's rules importing the receipt back.

use serde::{Deserialize, Serialize};

use crate::delivery::Identity;
use crate::receipt::Indexed;

/// One row: enough to read, purge or re-drive the receipt, and to wake it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRow {
    /// Which receipt, as its receipt names itself (the listing shows its
    /// fields beside the row's own).
    #[serde(flatten)]
    pub identity: Identity,
    pub state: String,
    pub attempts: u64,
    pub last_status: Option<u16>,
    /// When the object next has work; the sweep wakes it once past.
    pub next_wake_at: Option<u64>,
    pub accepted_at: u64,
    pub updated_at: u64,
    pub version: u64,
}

/// A row as D1's table holds it, column by column, its key as text: what
/// a listing shows (even a row a later version wrote with a key this one
/// could not send), and what the simulation's D1 keeps (a tombstone
/// written before any row of its object has empty text for its key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRow {
    pub object: String,
    pub route: String,
    pub scope: String,
    pub key: String,
    pub path: Option<String>,
    pub tenant_sha256: Option<String>,
    pub receipt_id: String,
    pub state: String,
    pub attempts: u64,
    pub last_status: Option<u16>,
    pub next_wake_at: Option<u64>,
    pub accepted_at: u64,
    pub updated_at: u64,
    pub version: u64,
}

impl From<&IndexRow> for TableRow {
    fn from(row: &IndexRow) -> TableRow {
        TableRow {
            object: row.identity.object.clone(),
            route: row.identity.route.clone(),
            scope: row.identity.scope.clone(),
            key: row.identity.key.to_string(),
            path: row.identity.path.clone(),
            tenant_sha256: row.identity.tenant_sha256.clone(),
            receipt_id: row.identity.receipt_id.clone(),
            state: row.state.clone(),
            attempts: row.attempts,
            last_status: row.last_status,
            next_wake_at: row.next_wake_at,
            accepted_at: row.accepted_at,
            updated_at: row.updated_at,
            version: row.version,
        }
    }
}

// An update lives only until it is written: its size is no cost.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexUpdate {
    Upsert(IndexRow),
    /// The receipt left the index: a tombstone at `version`.
    Remove {
        object: String,
        version: u64,
        at: u64,
    },
}

impl IndexUpdate {
    pub fn version(&self) -> u64 {
        match self {
            IndexUpdate::Upsert(row) => row.version,
            IndexUpdate::Remove { version, .. } => *version,
        }
    }

    /// The row's object.
    pub fn object(&self) -> &str {
        match self {
            IndexUpdate::Upsert(row) => &row.identity.object,
            IndexUpdate::Remove { object, .. } => object,
        }
    }

    /// The same write at another version.
    pub fn at_version(mut self, new: u64) -> IndexUpdate {
        match &mut self {
            IndexUpdate::Upsert(row) => row.version = new,
            IndexUpdate::Remove { version, .. } => *version = new,
        }
        self
    }
}

/// What a write of the index did: its row changed, or a write of the same
/// or a higher version had landed before, so it changed nothing (the
/// versions come from the clock, which may step back; or this write was
/// overtaken by a later one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexWrite {
    Landed,
    Outdated { row_version: u64 },
}

impl Indexed {
    /// What the index shows once `update` landed.
    pub fn after(update: &IndexUpdate) -> Indexed {
        match update {
            IndexUpdate::Upsert(row) => Indexed {
                state: Some(row.state.clone()),
                next_wake_at: row.next_wake_at,
                confirmed: true,
                shard: None,
            },
            IndexUpdate::Remove { .. } => Indexed::default(),
        }
    }
}
