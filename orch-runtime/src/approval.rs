//! Human approvals of gated calls (semantics §13): the identity of one exact call, and
//! the verdict a session holds for it.
//!
//! A gated tool is never admitted on its own: `check` answers
//! [`Refusal::NeedsApproval`](crate::Refusal::NeedsApproval). The host shows the call to a
//! human and stores the answer in the session with `approve` or `reject` — or, when the
//! answer comes later (a paused turn, a client asked over MCP), first `ask`, which holds
//! the question, then `answer`, which applies only while the session still holds it —
//! naming the call by its [`CallDigest`] — the SHA-256 of the tool's name and its arguments in
//! canonical form. The verdict is bound to that exact call and to the session's state:
//! the next event (a recorded tool, a user message, a reset) clears it, and admitting
//! the approved call consumes it, so one approval lets exactly one call run.
//!
//! ```
//! # orch_runtime::__doc_machine!();
//! use orch_runtime::approval::{Call, CallDigest};
//! use demo::{Session, Tool};
//! let mut s = Session::new();
//! s.on_user_message("publish it");
//! let args = r#"{"to":"blog"}"#;
//! let call = Call::new(CallDigest::of_canonical("publish", args.as_bytes()), args);
//! assert!(s.check_call(Tool::Publish, &call).unwrap_err().needs_approval());
//! s.approve(call.digest);
//! assert!(s.check_call(Tool::Publish, &call).is_ok());
//! // Another call of the same tool is not approved by it.
//! let other = r#"{"to":"everyone"}"#;
//! let other = Call::new(CallDigest::of_canonical("publish", other.as_bytes()), other);
//! assert!(s.check_call(Tool::Publish, &other).is_err());
//! // Admitting the approved call consumes the approval.
//! assert!(s.admit_call(Tool::Publish, &call).is_ok());
//! assert!(s.check_call(Tool::Publish, &call).is_err());
//! ```

use core::fmt;

/// Prefix of every hashed call, so a digest of a call is never the digest of something
/// else hashed the same way.
const DOMAIN: &[u8] = b"orch.call.v1\0";
/// The tag of arguments that are not JSON (hashed as the raw text).
#[cfg(feature = "serde")]
const RAW: &[u8] = b"\0raw\0";

/// The identity of one exact tool call: SHA-256 over the tool's name and its arguments
/// in canonical form (for JSON: object keys sorted, no insignificant whitespace), so
/// the same call written twice has one digest and any other call — another tool, one
/// argument changed — has another (collision resistance is SHA-256's).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallDigest([u8; 32]);

impl CallDigest {
    /// The digest of a call of `tool` whose arguments are already canonical bytes.
    pub fn of_canonical(tool: &str, canonical_args: &[u8]) -> Self {
        let mut h = hmac_sha256::Hash::new();
        h.update(DOMAIN);
        h.update((tool.len() as u64).to_le_bytes());
        h.update(tool.as_bytes());
        h.update(canonical_args);
        CallDigest(h.finalize())
    }

    /// The digest of a call of `tool` with these JSON arguments, in canonical form.
    #[cfg(feature = "serde")]
    pub fn of_json(tool: &str, args: &serde_json::Value) -> Self {
        let mut canonical = Vec::new();
        write_canonical(args, &mut canonical);
        Self::of_canonical(tool, &canonical)
    }

    /// The digest of a call of `tool` whose arguments arrived as text: the text in
    /// canonical form when it is JSON — RFC 8785's (object keys sorted by their UTF-16
    /// code units, no insignificant whitespace, strings escaped minimally) except that
    /// **numbers are kept exactly as written**, so no two calls that differ in any digit
    /// share a digest (`12345678901234567890123` is not `12345678901234567890124`, and
    /// `1.0` is not `1`) — else the text itself (a call a model wrote badly is still one
    /// exact call). An object with a key written twice is hashed as its text: which of
    /// the two a tool reads is the tool's.
    #[cfg(feature = "serde")]
    pub fn of_text(tool: &str, args: &str) -> Self {
        let mut canonical = Vec::with_capacity(args.len());
        match serde_json::from_str::<&serde_json::value::RawValue>(args) {
            Ok(raw) if write_canonical_text(raw, &mut canonical, 0).is_ok() => {
                Self::of_canonical(tool, &canonical)
            }
            _ => {
                let mut raw = Vec::with_capacity(RAW.len() + args.len());
                raw.extend_from_slice(RAW);
                raw.extend_from_slice(args.as_bytes());
                Self::of_canonical(tool, &raw)
            }
        }
    }

    /// The digest's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A digest from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        CallDigest(bytes)
    }

    /// A digest from its 64 lowercase or uppercase hex digits; `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let hex = hex.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
            let digit = |c: u8| (c as char).to_digit(16);
            *o = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Some(CallDigest(out))
    }
}

/// One exact call as the engine judges it: its identity ([`CallDigest`]) and its
/// arguments' text, exactly as sent — what rules on arguments read (semantics §16).
///
/// ```
/// use orch_runtime::{Call, CallDigest};
/// let args = r#"{"to": "blog"}"#;
/// let call = Call::new(CallDigest::of_canonical("publish", br#"{"to":"blog"}"#), args);
/// assert_eq!(call.arguments, args);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Call<'a> {
    /// The call's identity: what an approval is bound to.
    pub digest: CallDigest,
    /// The arguments' text as sent (a JSON object, usually).
    pub arguments: &'a str,
    /// When the call is made, in milliseconds since the Unix epoch, by the host's clock:
    /// budgets with a window judge by it (semantics §17). `None`: the session's clock
    /// (the newest time a host gave it), so a host that gives no time never lets a
    /// window pass.
    pub at: Option<u64>,
}

impl<'a> Call<'a> {
    /// The call with identity `digest` and arguments `arguments` (the text the digest
    /// was taken of).
    pub const fn new(digest: CallDigest, arguments: &'a str) -> Self {
        Call {
            digest,
            arguments,
            at: None,
        }
    }

    /// The same call, made at `ms` milliseconds since the Unix epoch.
    pub const fn at(mut self, ms: u64) -> Self {
        self.at = Some(ms);
        self
    }

    /// The call of `tool` with arguments `arguments`, its digest taken by
    /// [`CallDigest::of_text`].
    #[cfg(feature = "serde")]
    pub fn of_text(tool: &str, arguments: &'a str) -> Self {
        Call {
            digest: CallDigest::of_text(tool, arguments),
            arguments,
            at: None,
        }
    }
}

impl fmt::Display for CallDigest {
    /// 64 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for CallDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CallDigest({self})")
    }
}

/// Canonical JSON of a parsed value: object keys sorted by their UTF-16 code units, no
/// whitespace, strings and numbers as serde_json writes them (a number already parsed
/// into a `Value` is what it parsed to: hosts with the text use [`CallDigest::of_text`]).
#[cfg(feature = "serde")]
fn write_canonical(v: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match v {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // Writing a string or a scalar into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// The canonical form [`CallDigest::of_text`] hashes, as text: RFC 8785's, numbers kept
/// as written. `None` when `text` is not JSON, writes a key of one object twice, or nests
/// deeper than 128 levels.
#[cfg(feature = "serde")]
pub fn canonical_json(text: &str) -> Option<String> {
    let raw = serde_json::from_str::<&serde_json::value::RawValue>(text).ok()?;
    let mut out = Vec::with_capacity(text.len());
    write_canonical_text(raw, &mut out, 0).ok()?;
    String::from_utf8(out).ok()
}

/// RFC 8785's order of object keys: by their UTF-16 code units.
#[cfg(feature = "serde")]
fn utf16_order(a: &str, b: &str) -> core::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// How deep [`write_canonical_text`] follows nested arrays and objects (serde_json's own
/// parser stops at 128 already; this keeps the recursion bounded on its own).
#[cfg(feature = "serde")]
const MAX_DEPTH: usize = 128;

/// Canonical JSON of JSON text, numbers kept as written ([`CallDigest::of_text`]).
/// `Err` for an object with a duplicate key or nesting past [`MAX_DEPTH`].
#[cfg(feature = "serde")]
fn write_canonical_text(
    raw: &serde_json::value::RawValue,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ()> {
    use serde_json::value::RawValue;
    if depth > MAX_DEPTH {
        return Err(());
    }
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'{') => {
            let mut entries: Vec<(String, &RawValue)> =
                serde_json::from_str::<Entries<'_>>(text).map_err(|_| ())?.0;
            entries.sort_by(|a, b| utf16_order(&a.0, &b.0));
            if entries.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(());
            }
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, &k);
                out.push(b':');
                write_canonical_text(v, out, depth + 1)?;
            }
            out.push(b'}');
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| ())?;
            out.push(b'[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical_text(item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Some(b'"') => {
            let decoded: String = serde_json::from_str(text).map_err(|_| ())?;
            let _ = serde_json::to_writer(&mut *out, &decoded);
        }
        // A number, `true`, `false` or `null`: exactly as written (the parser checked it).
        _ => out.extend_from_slice(text.as_bytes()),
    }
    Ok(())
}

/// An object's entries in the order written, duplicates kept (serde_json's maps would
/// silently keep one).
#[cfg(feature = "serde")]
struct Entries<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

#[cfg(feature = "serde")]
impl<'de: 'a, 'a> serde::Deserialize<'de> for Entries<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(core::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries<'a>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) =
                    map.next_entry::<String, &'de serde_json::value::RawValue>()?
                {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visit(core::marker::PhantomData))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for CallDigest {
    /// 64 lowercase hex digits.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for CallDigest {
    /// 64 hex digits; anything else is an error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        CallDigest::from_hex(&text).ok_or_else(|| {
            serde::de::Error::custom("a call digest must be 64 hex digits (SHA-256)")
        })
    }
}

/// Where a human stands on one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub enum Verdict {
    /// A human was asked about the call and has not answered: the call still needs
    /// approval, and only an answer to this very question (`answer`) settles it.
    Pending,
    /// The call may run, once.
    Approved,
    /// The call must not run; asking again in this state gets the same answer.
    Rejected,
}

/// The verdict a session holds: for which call, in answer to which question, and what the
/// human said. Held until the next event or until the approved call is admitted. In a
/// JSON snapshot: `{"call": "<64 hex digits>", "verdict": "pending" | "approved" |
/// "rejected", "question": "<16 hex digits>"}` (`question` absent when it is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Approval {
    /// The call it is about.
    pub call: CallDigest,
    /// What the human said.
    pub verdict: Verdict,
    /// The identity of the question the verdict answers (or, pending, waits on): a value
    /// the host chose when it asked ([`QuestionId`]), so that an answer applies to the one
    /// question it was given for and to no later question about the same call. `0` for
    /// a verdict held without a question (`approve`, `reject`, or `ask` without an id).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "QuestionId::is_none")
    )]
    pub question: QuestionId,
}

/// The identity of a question put to a human about one call (semantics §13.1): chosen by
/// the host when it asks — a random nonce, or a digest binding the nonce to what the
/// question is about (the run protocol of `orch-agent` does that) — and required of the
/// answer. `QuestionId::new(0)` is "no identity". In JSON: 16 lowercase hex digits. Kept
/// as bytes, so that a session holding one stays byte-aligned.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct QuestionId([u8; 8]);

impl QuestionId {
    /// The absent identity (`0`).
    pub const NONE: QuestionId = QuestionId([0; 8]);

    /// The identity `id`.
    pub const fn new(id: u64) -> QuestionId {
        QuestionId(id.to_le_bytes())
    }

    /// The identity as a number.
    pub const fn get(&self) -> u64 {
        u64::from_le_bytes(self.0)
    }

    /// Is this the absent identity?
    pub fn is_none(&self) -> bool {
        self.get() == 0
    }

    /// A new random identity ([`nonce`]).
    pub fn random() -> QuestionId {
        QuestionId::new(nonce())
    }
}

/// A new random number, never 0: SipHash under the process's secret hash keys (drawn from
/// the operating system's randomness by the standard library) over a counter, the clock
/// and (where there is one) the process id, so that no two of a process repeat and none can be predicted
/// without the keys. For question identities and lease tokens.
pub fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = KEYS
        .get_or_init(std::collections::hash_map::RandomState::new)
        .build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    // WASI has no process ids (asking panics there); the hash keys differ per process
    // anyway.
    #[cfg(not(target_family = "wasm"))]
    h.write_u32(std::process::id());
    h.finish().max(1)
}

impl fmt::Display for QuestionId {
    /// 16 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.get())
    }
}

impl fmt::Debug for QuestionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QuestionId({self})")
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for QuestionId {
    /// 16 lowercase hex digits.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for QuestionId {
    /// 16 hex digits; anything else is an error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if text.len() != 16 {
            return Err(serde::de::Error::custom(
                "a question id must be 16 hex digits",
            ));
        }
        u64::from_str_radix(&text, 16)
            .map(QuestionId::new)
            .map_err(|_| serde::de::Error::custom("a question id must be 16 hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_bind_the_tool_and_the_exact_arguments() {
        let a = CallDigest::of_canonical("pay", b"{\"amount\":1}");
        assert_eq!(a, CallDigest::of_canonical("pay", b"{\"amount\":1}"));
        assert_ne!(a, CallDigest::of_canonical("pay", b"{\"amount\":2}"));
        assert_ne!(a, CallDigest::of_canonical("refund", b"{\"amount\":1}"));
        // The name's length is hashed: moving bytes between name and arguments changes it.
        assert_ne!(
            CallDigest::of_canonical("ab", b"c"),
            CallDigest::of_canonical("a", b"bc")
        );
        assert_eq!(CallDigest::from_hex(&a.to_string()), Some(a));
        assert_eq!(CallDigest::from_hex("zz"), None);
        assert_eq!(CallDigest::from_hex(&"g".repeat(64)), None);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_arguments_are_canonical() {
        let a = CallDigest::of_text("pay", r#"{"b": [1, {"y":2,"x":1}], "a": "é"}"#);
        let b = CallDigest::of_text("pay", r#"{"a":"é","b":[1,{"x":1,"y":2}]}"#);
        assert_eq!(a, b);
        assert_ne!(
            a,
            CallDigest::of_text("pay", r#"{"a":"é","b":[{"x":1,"y":2},1]}"#)
        );
        // Text that is not JSON is one exact call too, never equal to a JSON one.
        assert_eq!(
            CallDigest::of_text("pay", "{oops"),
            CallDigest::of_text("pay", "{oops")
        );
        assert_ne!(
            CallDigest::of_text("pay", "1"),
            CallDigest::of_text("pay", " 1x")
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn numbers_are_kept_as_written() {
        let digest = |args: &str| CallDigest::of_text("pay", args);
        // Beyond 64 bits and beyond double precision: every digit counts.
        assert_ne!(
            digest(r#"{"order": 12345678901234567890123}"#),
            digest(r#"{"order": 12345678901234567890124}"#)
        );
        assert_ne!(
            digest(r#"{"amount": 0.1000000000000000000001}"#),
            digest(r#"{"amount": 0.1000000000000000000002}"#)
        );
        assert_ne!(digest(r#"{"a": 1.0}"#), digest(r#"{"a": 1}"#));
        // Whitespace and key order still do not.
        assert_eq!(
            digest(r#"{ "b" : [1, 2.50] , "a" : "x\u0041" }"#),
            digest(r#"{"a":"xA","b":[1,2.50]}"#)
        );
        // A key written twice: the call is its text.
        assert_ne!(digest(r#"{"a":1,"a":2}"#), digest(r#"{"a":2}"#));
        assert_eq!(digest(r#"{"a":1,"a":2}"#), digest(r#"{"a":1,"a":2}"#));
        // Keys in RFC 8785 order (UTF-16 code units): U+FF61 sorts after U+1F600's
        // surrogates, though its UTF-8 bytes sort before them.
        let mut out = Vec::new();
        let raw: &serde_json::value::RawValue =
            serde_json::from_str("{\"\u{ff61}\":1,\"\u{1f600}\":2}").unwrap();
        write_canonical_text(raw, &mut out, 0).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"\u{1f600}\":2,\"\u{ff61}\":1}"
        );
        // Nesting deeper than serde_json parses is raw text, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(digest(&deep), digest(&deep));
    }
}
