//! The audit writer's rows (SPEC §13): the chain's entries, append-only,
//! the intents of acts under way, and a few named counters. The
//! [`Writer`](super::writer::Writer) decides; the rows only read and write
//! what it asks, each operation one SQL statement in the Worker
//! (`src/audit_object.rs`) and a map in [`MemoryRows`] here.
//!
//! Not a `host::Book`: the chain is never loaded whole (it is kept for the
//! deployment's life), only its head, a page, or the intents asked for.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};

use super::{Entry, Head, Intent};

/// The counter of the last intent id handed out.
pub const INTENT_COUNTER: &str = "intent";
/// When a checkpoint was last sent, and of which head `seq`.
pub const CHECKPOINT_AT: &str = "checkpoint_at";
pub const CHECKPOINT_SEQ: &str = "checkpoint_seq";

/// The rows the audit writer keeps.
pub trait AuditRows {
    /// The newest entry's `seq` and `hash` ([`Head::default`] before the
    /// first).
    fn head(&mut self) -> Result<Head, String>;
    /// Newest first: entries with `seq < before`, of `routes` when given,
    /// at most `limit`.
    fn newest(
        &mut self,
        before: u64,
        routes: Option<&[String]>,
        limit: u32,
    ) -> Result<Vec<Entry>, String>;
    /// Oldest first: entries with `seq > after`, at most `limit`.
    fn oldest(&mut self, after: u64, limit: u32) -> Result<Vec<Entry>, String>;
    /// Stores `entry` and closes the intent `id` it came from.
    fn append(&mut self, id: u64, entry: &Entry) -> Result<(), String>;
    /// Records the open intent `id`.
    fn open(&mut self, id: u64, intent: &Intent) -> Result<(), String>;
    /// The open intent `id`, if it is still open.
    fn intent(&mut self, id: u64) -> Result<Option<Intent>, String>;
    /// Open intents asked for before `at`, by id.
    fn opened_before(&mut self, at: u64) -> Result<Vec<(u64, Intent)>, String>;
    /// The highest open intent's id (`0` with none open).
    fn highest_open(&mut self) -> Result<u64, String>;
    /// When the oldest open intent was asked for.
    fn oldest_open_at(&mut self) -> Result<Option<u64>, String>;
    /// A named counter ([`INTENT_COUNTER`], [`CHECKPOINT_AT`],
    /// [`CHECKPOINT_SEQ`]), if it was ever set.
    fn counter(&mut self, name: &str) -> Result<Option<u64>, String>;
    fn set_counter(&mut self, name: &str, value: u64) -> Result<(), String>;
}

/// The rows in memory, for native tests: what a reload keeps is this
/// value, handed to a new writer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryRows {
    pub entries: BTreeMap<u64, Entry>,
    pub intents: BTreeMap<u64, Intent>,
    pub counters: BTreeMap<String, u64>,
}

impl AuditRows for MemoryRows {
    fn head(&mut self) -> Result<Head, String> {
        Ok(self
            .entries
            .values()
            .next_back()
            .map(|entry| Head {
                seq: entry.seq,
                hash: entry.hash.clone(),
            })
            .unwrap_or_default())
    }

    fn newest(
        &mut self,
        before: u64,
        routes: Option<&[String]>,
        limit: u32,
    ) -> Result<Vec<Entry>, String> {
        Ok(self
            .entries
            .range(..before)
            .rev()
            .map(|(_, entry)| entry)
            .filter(|entry| routes.is_none_or(|routes| routes.contains(&entry.route)))
            .take(limit as usize)
            .cloned()
            .collect())
    }

    fn oldest(&mut self, after: u64, limit: u32) -> Result<Vec<Entry>, String> {
        Ok(self
            .entries
            .range((Excluded(after), Unbounded))
            .map(|(_, entry)| entry.clone())
            .take(limit as usize)
            .collect())
    }

    fn append(&mut self, id: u64, entry: &Entry) -> Result<(), String> {
        if self.entries.contains_key(&entry.seq) {
            return Err(format!("UNIQUE constraint failed: seq {}", entry.seq));
        }
        self.entries.insert(entry.seq, entry.clone());
        self.intents.remove(&id);
        Ok(())
    }

    fn open(&mut self, id: u64, intent: &Intent) -> Result<(), String> {
        if self.intents.contains_key(&id) {
            return Err(format!("UNIQUE constraint failed: id {id}"));
        }
        self.intents.insert(id, intent.clone());
        Ok(())
    }

    fn intent(&mut self, id: u64) -> Result<Option<Intent>, String> {
        Ok(self.intents.get(&id).cloned())
    }

    fn opened_before(&mut self, at: u64) -> Result<Vec<(u64, Intent)>, String> {
        Ok(self
            .intents
            .iter()
            .filter(|(_, intent)| intent.at < at)
            .map(|(id, intent)| (*id, intent.clone()))
            .collect())
    }

    fn highest_open(&mut self) -> Result<u64, String> {
        Ok(self.intents.keys().next_back().copied().unwrap_or(0))
    }

    fn oldest_open_at(&mut self) -> Result<Option<u64>, String> {
        Ok(self.intents.values().map(|intent| intent.at).min())
    }

    fn counter(&mut self, name: &str) -> Result<Option<u64>, String> {
        Ok(self.counters.get(name).copied())
    }

    fn set_counter(&mut self, name: &str, value: u64) -> Result<(), String> {
        self.counters.insert(name.to_string(), value);
        Ok(())
    }
}
