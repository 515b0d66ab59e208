//! What admission needs of a JSON body, read once and without a tree
//! (SPEC §1.5 and §3): its canonical form, written as the body is read,
//! and the values at the pointers its key sources name. An object whose
//! members arrive out of order is put in order as it closes, by moving the
//! bytes its members wrote. It refuses what [`super::parse`] refuses, with
//! the same message at the same place: both drive one [`Reader`].
//!
//! Why not the tree: building one allocates a list per object and array,
//! and writing it walks it again; for a 64 KiB body that was a third of
//! admission.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::{
    name_order, utf16_order, write_string, JsonError, Pointed, PointerLookup, Reader, SeenNames,
};

/// A JSON body read once: its canonical form and what its pointers found.
#[derive(Debug)]
pub struct CanonicalBody<'a> {
    canonical: Vec<u8>,
    wanted: Vec<Wanted<'a>>,
}

impl CanonicalBody<'_> {
    /// The RFC 8785 form (with exact numbers; see [`super`]).
    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }
}

impl PointerLookup for CanonicalBody<'_> {
    /// A pointer that was not asked for finds nothing: admission asks for
    /// every pointer its route's key sources name.
    fn lookup(&self, pointer: &str) -> Pointed<'_> {
        let found = self.wanted.iter().find(|wanted| wanted.pointer == pointer);
        debug_assert!(found.is_some(), "{pointer} was not asked for");
        match found.map(|wanted| &wanted.found) {
            Some(Found::Text(text)) => Pointed::Text(text),
            Some(Found::Other) => Pointed::Other,
            Some(Found::Absent) | None => Pointed::Absent,
        }
    }
}

/// Reads one JSON text as [`super::parse`] does, into its canonical form
/// and the values at `pointers` (RFC 6901).
pub fn read<'a>(bytes: &'a [u8], pointers: &[&str]) -> Result<CanonicalBody<'a>, JsonError> {
    let wanted: Vec<Wanted> = pointers
        .iter()
        .map(|pointer| Wanted::new(pointer))
        .collect();
    let mut pass = OnePass {
        reader: Reader::new(bytes)?,
        out: Vec::with_capacity(bytes.len()),
        verbatim_from: 0,
        scratch: Vec::new(),
        sorted: Vec::new(),
        members: Vec::new(),
        deepest: wanted
            .iter()
            .filter_map(|wanted| wanted.tokens.as_ref().map(Vec::len))
            .max(),
        wanted,
        path: Vec::new(),
        untracked: 0,
    };
    pass.skip_whitespace();
    pass.value(0)?;
    pass.flush(pass.reader.at);
    pass.reader.end()?;
    Ok(CanonicalBody {
        canonical: pass.out,
        wanted: pass.wanted,
    })
}

/// A pointer asked for, and what it found.
#[derive(Debug)]
struct Wanted<'a> {
    pointer: String,
    /// Its reference tokens, unescaped; `None` for a pointer that is not
    /// one (no leading `/`), which finds nothing.
    tokens: Option<Vec<Token>>,
    found: Found<'a>,
}

impl Wanted<'_> {
    fn new(pointer: &str) -> Self {
        let tokens = match pointer {
            "" => Some(Vec::new()),
            _ => pointer.strip_prefix('/').map(|tokens| {
                tokens
                    .split('/')
                    .map(|token| Token::new(token.replace("~1", "/").replace("~0", "~")))
                    .collect()
            }),
        };
        Wanted {
            pointer: pointer.to_string(),
            tokens,
            found: Found::Absent,
        }
    }

    fn matches(&self, path: &[Step]) -> bool {
        self.tokens.as_ref().is_some_and(|tokens| {
            tokens.len() == path.len()
                && tokens.iter().zip(path).all(|(token, step)| match step {
                    Step::Member(name) => token.name == *name,
                    Step::Item(index) => token.index == Some(*index),
                })
        })
    }
}

#[derive(Debug)]
struct Token {
    name: String,
    /// The array index it names: decimal digits without a leading zero,
    /// as [`super::Json::pointer`] reads them.
    index: Option<usize>,
}

impl Token {
    fn new(name: String) -> Token {
        let canonical = name == "0" || !name.starts_with('0');
        let index = name.parse().ok().filter(|_| canonical);
        Token { name, index }
    }
}

#[derive(Debug, Clone)]
enum Found<'a> {
    Absent,
    Text(Cow<'a, str>),
    Other,
}

/// Where a value is: a member's name or an item's index.
enum Step<'a> {
    Member(Cow<'a, str>),
    Item(usize),
}

/// A member of an open object: its name, and the bytes its `"name":value`
/// occupies in the output.
struct Member<'a> {
    name: Cow<'a, str>,
    start: usize,
    end: usize,
}

/// The reader and what it has written. Most of a body is written as it
/// was sent: wherever the body's bytes are already canonical (no
/// whitespace, no escape, numbers in their layout, as senders usually
/// send them), they are left in the body and copied in whole runs when
/// something differs, rather than token by token.
struct OnePass<'a> {
    reader: Reader<'a>,
    /// The canonical form up to `verbatim_from`.
    out: Vec<u8>,
    /// The body's bytes from here to the reader are the canonical form's
    /// next bytes, not yet copied into `out`.
    verbatim_from: usize,
    /// Where an object's members go while they are put in order.
    scratch: Vec<u8>,
    /// Their indices, in the order of their names.
    sorted: Vec<usize>,
    /// The members of every open object, innermost last.
    members: Vec<Member<'a>>,
    wanted: Vec<Wanted<'a>>,
    /// The most tokens of any pointer: no deeper path is followed.
    deepest: Option<usize>,
    /// The path of the value being read, while it is followed.
    path: Vec<Step<'a>>,
    /// How many containers deep the reader is below the followed path.
    untracked: usize,
}

impl<'a> OnePass<'a> {
    /// Copies the verbatim run up to `to` (a position in the body).
    #[inline]
    fn flush(&mut self, to: usize) {
        let bytes = self.reader.bytes;
        self.out.extend_from_slice(&bytes[self.verbatim_from..to]);
        self.verbatim_from = to;
    }

    /// Where the canonical form is at body position `at`, within the
    /// verbatim run.
    #[inline]
    fn written_at(&self, at: usize) -> usize {
        self.out.len() + (at - self.verbatim_from)
    }

    /// Whitespace is left out: the run stops before it and starts again
    /// after it.
    #[inline]
    fn skip_whitespace(&mut self) {
        if matches!(self.reader.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.flush(self.reader.at);
            self.reader.skip_whitespace();
            self.verbatim_from = self.reader.at;
        }
    }

    /// A string or number whose text is not what it was sent as (an
    /// escape, another layout) is written in place of its bytes.
    fn rewrite(&mut self, from: usize, canonical: impl FnOnce(&mut Vec<u8>)) {
        self.flush(from);
        canonical(&mut self.out);
        self.verbatim_from = self.reader.at;
    }

    /// Whether the children of a container are followed: only while some
    /// pointer may still name one of them.
    fn follows_children(&self) -> bool {
        self.untracked == 0
            && self
                .deepest
                .is_some_and(|deepest| self.path.len() < deepest)
    }

    fn value(&mut self, depth: usize) -> Result<(), JsonError> {
        let found = match self.reader.peek() {
            None => return Err(self.reader.error("EOF while parsing a value")),
            Some(b'n') => self.reader.literal(b"null").map(|()| Found::Absent)?,
            Some(b't') => self.reader.literal(b"true").map(|()| Found::Other)?,
            Some(b'f') => self.reader.literal(b"false").map(|()| Found::Other)?,
            Some(b'"') => Found::Text(self.string()?),
            Some(b'-' | b'0'..=b'9') => {
                let from = self.reader.at;
                let text = self.reader.number()?;
                if let Cow::Owned(text) = &text {
                    self.rewrite(from, |out| out.extend_from_slice(text.as_bytes()));
                }
                Found::Text(text)
            }
            Some(b'[') => self.array(depth + 1).map(|()| Found::Other)?,
            Some(b'{') => self.object(depth + 1).map(|()| Found::Other)?,
            Some(_) => return Err(self.reader.error("expected value")),
        };
        // Every pointer that names this value (two spellings may: `/1`
        // and `/+1` read the same item); the path is again the value's.
        if self.untracked == 0 {
            for wanted in &mut self.wanted {
                if wanted.matches(&self.path) {
                    wanted.found = found.clone();
                }
            }
        }
        Ok(())
    }

    /// A string: one borrowed from the body held no escape, and the
    /// reader refuses control characters, so its bytes are its form.
    fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let from = self.reader.at;
        let text = self.reader.string()?;
        if let Cow::Owned(text) = &text {
            self.rewrite(from, |out| write_string(text, out));
        }
        Ok(text)
    }

    /// Enters the children of a container; answers whether their path is
    /// followed (then the caller keeps its last step up to date).
    fn enter_children(&mut self, first: Step<'a>) -> bool {
        let follows = self.follows_children();
        match follows {
            true => self.path.push(first),
            false => self.untracked += 1,
        }
        follows
    }

    fn leave_children(&mut self, followed: bool) {
        match followed {
            true => drop(self.path.pop()),
            false => self.untracked -= 1,
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), JsonError> {
        self.reader.enter(depth)?;
        self.reader.at += 1;
        self.skip_whitespace();
        if self.reader.peek() == Some(b']') {
            self.reader.at += 1;
            return Ok(());
        }
        let followed = self.enter_children(Step::Item(0));
        let mut index = 0;
        loop {
            self.skip_whitespace();
            if followed {
                *self.path.last_mut().expect("entered") = Step::Item(index);
            }
            self.value(depth)?;
            self.skip_whitespace();
            match self.reader.peek() {
                Some(b',') => {
                    self.reader.at += 1;
                    index += 1;
                }
                Some(b']') => {
                    self.reader.at += 1;
                    self.leave_children(followed);
                    return Ok(());
                }
                None => return Err(self.reader.error("EOF while parsing a list")),
                Some(_) => return Err(self.reader.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), JsonError> {
        self.reader.enter(depth)?;
        self.reader.at += 1;
        let first = self.members.len();
        let mut seen = SeenNames::default();
        self.skip_whitespace();
        if self.reader.peek() == Some(b'}') {
            self.reader.at += 1;
            return Ok(());
        }
        // The step is named once each member's name is read.
        let followed = self.enter_children(Step::Member(Cow::Borrowed("")));
        loop {
            self.skip_whitespace();
            match self.reader.peek() {
                Some(b'"') => {}
                None => return Err(self.reader.error("EOF while parsing an object")),
                Some(_) => return Err(self.reader.error("key must be a string")),
            }
            let name_at = self.reader.at;
            let start = self.written_at(name_at);
            let name = self.string()?;
            if seen.is_repeated(&self.members[first..], |member| &member.name, &name) {
                self.reader.at = name_at;
                return Err(self.reader.error(format!("duplicate member name {name:?}")));
            }
            self.skip_whitespace();
            match self.reader.peek() {
                Some(b':') => self.reader.at += 1,
                None => return Err(self.reader.error("EOF while parsing an object")),
                Some(_) => return Err(self.reader.error("expected `:`")),
            }
            self.skip_whitespace();
            if followed {
                *self.path.last_mut().expect("entered") = Step::Member(name.clone());
            }
            self.value(depth)?;
            let end = self.written_at(self.reader.at);
            self.members.push(Member { name, start, end });
            self.skip_whitespace();
            match self.reader.peek() {
                Some(b',') => self.reader.at += 1,
                Some(b'}') => break,
                None => return Err(self.reader.error("EOF while parsing an object")),
                Some(_) => return Err(self.reader.error("expected `,` or `}`")),
            }
        }
        self.leave_children(followed);
        self.put_in_order(first);
        self.members.truncate(first);
        self.reader.at += 1; // the closing brace
        Ok(())
    }

    /// RFC 8785 §3.2.3: the open object's members (from `first` on) were
    /// written as they came; when they came out of order, the bytes of
    /// those between the first and the last out of place are rewritten in
    /// the order of their names (a large last member, often a list of
    /// items, usually stays where it is).
    fn put_in_order(&mut self, first: usize) {
        let in_order = self.members[first..]
            .windows(2)
            .all(|pair| utf16_order(&pair[0].name, &pair[1].name) == Ordering::Less);
        if in_order {
            return;
        }
        // The members' bytes are moved where they are, so they must be
        // there: the run so far is copied first.
        self.flush(self.reader.at);
        let members = &self.members[first..];
        let sorted = &mut self.sorted;
        name_order(sorted, members.len(), &|index| &members[index].name);
        let before = sorted
            .iter()
            .enumerate()
            .take_while(|(at, &index)| *at == index)
            .count();
        let after = sorted
            .iter()
            .enumerate()
            .rev()
            .take_while(|(at, &index)| *at == index)
            .count();
        let moved = &sorted[before..members.len() - after];
        let (from, to) = (
            members[before].start,
            members[members.len() - after - 1].end,
        );
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.out[from..to]);
        let mut at = from;
        for (count, &index) in moved.iter().enumerate() {
            if count > 0 {
                self.out[at] = b',';
                at += 1;
            }
            let member = &members[index];
            let bytes = &self.scratch[member.start - from..member.end - from];
            self.out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, Json, MAX_DEPTH};

    /// The one pass against the tree: the same form, the same values, the
    /// same refusals.
    fn agrees(text: &str, pointers: &[&str]) {
        let tree = parse(text.as_bytes());
        let pass = read(text.as_bytes(), pointers);
        match (&tree, &pass) {
            (Ok(tree), Ok(pass)) => {
                assert_eq!(
                    String::from_utf8_lossy(pass.canonical()),
                    String::from_utf8_lossy(&tree.canonical()),
                    "{text}"
                );
                for pointer in pointers {
                    assert_eq!(
                        pass.lookup(pointer),
                        tree.lookup(pointer),
                        "{pointer} in {text}"
                    );
                }
            }
            (Err(tree), Err(pass)) => assert_eq!(pass, tree, "{text}"),
            _ => panic!("{text}: tree {tree:?}, one pass {pass:?}"),
        }
    }

    #[test]
    fn members_are_put_in_order_at_every_level() {
        agrees(
            r#"{ "b": [1, 2, {"d": null, "c": true}], "a": "x", "aa": {"z": {"y": 1, "x": 2}, "m": []} }"#,
            &[],
        );
        let body = read(br#"{"b":{"d":1,"c":2},"a":[{"f":0,"e":{}}]}"#, &[]).unwrap();
        assert_eq!(
            body.canonical(),
            br#"{"a":[{"e":{},"f":0}],"b":{"c":2,"d":1}}"#
        );
    }

    #[test]
    fn strings_names_and_numbers_take_their_canonical_form() {
        for text in [
            r#""\u0041\u00e9\u20ac""#,
            r#"{"\u0062":"\ud83d\ude00","a":"\u001f\n\"\\\/"}"#,
            "{\"\u{ff61}\":2,\"\u{1f600}\":1,\"\\r\":0}",
            "[1.0, 1e0, 100e-2, -0.0, 1E21, 12345678901234567890123, 4.50]",
            "  true ",
            "null",
            "{}",
            "[]",
            "[[],{},[{}]]",
        ] {
            agrees(text, &[]);
        }
    }

    #[test]
    fn pointers_find_what_the_tree_finds() {
        let text = r#"{"a/b":{"m~n":[10,{"id":"x"}]},"":1,"id":"evt_1","n":null,"t":true,
            "data":{"object":{"id":"pi_1","amount":1.50}},"items":[{"id":7},{"id":8}]}"#;
        let pointers = [
            "",
            "/",
            "/id",
            "/n",
            "/t",
            "/missing",
            "/a~1b/m~0n/1/id",
            "/a~1b/m~0n/01",
            "/a~1b/m~0n/2",
            "/a~1b/m~0n/0",
            "/data/object/id",
            "/data/object/amount",
            "/data",
            "/items/1/id",
            "/items/-",
            "/id/deeper",
            "nope",
        ];
        agrees(text, &pointers);
        let body = read(text.as_bytes(), &pointers).unwrap();
        assert_eq!(body.lookup("/items/1/id"), Pointed::Text("8"));
        assert_eq!(body.lookup("/data/object/amount"), Pointed::Text("1.5"));
        assert_eq!(body.lookup("/data"), Pointed::Other);
        assert_eq!(body.lookup("/n"), Pointed::Absent);
        assert_eq!(
            read(br#""k-1""#, &[""]).unwrap().lookup(""),
            Pointed::Text("k-1")
        );
    }

    #[test]
    fn two_spellings_of_one_pointer_both_find_it() {
        agrees(
            r#"{"items":[{"id":7},{"id":8}]}"#,
            &["/items/1/id", "/items/+1/id"],
        );
        let body = read(br#"[5,6]"#, &["/1", "/+1"]).unwrap();
        assert_eq!(body.lookup("/+1"), Pointed::Text("6"));
    }

    #[test]
    fn a_pointer_never_reads_past_a_scalar_or_into_the_wrong_kind() {
        let pointers = ["/0", "/a/0", "/a/b", "/b/0"];
        agrees(r#"{"a":[5],"b":{"0":6}}"#, &pointers);
        agrees(r#"[{"a":1}]"#, &pointers);
        agrees(r#"{"a":"text"}"#, &pointers);
    }

    #[test]
    fn refusals_match_the_tree_byte_for_byte() {
        for text in [
            "{\"a\":",
            "[1,\n 2,]",
            "\"\u{1}\"",
            "01",
            "1.",
            "-",
            "1 2",
            "",
            r#""\ud800""#,
            r#""\x""#,
            "1e9999999999",
            "{1:2}",
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"[1 2]"#,
            r#"{"amount":1,"amount":100}"#,
            r#"{"a":1,"\u0061":2}"#,
            "nul",
            "[tru]",
            "{\"a\":{\"b\":[1,2,{\"c\":",
        ] {
            agrees(text, &["/a"]);
        }
        let members: Vec<String> = (0..40).map(|n| format!("\"m{n}\":{n}")).collect();
        for repeat in ["m0", "m17", "m39"] {
            agrees(&format!("{{{},\"{repeat}\":1}}", members.join(",")), &[]);
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        agrees(&deep, &[]);
        assert_eq!(
            read(&[b'"', 0xff, b'"'], &[]).unwrap_err().message,
            "invalid UTF-8"
        );
    }

    #[test]
    fn a_large_object_is_read_in_linear_time() {
        let members: Vec<String> = (0..200_000).map(|n| format!("\"{n:x}\":{n}")).collect();
        let body = format!("{{{}}}", members.join(","));
        crate::within(20, move || assert!(read(body.as_bytes(), &["/ff"]).is_ok()));
    }

    #[test]
    fn found_values_are_the_trees() {
        // A value the pass found is the tree's, text for text.
        let text = r#"{"id":"evt_\u0031","amount":9007199254740993,"flag":false}"#;
        let tree: Json = parse(text.as_bytes()).unwrap();
        let body = read(text.as_bytes(), &["/id", "/amount", "/flag"]).unwrap();
        assert_eq!(body.lookup("/id"), Pointed::Text("evt_1"));
        assert_eq!(body.lookup("/amount"), tree.lookup("/amount"));
        assert_eq!(body.lookup("/flag"), Pointed::Other);
    }
}
