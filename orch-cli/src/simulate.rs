//! `orch simulate`: the trace contract of SPEC §10, and an interactive session.

use orch_runtime::dynamic::{DynOutcome, DynSession};
use std::io::{BufRead, Write};

/// One event of an events file.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `{"message": "..."}`
    Message(String),
    /// `{"tool": "name"}`
    Tool(String),
    /// `{"usage": {"prompt": n, "completion": n}}`
    Usage(u64, u64),
    /// `{"available": ["name", ...]}`
    Available(Vec<String>),
    /// `{"reset": true}`
    Reset,
}

const KINDS: &str = "message, tool, usage, available, reset";

/// Parses one line of an events file.
pub fn parse_event(line: &str) -> Result<Event, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let obj = v.as_object().ok_or_else(|| {
        "an event must be a JSON object such as {\"tool\": \"search\"}".to_owned()
    })?;
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
            let num = |k: &str| {
                o.get(k)
                    .and_then(serde_json::Value::as_u64)
                    .ok_or_else(|| format!("`usage.{k}` must be a non-negative integer"))
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

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn json_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let parts: Vec<String> = items.into_iter().map(json_str).collect();
    format!("[{}]", parts.join(","))
}

/// The trace line for the session's current state, with the outcome of a tool event.
pub fn trace_line(s: &DynSession<'_>, outcome: Option<&DynOutcome>) -> String {
    let mut allowed = s.allowed();
    allowed.sort_unstable();
    let step = s.step().map_or_else(|| "null".to_owned(), json_str);
    let mut line = format!(
        "{{\"step\":{step},\"sequenceIndex\":{},\"allowed\":{}",
        s.sequence_index(),
        json_list(allowed)
    );
    if let Some(o) = outcome {
        line.push_str(&format!(",\"outcome\":{}", json_str(o.as_str())));
        if let DynOutcome::OutOfSequence { expected } = o {
            line.push_str(&format!(
                ",\"expected\":{}",
                json_list(expected.iter().map(String::as_str))
            ));
        }
    }
    if let Some(mut b) = s.blocked_on() {
        b.sort_unstable();
        line.push_str(&format!(",\"blockedOn\":{}", json_list(b)));
    }
    line.push('}');
    line
}

/// Applies an event; returns the outcome for tool events.
pub fn apply(s: &mut DynSession<'_>, e: &Event) -> Option<DynOutcome> {
    match e {
        Event::Message(m) => s.on_user_message(m),
        Event::Tool(t) => return Some(s.record(t)),
        Event::Usage(p, c) => s.record_usage(*p, *c),
        Event::Available(names) => s.set_available(names.iter().map(String::as_str)),
        Event::Reset => s.reset(),
    }
    None
}

/// Parses every line of an events text, reporting the first bad line by number.
pub fn parse_events(name: &str, text: &str) -> Result<Vec<Event>, String> {
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        events.push(parse_event(line).map_err(|e| format!("{name}:{}: {e}", i + 1))?);
    }
    Ok(events)
}

/// Runs events and writes the trace: the initial state first, then one line per event.
pub fn run(s: &mut DynSession<'_>, events: &[Event], out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", trace_line(s, None))?;
    for e in events {
        let outcome = apply(s, e);
        writeln!(out, "{}", trace_line(s, outcome.as_ref()))?;
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
        if let Some(r) = reply {
            writeln!(out, "{r}")?;
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
        let e = parse_events("ev.jsonl", "{\"reset\": true}\n\n{\"nope\": 1}\n").unwrap_err();
        assert!(
            e.starts_with("ev.jsonl:3: unknown event kind `nope`"),
            "{e}"
        );
    }
}
