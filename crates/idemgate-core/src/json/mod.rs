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
    crate::small_sort::sort_by(order, |&a, &b| {
        utf16_order(name_of(a), name_of(b)) == Ordering::Less
    });
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

/// Objects up to this many members are searched for a repeated name one
/// by one; past it, by hash.
const LINEAR_MEMBERS: usize = 16;

/// The names one object's members had so far, to refuse a repeat.
#[derive(Default)]
struct SeenNames {
    /// A bit per (length, first and last byte) seen: a name whose bit is
    /// clear cannot be a repeat, so most small objects compare no names.
    shapes: u64,
    /// The names' hashes, once there are more than [`LINEAR_MEMBERS`]
    /// (made only then: most objects are small).
    hashes: Option<std::collections::HashSet<u64>>,
}

impl SeenNames {
    /// Whether `name` is already the name of one of `members` (`name_of`
    /// reads it), the members seen so far.
    fn is_repeated<T>(&mut self, members: &[T], name_of: fn(&T) -> &str, name: &str) -> bool {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash_of = |text: &str| BuildHasherDefault::<DefaultHasher>::default().hash_one(text);
        let look = || members.iter().any(|existing| name_of(existing) == name);
        if members.len() < LINEAR_MEMBERS {
            let bytes = name.as_bytes();
            let shape = match (bytes.first(), bytes.last()) {
                (Some(&first), Some(&last)) => {
                    (bytes.len() ^ usize::from(first) ^ usize::from(last).rotate_left(3)) % 64
                }
                _ => 0,
            };
            let seen = self.shapes & (1 << shape) != 0;
            self.shapes |= 1 << shape;
            return seen && look();
        }
        let hashes = self.hashes.get_or_insert_with(|| {
            let hashes = members.iter().map(|existing| hash_of(name_of(existing)));
            hashes.collect()
        });
        // A hash seen before is a repeat, or (rarely) a collision: then look.
        !hashes.insert(hash_of(name)) && look()
    }
}

/// The bytes that end a string's plain run: its closing quote, an escape,
/// or a control character (refused). One lookup per byte.
const ENDS_A_RUN: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

struct Reader<'a> {
    bytes: &'a [u8],
    /// The same bytes, known to be UTF-8.
    text: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`, which must be UTF-8.
    fn new(bytes: &'a [u8]) -> Result<Reader<'a>, JsonError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(Reader { bytes, text, at: 0 }),
            Err(error) => {
                let reader = Reader {
                    bytes,
                    text: "",
                    at: error.valid_up_to(),
                };
                Err(reader.error("invalid UTF-8"))
            }
        }
    }

    /// After the one value: nothing but whitespace.
    fn end(&mut self) -> Result<(), JsonError> {
        self.skip_whitespace();
        if self.at < self.bytes.len() {
            return Err(self.error("trailing characters"));
        }
        Ok(())
    }

    fn error(&self, message: impl Into<String>) -> JsonError {
        let before = &self.bytes[..self.at.min(self.bytes.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        JsonError {
            message: message.into(),
            line,
            column: self.at - line_start + 1,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn literal(&mut self, literal: &[u8]) -> Result<(), JsonError> {
        if self.bytes[self.at..].starts_with(literal) {
            self.at += literal.len();
            Ok(())
        } else {
            Err(self.error("expected value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json<'a>, JsonError> {
        match self.peek() {
            None => Err(self.error("EOF while parsing a value")),
            Some(b'n') => self.literal(b"null").map(|()| Json::Null),
            Some(b't') => self.literal(b"true").map(|()| Json::Bool(true)),
            Some(b'f') => self.literal(b"false").map(|()| Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Json::Number),
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => self.object(depth + 1),
            Some(_) => Err(self.error("expected value")),
        }
    }

    fn enter(&self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            Err(self.error("recursion limit exceeded"))
        } else {
            Ok(())
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json<'a>, JsonError> {
        self.enter(depth)?;
        self.at += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                None => return Err(self.error("EOF while parsing a list")),
                Some(_) => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json<'a>, JsonError> {
        self.enter(depth)?;
        self.at += 1;
        let mut members: Vec<Member<'a>> = Vec::new();
        // A large object finds a repeated name by its hash (a linear scan
        // per member would be quadratic: seconds of CPU for a 1 MiB body).
        let mut seen = SeenNames::default();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_whitespace();
            match self.peek() {
                Some(b'"') => {}
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("key must be a string")),
            }
            let name_at = self.at;
            let name = self.string()?;
            if seen.is_repeated(&members, |(existing, _)| existing, &name) {
                self.at = name_at;
                return Err(self.error(format!("duplicate member name {name:?}")));
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b':') => self.at += 1,
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("expected `:`")),
            }
            self.skip_whitespace();
            let value = self.value(depth)?;
            members.push((name, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    /// A string: borrowed from the body when it holds no escape.
    fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        self.at += 1; // the opening quote
        let mut text: Option<String> = None;
        loop {
            let start = self.at;
            self.at += self.bytes[start..]
                .iter()
                .position(|&byte| ENDS_A_RUN[usize::from(byte)])
                .unwrap_or(self.bytes.len() - start);
            // The run stops at ASCII, so it ends on a character boundary.
            let run = &self.text[start..self.at];
            match self.peek() {
                None => return Err(self.error("EOF while parsing a string")),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(match text {
                        None => Cow::Borrowed(run),
                        Some(mut text) => {
                            text.push_str(run);
                            Cow::Owned(text)
                        }
                    });
                }
                Some(b'\\') => {
                    self.at += 1;
                    let text = text.get_or_insert_with(String::new);
                    text.push_str(run);
                    self.escape(text)?;
                }
                Some(_) => {
                    return Err(self
                        .error("control character (\\u0000-\\u001F) found while parsing a string"))
                }
            }
        }
    }

    fn escape(&mut self, text: &mut String) -> Result<(), JsonError> {
        let Some(kind) = self.peek() else {
            return Err(self.error("EOF while parsing a string"));
        };
        self.at += 1;
        let decoded = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        if !self.bytes[self.at..].starts_with(b"\\u") {
                            return Err(self.error("lone leading surrogate in hex escape"));
                        }
                        self.at += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.error("lone leading surrogate in hex escape"));
                        }
                        let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(code).expect("a surrogate pair is a scalar value")
                    }
                    0xDC00..=0xDFFF => {
                        return Err(self.error("lone trailing surrogate in hex escape"))
                    }
                    _ => char::from_u32(unit).expect("not a surrogate"),
                }
            }
            _ => return Err(self.error("invalid escape")),
        };
        text.push(decoded);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self.bytes.get(self.at..self.at + 4);
        let value = digits
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|digits| u32::from_str_radix(digits, 16).ok());
        match value {
            Some(value) => {
                self.at += 4;
                Ok(value)
            }
            None => Err(self.error("invalid escape")),
        }
    }

    /// Where the run of digits from here ends.
    fn digits(&mut self) -> std::ops::Range<usize> {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        start..self.at
    }

    /// A number, read into its exact decimal value and laid out
    /// canonically; an integer already in that layout is borrowed.
    fn number(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let integer = self.digits();
        if integer.is_empty() {
            return Err(self.error("invalid number"));
        }
        if integer.len() > 1 && self.bytes[integer.start] == b'0' {
            self.at -= integer.len() - 1;
            return Err(self.error("invalid number"));
        }
        let mut fraction = self.at..self.at;
        if self.peek() == Some(b'.') {
            self.at += 1;
            fraction = self.digits();
            if fraction.is_empty() {
                return Err(self.error("invalid number"));
            }
        }
        let mut exponent: i64 = 0;
        let mut has_exponent = false;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            has_exponent = true;
            self.at += 1;
            let negative_exponent = self.peek() == Some(b'-');
            if matches!(self.peek(), Some(b'-' | b'+')) {
                self.at += 1;
            }
            let digits = self.digits();
            if digits.is_empty() {
                return Err(self.error("invalid number"));
            }
            for &digit in &self.bytes[digits] {
                exponent = exponent * 10 + i64::from(digit - b'0');
                if exponent > MAX_EXPONENT {
                    return Err(self.error("number out of range"));
                }
            }
            if negative_exponent {
                exponent = -exponent;
            }
        }
        // An integer of up to 21 digits is laid out as it is written,
        // except for negative zero.
        let is_zero = self.bytes[integer.start] == b'0';
        if fraction.is_empty() && !has_exponent && integer.len() <= 21 && !(negative && is_zero) {
            return Ok(Cow::Borrowed(&self.text[start..self.at]));
        }
        let mut significand = self.bytes[integer].to_vec();
        significand.extend_from_slice(&self.bytes[fraction.clone()]);
        // value = significand x 10^(exponent - fraction digits)
        let scale = exponent - fraction.len() as i64;
        Ok(Cow::Owned(layout(negative, &significand, scale)))
    }
}

/// ECMAScript's `Number.prototype.toString` layout of the exact value
/// `digits x 10^scale` (ECMA-262 §6.1.6.1.20, applied to the decimal as
/// given instead of to the nearest double).
fn layout(negative: bool, digits: &[u8], scale: i64) -> String {
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return "0".to_string(); // zero, whatever its sign or layout
    };
    let last = digits
        .iter()
        .rposition(|&d| d != b'0')
        .expect("a nonzero digit");
    let s = &digits[first..=last];
    let k = s.len() as i64;
    // value = s x 10^(n - k)
    let n = scale + (digits.len() - 1 - last) as i64 + k;
    let s = std::str::from_utf8(s).expect("ASCII digits");
    let mut out = String::with_capacity(s.len() + 8);
    if negative {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(s);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&s[..n as usize]);
        out.push('.');
        out.push_str(&s[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(s);
    } else {
        out.push_str(&s[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&s[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests;
