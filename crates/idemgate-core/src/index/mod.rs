//! The receipt index (SPEC §7, §2b, §15 v5): a table in each of a route's
//! index shards ([`shard`]), which an operator lists receipts by state from
//! without knowing their keys, and which each shard's sweep reads to wake
//! every object whose next step is overdue. The key's Durable Object stays
//! the truth; the index follows it:
//!
//! - a sync receipt is indexed when it fails, and leaves the index when it
//!   completes (a retry in flight keeps its `failed` row);
//! - an async receipt is indexed from acceptance (`queued`) through each
//!   attempt (`in_flight`, `failed`) to `dead`, and leaves the index when
//!   it completes;
//! - an async row says when its object next has work (`next_wake_at`: an
//!   attempt, a lease's end, a dead letter's warning or expiry), which is
//!   what the sweep looks for; a sync receipt waits for its sender, and
//!   its row says when it expires, so that a row left behind (its removal
//!   or its alarm lost) is woken and put right too.
//!
//! Every write carries a version, higher than any earlier write of the
//! object (across its lives, like epochs), and lands only over a lower
//! one; leaving the index writes a tombstone (`gone`) rather than deleting
//! the row. So a late or repeated write never brings back an older state
//! or a deleted row. Rows are keyed by the Durable Object's name, so a
//! purge removes its row without reading (or parsing) the receipt.

pub mod owed;
pub mod row;
pub mod shard;
pub mod sql;

pub use crate::receipt::Indexed;
pub use row::{IndexRow, IndexUpdate, IndexWrite, TableRow};

use crate::delivery::Identity;
use crate::receipt::{DeliveryKind, Receipt, ReceiptState};

/// The D1 binding a v4 deployment's index lived in (SPEC §15, v5: read
/// while its rows move into the shards).
pub const BINDING: &str = "IDEMGATE_INDEX";

/// The binding of the index's shards' Durable Object class.
pub const SHARD_BINDING: &str = "INDEX_SHARD";

/// States an operator can list.
pub const LISTABLE_STATES: &[&str] = &["queued", "in_flight", "failed", "dead", "superseded"];

/// The listable states of a delivery still to be made.
pub const PENDING_STATES: &[&str] = &["queued", "in_flight", "failed"];

/// The state of a tombstone: the receipt left the index.
pub const GONE: &str = "gone";

/// Rows per page of a listing.
pub const PAGE_SIZE: u32 = 50;

/// The state the index should show for `receipt` (`None`: no row).
/// `current` is what the row shows now.
pub fn wanted_state(receipt: Option<&Receipt>, current: Option<&str>) -> Option<String> {
    let receipt = receipt?;
    match (receipt.delivery, &receipt.state) {
        (_, ReceiptState::Completed { .. }) => None,
        (DeliveryKind::Async, state) => Some(state.name().to_string()),
        (DeliveryKind::Sync, ReceiptState::Failed { .. }) => Some("failed".into()),
        // A sync retry in flight keeps its failed row until it settles.
        (DeliveryKind::Sync, _) => current.map(str::to_string),
    }
}

/// The write that brings the index from `current` to what `receipt` needs,
/// at `version` (its own), if any. `object` names the row; `now` dates a
/// tombstone.
pub fn update_for(
    object: &str,
    receipt: Option<&Receipt>,
    current: &Indexed,
    version: u64,
    now: u64,
) -> Option<IndexUpdate> {
    let wanted = wanted_state(receipt, current.state.as_deref());
    // A sync receipt waits for its sender; its row says when it expires,
    // so that the sweep finds a row its receipt left behind (its removal
    // or its alarm lost). A retry that moves the expiry does not rewrite
    // the row: woken before it expires, the object writes it again.
    let next_wake_at = receipt.map(Receipt::next_wake);
    let sync = receipt.is_some_and(|receipt| receipt.delivery == DeliveryKind::Sync);
    let same_wake =
        next_wake_at == current.next_wake_at || (sync && current.next_wake_at.is_some());
    let unchanged = current.confirmed && wanted == current.state && same_wake;
    match (wanted, receipt) {
        (None, _) if current.confirmed && current.state.is_none() => None,
        (None, _) => Some(IndexUpdate::Remove {
            object: object.to_string(),
            version,
            at: now,
        }),
        (Some(_), _) if unchanged => None,
        (Some(state), Some(receipt)) => Some(IndexUpdate::Upsert(IndexRow {
            identity: Identity {
                object: object.to_string(),
                ..receipt.identity.clone()
            },
            state,
            attempts: receipt.attempts.len() as u64,
            last_status: receipt.last_status(),
            next_wake_at,
            accepted_at: receipt.first_seen_at,
            updated_at: receipt.updated_at,
            version,
        })),
        (Some(_), None) => None,
    }
}

/// A page boundary: rows after the last one shown, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub updated_at: u64,
    pub object: String,
}

impl Cursor {
    /// `<updated_at>.<object>`: opaque to callers, and printable.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.updated_at, self.object)
    }

    pub fn decode(text: &str) -> Option<Cursor> {
        let (at, object) = text.split_once('.')?;
        let valid = object.len() == 64 && object.bytes().all(|b| b.is_ascii_hexdigit());
        let updated_at = at.parse().ok()?;
        valid.then(|| Cursor {
            updated_at,
            object: object.to_string(),
        })
    }
}

#[cfg(test)]
mod tests;
