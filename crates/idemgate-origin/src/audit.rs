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
//! ```
//! let chain = serde_json::json!([]);
//! let report = idemgate_origin::audit::verify_chain(chain.as_array().unwrap());
//! assert!(report.is_ok());
//! ```

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
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Malformed => "malformed",
            Fault::Seq => "seq",
            Fault::PrevHash => "prev_hash",
            Fault::Hash => "hash",
            Fault::Head => "head",
        }
    }
}

/// The first broken entry: its position in the export (from 0), the `seq`
/// it claims (when it has one) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {index} (seq {seq:?}) breaks the chain: {}", fault.as_str())]
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

fn well_formed(entry: &Value) -> Option<&serde_json::Map<String, Value>> {
    let map = entry.as_object()?;
    if map.len() != FIELDS.len() || !FIELDS.iter().all(|name| map.contains_key(*name)) {
        return None;
    }
    map["seq"].as_u64()?;
    map["at"].as_u64()?;
    for name in ["actor", "action", "route", "target", "result"] {
        map[name].as_str()?;
    }
    for name in ["prev_hash", "hash"] {
        let hash = map[name].as_str()?;
        if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
    }
    Some(map)
}

/// Checks a chain exported oldest first; names the first broken entry.
pub fn verify_chain(entries: &[Value]) -> Result<Verified, Broken> {
    let mut previous_hash = GENESIS.to_string();
    let mut previous_seq = 0u64;
    for (index, entry) in entries.iter().enumerate() {
        let seq = entry.get("seq").and_then(Value::as_u64);
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
        entries: entries.len(),
        head_seq: previous_seq,
        head_hash: previous_hash,
    })
}

/// [`verify_chain`], and the chain must end at `head_hash` (the head the
/// summary showed when the export was taken), so that entries cut from
/// its end show too.
pub fn verify_chain_to(entries: &[Value], head_hash: &str) -> Result<Verified, Broken> {
    let verified = verify_chain(entries)?;
    if verified.head_hash != head_hash {
        return Err(Broken {
            index: entries.len(),
            seq: None,
            fault: Fault::Head,
        });
    }
    Ok(verified)
}

/// Reads an export: a JSON array of entries, an object with `entries`
/// (one page of `GET /__idemgate/audit`), or JSON Lines (one entry a line).
pub fn read_export(text: &str) -> Result<Vec<Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(entries)) => Ok(entries),
        Ok(Value::Object(mut page)) => match page.remove("entries") {
            Some(Value::Array(entries)) => Ok(entries),
            _ => Err("an object that holds no `entries` array".into()),
        },
        Ok(_) => Err("neither an array of entries nor a page of them".into()),
        Err(_) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).map_err(|error| error.to_string()))
            .collect(),
    }
}
