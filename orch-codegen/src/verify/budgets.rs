//! Budgets in the host model of `orch verify` (semantics §17): the calls the model makes
//! are charged as `orch simulate` charges a tool event without arguments, counts of calls
//! are exact, and what the model cannot count (sums, `where`, windows, refusals) is said.

use orch_runtime::approval::{Call, CallDigest};
use orch_runtime::compiled::Condition;
use orch_runtime::dynamic::{DynMachine, DynOutcome, DynSession};

/// Runs tool `name` in the model: the call charged to the budgets as a tool event
/// without arguments is (counts only, at `at`, else the session's clock), then
/// recorded.
pub(crate) fn run_tool(session: &mut DynSession<'_>, name: &str, at: Option<u64>) -> DynOutcome {
    if !session.machine().tables().rules.budgets.is_empty() {
        let mut call = Call::new(CallDigest::of_canonical(name, b"{}"), "{}");
        call.at = at;
        session.ran_call(name, &call);
    }
    session.record(name)
}

/// With windowed budgets, the time past every window since the session's newest call
/// (what an [`Event::Later`](super::explore::Event::Later) carries); `None` without.
pub(crate) fn past_every_window(session: &DynSession<'_>) -> Option<u64> {
    let rules = session.machine().tables().rules.view();
    let widest = rules
        .budgets
        .iter()
        .map(|b| b.within)
        .max()
        .filter(|w| *w > 0)?;
    Some(session.clock().saturating_add(widest).saturating_add(1))
}

/// Budget `b`'s total with a call of `tool` in state `session`, where the model knows it
/// exactly: a count of calls without `where` or `within` (charged as [`run_tool`]
/// charges). `None`: the model's choice.
pub(crate) fn exact_total(session: &DynSession<'_>, b: usize, tool: Option<usize>) -> Option<i128> {
    let rules = session.machine().tables().rules.view();
    let budget = rules.budgets.get(b)?;
    let exact = budget.sum.is_none()
        && budget.pred == orch_runtime::args::EVERY_CALL
        && budget.within == 0
        && !budget.refused;
    if !exact {
        return None;
    }
    let with_call = tool.is_some_and(|t| rules.charges_tool(b, t));
    Some(
        session.budget_total(b)
            + if with_call {
                orch_runtime::args::UNIT
            } else {
                0
            },
    )
}

/// With budgets, is a call of `name` one the rules on arguments can admit in state `session`
/// (step `active`): can some arguments satisfy every required rule, budgets read as
/// [`exact_total`] says? Always without budgets (or with `permissive`), as before
/// budgets the model left rules to the properties.
pub(crate) fn rules_admit(
    session: &DynSession<'_>,
    name: &str,
    active: Option<usize>,
    permissive: bool,
) -> bool {
    let machine = session.machine();
    let rules = machine.tables().rules.view();
    if permissive || rules.budgets.is_empty() {
        return true;
    }
    let tool = machine.tables().view().tool_index(name);
    let totals = |b: usize| exact_total(session, b, tool);
    super::arguments::can_run(rules, machine.tools(), tool, active, None, false, &totals).is_some()
}

/// Why the exploration cannot rule out step `i`: a condition of it reads a budget whose
/// charges depend on the arguments or on time.
pub(crate) fn abstracted(machine: &DynMachine, i: usize) -> Option<String> {
    let t = machine.tables();
    let view = t.view();
    let rules = t.rules.view();
    view.step_conditions(i).iter().find_map(|c| {
        let Condition::Budget(k) = *c else {
            return None;
        };
        let budget = rules.budget_of_condition(k)?;
        let b = rules.budgets.get(budget)?;
        let what = if b.refused {
            "that counts refused calls"
        } else if b.within != 0 {
            "with a window (the model lets time stand still or pass every window, not each moment between)"
        } else if b.sum.is_some() {
            "that adds up the calls' arguments"
        } else if b.pred != orch_runtime::args::EVERY_CALL {
            "with a `where` on the calls' arguments"
        } else {
            return None;
        };
        Some(format!(
            "its condition `budget {}` reads a budget {what}, which verify does not model: undecided",
            rules.describe_budget_condition(k)
        ))
    })
}
