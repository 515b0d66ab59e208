//! The chain's rules: each entry's hash, `seq` and `prev_hash`, and where
//! the chain must end (a head, a checkpoint).

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Broken, Checkpoint, Exported, Fault, Verified, FIELDS, GENESIS, MAX_INTEGER};

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

/// [`verify_chain`] of what [`read_export`](super::read_export) read, and [`verify_chain_to`]
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

/// [`verify_chain_at`] of what [`read_export`](super::read_export) read.
pub fn verify_export_at(entries: &[Exported], checkpoint: &Checkpoint) -> Result<Verified, Broken> {
    let verified = verify_export(entries, None)?;
    let hash_at = |at: usize| match entries.get(at)? {
        Exported::Entry(value) => value.get("hash")?.as_str(),
        Exported::Malformed { .. } => None,
    };
    agrees(verified, hash_at, checkpoint)
}
