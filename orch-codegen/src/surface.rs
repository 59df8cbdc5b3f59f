//! The checks that depend on where the template runs ([`Surface`]): behind an MCP gateway
//! no user message ever arrives, so message conditions never hold and message resets
//! never fire. W009 says so for `orch mcp`; E024 refuses the conditions for
//! `orch policy`, which would otherwise enforce a workflow that can never switch steps
//! the way its author meant; W009 also marks a rule whose `from` trusts the user's
//! messages, which never vouch for a value there. Positions come from the IR's spans.

use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Ir, IrCondition, IrPred, IrTest};
use orch_runtime::compiled::Origin;

/// Where a template runs, for the checks that depend on it ([`crate::surface_lints`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Surface {
    /// In the agent's own process (build.rs, the macro, `orch-agent`, the Python and
    /// npm packages): every user message reaches the session.
    #[default]
    Agent,
    /// Behind `orch mcp`: MCP carries no user messages, so message conditions never
    /// hold and message resets never fire (W009).
    McpGateway,
    /// Behind agentgateway with `orch policy`: message conditions cannot be enforced
    /// (E024), message resets never fire (W009).
    Policy,
}

/// The surface's diagnostics for `ir` (none for [`Surface::Agent`], which sees every
/// user message).
pub fn surface_lints(ir: &Ir, surface: Surface) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let through = match surface {
        Surface::Agent => return out,
        Surface::McpGateway => "through `orch mcp`",
        Surface::Policy => "through an MCP gateway",
    };
    for step in &ir.steps {
        let reading: Vec<(usize, &IrCondition)> = step
            .conditions
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, IrCondition::Contains(_) | IrCondition::Regex(_)))
            .collect();
        match surface {
            Surface::Policy => {
                for (i, condition) in &reading {
                    let span = step.spans.conditions.get(*i).copied();
                    let named = named(ir, condition);
                    out.push(
                        Diagnostic::new(
                            Code::ReadsUserMessages,
                            span.or(Some(step.spans.name)),
                            format!(
                                "step `{}`: {named} reads the user's message, which MCP traffic never carries: orch policy cannot enforce it",
                                step.name
                            ),
                        )
                        .label("never holds behind the gateway")
                        .help("switch steps on tool use instead (tool_used, sequence_match), or run orch inside the agent (orch-agent)")
                        .about_step(&step.name),
                    );
                }
            }
            Surface::McpGateway if !reading.is_empty() => {
                out.push(
                    Diagnostic::new(
                        Code::NoUserMessages,
                        Some(step.spans.name),
                        format!(
                            "step `{}` has {} message condition(s), which never hold {through}: MCP carries no user messages",
                            step.name,
                            reading.len()
                        ),
                    )
                    .label("never activated by the gateway")
                    .help("switch the step on tool use (tool_used, sequence_match), or allow `no_user_messages` if another host drives it")
                    .about_step(&step.name),
                );
            }
            _ => {}
        }
        if step.reset != 0 {
            out.push(
                Diagnostic::new(
                    Code::NoUserMessages,
                    Some(step.spans.name),
                    format!(
                        "step `{}` resets its sequence on user messages, which never arrive {through}",
                        step.name
                    ),
                )
                .label("the reset never fires behind the gateway")
                .help("reset on a tool instead, or allow `no_user_messages` if another host drives it")
                .about_step(&step.name),
            );
        }
    }
    for rule in &ir.arg_rules {
        if reads_user(&rule.pred) {
            out.push(
                Diagnostic::new(
                    Code::NoUserMessages,
                    Some(rule.span),
                    format!(
                        "rule `{}` accepts values the user wrote, which never arrive {through}: only its other origins can vouch for a value",
                        rule.name
                    ),
                )
                .label("`from` `user` never holds behind the gateway")
                .help("vouch for the value with a trusted tool or an earlier call instead, or allow `no_user_messages` if another host drives the run"),
            );
        }
    }
    out
}

/// Does a predicate read the user's messages (a `from` with the origin `user`)?
fn reads_user(p: &IrPred) -> bool {
    match p {
        IrPred::All(items) | IrPred::Any(items) => items.iter().any(reads_user),
        IrPred::Not(inner) => reads_user(inner),
        IrPred::Test { test, .. } => match test {
            IrTest::Seen { origin, .. } => *origin == Origin::User,
            IrTest::Each(inner) => reads_user(inner),
            _ => false,
        },
    }
}

/// `message_contains "…"` / `message_regex "…"`, as a template writes it.
fn named(ir: &Ir, condition: &IrCondition) -> String {
    match condition {
        IrCondition::Contains(i) => format!(
            "message_contains {:?}",
            ir.contains.get(*i).map_or("", String::as_str)
        ),
        IrCondition::Regex(i) => format!(
            "message_regex {:?}",
            ir.regexes.get(*i).map_or("", String::as_str)
        ),
        _ => String::new(),
    }
}
