//! The audit log (SPEC §13): every operator act, one hash chain per
//! deployment, in `seq` order. Pure: the chain's head, how an entry is
//! hashed, who acted and what an act names; and its one writer's decisions
//! ([`writer`]) over the rows it keeps ([`rows`]: SQLite in the Durable
//! Object, `src/audit_object.rs`, memory in the tests). The verifiers of an
//! exported chain are in `idemgate-origin` and the Node and Python
//! packages.
//!
//! An act is written in two steps so that "written before its answer" and
//! "an audit write that fails fails the act" both hold with one entry per
//! act: the act's [`Intent`] is made durable first (if that fails, the act
//! is refused with 503 and nothing is done), then the act runs, then the
//! intent becomes the chain's next [`Entry`] with the act's result. An
//! intent whose result never came (the worker died mid-act, or the second
//! write failed) is settled by the writer into an entry whose result is
//! [`RESULT_UNKNOWN`] once it is older than [`SETTLE_AFTER_MS`], so no act
//! that may have happened goes unrecorded.

pub mod call;
mod chain;
pub mod checkpoint;
pub mod rows;
pub mod writer;

pub use call::{AuditCall, Begun, Page, WRITER_NAME};
pub use chain::{Chain, Head};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first entry's `prev_hash`.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

pub use crate::access::TOKEN_ACTOR;

/// The result of an act whose intent was recorded but whose answer never
/// reached the writer.
pub const RESULT_UNKNOWN: &str = "unknown";

/// How long an intent may wait for its result before it is settled as
/// [`RESULT_UNKNOWN`]: longer than any operator call runs (a Worker's
/// request is cut at its CPU and wall limits well before).
pub const SETTLE_AFTER_MS: u64 = 15 * 60 * 1000;

/// How long entries are kept, at least (SPEC §13: 400 days). The writer
/// deletes nothing: every entry is kept for as long as the deployment.
pub const KEPT_AT_LEAST_DAYS: u64 = 400;

/// A page of the chain newest first, and of an export oldest first.
pub const PAGE: u32 = 50;
pub const EXPORT_PAGE: u32 = 500;

/// What an operator did, before it is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Unix milliseconds when the act was asked for.
    pub at: u64,
    pub actor: String,
    pub action: String,
    pub route: String,
    pub target: String,
}

/// One entry of the chain, as stored and exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    pub at: u64,
    pub actor: String,
    pub action: String,
    pub route: String,
    pub target: String,
    pub result: String,
    pub prev_hash: String,
    pub hash: String,
}

/// The entry's fields but `hash`: what the hash covers.
#[derive(Serialize)]
struct Unhashed<'a> {
    seq: u64,
    at: u64,
    actor: &'a str,
    action: &'a str,
    route: &'a str,
    target: &'a str,
    result: &'a str,
    prev_hash: &'a str,
}

impl Entry {
    /// The RFC 8785 canonical JSON of the entry without `hash`.
    pub fn canonical_unhashed(&self) -> Vec<u8> {
        let unhashed = Unhashed {
            seq: self.seq,
            at: self.at,
            actor: &self.actor,
            action: &self.action,
            route: &self.route,
            target: &self.target,
            result: &self.result,
            prev_hash: &self.prev_hash,
        };
        let plain = serde_json::to_vec(&unhashed).expect("an entry serializes");
        crate::json::parse(&plain)
            .expect("serde_json writes JSON the reader takes")
            .canonical()
    }

    /// Hex SHA-256 of `prev_hash`, a newline and the canonical JSON of the
    /// entry without `hash`.
    pub fn computed_hash(&self) -> String {
        let mut digest = Sha256::new();
        digest.update(self.prev_hash.as_bytes());
        digest.update(b"\n");
        digest.update(self.canonical_unhashed());
        hex::encode(digest.finalize())
    }
}

/// The id of the next intent. Ids are never handed out twice: an intent
/// settled as `unknown` leaves the table, and a late result for it must
/// not join the act that came after it under the same id (the review's
/// item 15, round 5: ids were the highest open id plus one). `counter` is
/// the last id handed out, kept apart from the intents; a log written
/// before it was kept starts above every id it can have handed out (no
/// more than its entries and its open intents).
pub fn next_intent_id(counter: Option<u64>, head_seq: u64, highest_open: u64) -> u64 {
    counter
        .unwrap_or(head_seq.saturating_add(highest_open))
        .max(highest_open)
        .saturating_add(1)
}

/// Hex SHA-256 of a key: how an entry names it (never the key itself).
pub fn key_sha256(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod writer_tests;
