//! Budgets (semantics §17): each budget's tools resolved, its sum, scope and window
//! judged, and the budget tests of rules and step conditions resolved against them.

use super::{Checker, Universe};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{IrBudget, IrCondition, IrTest};
use crate::model::{BudgetDecl, Condition, Span, Spanned};
use orch_runtime::args::{
    amount, is_pointer, window_ms, BUDGET_EVENTS, MAX_BUDGET_EVENTS, MAX_WINDOW_MS,
};
use orch_runtime::compiled::{glob_match, is_pattern, Per};
use std::collections::HashMap;

/// The most budgets a template may have (tests name them with 16 bits).
pub(crate) const MAX_BUDGETS: usize = 1024;

impl<'t> Checker<'t> {
    /// semantics §17: `orchestration.budgets`. E026: two budgets with one name. E015: a
    /// tool name that is not a tool of the universe; W004-like silence is not enough for
    /// a budget, so a pattern that matches no tool is E015 too (a budget that charges
    /// nothing would let every call through). E025: `sum` not a JSON pointer, `per`
    /// other than `run` or `step`, `within` not `<n>ms|s|m|h|d`, `events` without
    /// `within`. E027: a budget test inside a `where`. E019: a window over 400 days, `events`
    /// outside 1 to 4,096, more than [`MAX_BUDGETS`] budgets.
    pub(super) fn budgets(&mut self, universe: &Universe<'t>) -> Vec<IrBudget> {
        let t = self.t;
        self.budget_names = t.budgets.iter().map(|b| b.name.value.clone()).collect();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut out = Vec::new();
        for b in &t.budgets {
            if let Some(first) = seen.insert(&b.name.value, b.name.span) {
                self.push(
                    Diagnostic::new(
                        Code::ConflictingRule,
                        Some(b.name.span),
                        format!("two budgets are named `{}`", b.name.value),
                    )
                    .label("the second")
                    .related(first, "the first")
                    .help("rules and refusals name the budget: give every budget its own name"),
                );
            }
            if let Some(ir) = self.budget(b, universe) {
                out.push(ir);
            }
        }
        if out.len() > MAX_BUDGETS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                t.budgets.get(MAX_BUDGETS).map(|b| b.span),
                format!(
                    "the template has {} budgets; the limit is {MAX_BUDGETS}",
                    out.len()
                ),
            ));
        }
        out
    }

    fn budget(&mut self, b: &BudgetDecl, universe: &Universe<'t>) -> Option<IrBudget> {
        let tools = self.budget_tools(&b.tool, universe);
        let sum = match &b.sum {
            Some(p) if !is_pointer(&p.value) => {
                self.bad(
                    p.span,
                    format!("`{}` is not a JSON pointer", p.value),
                    "`sum` is the JSON pointer of the number a budget adds up: `/amount`",
                );
                None
            }
            Some(p) => Some(Some(p.value.clone())),
            None => Some(None),
        };
        let per = match b.per.as_ref().map(|p| p.value.as_str()) {
            None | Some("run") => Some(Per::Run),
            Some("step") => Some(Per::Step),
            Some("message") => Some(Per::Message),
            Some(other) => {
                self.bad(
                    b.per.as_ref().map_or(b.span, |p| p.span),
                    format!("`per` is `{other}`"),
                    "`per` is `run` (the default: the whole run), `step` (it starts again when the active step changes) or `message` (it starts again with every user message)",
                );
                None
            }
        };
        let within = match &b.within {
            None => Some(0),
            Some(w) => self.budget_window(w),
        };
        let refused = match b.counts.as_ref().map(|c| c.value.as_str()) {
            None | Some("admitted") => Some(false),
            Some("refused") => Some(true),
            Some(other) => {
                self.bad(
                    b.counts.as_ref().map_or(b.span, |c| c.span),
                    format!("`counts` is `{other}`"),
                    "`counts` is `admitted` (the default: the calls admitted to run) or `refused` (the calls the session refused)",
                );
                None
            }
        };
        let events = self.events(b);
        let when = match &b.when {
            Some(p) => {
                self.in_budget_where = true;
                let checked = self.property_when(p, universe);
                self.in_budget_where = false;
                Some(checked?)
            }
            None => None,
        };
        Some(IrBudget {
            name: b.name.value.clone(),
            tools: tools?,
            sum: sum?,
            when,
            per: per?,
            within_ms: within?,
            events: events?,
            refused: refused?,
            span: b.span,
        })
    }

    /// The tools a budget charges: one tool by name, or every tool a `*` pattern
    /// matches (E015 when none).
    fn budget_tools(
        &mut self,
        tool: &Spanned<String>,
        universe: &Universe<'t>,
    ) -> Option<Vec<usize>> {
        if self.empty_tool_name(tool) {
            return None;
        }
        if !is_pattern(&tool.value) {
            return self
                .tool_by_name(tool, universe, "a budget's `tool`")
                .map(|i| vec![i]);
        }
        let matched: Vec<usize> = universe
            .tools
            .iter()
            .enumerate()
            .filter(|(_, u)| glob_match(&tool.value, &u.value))
            .map(|(i, _)| i)
            .collect();
        if matched.is_empty() {
            self.push(
                Diagnostic::new(
                    Code::UnknownTool,
                    Some(tool.span),
                    format!("the pattern `{}` matches no tool", tool.value),
                )
                .label("a budget that charges no call would never count anything")
                .help("name the tool the budget charges, or fix the pattern")
                .about_tool(&tool.value),
            );
            return None;
        }
        Some(matched)
    }

    /// A window `<n>ms|s|m|h|d` in milliseconds: E025 for another form, E019 past
    /// [`MAX_WINDOW_MS`].
    fn budget_window(&mut self, w: &Spanned<String>) -> Option<u64> {
        match window_ms(&w.value) {
            None | Some(0) => {
                self.bad(
                    w.span,
                    format!("`within` is `{}`", w.value),
                    "a window is a whole number of `ms`, `s`, `m`, `h` or `d` above zero: `90s`, `1h`, `24h`, `7d`",
                );
                None
            }
            Some(ms) if ms > MAX_WINDOW_MS => {
                self.push(
                    Diagnostic::new(
                        Code::LimitExceeded,
                        Some(w.span),
                        format!("the window `{}` is over 400 days", w.value),
                    )
                    .help("a window is at most 400 days; for a longer budget, count over the run (`per: run`)"),
                );
                None
            }
            Some(ms) => Some(ms),
        }
    }

    /// How many charges a windowed budget keeps: E025 for `events` without a window,
    /// E019 outside 1 to [`MAX_BUDGET_EVENTS`].
    fn events(&mut self, b: &BudgetDecl) -> Option<u32> {
        let windowed = b.within.is_some();
        match &b.events {
            None => Some(if windowed { BUDGET_EVENTS } else { 0 }),
            Some(n) if !windowed => {
                self.bad(
                    n.span,
                    "`events` on a budget without a window".to_owned(),
                    "`events` is how many charges a budget with `within` keeps; a budget over the run or a step keeps only its total",
                );
                None
            }
            Some(n) if n.value == 0 || n.value > u64::from(MAX_BUDGET_EVENTS) => {
                self.push(Diagnostic::new(
                    Code::LimitExceeded,
                    Some(n.span),
                    format!(
                        "`events` is {}; a windowed budget keeps from 1 to {MAX_BUDGET_EVENTS} charges",
                        n.value
                    ),
                ));
                None
            }
            Some(n) => Some(n.value as u32),
        }
    }

    /// A budget test: the budget by name (E027), bounds that are decimals of at most
    /// nine places (E026) and in order (E026).
    pub(super) fn budget_test(
        &mut self,
        span: Span,
        name: &Spanned<String>,
        min: &Option<Spanned<String>>,
        max: &Option<Spanned<String>>,
    ) -> Option<IrTest> {
        if self.in_budget_where {
            self.push(
                Diagnostic::new(
                    Code::UnknownBudget,
                    Some(span.first_byte()),
                    format!("a budget's `where` tests budget `{}`", name.value),
                )
                .label("a budget's `where` reads the call's arguments only")
                .help("test budgets in rules, conditional approvals and properties"),
            );
            return None;
        }
        let Some(budget) = self.budget_names.iter().position(|n| *n == name.value) else {
            let mut d = Diagnostic::new(
                Code::UnknownBudget,
                Some(name.span),
                format!("unknown budget `{}`", name.value),
            )
            .label("no budget has this name");
            d = match super::closest(&name.value, self.budget_names.iter().map(String::as_str)) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help("declare it in `orchestration.budgets`"),
            };
            self.push(d);
            return None;
        };
        for b in [min, max].into_iter().flatten() {
            let magnitude = b.value.strip_prefix('-').unwrap_or(&b.value);
            if !orch_runtime::args::is_number(&b.value) || amount(magnitude).is_none() {
                self.push(
                    Diagnostic::new(
                        Code::ConflictingRule,
                        Some(b.span),
                        format!("a budget cannot be compared with `{}` exactly", b.value),
                    )
                    .label("more than nine decimal places, or too large")
                    .help("budgets hold exact decimals of at most nine decimal places"),
                );
                return None;
            }
        }
        if let (Some(lo), Some(hi)) = (min, max) {
            let order = orch_runtime::args::compare_numbers(&lo.value, &hi.value);
            if order == Some(core::cmp::Ordering::Greater) {
                self.push(
                    Diagnostic::new(
                        Code::ConflictingRule,
                        Some(span),
                        format!("`range` from {} to {} holds no total", lo.value, hi.value),
                    )
                    .label("no total is within these bounds")
                    .help("`min` must not be above `max`"),
                );
                return None;
            }
        }
        Some(IrTest::Budget {
            budget,
            min: min.as_ref().map(|m| m.value.clone()),
            max: max.as_ref().map(|m| m.value.clone()),
        })
    }

    /// A `budget` step condition: a budget test as in a rule ([`Checker::budget_test`]).
    /// Equal tests share one entry.
    pub(super) fn budget_condition(
        &mut self,
        c: &Condition,
        name: &Spanned<String>,
    ) -> Option<IrCondition> {
        let test = self.budget_test(c.span, name, &c.min, &c.max)?;
        let k = match self.budget_conditions.iter().position(|t| *t == test) {
            Some(k) => k,
            None => {
                self.budget_conditions.push(test);
                self.budget_conditions.len() - 1
            }
        };
        Some(IrCondition::Budget(k))
    }
}
