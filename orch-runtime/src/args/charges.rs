//! Budgets read from a template's rules (semantics §17): which budget charges a call and
//! how much, where each budget's state lies in a session's memory words, and each
//! budget's total by name.

use super::budget::{
    amount, decimal, within, Area, AreaMut, Budget, Charge, Per, EVERY_CALL, UNIT,
};
use super::json::{Doc, Unreadable};
use super::rules::{Eval, Pred, Rules, Test};
use regex::Regex;

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

    /// Does budget test `k` of [`Rules::budget_conditions`] hold of the budgets' totals
    /// at the session's clock (a step condition, semantics §17)? `memory`: a session's
    /// memory words.
    pub(crate) fn budget_condition_holds(&self, memory: &[u64], k: usize) -> bool {
        let test = self
            .budget_conditions
            .get(k)
            .and_then(|&p| self.preds.get(p as usize));
        let Some(Pred::Test {
            test: Test::Budget { budget, min, max },
            ..
        }) = test
        else {
            return false;
        };
        let area = budget_view(self, memory);
        let total = self
            .budgets
            .get(*budget as usize)
            .map_or(0, |b| area.value(b, area.clock()));
        within(total, self.text_of(*min), self.text_of(*max))
    }

    /// Per budget, one unit past the largest bound any budget test of these rules
    /// compares its total with: totals at or above it are alike to every test.
    pub fn budget_caps(&self) -> Vec<i128> {
        let mut caps = vec![UNIT; self.budgets.len()];
        for p in self.preds {
            if let Pred::Test {
                test: Test::Budget { budget, min, max },
                ..
            } = p
            {
                for t in [min, max] {
                    let bound = super::budget::bound(self.text_of(*t)).unwrap_or(0);
                    if let Some(cap) = caps.get_mut(*budget as usize) {
                        *cap = (*cap).max(bound.saturating_add(UNIT));
                    }
                }
            }
        }
        caps
    }

    /// Each budget's total at the session's clock, cut at `caps` (zero for a budget
    /// without one), appended to `out`: the budgets as far as the tests that gave the
    /// caps can tell them apart (what the states of `orch verify`'s exploration are
    /// keyed by). `memory`: a session's memory words.
    pub fn budget_key(&self, memory: &[u64], caps: &[i128], out: &mut Vec<u64>) {
        let area = budget_view(self, memory);
        let now = area.clock();
        for (budget, cap) in self.budgets.iter().zip(caps) {
            let total = area.value(budget, now).clamp(0, (*cap).max(0));
            out.push(u64::try_from(total).unwrap_or(u64::MAX));
        }
    }

    /// Budget `b`'s total at the session's clock, in billionths (0 for no such budget).
    /// `memory`: a session's memory words.
    pub fn budget_total(&self, memory: &[u64], b: usize) -> i128 {
        let area = budget_view(self, memory);
        self.budgets
            .get(b)
            .map_or(0, |budget| area.value(budget, area.clock()))
    }

    /// Does budget `b` charge the calls of tool `tool` (an index into the machine's
    /// tools)?
    pub fn charges_tool(&self, b: usize, tool: usize) -> bool {
        self.budgets
            .get(b)
            .is_some_and(|budget| self.budget_charges_tool(budget, tool))
    }

    /// Does a budget count the calls a session refused to admit (so that a refusal
    /// changes the session)?
    pub fn counts_refusals(&self) -> bool {
        self.budgets.iter().any(|b| b.refused)
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

/// Charging budgets and reading their totals while judging a call.
impl Rules<'_> {
    /// Charges an admitted call of `tool` — or, with `refused`, a call the session
    /// refused to admit — to every budget that counts it (semantics §17), at `at` (or
    /// the session's clock), moving the clock on. Arguments are read only when a budget
    /// sums a value or has a `where`; a charge whose value cannot be read is not made
    /// (judging refused such a call wherever a rule applies).
    pub(crate) fn charge_budgets(
        &self,
        memory: &mut [u64],
        tool: usize,
        arguments: &str,
        regexes: &[Option<Regex>],
        at: Option<u64>,
        refused: bool,
    ) {
        if self.budgets.is_empty() {
            return;
        }
        // The rings (which a `where` may read) and the budgets (which it may not, E027)
        // are apart: each charge is made as it is found.
        let (main, untrusted) = self.ring_sizes();
        let split = (main + untrusted + self.number_area_words()).min(memory.len());
        let (rings, area) = memory.split_at_mut(split);
        let mut area = AreaMut::new(area);
        let now = area.tick(at);
        if !self.charged(tool) {
            return;
        }
        let doc = if self.budget_reads_arguments(tool) {
            Doc::parse(arguments).ok()
        } else {
            None
        };
        let eval = doc
            .as_ref()
            .map(|doc| self.eval_over(doc, regexes, rings, Area::new(&[]), tool, now));
        for budget in self.budgets.iter().filter(|b| b.refused == refused) {
            let charge = match &eval {
                Some(e) => e.charge_of(budget),
                None => self.charge_of(budget, tool, None, &mut |_, _| false),
            };
            if let Charge::Amount(v) = charge {
                area.charge(budget, now, v);
            }
        }
    }

    /// Empties the budgets over `per` (a step's activation, or a user message): the
    /// active step changed, or a user message came.
    pub(crate) fn clear_budgets(&self, memory: &mut [u64], per: Per) {
        let mut area = AreaMut::new(self.budget_area_mut(memory));
        for budget in self.budgets.iter().filter(|b| b.per == per) {
            area.clear(budget);
        }
    }
}

impl Eval<'_, '_> {
    /// Budget `b`'s total with this call: what it holds at the call's time, plus what
    /// it would charge the call (saturating).
    pub(super) fn budget_total(&self, b: usize) -> i128 {
        let held = match self.rules.budgets.get(b) {
            Some(budget) => self.budgets.value(budget, self.now),
            None => 0,
        };
        match self.charges.get(b) {
            Some(Charge::Amount(v)) => held.saturating_add(*v),
            _ => held,
        }
    }

    /// What budget `budget` would charge this call.
    pub(super) fn charge_of(&self, budget: &Budget) -> Charge {
        self.rules
            .charge_of(budget, self.tool, Some(self.doc), &mut |_, p| {
                self.holds(0, p, &mut None)
            })
    }

    /// What every budget would charge this call, in order (nothing to the budgets
    /// that count refusals: a call judged is charged to them only once refused).
    pub(super) fn charges_of_call(&self) -> Vec<Charge> {
        self.rules
            .budgets
            .iter()
            .map(|b| {
                if b.refused {
                    Charge::None
                } else {
                    self.charge_of(b)
                }
            })
            .collect()
    }

    /// The first budget that charges this call but cannot read what it adds up.
    pub(super) fn unreadable_charge(&self) -> Option<Unreadable> {
        self.charges.iter().find_map(|c| match c {
            Charge::Unreadable(at) => Some(Unreadable::Amount(at.unwrap_or(0))),
            _ => None,
        })
    }
}
