//! What the receipt index shows of a receipt, as the receipt remembers it
//! (the index writes it: [`crate::index`]); kept here, with the receipt
//! that stores it, so that the receipt needs nothing of the index.

use serde::{Deserialize, Serialize};

/// What the index shows of a receipt, as its receipt remembers it: the
/// row's state and wake time, and the version of the last write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Indexed {
    /// `None`: no row (or a tombstone).
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake_at: Option<u64>,
    /// False when the last write failed or its outcome is unknown: the
    /// next transition (or the sweep) writes the row again.
    #[serde(default = "yes")]
    pub confirmed: bool,
    /// The index shard that holds the row (SPEC §15, v5), once one was
    /// written: kept across the object's lives, so that a change of
    /// `INDEX_SHARDS` never strands it. `None`: none yet, or the D1 index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u16>,
}

fn yes() -> bool {
    true
}

/// No row, and known to be none: a new receipt's.
impl Default for Indexed {
    fn default() -> Indexed {
        Indexed {
            state: None,
            next_wake_at: None,
            confirmed: true,
            shard: None,
        }
    }
}

impl Indexed {
    /// Reads a receipt's `indexed`: an object, or, as the second version
    /// stored it, the row's bare state (`"unknown"` after a failed write),
    /// whose wake time was never written, so the row is written again.
    pub fn read_stored<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Indexed, D::Error> {
        let value = Option::<serde_json::Value>::deserialize(deserializer)?;
        Ok(match value {
            None | Some(serde_json::Value::Null) => Indexed::default(),
            Some(serde_json::Value::String(state)) => Indexed {
                state: Some(state),
                next_wake_at: None,
                confirmed: false,
                shard: None,
            },
            Some(object) => serde_json::from_value(object).unwrap_or(Indexed {
                state: None,
                next_wake_at: None,
                confirmed: false,
                shard: None,
            }),
        })
    }
}
