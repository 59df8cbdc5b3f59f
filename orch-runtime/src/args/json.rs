//! The arguments of one call, read once: a strict JSON reader over the exact text the
//! model (or client) sent, into a flat tree of byte ranges. Nothing is re-encoded:
//! numbers stay the digits written, strings are decoded only when a rule compares them.
//!
//! Bounded: at most [`MAX_BYTES`] bytes, [`MAX_DEPTH`] levels and [`MAX_VALUES`] values;
//! an object that writes a key twice is refused (which of the two would the tool read?).

use std::borrow::Cow;

/// The largest arguments a rule reads, in bytes (1 MiB).
pub const MAX_BYTES: usize = 1 << 20;
/// The deepest nesting of arrays and objects a rule reads.
pub const MAX_DEPTH: usize = 64;
/// The most values (scalars, arrays, objects) a rule reads in one call's arguments.
pub const MAX_VALUES: usize = 1 << 16;

/// Why arguments could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unreadable {
    /// Not JSON (at this byte).
    Syntax(u32),
    /// An object writes this key twice (the second one starts at this byte).
    DuplicateKey(u32),
    /// Larger than [`MAX_BYTES`].
    TooLarge,
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// More than [`MAX_VALUES`] values.
    TooManyValues,
    /// A budget adds up a value the call leaves out, or one that is not a number it can
    /// add exactly: negative, more than nine decimal places, or too large (the value
    /// starts at this byte; 0 when it is missing).
    Amount(u32),
}

impl core::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Unreadable::Syntax(at) => write!(f, "the arguments are not JSON (at byte {at})"),
            Unreadable::DuplicateKey(at) => {
                write!(f, "the arguments write a key twice (at byte {at})")
            }
            Unreadable::TooLarge => write!(f, "the arguments are over {MAX_BYTES} bytes"),
            Unreadable::TooDeep => write!(f, "the arguments nest over {MAX_DEPTH} levels"),
            Unreadable::TooManyValues => write!(f, "the arguments hold over {MAX_VALUES} values"),
            Unreadable::Amount(0) => write!(
                f,
                "the value a budget adds up is missing or not a number it can add exactly"
            ),
            Unreadable::Amount(at) => write!(
                f,
                "the value a budget adds up (at byte {at}) is not a number it can add exactly: a budget adds numbers of zero or more with at most nine decimal places"
            ),
        }
    }
}

/// What a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    True,
    False,
    Number,
    /// A string; `escaped`: it holds a backslash escape (decoding allocates).
    String {
        escaped: bool,
    },
    Array,
    Object,
}

/// One value: its bytes (`start..end`, strings with their quotes), the node after its
/// subtree, its key when it is an object's member, and its number of children.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub kind: Kind,
    pub start: u32,
    pub end: u32,
    /// The index of the node after this one's subtree (its next sibling, if any).
    pub next: u32,
    /// The member's key (quotes included) and whether it is escaped; `None` outside an
    /// object.
    pub key: Option<(u32, u32, bool)>,
    /// Children of an array or object.
    pub len: u32,
}

/// The arguments of one call, read: the text and its values in document order.
#[derive(Debug)]
pub(crate) struct Doc<'a> {
    pub text: &'a str,
    pub nodes: Vec<Node>,
}

impl<'a> Doc<'a> {
    /// Reads `text` as one JSON value (whitespace around it allowed).
    pub fn parse(text: &'a str) -> Result<Self, Unreadable> {
        if text.len() > MAX_BYTES {
            return Err(Unreadable::TooLarge);
        }
        let mut r = Reader {
            text,
            b: text.as_bytes(),
            at: 0,
            // About one value per 8 bytes of typical arguments: one allocation, usually.
            nodes: Vec::with_capacity((text.len() / 8).clamp(8, 4096)),
        };
        r.ws();
        r.value(0, None)?;
        r.ws();
        if r.at != r.b.len() {
            return Err(Unreadable::Syntax(r.at as u32));
        }
        Ok(Doc {
            text,
            nodes: r.nodes,
        })
    }

    /// The raw text of node `i`.
    pub fn raw(&self, i: usize) -> &'a str {
        let n = &self.nodes[i];
        self.text
            .get(n.start as usize..n.end as usize)
            .unwrap_or("")
    }

    /// The children of node `i` (an array's elements, an object's members).
    pub fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let len = match self.nodes.get(i) {
            Some(n) if matches!(n.kind, Kind::Array | Kind::Object) => n.len,
            _ => 0,
        };
        let mut next = i + 1;
        (0..len).map(move |_| {
            let this = next;
            next = self.nodes.get(this).map_or(this + 1, |n| n.next as usize);
            this
        })
    }

    /// The decoded text of string node `i` (`None` when it is not a string).
    pub fn string(&self, i: usize) -> Option<Cow<'a, str>> {
        match self.nodes.get(i)?.kind {
            Kind::String { escaped } => Some(decode(self.raw(i), escaped)),
            _ => None,
        }
    }

    /// The decoded key of member node `i`.
    pub fn key(&self, i: usize) -> Option<Cow<'a, str>> {
        let (start, end, escaped) = self.nodes.get(i)?.key?;
        Some(decode(
            self.text.get(start as usize..end as usize)?,
            escaped,
        ))
    }

    /// The node a JSON pointer (RFC 6901) leads to from node `from`: `""` is `from`
    /// itself, `/a/0` member `a` then element `0`. `None` when nothing is there.
    pub fn pointer(&self, from: usize, pointer: &str) -> Option<usize> {
        if pointer.is_empty() {
            return Some(from);
        }
        let mut at = from;
        for token in pointer.strip_prefix('/')?.split('/') {
            let token = unescape_token(token);
            at = match self.nodes.get(at)?.kind {
                Kind::Object => self
                    .children(at)
                    .find(|&c| self.key(c).as_deref() == Some(&*token))?,
                Kind::Array => {
                    let index = array_index(&token)?;
                    self.children(at).nth(index)?
                }
                _ => return None,
            };
        }
        Some(at)
    }
}

impl Doc<'_> {
    /// Calls `visit` with every node `pointer` leads to from `from`, where a `*` token
    /// stands for every element of an array or every member of an object (so
    /// `/contacts/*/iban` is every contact's IBAN). Without `*`, [`Doc::pointer`].
    pub fn pointer_all(&self, from: usize, pointer: &str, visit: &mut dyn FnMut(usize)) {
        let Some(rest) = (if pointer.is_empty() {
            Some("")
        } else {
            pointer.strip_prefix('/')
        }) else {
            return;
        };
        if pointer.is_empty() {
            return visit(from);
        }
        let (token, tail) = match rest.split_once('/') {
            Some((t, tail)) => (t, Some(tail)),
            None => (rest, None),
        };
        let follow = |at: usize, visit: &mut dyn FnMut(usize)| match tail {
            Some(tail) => self.pointer_all(at, &format!("/{tail}"), visit),
            None => visit(at),
        };
        let kind = match self.nodes.get(from) {
            Some(n) => n.kind,
            None => return,
        };
        if token == "*" && matches!(kind, Kind::Array | Kind::Object) {
            for c in self.children(from) {
                follow(c, visit);
            }
            return;
        }
        if let Some(at) = self.pointer(from, &format!("/{token}")) {
            follow(at, visit);
        }
    }
}

/// A pointer token with `~1` and `~0` undone (RFC 6901 §4).
fn unescape_token(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    }
}

/// An array index token: digits without a leading zero (RFC 6901 §4).
fn array_index(token: &str) -> Option<usize> {
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    ok.then(|| token.parse().ok()).flatten()
}

/// Is `pointer` a JSON pointer (RFC 6901): empty, or `/`-separated tokens where `~` is
/// only ever `~0` or `~1`?
pub fn is_pointer(pointer: &str) -> bool {
    if pointer.is_empty() {
        return true;
    }
    pointer.starts_with('/') && {
        let b = pointer.as_bytes();
        b.iter()
            .enumerate()
            .all(|(i, &c)| c != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1')))
    }
}

/// The value of a JSON string literal (quotes included), read as strictly as arguments
/// are (`None` for anything else: another kind of value, a bad escape, more text).
pub fn string_literal(literal: &str) -> Option<String> {
    Doc::parse(literal).ok()?.string(0).map(Cow::into_owned)
}

/// The text of a JSON string literal (quotes included), decoded. The reader checked it.
fn decode(raw: &str, escaped: bool) -> Cow<'_, str> {
    let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or("");
    if !escaped {
        return Cow::Borrowed(inner);
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let unit = |chars: &mut core::str::Chars<'_>| {
                    let hex: String = chars.take(4).collect();
                    u32::from_str_radix(&hex, 16).unwrap_or(0xfffd)
                };
                let hi = unit(&mut chars);
                let code = if (0xd800..0xdc00).contains(&hi) {
                    // The reader checked that a low surrogate escape follows.
                    chars.next();
                    chars.next();
                    let lo = unit(&mut chars);
                    0x10000 + ((hi - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff)
                } else {
                    hi
                };
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Cow::Owned(out)
}

struct Reader<'b> {
    text: &'b str,
    b: &'b [u8],
    at: usize,
    nodes: Vec<Node>,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn err(&self) -> Unreadable {
        Unreadable::Syntax(self.at as u32)
    }

    fn push(
        &mut self,
        kind: Kind,
        start: usize,
        key: Option<(u32, u32, bool)>,
    ) -> Result<usize, Unreadable> {
        if self.nodes.len() >= MAX_VALUES {
            return Err(Unreadable::TooManyValues);
        }
        self.nodes.push(Node {
            kind,
            start: start as u32,
            end: start as u32,
            next: 0,
            key,
            len: 0,
        });
        Ok(self.nodes.len() - 1)
    }

    fn finish(&mut self, i: usize) {
        let (end, next) = (self.at as u32, self.nodes.len() as u32);
        if let Some(n) = self.nodes.get_mut(i) {
            n.end = end;
            n.next = next;
        }
    }

    fn value(&mut self, depth: usize, key: Option<(u32, u32, bool)>) -> Result<(), Unreadable> {
        let start = self.at;
        match self.b.get(self.at) {
            Some(b'{') => self.container(depth, key, Kind::Object)?,
            Some(b'[') => self.container(depth, key, Kind::Array)?,
            Some(b'"') => {
                let escaped = self.string()?;
                let i = self.push(Kind::String { escaped }, start, key)?;
                self.finish(i);
            }
            Some(b't') => self.word(b"true", Kind::True, key)?,
            Some(b'f') => self.word(b"false", Kind::False, key)?,
            Some(b'n') => self.word(b"null", Kind::Null, key)?,
            Some(b'-' | b'0'..=b'9') => {
                self.number()?;
                let i = self.push(Kind::Number, start, key)?;
                self.finish(i);
            }
            _ => return Err(self.err()),
        }
        Ok(())
    }

    fn word(
        &mut self,
        word: &[u8],
        kind: Kind,
        key: Option<(u32, u32, bool)>,
    ) -> Result<(), Unreadable> {
        if !self.b[self.at..].starts_with(word) {
            return Err(self.err());
        }
        let i = self.push(kind, self.at, key)?;
        self.at += word.len();
        self.finish(i);
        Ok(())
    }

    fn container(
        &mut self,
        depth: usize,
        key: Option<(u32, u32, bool)>,
        kind: Kind,
    ) -> Result<(), Unreadable> {
        if depth >= MAX_DEPTH {
            return Err(Unreadable::TooDeep);
        }
        let i = self.push(kind, self.at, key)?;
        let close = if kind == Kind::Object { b'}' } else { b']' };
        self.at += 1;
        self.ws();
        let mut len = 0u32;
        if self.b.get(self.at) == Some(&close) {
            self.at += 1;
        } else {
            loop {
                let member_key = if kind == Kind::Object {
                    if self.b.get(self.at) != Some(&b'"') {
                        return Err(self.err());
                    }
                    let key_start = self.at;
                    let escaped = self.string()?;
                    self.ws();
                    if self.b.get(self.at) != Some(&b':') {
                        return Err(self.err());
                    }
                    self.at += 1;
                    self.ws();
                    Some((key_start as u32, self.at_key_end(key_start), escaped))
                } else {
                    None
                };
                self.value(depth + 1, member_key)?;
                len += 1;
                self.ws();
                match self.b.get(self.at) {
                    Some(b',') => {
                        self.at += 1;
                        self.ws();
                    }
                    Some(&c) if c == close => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(self.err()),
                }
            }
        }
        if let Some(n) = self.nodes.get_mut(i) {
            n.len = len;
        }
        self.finish(i);
        if kind == Kind::Object && len > 1 {
            self.no_duplicate_keys(i)?;
        }
        Ok(())
    }

    /// The end of the key that starts at `key_start` (its closing quote included).
    fn at_key_end(&self, key_start: usize) -> u32 {
        // The key was just read: find its closing quote again by skipping escapes.
        let mut i = key_start + 1;
        while let Some(&c) = self.b.get(i) {
            match c {
                b'\\' => i += 2,
                b'"' => return (i + 1) as u32,
                _ => i += 1,
            }
        }
        i as u32
    }

    fn no_duplicate_keys(&self, object: usize) -> Result<(), Unreadable> {
        // The text as read (not validated again: once per object would make a document
        // of many objects quadratic).
        let doc = Doc {
            text: self.text,
            nodes: Vec::new(),
        };
        let end = self.nodes[object].next as usize;
        let members = || {
            let mut c = object + 1;
            core::iter::from_fn(move || {
                (c < end).then(|| {
                    let n = &self.nodes[c];
                    c = n.next as usize;
                    n.key
                })
            })
            .flatten()
        };
        // A small object without escaped keys (the usual case): compared pairwise, its
        // keys' raw texts, without allocating.
        if members().count() <= 16 && members().all(|(_, _, escaped)| !escaped) {
            let raw = |(s, e, _): (u32, u32, bool)| doc.text.get(s as usize..e as usize);
            for (i, a) in members().enumerate() {
                if let Some(b) = members().skip(i + 1).find(|&b| raw(a) == raw(b)) {
                    return Err(Unreadable::DuplicateKey(a.0.max(b.0)));
                }
            }
            return Ok(());
        }
        let mut keys: Vec<(Cow<'_, str>, u32)> = members()
            .map(|(s, e, escaped)| {
                let raw = doc.text.get(s as usize..e as usize).unwrap_or("");
                (decode(raw, escaped), s)
            })
            .collect();
        keys.sort();
        match keys.windows(2).find(|w| w[0].0 == w[1].0) {
            Some(w) => Err(Unreadable::DuplicateKey(w[0].1.max(w[1].1))),
            None => Ok(()),
        }
    }

    /// Reads a string literal; `true` when it holds an escape.
    fn string(&mut self) -> Result<bool, Unreadable> {
        self.at += 1;
        let mut escaped = false;
        loop {
            // Plain characters in one tight scan, to the next quote, escape or control.
            let rest = self.b.get(self.at..).unwrap_or_default();
            self.at += rest
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(rest.len());
            let Some(&c) = self.b.get(self.at) else {
                return Err(self.err());
            };
            match c {
                b'"' => {
                    self.at += 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.at += 1;
                    match self.b.get(self.at) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.at += 1
                        }
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            if (0xdc00..0xe000).contains(&hi) {
                                return Err(self.err());
                            }
                            if (0xd800..0xdc00).contains(&hi) {
                                if !self.b[self.at..].starts_with(b"\\u") {
                                    return Err(self.err());
                                }
                                self.at += 1;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(self.err());
                                }
                            }
                        }
                        _ => return Err(self.err()),
                    }
                }
                0..=0x1f => return Err(self.err()),
                _ => self.at += 1,
            }
        }
    }

    /// At `u` of `\uXXXX`: reads the four hex digits.
    fn hex4(&mut self) -> Result<u32, Unreadable> {
        let digits = self.b.get(self.at + 1..self.at + 5).ok_or(self.err())?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16).ok_or(self.err())?;
        }
        self.at += 5;
        Ok(v)
    }

    fn number(&mut self) -> Result<(), Unreadable> {
        let digits = |r: &mut Self| {
            let start = r.at;
            while matches!(r.b.get(r.at), Some(b'0'..=b'9')) {
                r.at += 1;
            }
            r.at > start
        };
        if self.b.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.b.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err()),
        }
        if self.b.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.err());
            }
        }
        if matches!(self.b.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.b.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.err());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_and_follows_pointers() {
        let doc =
            Doc::parse(r#" {"to": ["a", "b\u00e9"], "a/b": {"~": 1.50}, "n": null} "#).unwrap();
        let root = 0;
        let to = doc.pointer(root, "/to").unwrap();
        assert_eq!(doc.children(to).count(), 2);
        let second = doc.pointer(root, "/to/1").unwrap();
        assert_eq!(doc.string(second).unwrap(), "bé");
        assert_eq!(doc.raw(doc.pointer(root, "/a~1b/~0").unwrap()), "1.50");
        assert!(doc.pointer(root, "/to/01").is_none());
        assert!(doc.pointer(root, "/to/2").is_none());
        assert!(doc.pointer(root, "/missing").is_none());
        assert_eq!(doc.nodes[doc.pointer(root, "/n").unwrap()].kind, Kind::Null);
        assert_eq!(doc.key(doc.pointer(root, "/n").unwrap()).unwrap(), "n");
    }

    #[test]
    fn refuses_what_is_not_strict_json() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            "-",
            "\"\\x\"",
            "\"\u{1}\"",
            "tru",
            "{\"a\" 1}",
            "[1] 2",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "NaN",
        ] {
            assert!(
                matches!(Doc::parse(bad), Err(Unreadable::Syntax(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            Doc::parse(r#"{"a": 1, "\u0061": 2}"#).unwrap_err(),
            Unreadable::DuplicateKey(9)
        );
        // Small objects of plain keys are compared pairwise, larger ones sorted: both
        // find the later copy, and neither takes a key for its prefix.
        assert_eq!(
            Doc::parse(r#"{"a": 1, "ab": 2, "b": {"a": 0}, "a": 3}"#).unwrap_err(),
            Unreadable::DuplicateKey(33)
        );
        let keys = |n: usize, last: &str| {
            let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
            format!("{{{}, \"{last}\": 0}}", members.join(", "))
        };
        for n in [3, 15, 16, 40] {
            assert!(Doc::parse(&keys(n, "k")).is_ok(), "{n}");
            assert!(
                matches!(Doc::parse(&keys(n, "k1")), Err(Unreadable::DuplicateKey(_))),
                "{n}"
            );
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(Doc::parse(&deep).unwrap_err(), Unreadable::TooDeep);
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(Doc::parse(&ok).is_ok());
        let many = format!("[{}0]", "0,".repeat(MAX_VALUES));
        assert_eq!(Doc::parse(&many).unwrap_err(), Unreadable::TooManyValues);
    }

    #[test]
    fn a_star_token_is_every_element_or_member() {
        let doc = Doc::parse(
            r#"{"contacts": [{"iban": "A"}, {"name": "x"}, {"iban": "B"}], "m": {"a": 1, "b": 2}}"#,
        )
        .unwrap();
        let mut seen = Vec::new();
        doc.pointer_all(0, "/contacts/*/iban", &mut |n| {
            seen.push(doc.raw(n).to_owned())
        });
        assert_eq!(seen, ["\"A\"", "\"B\""]);
        seen.clear();
        doc.pointer_all(0, "/m/*", &mut |n| seen.push(doc.raw(n).to_owned()));
        assert_eq!(seen, ["1", "2"]);
        seen.clear();
        doc.pointer_all(0, "", &mut |n| seen.push(doc.raw(n).len().to_string()));
        assert_eq!(seen.len(), 1);
    }

    #[test]
    fn pointers_are_checked() {
        for ok in ["", "/", "/a", "/a~0b/~1", "/0"] {
            assert!(is_pointer(ok), "{ok}");
        }
        for bad in ["a", "/a~", "/a~2"] {
            assert!(!is_pointer(bad), "{bad}");
        }
    }
}
