//! `orch check-trace`: grade a recorded conversation against a template. A transcript —
//! OpenAI chat-completions messages, Anthropic messages, or orch's own decision records —
//! becomes events (user messages, tool calls, which of them ran), replayed through the
//! engine exactly as an orchestrated host would have applied them: each call judged
//! against the state the calls before it left, each call that ran recorded. The report
//! says which calls the workflow would have refused and why, which ran anyway, which
//! steps were visited, and which properties (semantics §14) the executions violate.

use orch_agent::audit::{AuditEvent, DecisionRecord};
use orch_agent::{Orchestrated, Policy};
use orch_codegen::ir::{IrProperty, IrRule};
use orch_runtime::compiled::glob_match;
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::printable::printable;
use orch_runtime::{Call, CallDigest};
use serde_json::{json, Value};
use std::collections::HashSet;

/// Which kind of transcript it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// OpenAI chat completions (`tool_calls`, `role: "tool"`).
    OpenAi,
    /// Anthropic messages (`tool_use` / `tool_result` blocks).
    Anthropic,
    /// orch's decision records (JSON lines).
    Orch,
}

impl TraceFormat {
    fn as_str(self) -> &'static str {
        match self {
            TraceFormat::OpenAi => "openai",
            TraceFormat::Anthropic => "anthropic",
            TraceFormat::Orch => "orch",
        }
    }
}

/// One event of a transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A user message.
    Message(String),
    /// A tool call the model made.
    Call {
        /// The call's id (its position when the transcript has none).
        id: String,
        /// The tool.
        tool: String,
        /// The call's digest.
        call: CallDigest,
        /// Its arguments as written (what rules on arguments judge; empty when the
        /// source does not have them).
        arguments: String,
        /// When it was judged (ms since the Unix epoch), when the source says: decision
        /// records do, for budgets with a window (semantics §17).
        at: Option<u64>,
    },
    /// A tool result: the call `id` ran.
    Ran(String),
    /// A human approved the call (orch records only).
    Approved(CallDigest),
}

/// Why a transcript cannot be read ([`parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceError {
    /// The text is neither decision records nor JSON.
    NotJson(String),
    /// An object without a `messages` array.
    NoMessages,
    /// JSON that is neither an array of messages nor an object with `messages`.
    NotATrace,
    /// Message `index` (from 1) is not one orch can read.
    Message {
        /// Its position, from 1.
        index: usize,
        /// What is wrong with it.
        why: String,
    },
    /// Line `line` (from 1) of a decision log is not a decision record.
    Record {
        /// Its line, from 1.
        line: usize,
        /// Why it does not parse.
        why: String,
    },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::NotJson(e) => write!(f, "the trace is not JSON: {e}"),
            TraceError::NoMessages => f.write_str("a trace object must have a `messages` array"),
            TraceError::NotATrace => {
                f.write_str("a trace is an array of messages, or an object with `messages`")
            }
            TraceError::Message { index, why } => write!(f, "message {index}: {why}"),
            TraceError::Record { line, why } => {
                write!(f, "line {line}: not a decision record: {why}")
            }
        }
    }
}

impl std::error::Error for TraceError {}

/// Reads a transcript: orch records (JSON lines), or a JSON array of messages (or an
/// object with `messages`) in OpenAI's or Anthropic's shape.
pub fn parse(text: &str) -> Result<(TraceFormat, Vec<TraceEvent>), TraceError> {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if serde_json::from_str::<DecisionRecord>(first).is_ok() {
        return parse_records(text).map(|e| (TraceFormat::Orch, e));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| TraceError::NotJson(e.to_string()))?;
    let messages = match &value {
        Value::Array(m) => m,
        Value::Object(o) => match o.get("messages") {
            Some(Value::Array(m)) => m,
            _ => return Err(TraceError::NoMessages),
        },
        _ => return Err(TraceError::NotATrace),
    };
    let mut events = Vec::new();
    let mut anthropic = false;
    for (i, m) in messages.iter().enumerate() {
        let at = |why: &str| TraceError::Message {
            index: i + 1,
            why: why.to_owned(),
        };
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| at("it has no `role`"))?;
        let content = m.get("content");
        match role {
            "system" | "developer" => {}
            "user" => match content {
                Some(Value::String(text)) => events.push(TraceEvent::Message(text.clone())),
                Some(Value::Array(blocks)) => {
                    let mut text = Vec::new();
                    for b in blocks {
                        match b.get("type").and_then(Value::as_str) {
                            Some("text") => {
                                text.push(b.get("text").and_then(Value::as_str).unwrap_or(""))
                            }
                            Some("tool_result") => {
                                anthropic = true;
                                let id = b
                                    .get("tool_use_id")
                                    .and_then(Value::as_str)
                                    .ok_or_else(|| at("a `tool_result` has no `tool_use_id`"))?;
                                events.push(TraceEvent::Ran(id.to_owned()));
                            }
                            _ => {}
                        }
                    }
                    if !text.is_empty() {
                        events.push(TraceEvent::Message(text.join("\n")));
                    }
                }
                _ => {}
            },
            "assistant" => {
                if let Some(Value::Array(calls)) = m.get("tool_calls") {
                    for c in calls {
                        let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
                        let f = c
                            .get("function")
                            .ok_or_else(|| at("a tool call has no `function`"))?;
                        let tool = f
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or_else(|| at("a tool call has no function `name`"))?;
                        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("");
                        let digest = CallDigest::of_text(tool, args);
                        events.push(call(id, tool, &digest, args, events.len()));
                    }
                }
                if let Some(Value::Array(blocks)) = content {
                    for b in blocks {
                        if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                            anthropic = true;
                            let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                            let tool = b
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or_else(|| at("a `tool_use` has no `name`"))?;
                            let input = b.get("input").cloned().unwrap_or(json!({}));
                            let digest = CallDigest::of_json(tool, &input);
                            let args = input.to_string();
                            events.push(call(id, tool, &digest, &args, events.len()));
                        }
                    }
                }
            }
            "tool" => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at("a `tool` message has no `tool_call_id`"))?;
                events.push(TraceEvent::Ran(id.to_owned()));
            }
            other => return Err(at(&format!("unknown role `{other}`"))),
        }
    }
    let format = if anthropic {
        TraceFormat::Anthropic
    } else {
        TraceFormat::OpenAi
    };
    Ok((format, events))
}

fn call(id: &str, tool: &str, digest: &CallDigest, arguments: &str, n: usize) -> TraceEvent {
    TraceEvent::Call {
        id: if id.is_empty() {
            format!("#{n}")
        } else {
            id.to_owned()
        },
        tool: tool.to_owned(),
        call: *digest,
        arguments: arguments.to_owned(),
        at: None,
    }
}

/// orch's decision records as trace events: messages, calls presented, tools recorded
/// (a recorded tool ran: the latest call of it not yet run), approvals.
fn parse_records(text: &str) -> Result<Vec<TraceEvent>, TraceError> {
    let mut events = Vec::new();
    let mut open: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // Checkpoints sign the log; they are no event.
        if line.trim().is_empty() || orch_agent::audit::is_checkpoint(line) {
            continue;
        }
        let r: DecisionRecord = serde_json::from_str(line).map_err(|e| TraceError::Record {
            line: i + 1,
            why: e.to_string(),
        })?;
        match r.event {
            AuditEvent::Message { text } => events.push(TraceEvent::Message(text)),
            AuditEvent::Call {
                tool,
                call,
                arguments,
                at,
            } => {
                let id = format!("{}#{}", r.run, r.seq);
                open.push((tool.clone(), id.clone()));
                let arguments = arguments.unwrap_or_default();
                events.push(TraceEvent::Call {
                    id,
                    tool,
                    call,
                    arguments,
                    at,
                });
            }
            AuditEvent::Record { tool, .. } => {
                let id = match open.iter().rposition(|(t, _)| *t == tool) {
                    Some(k) => open.remove(k).1,
                    None => {
                        // Recorded without a call presented: it ran all the same.
                        let id = format!("{}#{}", r.run, r.seq);
                        let call = CallDigest::of_text(&tool, "");
                        events.push(TraceEvent::Call {
                            id: id.clone(),
                            tool,
                            call,
                            arguments: String::new(),
                            at: None,
                        });
                        id
                    }
                };
                events.push(TraceEvent::Ran(id));
            }
            AuditEvent::Answer {
                call,
                approved: true,
                ..
            } => events.push(TraceEvent::Approved(call)),
            _ => {}
        }
    }
    Ok(events)
}

/// The ids of the calls of `events` that ran (a result came back for them).
pub fn ran_ids(events: &[TraceEvent]) -> HashSet<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Ran(id) => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

/// The tools of the host that made `events`: every tool the template of `machine`
/// declares and every tool the trace calls.
pub fn host_tools(machine: &DynMachine, events: &[TraceEvent]) -> Vec<String> {
    let mut tools: Vec<String> = machine.tools().to_vec();
    for e in events {
        if let TraceEvent::Call { tool, .. } = e {
            if !tools.contains(tool) {
                tools.push(tool.clone());
            }
        }
    }
    tools
}

/// Grades `events` under `machine`: the report as JSON, and whether it passed (no call
/// the workflow refuses ran, no property violated).
pub fn grade(
    machine: &DynMachine,
    properties: &[IrProperty],
    format: TraceFormat,
    events: &[TraceEvent],
) -> (Value, bool) {
    let ran = ran_ids(events);
    let policy = Policy::new(host_tools(machine, events));
    let mut session = machine.session();
    policy.prepare(&mut session);
    let mut steps: Vec<String> = session.step_name().map(str::to_owned).into_iter().collect();
    let mut calls = Vec::new();
    let mut violations = Vec::new();
    let mut monitors: Vec<Monitor> = properties.iter().map(Monitor::new).collect();
    for e in events {
        match e {
            TraceEvent::Message(text) => policy.message(&mut session, text),
            TraceEvent::Approved(call) => session.approve(*call),
            TraceEvent::Ran(_) => {}
            TraceEvent::Call {
                id,
                tool,
                call,
                arguments,
                at,
            } => {
                let n = calls.len() + 1;
                let step = session.step_name().map(str::to_owned);
                let mut checked = Call::new(*call, arguments);
                checked.at = *at;
                // The session's own words for a refusal (not the model's).
                let message = Orchestrated::check_call(&session, tool, &checked)
                    .err()
                    .map(|r| r.reason);
                let judged = policy.admit_call(&mut session, tool, &checked);
                let did_run = ran.contains(id.as_str());
                let verdict = match &judged {
                    Ok(()) => "allowed",
                    Err(r) => r.kind.as_str(),
                };
                calls.push(json!({
                    "n": n, "id": id, "tool": tool, "step": step, "verdict": verdict,
                    "message": message, "ran": did_run,
                }));
                if did_run {
                    if judged.is_err() {
                        violations.push(json!({
                            "call": n, "tool": tool,
                            "why": format!("`{tool}` ran although the workflow {}", match verdict {
                                "needs_approval" => "needs a human's approval of it, and none is recorded".to_owned(),
                                v => format!("refuses it ({v})"),
                            }),
                        }));
                    }
                    for m in &mut monitors {
                        m.ran(tool, n, judged.is_ok(), &session);
                    }
                    policy.record(&mut session, tool);
                }
            }
        }
        if let Some(step) = session.step_name() {
            if steps.last().map(String::as_str) != Some(step) {
                steps.push(step.to_owned());
            }
        }
    }
    let props: Vec<Value> = monitors.iter().map(Monitor::report).collect();
    let ok = violations.is_empty() && monitors.iter().all(|m| m.violated.is_none());
    let report = json!({
        "format": format.as_str(),
        "ok": ok,
        "calls": calls,
        "violations": violations,
        "steps": steps,
        "properties": props,
    });
    (report, ok)
}

/// One property, followed over the executions of a trace.
struct Monitor<'p> {
    property: &'p IrProperty,
    count: u64,
    seen_after: bool,
    /// The call (1-based) that violated it, and why.
    violated: Option<(usize, String)>,
}

impl<'p> Monitor<'p> {
    fn new(property: &'p IrProperty) -> Self {
        Monitor {
            property,
            count: 0,
            seen_after: false,
            violated: None,
        }
    }

    /// The tool ran as call `n`; `admitted` when the workflow admitted it (for a gated
    /// tool: on an approval). Judged before it is recorded.
    fn ran(&mut self, tool: &str, n: usize, admitted: bool, session: &DynSession<'_>) {
        let p = self.property;
        let matches = glob_match(&p.tool, tool);
        if self.violated.is_none() && matches {
            self.count += 1;
            let why = match &p.rule {
                IrRule::After(q) if !self.seen_after => {
                    Some(format!("`{tool}` ran before any tool matching `{q}`"))
                }
                IrRule::AtMost(max) if self.count > *max => {
                    Some(format!("`{tool}` ran {} times (at most {max})", self.count))
                }
                IrRule::Never => Some(format!("`{tool}` ran")),
                IrRule::Approved if !(admitted && was_gated(session, tool)) => {
                    Some(format!("`{tool}` ran without a human's approval"))
                }
                _ => None,
            };
            self.violated = why.map(|w| (n, w));
        }
        if let IrRule::After(q) = &p.rule {
            // A tool that matches both does not come after itself: seen only after it.
            if glob_match(q, tool) {
                self.seen_after = true;
            }
        }
    }

    fn report(&self) -> Value {
        let p = self.property;
        match &self.violated {
            None => json!({"name": p.name, "holds": true}),
            Some((n, why)) => json!({"name": p.name, "holds": false, "call": n, "why": why}),
        }
    }
}

/// Whether a tool was gated when it ran (for the `approved` property).
fn was_gated(session: &DynSession<'_>, tool: &str) -> bool {
    session.check(tool).is_err_and(|d| d.needs_approval())
}

/// The human rendering of a report. Every text from the trace or the template (tool and
/// step names, messages) is [`printable`]: a control character in a tool name cannot
/// rewrite the report on a terminal.
pub fn human(path: &str, report: &Value) -> String {
    let text = |v: &Value| printable(v.as_str().unwrap_or("")).into_owned();
    let mut out = String::new();
    for c in report["calls"].as_array().into_iter().flatten() {
        let ran = if c["ran"] == true { "ran" } else { "not run" };
        let step = match c["step"].as_str() {
            Some(step) => printable(step).into_owned(),
            None => "-".to_owned(),
        };
        let tool = text(&c["tool"]);
        match c["message"].as_str() {
            None => out.push_str(&format!(
                "call {} `{tool}` in step {step}: allowed, {ran}\n",
                c["n"]
            )),
            Some(m) => out.push_str(&format!(
                "call {} `{tool}` in step {step}: {} ({}), {ran}\n",
                c["n"],
                text(&c["verdict"]),
                printable(m)
            )),
        }
    }
    let steps: Vec<String> = report["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| printable(s).into_owned())
        .collect();
    out.push_str(&format!("steps visited: {}\n", steps.join(" → ")));
    for p in report["properties"].as_array().into_iter().flatten() {
        match p["holds"].as_bool() {
            Some(true) => out.push_str(&format!("property `{}` holds\n", text(&p["name"]))),
            _ => out.push_str(&format!(
                "error: property `{}` is violated at call {}: {}\n",
                text(&p["name"]),
                p["call"],
                text(&p["why"])
            )),
        }
    }
    for v in report["violations"].as_array().into_iter().flatten() {
        out.push_str(&format!("error: call {}: {}\n", v["call"], text(&v["why"])));
    }
    let verdict = if report["ok"] == true {
        "follows the workflow"
    } else {
        "does not follow the workflow"
    };
    out.push_str(&format!("{}: the trace {verdict}\n", printable(path)));
    out
}
