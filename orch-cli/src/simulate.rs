//! `orch simulate`: the trace contract of semantics §10, and an interactive session.

use orch_runtime::approval::{Call, CallDigest};
use orch_runtime::dynamic::{DynOutcome, DynSession};
use orch_runtime::Refusal;
use std::io::{BufRead, Write};

/// One event of an events file.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `{"message": "..."}`
    Message(String),
    /// `{"tool": "name"}`
    Tool(String),
    /// `{"tool": "name", "arguments": {..}, "at": ms}`: a call at a time (milliseconds
    /// since the epoch; absent: the session's clock); with `arguments`, judged by the
    /// rules on arguments first, and charged to the budgets by them. Either key may be
    /// left out.
    Call {
        /// The tool.
        tool: String,
        /// The arguments' JSON text, when given.
        arguments: Option<String>,
        /// When the call is made.
        at: Option<u64>,
    },
    /// `{"usage": {"prompt": n, "completion": n}}`
    Usage(u64, u64),
    /// `{"available": ["name", ...]}`
    Available(Vec<String>),
    /// `{"reset": true}`
    Reset,
    /// `{"approve": "name"}`: a human approves the next call of a gated tool, in the
    /// current state (semantics §13).
    Approve(String),
    /// `{"reject": "name"}`: a human rejects the call of a gated tool; it does not run.
    Reject(String),
}

const KINDS: &str = "message, tool, usage, available, reset, approve, reject";

/// The longest event line read, in bytes (a message of a few MB is fine; an endless
/// line is an error, not an endless allocation).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Any JSON value, read only to find an object with a repeated key (which a plain JSON
/// parser resolves silently by keeping one value).
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = NoDuplicateKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut seen = std::collections::HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "the key `{key}` appears twice"
                        )));
                    }
                    map.next_value::<NoDuplicateKeys>()?;
                }
                Ok(NoDuplicateKeys)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
                Ok(NoDuplicateKeys)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A token count: a non-negative integer that fits in 64 bits.
fn count(v: &serde_json::Value, what: &str) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    match v.as_f64() {
        Some(x) if x >= 0.0 && x.fract() == 0.0 => {
            Err(format!("`{what}` is too large (at most {})", u64::MAX))
        }
        _ => Err(format!(
            "`{what}` must be a non-negative integer, found {v}"
        )),
    }
}

/// Parses one line of an events file.
pub fn parse_event(line: &str) -> Result<Event, String> {
    serde_json::from_str::<NoDuplicateKeys>(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let obj = v.as_object().ok_or_else(|| {
        "an event must be a JSON object such as {\"tool\": \"search\"}".to_owned()
    })?;
    if obj.contains_key("tool")
        && obj.len() > 1
        && obj
            .keys()
            .all(|k| ["tool", "arguments", "at"].contains(&k.as_str()))
    {
        return call_event(obj);
    }
    if obj.len() != 1 {
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        return Err(format!(
            "an event has exactly one key (one of {KINDS}); found {keys:?}"
        ));
    }
    let Some((kind, value)) = obj.iter().next() else {
        return Err(format!("an empty event; expected one of {KINDS}"));
    };
    let string = |what: &str| {
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("`{kind}` must be {what}"))
    };
    match kind.as_str() {
        "message" => Ok(Event::Message(string("a string")?)),
        "tool" => Ok(Event::Tool(string("a tool name")?)),
        "approve" => Ok(Event::Approve(string("a tool name")?)),
        "reject" => Ok(Event::Reject(string("a tool name")?)),
        "reset" => match value.as_bool() {
            Some(true) => Ok(Event::Reset),
            _ => Err("`reset` must be `true`".to_owned()),
        },
        "available" => {
            let arr = value
                .as_array()
                .ok_or("`available` must be an array of tool names")?;
            arr.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| "`available` must be an array of tool names".to_owned())
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Event::Available)
        }
        "usage" => {
            let o = value
                .as_object()
                .ok_or("`usage` must be {\"prompt\": n, \"completion\": n}")?;
            let num = |k: &str| match o.get(k) {
                Some(v) => count(v, &format!("usage.{k}")),
                None => Err(format!("`usage.{k}` is missing")),
            };
            if let Some(extra) = o.keys().find(|k| *k != "prompt" && *k != "completion") {
                return Err(format!(
                    "unknown `usage` field `{extra}` (expected prompt, completion)"
                ));
            }
            Ok(Event::Usage(num("prompt")?, num("completion")?))
        }
        other => Err(format!(
            "unknown event kind `{other}` (expected one of {KINDS})"
        )),
    }
}

/// A tool event with `arguments` or `at`.
fn call_event(obj: &serde_json::Map<String, serde_json::Value>) -> Result<Event, String> {
    let tool = obj
        .get("tool")
        .and_then(serde_json::Value::as_str)
        .ok_or("`tool` must be a tool name")?
        .to_owned();
    let arguments = match obj.get("arguments") {
        None => None,
        Some(v @ serde_json::Value::Object(_)) => Some(v.to_string()),
        Some(_) => return Err("`arguments` must be a JSON object".to_owned()),
    };
    let at = obj.get("at").map(|v| count(v, "at")).transpose()?;
    Ok(Event::Call {
        tool,
        arguments,
        at,
    })
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn json_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let parts: Vec<String> = items.into_iter().map(json_str).collect();
    format!("[{}]", parts.join(","))
}

/// What applying one event did, for its trace line.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// Not a tool event (or nothing to report).
    Nothing,
    /// A tool event: the tool was recorded, with this outcome.
    Recorded(DynOutcome),
    /// A tool event for a gated tool without a human's approval: it did not run.
    NeedsApproval,
    /// A call that breaks a rule on arguments: it did not run. The rule's name and why.
    Refused(String, String),
    /// `{"approve": t}`: the next call of `t` may run.
    Approved(String),
    /// `{"reject": t}`: the call of `t` does not run.
    Rejected(String),
}

/// The trace line for the session's current state, with what the event did.
pub fn trace_line(s: &DynSession<'_>, applied: &Applied) -> String {
    let mut allowed = s.allowed();
    allowed.sort_unstable();
    let step = s.step().map_or_else(|| "null".to_owned(), json_str);
    let mut line = format!(
        "{{\"step\":{step},\"sequenceIndex\":{},\"allowed\":{}",
        s.sequence_index(),
        json_list(allowed)
    );
    match applied {
        Applied::Recorded(o) => {
            line.push_str(&format!(",\"outcome\":{}", json_str(o.as_str())));
            if let DynOutcome::OutOfSequence { expected } = o {
                line.push_str(&format!(
                    ",\"expected\":{}",
                    json_list(expected.iter().map(String::as_str))
                ));
            }
        }
        Applied::NeedsApproval => line.push_str(",\"outcome\":\"needs_approval\""),
        Applied::Refused(rule, why) => line.push_str(&format!(
            ",\"outcome\":\"refused\",\"rule\":{},\"reason\":{}",
            json_str(rule),
            json_str(why)
        )),
        Applied::Approved(t) => line.push_str(&format!(",\"approved\":{}", json_str(t))),
        Applied::Rejected(t) => line.push_str(&format!(",\"rejected\":{}", json_str(t))),
        Applied::Nothing => {}
    }
    if let Some(mut b) = s.blocked_on() {
        b.sort_unstable();
        line.push_str(&format!(",\"blockedOn\":{}", json_list(b)));
    }
    line.push('}');
    line
}

/// Applies an event. `approved` is the tool a human has approved the next call of, if
/// any: an approval holds for the next event only (it is bound to the state it was given
/// in), and a tool the state gates runs only with it (semantics §13).
pub fn apply(s: &mut DynSession<'_>, e: &Event, approved: &mut Option<String>) -> Applied {
    let approval = approved.take();
    match e {
        Event::Message(m) => s.on_user_message(m),
        Event::Tool(t) => return unjudged(s, t, None, approval.as_deref()),
        Event::Call {
            tool,
            arguments: None,
            at,
        } => return unjudged(s, tool, *at, approval.as_deref()),
        Event::Call {
            tool,
            arguments: Some(arguments),
            at,
        } => {
            let mut call = Call::new(CallDigest::of_text(tool, arguments), arguments);
            call.at = *at;
            match s.check_call(tool, &call) {
                Err(Refusal::BrokenRule { broken, .. }) => {
                    let rule = s.rule_name(broken.rule).to_owned();
                    return Applied::Refused(rule, s.explain_broken(&broken, arguments));
                }
                Err(d) if d.needs_approval() && approval.as_deref() != Some(tool.as_str()) => {
                    return Applied::NeedsApproval;
                }
                _ => return ran(s, tool, arguments, *at),
            }
        }
        Event::Usage(p, c) => s.record_usage(*p, *c),
        Event::Available(names) => s.set_available(names.iter().map(String::as_str)),
        Event::Reset => s.reset(),
        Event::Approve(t) => {
            *approved = Some(t.clone());
            return Applied::Approved(t.clone());
        }
        Event::Reject(t) => return Applied::Rejected(t.clone()),
    }
    Applied::Nothing
}

/// A tool event without arguments: the tool runs (a gated one only with the human's
/// approval), whatever a rule on arguments would say of a call it was not given.
fn unjudged(
    s: &mut DynSession<'_>,
    tool: &str,
    at: Option<u64>,
    approved: Option<&str>,
) -> Applied {
    let gated = s.check(tool).is_err_and(|d| d.needs_approval());
    if gated && approved != Some(tool) {
        return Applied::NeedsApproval;
    }
    ran(s, tool, "{}", at)
}

/// A tool that runs: its call stored as admitting it would (arguments remembered, budgets
/// charged at `at`, else at the session's clock), then recorded.
fn ran(s: &mut DynSession<'_>, tool: &str, arguments: &str, at: Option<u64>) -> Applied {
    let mut call = Call::new(CallDigest::of_text(tool, arguments), arguments);
    call.at = at;
    s.ran_call(tool, &call);
    Applied::Recorded(s.record(tool))
}

/// Why a simulation stopped early.
#[derive(Debug)]
pub enum RunError {
    /// An event line is wrong: `name:line: what`.
    Event(String),
    /// Reading the events or writing the trace failed.
    Io(std::io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Event(e) => f.write_str(e),
            RunError::Io(e) => e.fmt(f),
        }
    }
}

/// Reads one line of at most [`MAX_EVENT_BYTES`] into `buf` (without its newline);
/// `false` at the end of the input.
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> Result<bool, String> {
    buf.clear();
    loop {
        let chunk = input.fill_buf().map_err(|e| e.to_string())?;
        if chunk.is_empty() {
            return Ok(!buf.is_empty());
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(nl) => (nl + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > MAX_EVENT_BYTES + 1 {
            return Err(format!("the line is longer than {MAX_EVENT_BYTES} bytes"));
        }
        buf.extend_from_slice(&chunk[..take]);
        input.consume(take);
        if done {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(true);
        }
    }
}

/// Runs the events of `input` (JSON lines; `name` names it in errors) and writes the
/// trace as it goes: the initial state first, then one line per event, each written
/// (and flushed) before the next event is read. A bad event stops the run with its line
/// number; the lines before it have been written.
pub fn run(
    s: &mut DynSession<'_>,
    name: &str,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> Result<(), RunError> {
    writeln!(out, "{}", trace_line(s, &Applied::Nothing)).map_err(RunError::Io)?;
    let mut approved = None;
    out.flush().map_err(RunError::Io)?;
    let mut buf = Vec::new();
    for number in 1.. {
        let more = read_line(input, &mut buf)
            .map_err(|e| RunError::Event(format!("{name}:{number}: {e}")))?;
        if !more {
            return Ok(());
        }
        let line = std::str::from_utf8(&buf)
            .map_err(|e| RunError::Event(format!("{name}:{number}: not UTF-8 text ({e})")))?;
        if line.trim().is_empty() {
            continue;
        }
        let event =
            parse_event(line).map_err(|e| RunError::Event(format!("{name}:{number}: {e}")))?;
        let applied = apply(s, &event, &mut approved);
        writeln!(out, "{}", trace_line(s, &applied)).map_err(RunError::Io)?;
        out.flush().map_err(RunError::Io)?;
    }
    Ok(())
}

/// A human-readable summary of the state (interactive mode).
fn describe(s: &DynSession<'_>) -> String {
    let step = s.step().unwrap_or("(none)");
    let mut out = format!("step: {step}");
    let len = s.sequence().len();
    if len > 0 {
        out.push_str(&format!("  sequence: {}/{len}", s.sequence_index()));
    }
    let mut allowed = s.allowed();
    allowed.sort_unstable();
    out.push_str(&format!(
        "\nallowed: {}",
        if allowed.is_empty() {
            "(none)".to_owned()
        } else {
            allowed.join(", ")
        }
    ));
    if let Some(b) = s.blocked_on() {
        out.push_str(&format!(
            "\nblocked on: {} (the host has not made it available)",
            b.join(" | ")
        ));
    }
    let u = s.usage();
    if u.total() > 0 {
        out.push_str(&format!(
            "\ntokens: {} prompt + {} completion",
            u.prompt, u.completion
        ));
    }
    out
}

const HELP: &str = "type a user message, or:
  /tool NAME          record that the host ran a tool
  /available A B C    set the host's tools (no names: every tool)
  /usage P C          add token usage
  /reset              start over
  /state              show the state
  /help, /quit";

/// An interactive session on a terminal.
pub fn interactive(
    s: &mut DynSession<'_>,
    input: impl BufRead,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let name = s.machine().name();
    writeln!(
        out,
        "orch simulate: {name} — /help for commands, /quit to leave"
    )?;
    writeln!(out, "{}", describe(s))?;
    write!(out, "> ")?;
    out.flush()?;
    for line in input.lines() {
        let line = line?;
        let line = line.trim();
        let reply = if line.is_empty() {
            None
        } else if let Some(cmd) = line.strip_prefix('/') {
            let mut parts = cmd.split_whitespace();
            match (parts.next().unwrap_or(""), parts.collect::<Vec<_>>()) {
                ("quit" | "exit" | "q", _) => break,
                ("help" | "h", _) => Some(HELP.to_owned()),
                ("state", _) => Some(describe(s)),
                ("reset", _) => {
                    s.reset();
                    Some(describe(s))
                }
                ("tool", args) if args.len() == 1 => {
                    let before = s.check(args[0]);
                    let outcome = s.record(args[0]);
                    let why = match before {
                        Err(e) => format!(" ({e})"),
                        Ok(()) => String::new(),
                    };
                    Some(format!(
                        "{}: {}{why}\n{}",
                        args[0],
                        outcome.as_str(),
                        describe(s)
                    ))
                }
                ("tool", _) => Some("usage: /tool NAME".to_owned()),
                ("available", args) => {
                    if args.is_empty() {
                        let all: Vec<String> = s.machine().tools().to_vec();
                        s.set_available(all.iter().map(String::as_str));
                    } else {
                        s.set_available(args.iter().copied());
                    }
                    Some(describe(s))
                }
                ("usage", args) => match (
                    args.first().and_then(|a| a.parse().ok()),
                    args.get(1).and_then(|a| a.parse().ok()),
                ) {
                    (Some(p), Some(c)) if args.len() == 2 => {
                        s.record_usage(p, c);
                        Some(describe(s))
                    }
                    _ => Some("usage: /usage PROMPT COMPLETION".to_owned()),
                },
                (other, _) => Some(format!("unknown command /{other}; /help lists them")),
            }
        } else {
            s.on_user_message(line);
            Some(describe(s))
        };
        // Names from the template and the line typed, escaped for the terminal.
        if let Some(r) = reply {
            writeln!(out, "{}", orch_runtime::printable::printable_lines(&r))?;
        }
        write!(out, "> ")?;
        out.flush()?;
    }
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_or_say_why() {
        assert_eq!(
            parse_event(r#"{"message": "hi"}"#),
            Ok(Event::Message("hi".into()))
        );
        assert_eq!(
            parse_event(r#"{"usage": {"prompt": 3, "completion": 4}}"#),
            Ok(Event::Usage(3, 4))
        );
        assert_eq!(parse_event(r#"{"reset": true}"#), Ok(Event::Reset));
        assert!(parse_event(r#"{"teleport": 1}"#)
            .unwrap_err()
            .contains("unknown event kind `teleport`"));
        assert!(parse_event(r#"{"tool": 3}"#)
            .unwrap_err()
            .contains("`tool` must be a tool name"));
        assert!(parse_event(r#"{"tool": "a", "message": "b"}"#)
            .unwrap_err()
            .contains("exactly one key"));
        assert!(parse_event(r#"{"usage": {"prompt": -1, "completion": 0}}"#).is_err());
        assert!(parse_event("[1]").is_err());
        assert!(parse_event("{").is_err());
        let machine =
            orch_codegen::compile_json(r#"{"agentId": "m", "orchestration": {"steps": []}}"#, None)
                .to_machine()
                .unwrap();
        let mut session = machine.session();
        let mut input: &[u8] = b"{\"reset\": true}\r\n\n{\"nope\": 1}\n";
        let mut out = Vec::new();
        let e = run(&mut session, "ev.jsonl", &mut input, &mut out).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ev.jsonl:3: unknown event kind `nope`"),
            "{e}"
        );
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2);
    }
}
