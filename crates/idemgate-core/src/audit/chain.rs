//! The chain's head and how the next entry is made from an intent: the
//! writer restores the head from its last row, appends, and stores the
//! entry it is given, in the same turn.

use serde::{Deserialize, Serialize};

use super::{Entry, Intent, GENESIS, RESULT_UNKNOWN, SETTLE_AFTER_MS};

/// The newest entry's `seq` and `hash` (`0` and [`GENESIS`] before the
/// first): what the summary shows, and what an exported chain must end at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

impl Default for Head {
    fn default() -> Self {
        Head {
            seq: 0,
            hash: GENESIS.to_string(),
        }
    }
}

/// The chain as its writer holds it: only the head is needed to append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    head: Head,
}

impl Chain {
    pub fn restore(head: Head) -> Chain {
        Chain { head }
    }

    pub fn head(&self) -> &Head {
        &self.head
    }

    /// The next entry: `intent` with its `result`, linked to the head, and
    /// the head moved to it.
    pub fn append(&mut self, intent: &Intent, result: &str) -> Entry {
        let mut entry = Entry {
            seq: self.head.seq + 1,
            at: intent.at,
            actor: intent.actor.clone(),
            action: intent.action.clone(),
            route: intent.route.clone(),
            target: intent.target.clone(),
            result: result.to_string(),
            prev_hash: self.head.hash.clone(),
            hash: String::new(),
        };
        entry.hash = entry.computed_hash();
        self.head = Head {
            seq: entry.seq,
            hash: entry.hash.clone(),
        };
        entry
    }

    /// Open intents (by id, in the order they were opened) whose result
    /// has not come within [`SETTLE_AFTER_MS`] of `now`: each becomes the
    /// next entry, with the result [`RESULT_UNKNOWN`], since its act may
    /// have happened. Answers the intents closed and their entries.
    pub fn settle(&mut self, open: &[(u64, Intent)], now: u64) -> Vec<(u64, Entry)> {
        let mut open: Vec<&(u64, Intent)> = open
            .iter()
            .filter(|(_, intent)| intent.at.saturating_add(SETTLE_AFTER_MS) < now)
            .collect();
        open.sort_by_key(|(id, _)| *id);
        open.into_iter()
            .map(|(id, intent)| (*id, self.append(intent, RESULT_UNKNOWN)))
            .collect()
    }
}
