//! The run protocol: the parts of orch's promise that every host keeps the same way —
//! `orch mcp`, `orch policy`, the agent loop, the rig hook and the Python and JavaScript
//! bindings call these and only convert (docs/protocol.md states the protocol).
//!
//! - **Questions with an identity.** A gated call is put to a human as a [`Question`]: a
//!   random nonce, bound to the run, the active step, the tool, the exact call
//!   ([`CallDigest`]), the template's fingerprint and an expiry. The session holds the
//!   question's [`QuestionId`] (a digest of all of that); an answer names the question by
//!   its [`Ticket`] (what a client echoes as `requestState`), and applies only while the
//!   run holds that very question: once, in the state it was asked in, before it
//!   expires, in the run it was asked in. Any other answer is *stale*
//!   ([`Unanswered`]) and is refused as it is — never taken as a reason to ask again, so
//!   a replayed answer can never answer a later question about the same call.
//! - **What counts as run.** [`classify`] reads a tool result: only a complete,
//!   well-formed, successful `CallToolResult` means the tool ran; an error result, an
//!   `input_required` or task result, or anything malformed means it did not, and says
//!   which ([`NotRun`]).
//!
//! ```
//! use orch_agent::protocol::{classify, NotRun, ToolResult};
//! use serde_json::json;
//! assert_eq!(classify(&json!({"content": []})), ToolResult::Ran);
//! assert_eq!(
//!     classify(&json!({"content": [], "isError": true})),
//!     ToolResult::NotRun(NotRun::Error)
//! );
//! assert_eq!(
//!     classify(&json!({"resultType": "input_required", "inputRequests": {}})),
//!     ToolResult::NotRun(NotRun::InputRequired)
//! );
//! assert!(matches!(classify(&json!({})), ToolResult::NotRun(NotRun::Malformed(_))));
//! ```

use orch_runtime::{CallDigest, QuestionId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a question put to a human stays answerable unless the host says otherwise.
pub const DEFAULT_QUESTION_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What a [`Ticket`]'s text starts with (the `requestState` orch issues).
pub const TICKET_PREFIX: &str = "orch-q1:";

/// Prefix of every hashed question, so its identity is never the digest of anything else.
const DOMAIN: &[u8] = b"orch.question.v1\0";

/// A question put to a human about one exact call (semantics §13.1): what it is bound to.
/// Its [`QuestionId`] is what the session holds; its [`Ticket`] is what the human's
/// answer must carry back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Question {
    /// A random number, new for every question.
    #[serde(with = "hex_u64")]
    pub nonce: u64,
    /// The run (store key, session or credential) the question was asked in; `""` for a
    /// host that serves one run.
    pub run: String,
    /// The active step when it was asked.
    pub step: Option<String>,
    /// The tool called.
    pub tool: String,
    /// The exact call.
    pub call: CallDigest,
    /// The compiled template's fingerprint.
    #[serde(with = "hex_u64")]
    pub fingerprint: u64,
    /// When it stops being answerable, in milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// Where the call's values were seen, one line each (semantics §16), for the human:
    /// not part of what the question is bound to. Empty when the template remembers
    /// nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<String>,
}

impl Question {
    /// A new question about the call `call` of `tool` in `run`, asked in `step` of the
    /// template `fingerprint`, answerable for `ttl` from now.
    pub fn new(
        run: &str,
        step: Option<&str>,
        tool: &str,
        call: CallDigest,
        fingerprint: u64,
        ttl: Duration,
    ) -> Question {
        Question {
            nonce: nonce(),
            run: run.to_owned(),
            step: step.map(str::to_owned),
            tool: tool.to_owned(),
            call,
            fingerprint,
            expires_ms: now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            origins: Vec::new(),
        }
    }

    /// The identity the session holds: SHA-256 over everything the question is bound to,
    /// its first eight bytes (never 0). Changing any of it — another run, step, tool,
    /// call, template, expiry or nonce — gives another identity.
    pub fn id(&self) -> QuestionId {
        let mut h = hmac_sha256::Hash::new();
        h.update(DOMAIN);
        h.update(self.nonce.to_le_bytes());
        for part in [
            self.run.as_bytes(),
            self.step.as_deref().unwrap_or("").as_bytes(),
            self.tool.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update([u8::from(self.step.is_some())]);
        h.update(self.call.as_bytes());
        h.update(self.fingerprint.to_le_bytes());
        h.update(self.expires_ms.to_le_bytes());
        let digest = h.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        QuestionId::new(u64::from_le_bytes(first).max(1))
    }

    /// What the answer must carry back: the nonce, the expiry and the call.
    pub fn ticket(&self) -> Ticket {
        Ticket {
            nonce: self.nonce,
            expires_ms: self.expires_ms,
            call: self.call,
        }
    }
}

/// The part of a [`Question`] its answer carries back (as a client's `requestState`):
/// with the run, the step, the tool and the fingerprint the answering host knows, it
/// gives the question's identity again — and only the question's. In text:
/// `orch-q1:<nonce, 16 hex digits>:<expiry, decimal ms>:<call digest, 64 hex digits>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    /// The question's nonce.
    pub nonce: u64,
    /// The question's expiry (milliseconds since the Unix epoch).
    pub expires_ms: u64,
    /// The call asked about.
    pub call: CallDigest,
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{TICKET_PREFIX}{:016x}:{}:{}",
            self.nonce, self.expires_ms, self.call
        )
    }
}

impl Ticket {
    /// Is this text meant to be one of orch's tickets (others are an upstream's own
    /// `requestState`)?
    pub fn is_ours(text: &str) -> bool {
        text.starts_with(TICKET_PREFIX)
    }

    /// Reads a ticket's text; an error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Ticket, Unanswered> {
        let malformed = || Unanswered::Malformed;
        let rest = text.strip_prefix(TICKET_PREFIX).ok_or_else(malformed)?;
        let mut parts = rest.split(':');
        let (Some(nonce), Some(expires), Some(call), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed());
        };
        if nonce.len() != 16 || expires.is_empty() || expires.len() > 20 {
            return Err(malformed());
        }
        let nonce = u64::from_str_radix(nonce, 16).map_err(|_| malformed())?;
        if !expires.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        let expires_ms = expires.parse::<u64>().map_err(|_| malformed())?;
        let call = CallDigest::from_hex(call).ok_or_else(malformed)?;
        Ok(Ticket {
            nonce,
            expires_ms,
            call,
        })
    }

    /// The identity of the question this ticket was issued for, if it was issued in
    /// `run`, in `step`, for `tool`, by the template `fingerprint`.
    pub fn question_id(
        &self,
        run: &str,
        step: Option<&str>,
        tool: &str,
        fingerprint: u64,
    ) -> QuestionId {
        Question {
            nonce: self.nonce,
            run: run.to_owned(),
            step: step.map(str::to_owned),
            tool: tool.to_owned(),
            call: self.call,
            fingerprint,
            expires_ms: self.expires_ms,
            origins: Vec::new(),
        }
        .id()
    }
}

/// Why an answer applied to no question: nothing changed and nothing runs on it. It is
/// never a reason to ask again in the same request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unanswered {
    /// The ticket is not one orch issued (it must be echoed unchanged).
    Malformed,
    /// The ticket names another call than the one retried with it.
    OtherCall,
    /// The question expired before the answer came.
    Expired,
    /// The run holds no such question: it was answered already (a replay), the run
    /// changed since it was asked (an event, another question), or it was asked in
    /// another run or template.
    Stale,
}

impl Unanswered {
    /// A stable name: `malformed`, `other_call`, `expired`, `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unanswered::Malformed => "malformed",
            Unanswered::OtherCall => "other_call",
            Unanswered::Expired => "expired",
            Unanswered::Stale => "stale",
        }
    }
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unanswered::Malformed => {
                "the answer's requestState is not one orch issued (it must be echoed unchanged)"
            }
            Unanswered::OtherCall => {
                "the answer was given for another call: a retry must repeat the tool and arguments the human was asked about"
            }
            Unanswered::Expired => "the question expired before the answer came",
            Unanswered::Stale => {
                "the answer belongs to no question the workflow run holds: it was answered already, the run changed since it was asked, or it was asked in another run"
            }
        })
    }
}

impl std::error::Error for Unanswered {}

/// What a tool result says about the call ([`classify`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolResult {
    /// A complete, successful result: the tool ran, and is recorded.
    Ran,
    /// The tool did not run (or did not finish): nothing is recorded.
    NotRun(NotRun),
}

/// Why a result does not count as the tool having run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotRun {
    /// `isError: true`: the tool failed; the model may call it again.
    Error,
    /// `resultType: "input_required"`: the server needs more input before it runs the
    /// call; the retry is a new call.
    InputRequired,
    /// A task was created (`resultType: "task"`, or a `task` instead of content): the
    /// call has not completed.
    Task,
    /// Another `resultType` this protocol does not know to be complete.
    Other(String),
    /// Not a `CallToolResult`: what is wrong with it.
    Malformed(String),
}

impl NotRun {
    /// A stable name: `error`, `input_required`, `task`, `other`, `malformed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            NotRun::Error => "error",
            NotRun::InputRequired => "input_required",
            NotRun::Task => "task",
            NotRun::Other(_) => "other",
            NotRun::Malformed(_) => "malformed",
        }
    }
}

impl fmt::Display for NotRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRun::Error => f.write_str("the result is an error (`isError: true`)"),
            NotRun::InputRequired => {
                f.write_str("the server asks for more input (`resultType: \"input_required\"`)")
            }
            NotRun::Task => f.write_str("the server created a task: the call has not completed"),
            NotRun::Other(kind) => {
                write!(f, "the result's `resultType` is `{kind}`, not `complete`")
            }
            NotRun::Malformed(why) => write!(f, "the result is not a tool result: {why}"),
        }
    }
}

/// Reads a `tools/call` result: did the tool run? Only a JSON object with a `content`
/// array, `resultType` absent or `"complete"`, no `task`, and `isError` absent, null or
/// `false` counts as run.
pub fn classify(result: &Value) -> ToolResult {
    let malformed = |why: &str| ToolResult::NotRun(NotRun::Malformed(why.to_owned()));
    let Some(result) = result.as_object() else {
        return malformed("it is not a JSON object");
    };
    let result_type = match result.get("resultType") {
        None | Some(Value::Null) => None,
        Some(Value::String(kind)) => Some(kind.as_str()),
        Some(_) => return malformed("its `resultType` is not a string"),
    };
    let has_task = result.get("task").is_some_and(|t| !t.is_null());
    if let Some(not_run) = deferred(result_type, has_task) {
        return not_run;
    }
    match result.get("content") {
        Some(Value::Array(_)) => {}
        Some(_) => return malformed("its `content` is not an array"),
        None => return malformed("it has no `content`"),
    }
    let is_error = match result.get("isError") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return malformed("its `isError` is not a boolean"),
    };
    classify_fields(result_type, has_task, is_error)
}

/// What rules on arguments read of a `tools/call` result (semantics §16): its
/// `structuredContent` when it has one, else its text: the text of its one text block,
/// or the texts of several joined by newlines (a text that is JSON has its values read;
/// other text holds none). `None` for a result with neither.
pub fn result_values(result: &Value) -> Option<String> {
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return Some(structured.to_string());
    }
    let texts: Vec<&str> = result
        .get("content")?
        .as_array()?
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    match texts.as_slice() {
        [] => None,
        [one] => Some((*one).to_owned()),
        many => Some(many.join("\n")),
    }
}

/// [`classify`] of a result a host already holds typed (an MCP SDK's `CallToolResult`,
/// whose `content` is a list by construction): its `resultType`, whether it carries a
/// `task`, and its `isError`.
pub fn classify_fields(
    result_type: Option<&str>,
    has_task: bool,
    is_error: Option<bool>,
) -> ToolResult {
    if let Some(not_run) = deferred(result_type, has_task) {
        return not_run;
    }
    match is_error {
        Some(true) => ToolResult::NotRun(NotRun::Error),
        None | Some(false) => ToolResult::Ran,
    }
}

/// A result that is not complete (yet): why, if so.
fn deferred(result_type: Option<&str>, has_task: bool) -> Option<ToolResult> {
    let not_run = |why| Some(ToolResult::NotRun(why));
    match result_type {
        None | Some("complete") if has_task => not_run(NotRun::Task),
        None | Some("complete") => None,
        Some("input_required") => not_run(NotRun::InputRequired),
        Some("task") => not_run(NotRun::Task),
        Some(other) => not_run(NotRun::Other(other.to_owned())),
    }
}

/// The entries of the JSON object `text`, in the order written, each value's text
/// untouched, a key written twice kept twice (a map would silently keep one): for a host
/// that passes a call on without re-encoding any value, and refuses ambiguous objects.
pub fn object_entries(text: &str) -> Result<Vec<(String, Box<RawValue>)>, serde_json::Error> {
    struct Entries(Vec<(String, Box<RawValue>)>);
    impl<'de> Deserialize<'de> for Entries {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Entries;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Entries, A::Error> {
                    let mut entries = Vec::new();
                    while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                        entries.push(entry);
                    }
                    Ok(Entries(entries))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    serde_json::from_str::<Entries>(text).map(|e| e.0)
}

/// The first number in the JSON text `arguments` that a host which parses numbers into
/// 64-bit integers or doubles and writes them back (as the MCP SDKs do) would pass on
/// written otherwise — an integer beyond 64 bits, a decimal past double precision, but
/// also `-0` (written back `-0.0`), `1E2` (`100.0`) or `1.50` (`1.5`) — as written;
/// `None` when every number would be passed on exactly as written (or the text is not
/// JSON: that is for the parser to say). A gateway that cannot forward such a call
/// exactly refuses it: the call a human approves and a digest names is the call as
/// written, so it judges calls and never rewrites one ([`forwarded_number`] says what
/// the number would have become).
///
/// ```
/// use orch_agent::protocol::inexact_number;
/// assert_eq!(inexact_number(r#"{"order": 7, "amount": 19.99, "big": 18446744073709551615}"#), None);
/// assert_eq!(
///     inexact_number(r#"{"order": 12345678901234567890123}"#).as_deref(),
///     Some("12345678901234567890123")
/// );
/// assert_eq!(inexact_number(r#"[0.1000000000000000000001]"#).as_deref(), Some("0.1000000000000000000001"));
/// assert_eq!(inexact_number(r#"{"delta": -0}"#).as_deref(), Some("-0"));
/// assert_eq!(inexact_number(r#"{"count": 1E2}"#).as_deref(), Some("1E2"));
/// ```
pub fn inexact_number(arguments: &str) -> Option<String> {
    let raw = serde_json::from_str::<&RawValue>(arguments).ok()?;
    first_inexact(raw, 0)
}

fn first_inexact(raw: &RawValue, depth: usize) -> Option<String> {
    if depth > 128 {
        return None;
    }
    let text = raw.get();
    match text.as_bytes().first()? {
        b'{' => serde_json::from_str::<std::collections::BTreeMap<String, &RawValue>>(text)
            .ok()?
            .values()
            .find_map(|v| first_inexact(v, depth + 1)),
        b'[' => serde_json::from_str::<Vec<&RawValue>>(text)
            .ok()?
            .into_iter()
            .find_map(|v| first_inexact(v, depth + 1)),
        b'-' | b'0'..=b'9' => {
            (forwarded_number(text).as_deref() != Some(text)).then(|| text.to_owned())
        }
        _ => None,
    }
}

/// The JSON number `lexeme` as a host that reads numbers into 64-bit integers or doubles
/// writes it back (serde_json, as the Rust MCP SDK does): `-0` becomes `-0.0`, `1E2`
/// becomes `100.0`, `12345678901234567890123` becomes `1.2345678901234568e22`; `None`
/// when it is not a number such a host reads at all.
///
/// ```
/// use orch_agent::protocol::forwarded_number;
/// assert_eq!(forwarded_number("19.99").as_deref(), Some("19.99"));
/// assert_eq!(forwarded_number("1E2").as_deref(), Some("100.0"));
/// ```
pub fn forwarded_number(lexeme: &str) -> Option<String> {
    let value = serde_json::from_str::<serde_json::Number>(lexeme).ok()?;
    serde_json::to_string(&value).ok()
}

/// [`classify`] of a result given as JSON text, as one word: `ran`, or why not (`error`,
/// `input_required`, `task`, `other`, `malformed` — text that is not JSON is malformed).
/// What the bindings expose, so every language reads results by the one rule.
pub fn result_kind(result: &str) -> &'static str {
    match classify_text(result) {
        ToolResult::Ran => "ran",
        ToolResult::NotRun(why) => why.as_str(),
    }
}

/// [`classify`] for a result's JSON text: text that is not JSON is
/// [`NotRun::Malformed`].
pub fn classify_text(result: &str) -> ToolResult {
    match serde_json::from_str::<Value>(result) {
        Ok(value) => classify(&value),
        Err(e) => ToolResult::NotRun(NotRun::Malformed(format!("not JSON: {e}"))),
    }
}

pub use orch_runtime::approval::nonce;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if text.len() != 16 {
            return Err(serde::de::Error::custom("expected 16 hex digits"));
        }
        u64::from_str_radix(&text, 16)
            .map_err(|_| serde::de::Error::custom("expected 16 hex digits"))
    }
}

/// The ids that more than one of a model response's tool calls carry (empty ids
/// ignored): a result or an approval for one of them could be taken for another, so no
/// call under a shared id runs ([`shared_id_refusal`]).
pub fn shared_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut shared: Vec<String> = Vec::new();
    for id in ids.into_iter().filter(|id| !id.is_empty()) {
        if seen.contains(&id) {
            if !shared.iter().any(|s| s == id) {
                shared.push(id.to_owned());
            }
        } else {
            seen.push(id);
        }
    }
    shared
}

/// The refusal of a call of `tool` whose id `id` another call of the same model
/// response carries too.
pub fn shared_id_refusal(tool: &str, id: &str) -> crate::policy::refusal::Refusal {
    crate::policy::refusal::Refusal {
        tool: tool.to_owned(),
        kind: crate::policy::refusal::RefusalKind::NotAllowed,
        reason: format!(
            "error: `{tool}` was not run: the model gave two tool calls the same id `{id}`; each call needs an id of its own."
        ),
        rule: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question() -> Question {
        Question::new(
            "run:a",
            Some("Checkout"),
            "pay",
            CallDigest::of_canonical("pay", b"{}"),
            42,
            Duration::from_secs(60),
        )
    }

    #[test]
    fn a_question_is_bound_to_everything_it_is_about() {
        let q = question();
        let id = q.id();
        assert_ne!(id, QuestionId::NONE);
        let t = q.ticket();
        assert_eq!(Ticket::parse(&t.to_string()), Ok(t));
        assert_eq!(t.question_id("run:a", Some("Checkout"), "pay", 42), id);
        // Another run, step, tool or template: another identity.
        assert_ne!(t.question_id("run:b", Some("Checkout"), "pay", 42), id);
        assert_ne!(t.question_id("run:a", Some("Browse"), "pay", 42), id);
        assert_ne!(t.question_id("run:a", None, "pay", 42), id);
        assert_ne!(t.question_id("run:a", Some("Checkout"), "refund", 42), id);
        assert_ne!(t.question_id("run:a", Some("Checkout"), "pay", 43), id);
        // An expiry moved in the ticket: another identity.
        let moved = Ticket {
            expires_ms: t.expires_ms + 1,
            ..t
        };
        assert_ne!(moved.question_id("run:a", Some("Checkout"), "pay", 42), id);
        // Two questions about the same call differ.
        assert_ne!(question().id(), id);
        // The question survives JSON.
        let back: Question = serde_json::from_value(serde_json::to_value(&q).unwrap()).unwrap();
        assert_eq!(back, q);
    }

    #[test]
    fn tickets_are_read_strictly() {
        let t = question().ticket().to_string();
        for bad in [
            "",
            "orch-q1:",
            "orch-approval:00",
            &t.replace("orch-q1:", "orch-q2:"),
            &format!("{t}:1"),
            &t[..t.len() - 1],
            &t.replacen(':', ":+", 2),
        ] {
            assert_eq!(Ticket::parse(bad), Err(Unanswered::Malformed), "{bad}");
        }
    }

    #[test]
    fn only_a_complete_successful_result_counts_as_run() {
        assert_eq!(classify(&json!({"content": []})), ToolResult::Ran);
        assert_eq!(
            classify(&json!({"content": [], "isError": false, "resultType": "complete"})),
            ToolResult::Ran
        );
        for (result, kind) in [
            (json!({"content": [], "isError": true}), "error"),
            (json!({"resultType": "input_required"}), "input_required"),
            (json!({"resultType": "task", "task": {}}), "task"),
            (json!({"task": {"taskId": "1"}}), "task"),
            (json!({"resultType": "later", "content": []}), "other"),
            (json!({}), "malformed"),
            (json!({"foo": 1}), "malformed"),
            (json!([]), "malformed"),
            (json!({"content": "x"}), "malformed"),
            (json!({"content": [], "isError": "no"}), "malformed"),
            (json!({"content": [], "resultType": 1}), "malformed"),
        ] {
            match classify(&result) {
                ToolResult::NotRun(why) => assert_eq!(why.as_str(), kind, "{result}"),
                ToolResult::Ran => panic!("{result} counted as run"),
            }
        }
    }
}
