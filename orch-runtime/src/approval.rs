//! Human approvals of gated calls (semantics §13): the identity of one exact call, and
//! the verdict a session holds for it.
//!
//! A gated tool is never admitted on its own: `check` answers
//! [`Denied::NeedsApproval`](crate::Denied::NeedsApproval). The host shows the call to a
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
//! use orch_runtime::approval::CallDigest;
//! use demo::{Session, Tool};
//! let mut s = Session::new();
//! s.on_user_message("publish it");
//! let call = CallDigest::of_canonical("publish", br#"{"to":"blog"}"#);
//! assert!(s.check_call(Tool::Publish, &call).unwrap_err().needs_approval());
//! s.approve(call);
//! assert!(s.check_call(Tool::Publish, &call).is_ok());
//! // Another call of the same tool is not approved by it.
//! let other = CallDigest::of_canonical("publish", br#"{"to":"everyone"}"#);
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

    /// The digest of a call of `tool` whose arguments arrived as text: canonical JSON
    /// when the text is JSON, else the text itself (a call a model wrote badly is still
    /// one exact call).
    #[cfg(feature = "serde")]
    pub fn of_text(tool: &str, args: &str) -> Self {
        match serde_json::from_str::<serde_json::Value>(args) {
            Ok(v) => Self::of_json(tool, &v),
            Err(_) => {
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

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace, strings and
/// numbers as serde_json writes them.
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
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
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

/// The verdict a session holds: for which call, and what the human said. Held until the
/// next event or until the approved call is admitted. In a JSON snapshot:
/// `{"call": "<64 hex digits>", "verdict": "pending" | "approved" | "rejected"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Approval {
    /// The call it is about.
    pub call: CallDigest,
    /// What the human said.
    pub verdict: Verdict,
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
}
