//! Budgets in snapshots (semantics §17): each budget's total and a windowed budget's
//! charges, by the budget's *name*, and the session's clock — so a run restored into a
//! changed template keeps what it spent wherever the budget still exists.

use super::{RestoreError, RestoreReport};
use crate::args::{amount, decimal};
use crate::tables::Tables;

/// One budget's state in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct BudgetSnapshot {
    /// The budget's name.
    pub name: String,
    /// What it holds: the count or the sum, as a decimal (a windowed budget: every
    /// charge it still keeps).
    pub total: String,
    /// A windowed budget's charges, oldest first: `[time in ms, amount as a decimal]`.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub charges: Vec<(u64, String)>,
}

/// The session's clock and its budgets that hold something, from its memory words.
pub(super) fn budget_parts<S: AsRef<str>>(
    t: &Tables<'_, S>,
    memory: &[u64],
) -> (u64, Vec<BudgetSnapshot>) {
    let rules = t.rules;
    let area = crate::args::budget_view(&rules, memory);
    let mut out = Vec::new();
    for (b, budget) in rules.budgets.iter().enumerate() {
        let total = area.stored_total(budget);
        let charges = area.charges(budget);
        if total == 0 && charges.is_empty() {
            continue;
        }
        out.push(BudgetSnapshot {
            name: rules.budget_name(b).to_owned(),
            total: decimal(total),
            charges: charges
                .into_iter()
                .map(|(at, v)| (at, decimal(v)))
                .collect(),
        });
    }
    (area.clock(), out)
}

/// Puts a snapshot's budgets into a session's memory words, by name: a budget the
/// template no longer has is dropped (reported); a windowed budget takes the charges
/// (or, from a snapshot of a budget without a window, its total as one charge at the
/// clock's time); a budget without a window takes the total. `Err` for an amount that
/// is not a decimal a budget can hold.
pub(super) fn restore_budgets<S: AsRef<str>>(
    t: &Tables<'_, S>,
    clock: u64,
    budgets: &[BudgetSnapshot],
    memory: &mut [u64],
    report: &mut RestoreReport,
) -> Result<(), RestoreError> {
    let rules = t.rules;
    let read = |text: &str| {
        amount(text).ok_or_else(|| {
            RestoreError::Malformed(format!(
                "a budget's amount `{text}` is not a decimal of zero or more with at most nine decimal places"
            ))
        })
    };
    let mut area = crate::args::budget_view_mut(&rules, memory);
    area.set_clock(clock);
    for snap in budgets {
        let total = read(&snap.total)?;
        let charges: Vec<(u64, i128)> = snap
            .charges
            .iter()
            .map(|(at, v)| Ok((*at, read(v)?)))
            .collect::<Result<_, RestoreError>>()?;
        let Some(budget) = rules
            .budget_index(&snap.name)
            .and_then(|b| rules.budgets.get(b))
        else {
            report.missing_budgets.push(snap.name.clone());
            continue;
        };
        area.clear(budget);
        match (budget.within != 0, charges.is_empty()) {
            (true, false) => {
                for (at, v) in charges {
                    area.charge(budget, at, v);
                }
            }
            (true, true) => area.charge(budget, clock, total),
            (false, _) => area.set_total(budget, total),
        }
    }
    Ok(())
}
