//! The checks that run the built machine: W007 and W008 (steps no reachable state
//! activates, sequences no reachable state completes) and E023 (a property a reachable
//! state violates), found by exploring every state of the default host model of
//! `orch verify` within the bounds below. They read positions from the IR's spans.

use crate::diagnostic::{Code, Diagnostic};
use crate::ir::Ir;
use crate::verify::explore::{self, Exploration, Host};
use orch_runtime::dynamic::DynMachine;

/// The verifier-backed lints run on templates up to these sizes (and stop, saying
/// nothing, past [`VERIFY_STATES`] explored states): `orch verify` has no such bound.
const VERIFY_MAX_STEPS: usize = 256;
/// See [`VERIFY_MAX_STEPS`].
const VERIFY_MAX_TOOLS: usize = 256;
/// See [`VERIFY_MAX_STEPS`].
const VERIFY_MAX_MESSAGE_CONDITIONS: usize = 32;
/// See [`VERIFY_MAX_STEPS`].
const VERIFY_STATES: usize = 5_000;
/// See [`VERIFY_MAX_STEPS`]: the lints' share of work (a quarter of `orch verify`'s
/// default), so that a template whose message conditions are costly to analyse costs
/// `orch check`, build.rs and the macro a fraction of a second, and the lints stay silent.
const VERIFY_WORK: u64 = 5_000_000;

/// W007, W008 and (with `prove_properties`) E023 for a template without errors whose
/// IR is `ir` and machine `machine`; `found` are the diagnostics so far (W001, W002 and
/// W006 already say some of what W007/W008 would). Nothing on templates past the bounds
/// above, and nothing claimed from an exploration that did not finish.
pub(crate) fn analyse(
    ir: &Ir,
    machine: &DynMachine,
    found: &[Diagnostic],
    prove_properties: bool,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if ir.steps.len() > VERIFY_MAX_STEPS
        || ir.tools.len() > VERIFY_MAX_TOOLS
        || ir.contains.len() + ir.regexes.len() > VERIFY_MAX_MESSAGE_CONDITIONS
    {
        return out;
    }
    let options = explore::Options {
        max_states: VERIFY_STATES,
        max_work: VERIFY_WORK,
        ..Default::default()
    };
    // The host model (message combinations, foreign names) is prepared once for the
    // properties and the exploration.
    let Ok(host) = Host::new(machine, &options) else {
        return out;
    };
    if prove_properties {
        violated_properties(ir, machine, &options, &host, &mut out);
    }
    let exploration = explore::explore_with(machine, &options, &host);
    out.extend(lints_of(ir, &exploration, found));
    out
}

/// E023: every property a reachable state violates (an undecided one is left to
/// `orch verify`).
fn violated_properties(
    ir: &Ir,
    machine: &DynMachine,
    options: &explore::Options,
    host: &Host,
    out: &mut Vec<Diagnostic>,
) {
    let found = crate::verify::properties::check_with(machine, &ir.properties, options, host);
    for f in found.iter().filter(|f| f.holds == Some(false)) {
        let Some(p) = ir.properties.iter().find(|p| p.name == f.name) else {
            continue;
        };
        let witness = f
            .witness
            .as_deref()
            .map(explore::witness_to_json)
            .unwrap_or_default();
        out.push(
            Diagnostic::new(
                Code::PropertyViolated,
                Some(p.span),
                format!(
                    "property `{}` is violated: {}",
                    f.name,
                    f.message.as_deref().unwrap_or("a reachable state violates it")
                ),
            )
            .label(format!("violated ({})", p.rule.key()))
            .note(format!("witness (`orch simulate` events from a fresh session): {witness}"))
            .help("change the steps so that no path reaches the violating call, or the property if it says too much"),
        );
    }
}

/// W007 and W008 from a finished exploration of the default host model, except where
/// W001, W002 or W006 (in `found`) already said so. The default step is left out of
/// W007: a default that a condition pre-empts from the first event on is common and
/// deliberate.
fn lints_of(ir: &Ir, exploration: &Exploration, found: &[Diagnostic]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if !exploration.complete {
        return out;
    }
    let already = |codes: &[Code], step: &str| {
        found
            .iter()
            .any(|d| codes.contains(&d.code) && d.subject.step.as_deref() == Some(step))
    };
    for (i, finding) in exploration.steps.iter().enumerate() {
        let Some(step) = ir.steps.get(i) else {
            continue;
        };
        if finding.reachable.is_none() && ir.default_step != Some(i) {
            if finding.abstracted.is_some()
                || already(&[Code::UnreachableStep, Code::ShadowedStep], &finding.name)
            {
                continue;
            }
            let mut d = Diagnostic::new(
                Code::DeadStep,
                Some(step.spans.name),
                format!(
                    "step `{}` can never become active: {}",
                    finding.name,
                    finding
                        .reason
                        .as_deref()
                        .unwrap_or("no reachable state activates it")
                ),
            )
            .label("never active")
            .help(
                "run `orch verify` on the template for witnesses of the steps that are reachable",
            );
            d.subject.step = Some(finding.name.clone());
            out.push(d);
        } else if finding.has_sequence
            && finding.completes.is_none()
            && !already(&[Code::SequenceNeverCompletes], &finding.name)
        {
            let mut d = Diagnostic::new(
                Code::SequenceCannotComplete,
                Some(step.spans.name),
                format!(
                    "the sequence of step `{}` can never complete: the step becomes active, but no continuation records its tools to the end",
                    finding.name
                ),
            )
            .label("sequence never completes")
            .help("run `orch verify` for a witness of how the step becomes active");
            d.subject.step = Some(finding.name.clone());
            out.push(d);
        }
    }
    out
}
