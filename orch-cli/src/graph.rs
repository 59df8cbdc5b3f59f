//! `orch graph`: the state diagram of a template, in Mermaid or Graphviz DOT.
//!
//! Steps are states; the default step is the start. A step is entered from whichever
//! step is active when its conditions hold (first match wins), so transitions are drawn
//! from an "any step" point, labelled with the conditions. A step's sequence is drawn as
//! the ordered sub-states of that step. Unreachable and shadowed steps are marked.

use orch_codegen::ir::{Ir, IrCondition};
use orch_codegen::{Code, Diagnostic};

/// Why a step is marked: read from the diagnostics' subjects, never their text.
pub fn mark(ir: &Ir, diags: &[Diagnostic], step: usize) -> Option<&'static str> {
    let name = ir.steps.get(step)?.name.as_str();
    diags
        .iter()
        .filter(|d| d.subject.step.as_deref() == Some(name))
        .find_map(|d| match d.code {
            Code::UnreachableStep => Some("unreachable"),
            Code::ShadowedStep => Some("shadowed"),
            Code::SequenceNeverCompletes => Some("sequence never completes"),
            _ => None,
        })
}

/// The steps entered by their conditions (every step but the default and those without
/// conditions), in template order.
fn conditional_steps(ir: &Ir) -> impl Iterator<Item = usize> + '_ {
    (0..ir.steps.len())
        .filter(|&i| Some(i) != ir.default_step && !ir.steps[i].conditions.is_empty())
}

/// The label of a transition into `step`: its conditions, joined by "and".
pub fn condition_label(ir: &Ir, step: usize) -> String {
    let tool = |i: usize| ir.tools.get(i).map_or("?", |t| t.name.as_str());
    ir.steps[step]
        .conditions
        .iter()
        .map(|c| match *c {
            IrCondition::ToolUsed(t) => format!("tool_used {}", tool(t)),
            IrCondition::SequenceMatch => "sequence complete".to_owned(),
            IrCondition::Contains(i) => format!(
                "contains \"{}\"",
                ir.contains.get(i).map_or("", |s| s.as_str())
            ),
            IrCondition::Regex(i) => format!("/{}/", ir.regexes.get(i).map_or("", |s| s.as_str())),
            IrCondition::NotRecentlyUsed { tool: t, window } => {
                format!("{} not used in last {window}", tool(t))
            }
            IrCondition::Budget(k) => format!("budget {}", ir.memory.describe_condition(k)),
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

/// A sequence group's label: its tools, joined by " | ".
pub(crate) fn group_label(ir: &Ir, group: &[usize]) -> String {
    group
        .iter()
        .map(|i| ir.tools.get(*i).map_or("?", |t| t.name.as_str()))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Mermaid's labels cannot contain `:`, `;`, `#`, quotes or newlines as-is.
fn mermaid_text(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ':' => '꞉',
            ';' => ',',
            '"' => '\'',
            '#' => '♯',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// The diagram in Mermaid (`stateDiagram-v2`).
pub fn mermaid(ir: &Ir, diags: &[Diagnostic]) -> String {
    let mut out = String::from("stateDiagram-v2\n    direction LR\n");
    let id = |i: usize| format!("s{i}");
    for (i, s) in ir.steps.iter().enumerate() {
        let mut name = mermaid_text(&s.name);
        if Some(i) == ir.default_step {
            name.push_str(" (default)");
        }
        if let Some(m) = mark(ir, diags, i) {
            name.push_str(&format!(" ⚠ {m}"));
        }
        out.push_str(&format!("    state \"{name}\" as {}\n", id(i)));
        if !s.sequence.is_empty() {
            out.push_str(&format!("    state {} {{\n", id(i)));
            out.push_str(&format!("        [*] --> {}_0\n", id(i)));
            for (p, g) in s.sequence.iter().enumerate() {
                out.push_str(&format!(
                    "        state \"{}. {}\" as {}_{p}\n",
                    p + 1,
                    mermaid_text(&group_label(ir, g)),
                    id(i)
                ));
                if p + 1 < s.sequence.len() {
                    out.push_str(&format!("        {}_{p} --> {}_{}\n", id(i), id(i), p + 1));
                }
            }
            out.push_str(&format!(
                "        {}_{} --> [*]\n",
                id(i),
                s.sequence.len() - 1
            ));
            out.push_str("    }\n");
        }
    }
    match ir.default_step {
        Some(d) => out.push_str(&format!("    [*] --> {}\n", id(d))),
        None => out.push_str("    state \"no active step\" as none\n    [*] --> none\n"),
    }
    let entered: Vec<usize> = conditional_steps(ir).collect();
    if !entered.is_empty() {
        out.push_str("    state \"any step\" as any\n");
        out.push_str("    note right of any: a step becomes active from whichever step is active, when its conditions hold (first match wins)\n");
    }
    for i in entered {
        out.push_str(&format!(
            "    any --> {} : {}\n",
            id(i),
            mermaid_text(&condition_label(ir, i))
        ));
    }
    out.push_str("    classDef warn fill:#fde2e1,stroke:#c0392b,color:#7b241c\n");
    for i in 0..ir.steps.len() {
        if mark(ir, diags, i).is_some() {
            out.push_str(&format!("    class {} warn\n", id(i)));
        }
    }
    out
}

fn dot_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The diagram in Graphviz DOT.
pub fn dot(ir: &Ir, diags: &[Diagnostic]) -> String {
    let mut out = format!(
        "digraph \"{}\" {{\n    rankdir=LR;\n    graph [fontname=\"Helvetica\"];\n    node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", fontname=\"Helvetica\"];\n    edge [fontname=\"Helvetica\", fontsize=10];\n    start [shape=point, width=0.15, fillcolor=black];\n",
        dot_text(&ir.name)
    );
    for (i, s) in ir.steps.iter().enumerate() {
        let mut label = dot_text(&s.name);
        if Some(i) == ir.default_step {
            label.push_str("\\n(default)");
        }
        let warn = mark(ir, diags, i);
        if let Some(m) = warn {
            label.push_str(&format!("\\n⚠ {m}"));
        }
        let style = if warn.is_some() {
            ", fillcolor=\"#fde2e1\", color=\"#c0392b\""
        } else {
            ""
        };
        if s.sequence.is_empty() {
            out.push_str(&format!("    s{i} [label=\"{label}\"{style}];\n"));
        } else {
            out.push_str(&format!(
                "    subgraph cluster_s{i} {{\n        label=\"{label}\";\n        style=\"rounded{}\";\n        color=\"{}\";\n",
                if warn.is_some() { ",filled" } else { "" },
                if warn.is_some() { "#c0392b" } else { "#4a6fa5" }
            ));
            if warn.is_some() {
                out.push_str("        fillcolor=\"#fde2e1\";\n");
            }
            out.push_str(&format!(
                "        s{i} [shape=circle, label=\"\", width=0.2, fillcolor=\"#4a6fa5\"];\n"
            ));
            for (p, g) in s.sequence.iter().enumerate() {
                out.push_str(&format!(
                    "        s{i}_{p} [label=\"{}. {}\"];\n",
                    p + 1,
                    dot_text(&group_label(ir, g))
                ));
                let from = if p == 0 {
                    format!("s{i}")
                } else {
                    format!("s{i}_{}", p - 1)
                };
                out.push_str(&format!("        {from} -> s{i}_{p};\n"));
            }
            out.push_str("    }\n");
        }
    }
    match ir.default_step {
        Some(d) => out.push_str(&format!("    start -> s{d};\n")),
        None => {
            out.push_str("    none [label=\"no active step\", style=dashed];\n    start -> none;\n")
        }
    }
    let entered: Vec<usize> = conditional_steps(ir).collect();
    if !entered.is_empty() {
        out.push_str("    any [label=\"any step\\n(first match wins)\", shape=ellipse, style=dashed, fillcolor=white];\n");
    }
    for i in entered {
        out.push_str(&format!(
            "    any -> s{i} [label=\"{}\"];\n",
            dot_text(&condition_label(ir, i))
        ));
    }
    out.push_str("}\n");
    out
}
