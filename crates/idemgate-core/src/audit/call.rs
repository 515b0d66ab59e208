//! What the operator API asks of the audit log's writer, as one JSON line
//! over RPC, and what it answers.

use serde::{Deserialize, Serialize};

use super::{Entry, Head, Intent};

/// The name of the one writer object of a deployment.
pub const WRITER_NAME: &str = "audit";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AuditCall {
    /// Records `intent` durably before the act; answers [`Begun`].
    /// `fail` (the end-to-end tests' hook only) makes the write fail.
    Begin {
        intent: Intent,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fail: bool,
    },
    /// Appends the intent as the chain's next entry with the act's
    /// result; answers the [`Entry`]. `fail` (the end-to-end tests' hook
    /// only) makes the write fail, leaving the intent open.
    Finish {
        intent_id: u64,
        result: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fail: bool,
    },
    /// The chain's [`Head`].
    Head,
    /// Newest first: entries with `seq < before` (all when `None`), of
    /// `routes` when given, at most `limit`; answers [`Page`].
    Page {
        routes: Option<Vec<String>>,
        before: Option<u64>,
        limit: u32,
    },
    /// Oldest first: entries with `seq > after`, at most `limit`, every
    /// route (the whole chain, for verification); answers [`Page`].
    Export { after: u64, limit: u32 },
}

impl AuditCall {
    /// Whether the call writes the chain or its intents: after one, the
    /// writer's alarm is set again (an intent settles, a head goes out).
    pub fn writes(&self) -> bool {
        matches!(self, AuditCall::Begin { .. } | AuditCall::Finish { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Begun {
    pub intent_id: u64,
}

/// A page of the chain and the cursor of the next (a `seq`), with the
/// head at the time of reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub entries: Vec<Entry>,
    pub cursor: Option<u64>,
    pub head: Head,
}

impl Page {
    /// The page as `GET /__idemgate/audit` answers it. The head (how many
    /// acts the whole deployment made, and its hash) is the top-level
    /// token's to see: a route token's page is its own routes' entries
    /// alone, with no head.
    pub fn answer(&self, whole_chain: bool) -> serde_json::Value {
        serde_json::json!({
            "entries": self.entries,
            "cursor": self.cursor.map(|seq| seq.to_string()),
            "head": whole_chain.then_some(&self.head),
        })
    }

    /// The next cursor: the last entry's `seq` when the page is full.
    pub fn cursor_of(entries: &[Entry], limit: u32) -> Option<u64> {
        (entries.len() as u32 == limit && limit > 0)
            .then(|| entries.last().map(|entry| entry.seq))
            .flatten()
    }
}
