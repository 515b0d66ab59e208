//! A strict JSON reader (RFC 8259) and the canonical form of SPEC §1.5.
//!
//! Why not `serde_json` plus `serde_jcs`: a fingerprint must tell apart
//! bodies whose numbers differ in value however large or long they are,
//! and must refuse duplicate member names; `serde_json` reads numbers as
//! IEEE doubles (losing digits past 2^53 or 17 significant digits) and
//! keeps the last of two members of one name. No maintained crate reads
//! JSON with exact numbers and duplicate detection without switching
//! `serde_json` to `arbitrary_precision` for the whole build (the `worker`
//! crate included), so the reader is written here, small and fuzzed.
//!
//! The canonical form is RFC 8785 (JCS): members sorted by the UTF-16 code
//! units of their names, no whitespace, minimal string escapes, numbers in
//! ECMAScript `Number.prototype.toString` layout. One deliberate departure:
//! a number is laid out from its exact decimal value rather than from the
//! nearest double, so `9007199254740993` stays `9007199254740993` (JCS
//! would print `9007199254740992`). For every number a double holds with
//! its shortest digits (all the usual ones) the two agree byte for byte.

pub mod one_pass;
mod reader;

use reader::{Reader, SeenNames};

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

/// Nesting deeper than this is refused, as `serde_json` does.
pub const MAX_DEPTH: usize = 128;
/// Decimal exponents beyond this are refused: no payment needs them, and a
/// bound keeps the layout arithmetic far from overflow.
const MAX_EXPONENT: i64 = 1_000_000_000;

/// A parsed JSON value. Objects keep their members in the order sent
/// (names are unique); numbers keep their canonical text. Strings and
/// numbers borrow from the body wherever their text is already what it
/// stands for (no escape, a number in canonical layout), so reading a
/// large body allocates little more than its lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// The canonical text of the number's exact value.
    Number(Cow<'a, str>),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<Member<'a>>),
}

/// An object's member: its name and value.
pub type Member<'a> = (Cow<'a, str>, Json<'a>);

/// Why a body is not JSON, with where (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for JsonError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{} at line {} column {}",
            self.message, self.line, self.column
        )
    }
}

/// Parses one JSON text: exactly one value, optionally surrounded by
/// whitespace, valid UTF-8, no duplicate member names.
pub fn parse(bytes: &[u8]) -> Result<Json<'_>, JsonError> {
    let mut reader = Reader::new(bytes)?;
    reader.skip_whitespace();
    let value = reader.value(0)?;
    reader.end()?;
    Ok(value)
}

/// What a key source reads from a JSON body (SPEC §3, `json:POINTER`).
pub trait PointerLookup {
    /// The value at an RFC 6901 pointer.
    fn lookup(&self, pointer: &str) -> Pointed<'_>;
}

/// What a pointer found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pointed<'v> {
    /// No such member or item, or `null`.
    Absent,
    /// A string's text, or a number's canonical text.
    Text(&'v str),
    /// An object, an array or a boolean.
    Other,
}

impl PointerLookup for Json<'_> {
    fn lookup(&self, pointer: &str) -> Pointed<'_> {
        match self.pointer(pointer) {
            None | Some(Json::Null) => Pointed::Absent,
            Some(Json::String(text) | Json::Number(text)) => Pointed::Text(text),
            Some(_) => Pointed::Other,
        }
    }
}

impl<'a> Json<'a> {
    /// RFC 6901: `""` is the whole value, `/a/0` a member then an index.
    pub fn pointer(&self, pointer: &str) -> Option<&Json<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let mut current = self;
        for token in pointer.strip_prefix('/')?.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            current = match current {
                Json::Object(members) => &members.iter().find(|(name, _)| *name == token)?.1,
                Json::Array(items) => {
                    let valid = token == "0" || !token.starts_with('0');
                    let index: usize = token.parse().ok().filter(|_| valid)?;
                    items.get(index)?
                }
                _ => return None,
            };
        }
        Some(current)
    }

    /// The member `name` of an object.
    pub fn get(&self, name: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(members) => members.iter().find(|(key, _)| key == name).map(|m| &m.1),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(text) => Some(text),
            _ => None,
        }
    }

    /// The RFC 8785 canonical form (with exact numbers; see the module).
    pub fn canonical(&self) -> Vec<u8> {
        self.canonical_with_capacity(0)
    }

    /// [`Json::canonical`] into a buffer sized for `capacity` bytes: the
    /// size of the body read suits, as the canonical form is rarely longer.
    pub fn canonical_with_capacity(&self, capacity: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(capacity);
        self.write_canonical(&mut out);
        out
    }

    fn write_canonical(&self, out: &mut Vec<u8>) {
        match self {
            Json::Null => out.extend_from_slice(b"null"),
            Json::Bool(true) => out.extend_from_slice(b"true"),
            Json::Bool(false) => out.extend_from_slice(b"false"),
            Json::Number(text) => out.extend_from_slice(text.as_bytes()),
            Json::String(text) => write_string(text, out),
            Json::Array(items) => {
                out.push(b'[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    item.write_canonical(out);
                }
                out.push(b']');
            }
            Json::Object(members) => {
                let mut order = Vec::new();
                name_order(&mut order, members.len(), &|index| &members[index].0);
                out.push(b'{');
                for (count, &index) in order.iter().enumerate() {
                    let (name, value) = &members[index];
                    if count > 0 {
                        out.push(b',');
                    }
                    write_string(name, out);
                    out.push(b':');
                    value.write_canonical(out);
                }
                out.push(b'}');
            }
        }
    }
}

/// RFC 8785 §3.2.3: names sort by their UTF-16 code units. For ASCII
/// names (nearly all) that is their bytes' order, and names seldom share
/// their first byte.
fn utf16_order(a: &str, b: &str) -> Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(&x), Some(&y)) if x != y && x.is_ascii() && y.is_ascii() => return x.cmp(&y),
        _ => {}
    }
    if a.is_ascii() && b.is_ascii() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The indices of `count` members in the order of their names
/// (`name_of`), into `order`: one sort for both readers.
fn name_order<'n>(order: &mut Vec<usize>, count: usize, name_of: &dyn Fn(usize) -> &'n str) {
    order.clear();
    order.extend(0..count);
    order.sort_unstable_by(|&a, &b| utf16_order(name_of(a), name_of(b)));
}

/// RFC 8785 §3.2.2.2: only `"`, `\` and control characters are escaped,
/// the usual ones short, the rest as lowercase `\u00xx`.
fn write_string(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = text.as_bytes();
    // Most strings need no escape: one pass without branches finds out.
    let needs_escape = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
    if !bytes
        .iter()
        .fold(false, |any, &byte| any | needs_escape(byte))
    {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut plain_from = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        if !needs_escape(byte) {
            continue;
        }
        // Runs that need no escape are copied whole.
        out.extend_from_slice(&bytes[plain_from..at]);
        plain_from = at + 1;
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            // The other control characters.
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xf)]);
            }
        }
    }
    out.extend_from_slice(&bytes[plain_from..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests;
