//! Verify an audit chain exported from idemgate (`GET /__idemgate/audit`,
//! oldest first): each entry's `hash` is the hex SHA-256 of its
//! `prev_hash`, a newline, and the RFC 8785 canonical JSON of the entry
//! without `hash`; each `prev_hash` is the previous entry's `hash` (64
//! zeros for the first); `seq` counts up from 1 by one. The first entry
//! that breaks any of these is named, so an edited, deleted or reordered
//! entry shows. A chain cut at its end still verifies: compare its last
//! `seq` and `hash` with the head idemgate's summary shows
//! ([`verify_chain_to`]).
//!
//! A chain rewritten inside the deployment (an entry edited and every hash
//! after it recomputed) still verifies as a chain. idemgate therefore
//! anchors it outside: after each act (at most once a minute) and daily
//! it sends the head to its `json` alert sinks as a signed
//! `idemgate.audit_head` [`Checkpoint`]. [`verify_chain_at`] checks an
//! export against one: the entry at the checkpoint's `seq` must be in the
//! export and carry its `hash` ([`Fault::Truncated`], [`Fault::Checkpoint`]).
//!
//! [`read_export`] reads an export strictly, as the Node.js and Python
//! verifiers read it: an entry with a member named twice, a lone surrogate
//! (`"\ud800"`), or a `seq` or `at` not written as a plain integer (`1.0`,
//! `1e0`, `-0`) or beyond [`MAX_INTEGER`] is malformed; a page naming a
//! member twice, and nesting deeper than [`MAX_DEPTH`] levels, make the
//! export unreadable. [`verify_export`] checks what it read.
//!
//! ```
//! let chain = serde_json::json!([]);
//! let report = idemgate_origin::audit::verify_chain(chain.as_array().unwrap());
//! assert!(report.is_ok());
//! ```

mod chain;
mod checkpoint;
mod export;

pub use chain::{
    canonical, entry_hash, is_hash, verify_chain, verify_chain_at, verify_chain_to, verify_export,
    verify_export_at,
};
pub use checkpoint::{Checkpoint, CHECKPOINT_TYPE};
pub use export::{read_export, Exported};

/// The first entry's `prev_hash`.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The fields of an entry, in the order idemgate writes them; `hash` last.
pub const FIELDS: [&str; 9] = [
    "seq",
    "at",
    "actor",
    "action",
    "route",
    "target",
    "result",
    "prev_hash",
    "hash",
];

/// The largest integer `seq` and `at` may hold: 2^53 - 1, the largest a
/// double holds exactly (JavaScript's `Number.MAX_SAFE_INTEGER`). Beyond it
/// (|n| > 2^53 - 1) an entry is malformed, in the Node.js and Python
/// verifiers too.
pub const MAX_INTEGER: u64 = (1 << 53) - 1;

/// No export nests deeper than 3 levels (a page, its entries, an entry);
/// one nesting deeper than this is unreadable, in all three verifiers.
pub const MAX_DEPTH: usize = 64;

/// Why an entry breaks the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Not an object with exactly the entry's fields, each of its type.
    Malformed,
    /// Its `seq` is not the previous one's plus one (1 for the first):
    /// an entry before it was deleted, or entries were reordered.
    Seq,
    /// Its `prev_hash` is not the previous entry's `hash`.
    PrevHash,
    /// Its `hash` is not the hash of its content: it was edited.
    Hash,
    /// The chain does not end at the head it was checked against: entries
    /// were cut from its end.
    Head,
    /// The export ends before the checkpoint's `seq`: entries the sinks
    /// were told of were cut from its end. Named at the position after the
    /// last entry, with no `seq`, as [`Fault::Head`] is.
    Truncated,
    /// The entry at the checkpoint's `seq` carries another hash: the chain
    /// was rewritten up to there (and re-hashed after) since the sinks
    /// received the checkpoint.
    Checkpoint,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Malformed => "malformed",
            Fault::Seq => "seq",
            Fault::PrevHash => "prev_hash",
            Fault::Hash => "hash",
            Fault::Head => "head",
            Fault::Truncated => "truncated",
            Fault::Checkpoint => "checkpoint",
        }
    }
}

/// The first broken entry: its position in the export (from 0), the `seq`
/// it claims (when it has one) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "entry {index} (seq {}) breaks the chain: {}",
    .seq.map_or_else(|| "null".to_string(), |seq| seq.to_string()),
    fault.as_str()
)]
pub struct Broken {
    pub index: usize,
    pub seq: Option<u64>,
    pub fault: Fault,
}

/// A chain that verified: how many entries, and its last `seq` and `hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub entries: usize,
    pub head_seq: u64,
    pub head_hash: String,
}
