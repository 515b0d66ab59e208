//! The reader itself: one pass over the bytes, refusing what RFC 8259
//! refuses (and a repeated member name), numbers kept exact.

use std::borrow::Cow;

use super::{Json, JsonError, Member, MAX_DEPTH, MAX_EXPONENT};

/// Objects up to this many members are searched for a repeated name one
/// by one; past it, by hash.
const LINEAR_MEMBERS: usize = 16;

/// The names one object's members had so far, to refuse a repeat.
#[derive(Default)]
pub(super) struct SeenNames {
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
    pub(super) fn is_repeated<T>(
        &mut self,
        members: &[T],
        name_of: fn(&T) -> &str,
        name: &str,
    ) -> bool {
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

pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    /// The same bytes, known to be UTF-8.
    pub(super) text: &'a str,
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`, which must be UTF-8.
    pub(super) fn new(bytes: &'a [u8]) -> Result<Reader<'a>, JsonError> {
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
    pub(super) fn end(&mut self) -> Result<(), JsonError> {
        self.skip_whitespace();
        if self.at < self.bytes.len() {
            return Err(self.error("trailing characters"));
        }
        Ok(())
    }

    pub(super) fn error(&self, message: impl Into<String>) -> JsonError {
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

    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    pub(super) fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    pub(super) fn literal(&mut self, literal: &[u8]) -> Result<(), JsonError> {
        if self.bytes[self.at..].starts_with(literal) {
            self.at += literal.len();
            Ok(())
        } else {
            Err(self.error("expected value"))
        }
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<Json<'a>, JsonError> {
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

    pub(super) fn enter(&self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            Err(self.error("recursion limit exceeded"))
        } else {
            Ok(())
        }
    }

    pub(super) fn array(&mut self, depth: usize) -> Result<Json<'a>, JsonError> {
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

    pub(super) fn object(&mut self, depth: usize) -> Result<Json<'a>, JsonError> {
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
    pub(super) fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
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

    pub(super) fn escape(&mut self, text: &mut String) -> Result<(), JsonError> {
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

    pub(super) fn hex4(&mut self) -> Result<u32, JsonError> {
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
    pub(super) fn digits(&mut self) -> std::ops::Range<usize> {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        start..self.at
    }

    /// A number, read into its exact decimal value and laid out
    /// canonically; an integer already in that layout is borrowed.
    pub(super) fn number(&mut self) -> Result<Cow<'a, str>, JsonError> {
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
