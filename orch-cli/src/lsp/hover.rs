//! What a hover on a step shows: its conditions, the rules that judge its calls, its
//! effective allowed tools and its sequence.

use orch_codegen::ir::Ir;
use orch_codegen::model::{ConditionType, SequenceEntry, Span, Template};

pub(super) fn code(s: &str) -> String {
    let ticks = if s.contains('`') { "`` " } else { "`" };
    let close = if s.contains('`') { " ``" } else { "`" };
    format!("{ticks}{s}{close}")
}

/// The hover text of `step`: description, conditions, effective allowed tools (from
/// the IR step written at the same place, when the template compiles) and sequence.
pub(super) fn step_summary(
    t: &Template,
    ir: Option<&Ir>,
    step: &orch_codegen::model::Step,
) -> String {
    let index = t
        .steps
        .iter()
        .position(|s| s.span == step.span)
        .unwrap_or(0);
    let name = step.name.as_ref().map_or("", |n| n.value.as_str());
    let is_default = step.is_default.as_ref().is_some_and(|d| d.value)
        || t.default_step.as_ref().is_some_and(|d| d.value == name);
    let mut out = format!(
        "**Step {}** ({} of {})",
        code(name),
        index + 1,
        t.steps.len()
    );
    if let Some(d) = &step.description {
        out.push_str(&format!("\n\n{d}"));
    }
    conditions_summary(step, is_default, &mut out);
    allowed_summary(ir, step, &mut out);
    sequence_summary(step, &mut out);
    rules_summary(ir, step, &mut out);
    out
}

/// What rule `r` says, in the words refusals use: "`iban` on `send_money`: refuses a
/// call unless: `/recipient` must be …" (semantics §16).
pub(super) fn rule_words(ir: &Ir, r: &orch_codegen::ir::IrArgRule) -> String {
    let budgets: Vec<&str> = ir.memory.budgets.iter().map(|b| b.name.as_str()).collect();
    let (flat, root) = orch_codegen::ir::flatten_predicate(&r.pred, &budgets);
    let tool = |i: u16| ir.tools.get(usize::from(i)).map_or("", |t| t.name.as_str());
    let what = flat.view().describe(root, &tool);
    let on = code(tool(r.tool as u16));
    match r.kind {
        orch_runtime::compiled::RuleKind::Require => {
            format!("{} on {on}: refuses a call unless: {what}", code(&r.name))
        }
        orch_runtime::compiled::RuleKind::ApproveWhen => format!(
            "{} on {on}: asks a human about a call whose arguments satisfy: {what}",
            code(&r.name)
        ),
    }
}

/// The hover of a rule's name: the rule compiled at `span`, its scope and what it says.
pub(super) fn rule_summary(ir: &Ir, span: Span) -> Option<String> {
    let r = ir.arg_rules.iter().find(|r| r.span == span)?;
    let scope = match r.step.and_then(|i| ir.steps.get(i)) {
        Some(s) => format!("while step {} is active", code(&s.name)),
        None => "in every step".to_owned(),
    };
    Some(format!("**Rule** {} ({scope})", rule_words(ir, r)))
}

/// The hover's **Rules on arguments** section: the orchestration's rules and the step's
/// own, in the order they judge a call.
pub(super) fn rules_summary(ir: Option<&Ir>, step: &orch_codegen::model::Step, out: &mut String) {
    let Some(ir) = ir else { return };
    let index = ir.steps.iter().position(|s| s.spans.step == step.span);
    let rules: Vec<String> = ir
        .arg_rules
        .iter()
        .filter(|r| r.step.is_none() || r.step == index)
        .map(|r| format!("\n- {}", rule_words(ir, r)))
        .collect();
    if !rules.is_empty() {
        out.push_str("\n\n**Rules on arguments**:");
        out.extend(rules);
    }
}

/// The hover's **Conditions** section.
pub(super) fn conditions_summary(
    step: &orch_codegen::model::Step,
    is_default: bool,
    out: &mut String,
) {
    out.push_str("\n\n**Conditions**: ");
    if is_default {
        out.push_str("the default step: active when no other step's conditions hold");
        if !step.conditions.is_empty() {
            out.push_str(" (its own conditions are ignored)");
        }
    } else if step.conditions.is_empty() {
        out.push_str("none, so it never becomes active");
    } else {
        out.push_str("all of");
        for c in &step.conditions {
            let kind = match c.kind.as_ref().map(|k| &k.value) {
                Some(ConditionType::Known(k)) => k.as_str().to_owned(),
                Some(ConditionType::Unknown(u)) => format!("{u} (unknown)"),
                None => "(no type)".to_owned(),
            };
            out.push_str(&format!("\n- `{kind}`"));
            if let Some(v) = &c.value {
                out.push_str(&format!(" {}", code(&v.value)));
            }
            if let Some(w) = &c.window {
                out.push_str(&format!(" within the last {} tools", w.value));
            }
            match (&c.min, &c.max) {
                (Some(lo), Some(hi)) => {
                    out.push_str(&format!(" from {} to {}", lo.value, hi.value));
                }
                (Some(lo), None) => out.push_str(&format!(" at least {}", lo.value)),
                (None, Some(hi)) => out.push_str(&format!(" at most {}", hi.value)),
                (None, None) => {}
            }
        }
    }
}

/// The hover's **Allowed tools** section, from the IR step written at the same place.
pub(super) fn allowed_summary(ir: Option<&Ir>, step: &orch_codegen::model::Step, out: &mut String) {
    out.push_str("\n\n**Allowed tools**: ");
    let compiled = ir.and_then(|ir| {
        ir.steps
            .iter()
            .find(|s| s.spans.step == step.span)
            .map(|s| (ir, s))
    });
    match compiled {
        Some((ir, s)) => {
            let tools: Vec<String> = s
                .static_set
                .iter()
                .filter_map(|i| ir.tools.get(i))
                .map(|t| code(&t.name))
                .collect();
            if tools.is_empty() {
                out.push_str("none");
            } else if s.allow_all && s.deny_patterns.is_empty() && tools.len() == ir.tools.len() {
                out.push_str(&format!("all {} ({})", tools.len(), tools.join(", ")));
            } else {
                out.push_str(&tools.join(", "));
            }
            if !s.allow_patterns.is_empty() || !s.deny_patterns.is_empty() {
                let list = |p: &[String]| p.iter().map(|p| code(p)).collect::<Vec<_>>().join(", ");
                out.push_str("; tools the template does not declare are judged by");
                if !s.allow_patterns.is_empty() {
                    out.push_str(&format!(" allowed {}", list(&s.allow_patterns)));
                }
                if !s.deny_patterns.is_empty() {
                    out.push_str(&format!(" denied {}", list(&s.deny_patterns)));
                }
            }
            // Approval gates (semantics §13): the step's own and the orchestration's.
            if !s.approve.is_empty() {
                let mut gated: Vec<String> = s
                    .approve
                    .tools
                    .iter()
                    .filter(|&i| s.static_set.contains(i))
                    .filter_map(|i| ir.tools.get(i))
                    .map(|t| code(&t.name))
                    .collect();
                gated.extend(s.approve.patterns.iter().map(|p| code(p)));
                if !gated.is_empty() {
                    out.push_str(&format!(
                        "\n\n**Needs a human's approval of each call**: {}",
                        gated.join(", ")
                    ));
                }
            }
        }
        _ => out.push_str("(fix the template's errors to see them)"),
    }
}

/// The hover's **Sequence** section.
pub(super) fn sequence_summary(step: &orch_codegen::model::Step, out: &mut String) {
    match &step.sequence {
        Some(seq) if !seq.value.is_empty() => {
            let entries: Vec<String> = seq
                .value
                .iter()
                .map(|e| match e {
                    SequenceEntry::Tool(t) => code(&t.value),
                    SequenceEntry::Group(g) => format!(
                        "({})",
                        g.value
                            .iter()
                            .map(|t| code(&t.value))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ),
                })
                .collect();
            out.push_str(&format!(
                "\n\n**Sequence**: {} (while it runs, only the tool at the current position)",
                entries.join(" → ")
            ));
            if !step.reset_sequence_on.is_empty() {
                let on: Vec<String> = step
                    .reset_sequence_on
                    .iter()
                    .map(|r| code(&r.value))
                    .collect();
                out.push_str(&format!("; restarts on {}", on.join(", ")));
            }
        }
        _ => out.push_str("\n\n**Sequence**: none"),
    }
}
