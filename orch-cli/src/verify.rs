//! `orch verify`: every state a template's session can reach, explored exhaustively
//! (`orch_codegen::verify`), reported per step and per sequence with a shortest
//! witness — a list of `orch simulate` events from a fresh session.

use orch_codegen::diagnostic::SourceText;
use orch_codegen::verify::explore::{explore_with, Event, Exploration, Host, Options};
use orch_codegen::verify::properties::PropertyFinding;
use serde_json::{json, Value};

/// The findings of one file, as JSON lines (`--format json`).
pub fn json_lines(file: &str, found: &Exploration) -> Vec<String> {
    let mut out = Vec::new();
    let decided = |w: &Option<Vec<Event>>| match (w, found.complete) {
        (Some(_), _) => Value::Bool(true),
        (None, true) => Value::Bool(false),
        (None, false) => Value::Null,
    };
    for step in &found.steps {
        let mut line = json!({
            "file": file,
            "kind": "step",
            "step": step.name,
            "reachable": decided(&step.reachable),
        });
        if let Some(w) = &step.reachable {
            line["witness"] = witness_json(w);
        }
        if let Some(r) = &step.reason {
            line["reason"] = Value::String(r.clone());
        }
        out.push(line.to_string());
        if step.has_sequence && step.reachable.is_some() {
            let mut line = json!({
                "file": file,
                "kind": "sequence",
                "step": step.name,
                "completes": decided(&step.completes),
            });
            if let Some(w) = &step.completes {
                line["witness"] = witness_json(w);
            }
            out.push(line.to_string());
        }
    }
    for step in found.steps.iter().filter(|s| s.traps) {
        let mut line = json!({"file": file, "kind": "trap", "step": step.name});
        if let Some(w) = &step.reachable {
            line["witness"] = witness_json(w);
        }
        out.push(line.to_string());
    }
    if let Some(w) = &found.blocked {
        out.push(json!({"file": file, "kind": "blocked", "witness": witness_json(w)}).to_string());
    }
    if let Some(w) = &found.no_tools {
        out.push(json!({"file": file, "kind": "no_tools", "witness": witness_json(w)}).to_string());
    }
    out.push(
        json!({"file": file, "kind": "summary", "states": found.states, "complete": found.complete})
            .to_string(),
    );
    out
}

/// A witness as semantics §10 event objects (an approved call of a gated tool is two:
/// `{"approve": t}`, `{"tool": t}`).
pub fn witness_json(w: &[Event]) -> Value {
    Value::Array(w.iter().flat_map(event_json).collect())
}

fn event_json(e: &Event) -> Vec<Value> {
    match e {
        Event::Available(list) => vec![json!({ "available": list })],
        Event::Message(m) => vec![json!({ "message": m })],
        Event::Tool(t) => vec![json!({ "tool": t })],
        Event::ApprovedTool(t) => vec![json!({ "approve": t }), json!({ "tool": t })],
        Event::Reset => vec![json!({ "reset": true })],
    }
}

/// Where each step's name is in the source (for human output), by step index.
pub fn step_locations(source: &str) -> Vec<Option<(usize, usize)>> {
    let (template, _) = orch_codegen::__private::parse(source, None);
    let text = SourceText::new(source);
    template.map_or_else(Vec::new, |t| {
        t.steps
            .iter()
            .map(|s| {
                s.name
                    .as_ref()
                    .and_then(|n| n.span.byte_range())
                    .map(|r| text.line_col(r.start))
            })
            .collect()
    })
}

/// The findings of one file, rustc-style.
pub fn human(file: &str, source: &str, found: &Exploration) -> String {
    let places = step_locations(source);
    let lines: Vec<&str> = source.lines().collect();
    let at = |i: usize| -> String {
        match places.get(i).copied().flatten() {
            Some((l, c)) => {
                let text = lines.get(l - 1).copied().unwrap_or("");
                let shown: String = text.chars().take(160).collect();
                format!(
                    "  --> {file}:{l}:{c}\n   |\n{l:>3}| {shown}\n   | {}^",
                    " ".repeat(c.saturating_sub(1).min(160))
                )
            }
            None => format!("  --> {file}"),
        }
    };
    let mut out = String::new();
    let mut findings = 0;
    for (i, step) in found.steps.iter().enumerate() {
        match (&step.reachable, found.complete) {
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
    out
}

fn inline(w: &[Event]) -> String {
    if w.is_empty() {
        return "(a fresh session)".to_owned();
    }
    w.iter()
        .flat_map(event_json)
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Does the file have findings (or is it undecided)?
pub fn has_findings(found: &Exploration) -> bool {
    !found.complete
        || found
            .steps
            .iter()
            .any(|s| s.reachable.is_none() || (s.has_sequence && s.completes.is_none()))
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

/// Explores with the CLI's options and decides the template's properties (semantics
/// §14), the host model prepared once for both.
pub fn run(
    machine: &orch_runtime::dynamic::DynMachine,
    properties: &[orch_codegen::ir::IrProperty],
    options: &Options,
) -> Result<(Exploration, Vec<PropertyFinding>), String> {
    let host = Host::new(machine, options).map_err(|e| format!("{e:?}"))?;
    let found = explore_with(machine, options, &host);
    let props = orch_codegen::verify::properties::check_with(machine, properties, options, &host);
    Ok((found, props))
}

/// One JSON line per property: `{"kind": "property", "name", "holds": true|false|null,
/// "witness": [events]}` (a witness for a violated one; `holds` is null only when the
/// search stopped at its limit).
pub fn property_lines(file: &str, found: &[PropertyFinding]) -> Vec<String> {
    found
        .iter()
        .map(|p| {
            let mut line = json!({
                "file": file,
                "kind": "property",
                "name": p.name,
                "holds": p.holds,
            });
            if let Some(w) = &p.witness {
                line["witness"] = witness_json(w);
            }
            if let Some(m) = &p.message {
                line["message"] = Value::String(m.clone());
            }
            line.to_string()
        })
        .collect()
}

/// The properties, rustc-style, each at its `name` in the source.
pub fn properties_human(file: &str, source: &str, found: &[PropertyFinding]) -> String {
    let (template, _) = orch_codegen::__private::parse(source, None);
    let text = SourceText::new(source);
    let lines: Vec<&str> = source.lines().collect();
    let at = |name: &str| -> String {
        let place = template.as_ref().and_then(|t| {
            t.properties
                .iter()
                .find(|p| p.name.value == name)
                .and_then(|p| p.name.span.byte_range())
                .map(|r| text.line_col(r.start))
        });
        match place {
            Some((l, c)) => {
                let shown: String = lines
                    .get(l - 1)
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
