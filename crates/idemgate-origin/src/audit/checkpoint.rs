//! The chain's head as idemgate sends it to its alert sinks, and how a
//! checkpoint is read: from a sink's body or as `SEQ:HASH`.

use std::str::FromStr;

use serde_json::Value;

use super::export::{nesting, Strict};
use super::{is_hash, MAX_DEPTH, MAX_INTEGER};

/// What a checkpoint's `type` is.
pub const CHECKPOINT_TYPE: &str = "idemgate.audit_head";

/// The head of the chain as idemgate sent it to its `json` alert sinks:
/// a `seq` from 1 to [`MAX_INTEGER`], the `hash` of the entry at that
/// `seq`, and (read from a sink's body) when it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub seq: u64,
    pub hash: String,
    /// The checkpoint's `at` (RFC 3339, UTC); `None` when given as
    /// `SEQ:HASH`.
    pub at: Option<String>,
}

impl Checkpoint {
    /// Reads a checkpoint as a `json` sink receives it (the body, its
    /// signature already checked by the receiver):
    /// `{"type":"idemgate.audit_head","seq":42,"hash":"<64 hex>","at":"2026-12-05T16:00:00Z"}`,
    /// members in any order, other members ignored. As strictly as an
    /// export: a member named twice or a lone surrogate anywhere, a number
    /// out of a double's range, or nesting deeper than [`MAX_DEPTH`] levels
    /// make it unreadable; so do a `type` other than [`CHECKPOINT_TYPE`], a
    /// `seq` not a plain integer from 1 to [`MAX_INTEGER`], a `hash` not 64
    /// lowercase hex digits, and an `at` not `YYYY-MM-DDTHH:MM:SS[.F]Z`.
    pub fn from_json(text: &str) -> Result<Checkpoint, String> {
        if nesting(text) > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        let Strict(value) = serde_json::from_str(text).map_err(|error| error.to_string())?;
        let Value::Object(members) = value else {
            return Err("not a JSON object".into());
        };
        if members.get("type").and_then(Value::as_str) != Some(CHECKPOINT_TYPE) {
            return Err(format!("its `type` is not `{CHECKPOINT_TYPE}`"));
        }
        let seq = members
            .get("seq")
            .and_then(Value::as_u64)
            .filter(|seq| (1..=MAX_INTEGER).contains(seq))
            .ok_or("its `seq` is not an integer from 1 to 2^53 - 1")?;
        let hash = members
            .get("hash")
            .and_then(Value::as_str)
            .filter(|hash| is_hash(hash))
            .ok_or("its `hash` is not 64 lowercase hex digits")?;
        let at = members
            .get("at")
            .and_then(Value::as_str)
            .filter(|at| is_utc_time(at))
            .ok_or("its `at` is not an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SSZ)")?;
        Ok(Checkpoint {
            seq,
            hash: hash.to_string(),
            at: Some(at.to_string()),
        })
    }
}

/// `SEQ:HASH`, as `verify-audit --head` takes a checkpoint written out:
/// `SEQ` a plain integer from 1 to [`MAX_INTEGER`], `HASH` 64 lowercase
/// hex digits.
impl FromStr for Checkpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Checkpoint, String> {
        let invalid = || format!("{text:?} is not SEQ:HASH");
        let (seq, hash) = text.split_once(':').ok_or_else(invalid)?;
        let plain = !seq.is_empty()
            && seq.bytes().all(|b| b.is_ascii_digit())
            && !seq.starts_with('0')
            && seq.len() <= 16;
        let seq = Some(seq)
            .filter(|_| plain)
            .and_then(|seq| seq.parse::<u64>().ok())
            .filter(|seq| (1..=MAX_INTEGER).contains(seq))
            .ok_or_else(invalid)?;
        if !is_hash(hash) {
            return Err(invalid());
        }
        Ok(Checkpoint {
            seq,
            hash: hash.to_string(),
            at: None,
        })
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, a fraction of a second allowed, each field in
/// its range (a day up to 31 in every month, a second up to 60).
fn is_utc_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    let number = |from: usize, to: usize| -> Option<u32> {
        let digits = bytes.get(from..to)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let fields = [
        (0, 4, 0, 9999),
        (5, 7, 1, 12),
        (8, 10, 1, 31),
        (11, 13, 0, 23),
        (14, 16, 0, 59),
        (17, 19, 0, 60),
    ];
    let in_range = fields
        .iter()
        .all(|&(from, to, low, high)| number(from, to).is_some_and(|n| (low..=high).contains(&n)));
    let separated = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')]
        .iter()
        .all(|&(at, byte)| bytes.get(at) == Some(&byte));
    let fraction = match bytes.get(19..) {
        Some([b'Z']) => true,
        Some([b'.', digits @ .., b'Z']) => {
            !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    };
    in_range && separated && fraction
}
