//! Budgets read from a template's rules (semantics §17): which budget charges a call and
//! how much, where each budget's state lies in a session's memory words, and each
//! budget's total by name.

use super::budget::{amount, decimal, Area, AreaMut, Budget, Charge, EVERY_CALL, UNIT};
use super::json::Doc;
use super::rules::Rules;

/// The budgets' area of a session's memory words.
pub(crate) fn budget_view<'w>(rules: &Rules<'_>, memory: &'w [u64]) -> Area<'w> {
    Area::new(rules.budget_area(memory))
}

/// The budgets' area of a session's memory words, to change.
pub(crate) fn budget_view_mut<'w>(rules: &Rules<'_>, memory: &'w mut [u64]) -> AreaMut<'w> {
    AreaMut::new(rules.budget_area_mut(memory))
}

impl<'a> Rules<'a> {
    /// What budget `b` would charge a call of `tool` with these arguments.
    pub(crate) fn charge_of(
        &self,
        b: &Budget,
        tool: usize,
        doc: Option<&Doc<'_>>,
        holds: &mut dyn FnMut(&Doc<'_>, u32) -> bool,
    ) -> Charge {
        if !self.budget_charges_tool(b, tool) {
            return Charge::None;
        }
        if b.pred == EVERY_CALL && b.sum.is_none() {
            return Charge::Amount(UNIT);
        }
        let Some(doc) = doc else {
            return Charge::Unreadable(None);
        };
        if b.pred != EVERY_CALL && !holds(doc, b.pred) {
            return Charge::None;
        }
        let Some(sum) = b.sum else {
            return Charge::Amount(UNIT);
        };
        let Some(n) = doc.pointer(0, self.text_of(sum)) else {
            return Charge::Unreadable(None);
        };
        let node = &doc.nodes[n];
        if node.kind != super::json::Kind::Number {
            return Charge::Unreadable(Some(node.start));
        }
        match amount(doc.raw(n)) {
            Some(v) => Charge::Amount(v),
            None => Charge::Unreadable(Some(node.start)),
        }
    }

    /// Does budget `b` charge calls of `tool`?
    pub(crate) fn budget_charges_tool(&self, b: &Budget, tool: usize) -> bool {
        self.budget_tools
            .get(b.tools.range())
            .unwrap_or(&[])
            .iter()
            .any(|&t| t as usize == tool)
    }

    /// Does some budget charge calls of `tool`, and need its arguments to know how
    /// much?
    pub(crate) fn budget_reads_arguments(&self, tool: usize) -> bool {
        self.budgets
            .iter()
            .any(|b| (b.sum.is_some() || b.pred != EVERY_CALL) && self.budget_charges_tool(b, tool))
    }

    /// Does some budget charge calls of `tool`?
    pub(crate) fn charged(&self, tool: usize) -> bool {
        self.budgets
            .iter()
            .any(|b| self.budget_charges_tool(b, tool))
    }

    /// The words of the budgets' area: a clock word and each budget's state; none
    /// without budgets.
    pub fn budget_area_words(&self) -> usize {
        if self.budgets.is_empty() {
            0
        } else {
            1 + self.budgets.iter().map(Budget::words).sum::<usize>()
        }
    }

    /// Budget `b` and its words, within the area `area`.
    /// Each budget's total at the session's clock, by name, as a decimal — the budgets
    /// that hold nothing left out (semantics §17). `memory`: a session's memory words.
    pub fn budget_totals(&self, memory: &[u64]) -> Vec<(&'a str, String)> {
        let area = budget_view(self, memory);
        let now = area.clock();
        self.budgets
            .iter()
            .enumerate()
            .filter_map(|(b, budget)| {
                let total = area.value(budget, now);
                (total != 0).then(|| (self.budget_name(b), decimal(total)))
            })
            .collect()
    }

    /// Budget `b`'s name.
    pub fn budget_name(&self, b: usize) -> &'a str {
        self.budgets.get(b).map_or("", |x| self.text_of(x.name))
    }

    /// The index of the budget named `name`.
    pub fn budget_index(&self, name: &str) -> Option<usize> {
        self.budgets
            .iter()
            .position(|b| self.text_of(b.name) == name)
    }
}
