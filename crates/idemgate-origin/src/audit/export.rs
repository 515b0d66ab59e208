//! Reading an export strictly, as the Node.js and Python verifiers read it,
//! so that a hostile export reads the same in all three: an entry naming a
//! member twice, or holding a lone surrogate or a number serde_json cannot
//! hold, is [`Exported::Malformed`] rather than read one way here and
//! another there.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::{MAX_DEPTH, MAX_INTEGER};

/// One entry of an export as [`read_export`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Exported {
    /// An entry read strictly, for [`verify_export`](super::verify_export) to check.
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
pub(super) fn nesting(text: &str) -> usize {
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
pub(super) struct Strict(pub(super) Value);

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
