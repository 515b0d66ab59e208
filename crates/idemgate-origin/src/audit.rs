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

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

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

/// RFC 8785 canonical JSON of the values an entry holds: strings and
/// integers (objects' names sorted by UTF-16 code units). `None` for a
/// value no entry holds (a fraction, say).
pub fn canonical(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => "null".into(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => match (number.as_u64(), number.as_i64()) {
            (Some(n), _) => n.to_string(),
            (None, Some(n)) => n.to_string(),
            _ => return None,
        },
        Value::String(text) => serde_json::to_string(text).ok()?,
        Value::Array(items) => {
            let items: Option<Vec<String>> = items.iter().map(canonical).collect();
            format!("[{}]", items?.join(","))
        }
        Value::Object(map) => {
            let mut names: Vec<&String> = map.keys().collect();
            names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            let mut members = Vec::with_capacity(names.len());
            for name in names {
                members.push(format!(
                    "{}:{}",
                    serde_json::to_string(name).ok()?,
                    canonical(&map[name])?
                ));
            }
            format!("{{{}}}", members.join(","))
        }
    })
}

/// The hash an entry should carry: over its `prev_hash` and its fields
/// but `hash`.
pub fn entry_hash(entry: &serde_json::Map<String, Value>) -> Option<String> {
    let prev_hash = entry.get("prev_hash")?.as_str()?;
    let mut unhashed = entry.clone();
    unhashed.remove("hash");
    let content = canonical(&Value::Object(unhashed))?;
    let mut digest = Sha256::new();
    digest.update(prev_hash.as_bytes());
    digest.update(b"\n");
    digest.update(content.as_bytes());
    Some(hex::encode(digest.finalize()))
}

/// Whether `text` is a hash as idemgate writes one: 64 lowercase hex digits.
pub fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn well_formed(entry: &Value) -> Option<&serde_json::Map<String, Value>> {
    let map = entry.as_object()?;
    if map.len() != FIELDS.len() || !FIELDS.iter().all(|name| map.contains_key(*name)) {
        return None;
    }
    for name in ["seq", "at"] {
        map[name].as_u64().filter(|n| *n <= MAX_INTEGER)?;
    }
    for name in ["actor", "action", "route", "target", "result"] {
        map[name].as_str()?;
    }
    for name in ["prev_hash", "hash"] {
        map[name].as_str().filter(|hash| is_hash(hash))?;
    }
    Some(map)
}

/// The `seq` an entry claims: an integer from 0 to [`MAX_INTEGER`].
fn claimed_seq(entry: &Value) -> Option<u64> {
    entry
        .get("seq")
        .and_then(Value::as_u64)
        .filter(|seq| *seq <= MAX_INTEGER)
}

/// Checks a chain exported oldest first; names the first broken entry.
pub fn verify_chain(entries: &[Value]) -> Result<Verified, Broken> {
    verify(entries.iter().map(Ok))
}

/// Each entry, or the `seq` a malformed one claims.
fn verify<'a>(
    entries: impl Iterator<Item = Result<&'a Value, Option<u64>>>,
) -> Result<Verified, Broken> {
    let mut previous_hash = GENESIS.to_string();
    let mut previous_seq = 0u64;
    let mut count = 0;
    for (index, entry) in entries.enumerate() {
        count += 1;
        let entry = entry.map_err(|seq| Broken {
            index,
            seq,
            fault: Fault::Malformed,
        })?;
        let seq = claimed_seq(entry);
        let broken = |fault| Broken { index, seq, fault };
        let map = well_formed(entry).ok_or(broken(Fault::Malformed))?;
        if seq != previous_seq.checked_add(1) {
            return Err(broken(Fault::Seq));
        }
        if map["prev_hash"].as_str() != Some(previous_hash.as_str()) {
            return Err(broken(Fault::PrevHash));
        }
        let hash = map["hash"].as_str().unwrap_or_default();
        if entry_hash(map).as_deref() != Some(hash) {
            return Err(broken(Fault::Hash));
        }
        previous_hash = hash.to_string();
        previous_seq = seq.unwrap_or_default();
    }
    Ok(Verified {
        entries: count,
        head_seq: previous_seq,
        head_hash: previous_hash,
    })
}

fn ends_at(verified: Verified, head_hash: &str, entries: usize) -> Result<Verified, Broken> {
    if verified.head_hash != head_hash {
        return Err(Broken {
            index: entries,
            seq: None,
            fault: Fault::Head,
        });
    }
    Ok(verified)
}

/// [`verify_chain`], and the chain must end at `head_hash` (the head the
/// summary showed when the export was taken), so that entries cut from
/// its end show too.
pub fn verify_chain_to(entries: &[Value], head_hash: &str) -> Result<Verified, Broken> {
    ends_at(verify_chain(entries)?, head_hash, entries.len())
}

/// [`verify_chain`] of what [`read_export`] read, and [`verify_chain_to`]
/// when given the head.
pub fn verify_export(entries: &[Exported], head_hash: Option<&str>) -> Result<Verified, Broken> {
    let verified = verify(entries.iter().map(|entry| match entry {
        Exported::Entry(value) => Ok(value),
        Exported::Malformed { seq } => Err(*seq),
    }))?;
    match head_hash {
        Some(head_hash) => ends_at(verified, head_hash, entries.len()),
        None => Ok(verified),
    }
}

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

/// Whether a chain that verified agrees with `checkpoint`: the entry at
/// its `seq` (`hash_at` gives an entry's hash by position) carries its
/// hash. `seq` 0 is the empty chain's head, [`GENESIS`].
fn agrees<'a>(
    verified: Verified,
    hash_at: impl Fn(usize) -> Option<&'a str>,
    checkpoint: &Checkpoint,
) -> Result<Verified, Broken> {
    if checkpoint.seq > verified.head_seq {
        return Err(Broken {
            index: verified.entries,
            seq: None,
            fault: Fault::Truncated,
        });
    }
    // Verified: the entry at position i has seq i + 1.
    let (hash, index, seq) = match checkpoint.seq.checked_sub(1) {
        Some(at) => (hash_at(at as usize), at as usize, Some(checkpoint.seq)),
        None => (Some(GENESIS), 0, None),
    };
    if hash != Some(checkpoint.hash.as_str()) {
        return Err(Broken {
            index,
            seq,
            fault: Fault::Checkpoint,
        });
    }
    Ok(verified)
}

/// [`verify_chain`], and the chain must agree with `checkpoint` (one
/// idemgate sent to its alert sinks): the entry at the checkpoint's `seq`
/// is in the export ([`Fault::Truncated`] if the export ends before it)
/// and carries the checkpoint's `hash` ([`Fault::Checkpoint`]: the chain
/// was rewritten since, however consistently). Entries after it are the
/// chain grown since.
pub fn verify_chain_at(entries: &[Value], checkpoint: &Checkpoint) -> Result<Verified, Broken> {
    let verified = verify_chain(entries)?;
    agrees(
        verified,
        |at| entries.get(at)?.get("hash")?.as_str(),
        checkpoint,
    )
}

/// [`verify_chain_at`] of what [`read_export`] read.
pub fn verify_export_at(entries: &[Exported], checkpoint: &Checkpoint) -> Result<Verified, Broken> {
    let verified = verify_export(entries, None)?;
    let hash_at = |at: usize| match entries.get(at)? {
        Exported::Entry(value) => value.get("hash")?.as_str(),
        Exported::Malformed { .. } => None,
    };
    agrees(verified, hash_at, checkpoint)
}

/// One entry of an export as [`read_export`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Exported {
    /// An entry read strictly, for [`verify_export`] to check.
    Entry(Value),
    /// An entry malformed however its members are read: it names a member
    /// twice, or holds a lone surrogate or a number serde_json cannot hold
    /// (`1e400`), at any depth. `seq` is the one it claims (its `seq`
    /// member, named once, an integer from 0 to [`MAX_INTEGER`]).
    Malformed { seq: Option<u64> },
}

/// Reads an export: a JSON array of entries, an object with `entries`
/// (one page of `GET /__idemgate/audit`), or JSON Lines (one entry a line,
/// split at LF; lines of only spaces, tabs and CR are skipped). Entries are
/// read strictly (see [`Exported`]); a page that names a member twice, or
/// nesting deeper than [`MAX_DEPTH`] levels, cannot be read.
pub fn read_export(text: &str) -> Result<Vec<Exported>, String> {
    if nesting(text) > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    // Whether the text is one JSON value: skipped unread, the way serde_json
    // skips a raw value, so that neither a lone surrogate nor a number out
    // of a float's range (which the strict reading refuses later, entry by
    // entry) sends it to JSON Lines.
    if serde_json::from_str::<IgnoredAny>(text).is_err() {
        return text
            .split('\n')
            .filter(|line| {
                !line
                    .bytes()
                    .all(|byte| matches!(byte, b' ' | b'\t' | b'\r'))
            })
            .map(|line| {
                serde_json::from_str::<IgnoredAny>(line).map_err(|error| error.to_string())?;
                Ok(read_entry(line))
            })
            .collect();
    }
    let Outline(entries) = serde_json::from_str(text).map_err(|error| error.to_string())?;
    Ok(entries
        .iter()
        .map(|entry| read_entry(entry.get()))
        .collect())
}

/// How deep arrays and objects nest in a text, outside its strings.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn read_entry(raw: &str) -> Exported {
    match serde_json::from_str::<Strict>(raw) {
        Ok(Strict(value)) => Exported::Entry(value),
        Err(_) => Exported::Malformed {
            seq: serde_json::from_str::<SeqClaim>(raw)
                .ok()
                .and_then(|claim| claim.0),
        },
    }
}

/// The entries of an export that is one JSON value, each unread: the array,
/// or the page's `entries` (the page naming each member once).
struct Outline<'a>(Vec<&'a RawValue>);

impl<'de> Deserialize<'de> for Outline<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OutlineVisitor)
    }
}

struct OutlineVisitor;

impl<'de> Visitor<'de> for OutlineVisitor {
    type Value = Outline<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an array of entries or a page of them")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = seq.next_element()? {
            entries.push(entry);
        }
        Ok(Outline(entries))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let no_entries = || de::Error::custom("an object that holds no `entries` array");
        let mut names = HashSet::new();
        let mut entries: Option<&'de RawValue> = None;
        // A lone surrogate in a name fails here, as serde_json reads it.
        while let Some(name) = map.next_key::<String>()? {
            if name == "entries" {
                entries = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            if !names.insert(name) {
                return Err(de::Error::custom("a page that names a member twice"));
            }
        }
        let entries = entries.ok_or_else(no_entries)?;
        serde_json::from_str(entries.get())
            .map(Outline)
            .map_err(|_| no_entries())
    }
}

/// A JSON value read strictly: a member named twice, at any depth, is an
/// error (serde_json already refuses a lone surrogate).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = serde_json::Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if members.insert(name, value).is_some() {
                return Err(de::Error::custom("a member named twice"));
            }
        }
        Ok(Value::Object(members))
    }
}

/// The `seq` an entry that cannot be read strictly claims: its `seq`
/// member, named once, an integer from 0 to [`MAX_INTEGER`]. Its other
/// members are skipped unread, and names are read as bytes, so that a lone
/// surrogate elsewhere does not hide it.
struct SeqClaim(Option<u64>);

impl<'de> Deserialize<'de> for SeqClaim {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(SeqClaimVisitor)
    }
}

struct SeqClaimVisitor;

impl<'de> Visitor<'de> for SeqClaimVisitor {
    type Value = SeqClaim;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SeqClaim, A::Error> {
        let mut claims: Vec<&'de RawValue> = Vec::new();
        while let Some(IsSeq(is_seq)) = map.next_key()? {
            if is_seq {
                claims.push(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(SeqClaim(match claims[..] {
            [claim] => serde_json::from_str::<u64>(claim.get())
                .ok()
                .filter(|seq| *seq <= MAX_INTEGER),
            _ => None,
        }))
    }
}

/// Whether a member's name is `seq`, read as bytes: serde_json lets a
/// lone surrogate through in bytes (as WTF-8), never in a `str`.
struct IsSeq(bool);

impl<'de> Deserialize<'de> for IsSeq {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(IsSeqVisitor)
    }
}

struct IsSeqVisitor;

impl<'de> Visitor<'de> for IsSeqVisitor {
    type Value = IsSeq;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a member's name")
    }

    fn visit_bytes<E>(self, name: &[u8]) -> Result<IsSeq, E> {
        Ok(IsSeq(name == b"seq"))
    }

    fn visit_str<E>(self, name: &str) -> Result<IsSeq, E> {
        Ok(IsSeq(name == "seq"))
    }
}
