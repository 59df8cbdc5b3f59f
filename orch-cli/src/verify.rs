//! `orch verify`: every state a template's session can reach, explored exhaustively
//! (`orch_codegen::verify`), reported per step and per sequence with a shortest
//! witness — a list of `orch simulate` events from a fresh session.

use orch_codegen::diagnostic::SourceText;
use orch_codegen::verify::explore::{Event, Exploration, Options};
use orch_codegen::verify::properties::PropertyFinding;
use orch_codegen::verify::report::{self, Finding, Kind};
use orch_codegen::{Ir, Span};
use serde_json::{json, Value};

/// The findings of one file (`report::findings`, in their order), as JSON lines
/// (`--format json`).
pub fn json_lines(file: &str, findings: &[Finding]) -> Vec<String> {
    let answer = |a: Option<bool>| a.map_or(Value::Null, Value::Bool);
    findings
        .iter()
        .map(|f| {
            let mut line = serde_json::Map::new();
            line.insert("file".into(), file.into());
            line.insert("kind".into(), f.kind.as_str().into());
            if let Some(step) = &f.step {
                line.insert("step".into(), step.as_str().into());
            }
            if let Some(name) = &f.name {
                line.insert("name".into(), name.as_str().into());
            }
            match f.kind {
                Kind::Step => line.insert("reachable".into(), answer(f.answer)),
                Kind::Sequence => line.insert("completes".into(), answer(f.answer)),
                Kind::Property => line.insert("holds".into(), answer(f.answer)),
                _ => None,
            };
            if let Some(w) = &f.witness {
                line.insert("witness".into(), witness_json(w));
            }
            if let Some(r) = &f.reason {
                line.insert("reason".into(), r.as_str().into());
            }
            if let Some(m) = &f.message {
                line.insert("message".into(), m.as_str().into());
            }
            if let Some(states) = f.states {
                line.insert("states".into(), states.into());
            }
            if let Some(complete) = f.complete {
                line.insert("complete".into(), complete.into());
            }
            Value::Object(line).to_string()
        })
        .collect()
}

/// A witness as semantics §10 event objects.
fn witness_json(w: &[report::Step]) -> Value {
    Value::Array(w.iter().map(step_json).collect())
}

/// A witness's event as a semantics §10 event object.
pub(crate) fn step_json(e: &report::Step) -> Value {
    match e {
        report::Step::Available(list) => json!({ "available": list }),
        report::Step::Message(m) => json!({ "message": m }),
        report::Step::Tool(t) => json!({ "tool": t }),
        report::Step::ToolAt(t, at) => json!({ "tool": t, "at": at }),
        report::Step::Approve(t) => json!({ "approve": t }),
        report::Step::Reset => json!({ "reset": true }),
    }
}

/// Where findings are in one file's source: its line index and lines, made once per
/// report (a report on a template of thousands of steps places each of them).
struct Places<'s> {
    file: &'s str,
    text: SourceText<'s>,
    lines: Vec<&'s str>,
}

impl<'s> Places<'s> {
    fn new(file: &'s str, source: &'s str) -> Self {
        Places {
            file,
            text: SourceText::new(source),
            lines: source.lines().collect(),
        }
    }

    /// `  --> file:line:col` and the source line under it, for a finding at `span` (just
    /// the file when the span is unknown).
    fn at(&self, span: Option<Span>) -> String {
        let file = self.file;
        match span
            .and_then(Span::byte_range)
            .map(|r| self.text.line_col(r.start))
        {
            Some((l, c)) => {
                let shown: String = self
                    .lines
                    .get(l.saturating_sub(1))
                    .copied()
                    .unwrap_or("")
                    .chars()
                    .take(160)
                    .collect();
                format!(
                    "  --> {file}:{l}:{c}\n   |\n{l:>3}| {shown}\n   | {}^",
                    " ".repeat(c.saturating_sub(1).min(160))
                )
            }
            None => format!("  --> {file}"),
        }
    }
}

/// The findings of one file, rustc-style, each at its step's name (from the IR's spans).
pub fn human(file: &str, source: &str, ir: Option<&Ir>, found: &Exploration) -> String {
    let places = Places::new(file, source);
    let at = |i: usize| places.at(ir.and_then(|ir| ir.steps.get(i)).map(|s| s.spans.name));
    let mut out = String::new();
    let mut findings = 0;
    for (i, step) in found.steps.iter().enumerate() {
        match (&step.reachable, found.complete) {
            (None, _) if step.abstracted.is_some() => {
                out.push_str(&format!(
                    "note: step `{}`: undecided\n{}\n   = note: {}\n\n",
                    step.name,
                    at(i),
                    step.abstracted.as_deref().unwrap_or_default()
                ));
            }
            (None, true) => {
                findings += 1;
                out.push_str(&format!(
                    "warning: step `{}` can never become active\n{}\n   = note: {}\n\n",
                    step.name,
                    at(i),
                    step.reason
                        .as_deref()
                        .unwrap_or("no events from a fresh session activate it")
                ));
            }
            (None, false) => {
                out.push_str(&format!(
                    "note: step `{}`: undecided (the exploration stopped at its state limit)\n{}\n\n",
                    step.name,
                    at(i)
                ));
            }
            (Some(_), _) => {}
        }
        if step.has_sequence && step.reachable.is_some() && step.completes.is_none() {
            if found.complete {
                findings += 1;
                out.push_str(&format!(
                    "warning: the sequence of step `{}` can never complete\n{}\n   = note: the step becomes active (witness: {}), but no continuation records its last tool in order\n\n",
                    step.name,
                    at(i),
                    inline(step.reachable.as_deref().unwrap_or(&[]))
                ));
            } else {
                out.push_str(&format!(
                    "note: whether the sequence of step `{}` completes is undecided\n{}\n\n",
                    step.name,
                    at(i)
                ));
            }
        }
    }
    for (i, step) in found.steps.iter().enumerate().filter(|(_, s)| s.traps) {
        out.push_str(&format!(
            "note: step `{}` traps the session: once it is active, only `reset` leaves it\n{}\n\n",
            step.name,
            at(i)
        ));
    }
    if let Some(w) = &found.blocked {
        out.push_str(&format!(
            "note: a session can be blocked: a sequence waits for a tool the host does not have\n  = witness: {}\n\n",
            inline(w)
        ));
    }
    if let Some(w) = &found.no_tools {
        out.push_str(&format!(
            "note: a session can reach a state where no tool is allowed\n  = witness: {}\n\n",
            inline(w)
        ));
    }
    out.push_str(&format!(
        "{file}: {} step{} reachable of {}, {findings} finding{}, {} states explored{}\n",
        found.steps.iter().filter(|s| s.reachable.is_some()).count(),
        if found.steps.len() == 1 { "" } else { "s" },
        found.steps.len(),
        if findings == 1 { "" } else { "s" },
        found.states,
        if found.complete {
            ""
        } else {
            " (stopped at the state limit: incomplete)"
        }
    ));
    // Step names, tool names and source lines come from the template: escaped for the
    // terminal (the report's own line breaks kept).
    orch_runtime::printable::printable_lines(&out).into_owned()
}

fn inline(w: &[Event]) -> String {
    if w.is_empty() {
        return "(a fresh session)".to_owned();
    }
    report::witness(w)
        .iter()
        .map(|v| step_json(v).to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Does the file have findings (or is it undecided)? A step whose condition reads a
/// budget the model does not count exactly is undecided by design, said in a note, and
/// not a finding.
pub fn has_findings(found: &Exploration) -> bool {
    !found.complete
        || found.steps.iter().any(|s| {
            (s.reachable.is_none() && s.abstracted.is_none())
                || (s.has_sequence && s.completes.is_none())
        })
}

/// The exploration's options from the CLI's flags.
pub fn options(
    permissive: bool,
    available: Option<Vec<String>>,
    max_states: usize,
    max_work: u64,
) -> Options {
    Options {
        permissive,
        available,
        max_states,
        max_work,
    }
}

/// The properties, rustc-style, each at its `name` in the source (from the IR's spans).
pub fn properties_human(
    file: &str,
    source: &str,
    ir: Option<&Ir>,
    found: &[PropertyFinding],
) -> String {
    let places = Places::new(file, source);
    let at = |name: &str| {
        let span = ir
            .and_then(|ir| ir.properties.iter().find(|p| p.name == name))
            .map(|p| p.span);
        places.at(span)
    };
    let mut out = String::new();
    for p in found {
        match p.holds {
            Some(false) => out.push_str(&format!(
                "error: property `{}` is violated: {}\n{}\n   = witness: {}\n\n",
                p.name,
                p.message.as_deref().unwrap_or("a reachable state violates it"),
                at(&p.name),
                inline(p.witness.as_deref().unwrap_or(&[]))
            )),
            Some(true) => out.push_str(&format!(
                "property `{}` holds ({} states explored)\n",
                p.name, p.states
            )),
            None => out.push_str(&format!(
                "note: property `{}` is undecided (the search stopped at its limit after {} states)\n{}\n\n",
                p.name,
                p.states,
                at(&p.name)
            )),
        }
    }
    out
}
