//! The checks of semantics §3. Every front end calls [`check`]; no rule is implemented
//! anywhere else.
//!
//! [`check`] reads as the list of rules it applies, in order. Each rule is a small
//! function whose doc comment states it; the rules that resolve names (tools, steps,
//! conditions) live in [`names`], [`tools`] and [`steps`], the warnings about a valid
//! template in [`lints`], and building the [`Ir`] from the resolved template is a
//! separate step, [`lower`].

mod budgets;
mod lints;
mod names;
mod rules;
mod steps;
pub(crate) mod suggest;
mod tools;

use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::ir::{Ir, IrProperty, IrRule};
use crate::limits::{
    MAX_HISTORY, MAX_MESSAGE_CONDITIONS, MAX_REGEX_BYTES, MAX_TABLE_WORDS, MAX_TEMPLATE_STEPS,
    MAX_TOOLS,
};
use crate::model::{PropertyRule, Span, Spanned, Template};
use crate::resolved::StepInfo;
use orch_runtime::compiled::MessageRegex;
use std::collections::HashMap;

/// The `resetSequenceOn` triggers semantics §7 defines.
pub const RESET_TRIGGERS: [&str; 3] = ["user_message", "message_contains", "message_regex"];

/// Applies every rule of semantics §3 to `t` and resolves its names. Judges only:
/// nothing is lowered or built here ([`crate::compile`] runs the stages in order).
pub(crate) fn check(t: &Template) -> Resolved<'_> {
    let mut c = Checker::new(t);
    c.check_allow_list();
    c.check_max_rounds();
    let machine = c.machine_name();
    let universe = c.universe();
    let tool_idents = c.idents(&universe.tools, "tool");
    c.check_size(&universe);
    let step_names = c.step_names();
    let step_idents = c.idents(&step_names.unique, "step");
    let default_step = c.default_step();
    let approve = c.gate(&t.approve, &universe, "orchestration.approve");
    let lost = crate::ir::IrLost {
        retry: c.gate(&t.lost_results.retry, &universe, "lostResults.retry"),
        ran: c.gate(&t.lost_results.ran, &universe, "lostResults.ran"),
        hold: c.gate(&t.lost_results.hold, &universe, "lostResults.hold"),
    };
    // Budgets before steps: a step's condition may test one.
    let mut memory = c.memory(&universe);
    memory.budgets = c.budgets(&universe);
    let steps: Vec<StepInfo<'_>> = t
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut step = c.step(s, &universe, default_step == Some(i), step_names.skip[i]);
            let own = c.gate(
                s.approve.as_deref().unwrap_or(&[]),
                &universe,
                "availableTools.approve",
            );
            step.approve = own.union(&approve);
            step
        })
        .collect();
    memory.conditions = std::mem::take(&mut c.budget_conditions);
    let properties = c.properties(&universe);
    let arg_rules = c.arg_rules(&universe);
    c.check_message_conditions();
    let history = c.history_capacity(&steps);
    let steps = steps::whole_history_windows(steps, history);
    lints::run(&mut c, &steps, &universe, default_step);
    Resolved {
        parts: crate::resolved::Parts {
            machine,
            tools: universe.tools,
            tool_idents,
            steps,
            step_names: step_names.unique,
            step_idents,
            default_step,
            history,
            contains: c.contains,
            regexes: c.regexes,
            max_rounds: t.max_rounds.as_ref().map(|m| m.value),
            description: t.description.clone(),
            approve,
            lost,
            properties,
            arg_rules,
            memory,
        },
        regexes: c.compiled_regexes,
        diagnostics: c.diags,
    }
}

/// What [`check`] resolved: the parts [`crate::lower`] makes the IR of, the message
/// regexes it compiled (to validate them; the machine reuses them), and every
/// diagnostic it found, in the order found.
pub(crate) struct Resolved<'t> {
    /// The resolved template.
    pub(crate) parts: crate::resolved::Parts<'t>,
    /// `parts.regexes`, compiled.
    pub(crate) regexes: Vec<MessageRegex>,
    /// Errors and warnings, unsorted, the allow list not yet applied.
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// E019: the compiled tool sets fit in [`MAX_TABLE_WORDS`] words (`tables` are `ir`'s).
pub(crate) fn table_size(
    ir: &Ir,
    tables: &orch_runtime::compiled::OwnedTables,
) -> Option<Diagnostic> {
    let words = tables.bits.len();
    (words > MAX_TABLE_WORDS).then(|| {
        Diagnostic::new(
            Code::LimitExceeded,
            None,
            format!(
                "the compiled tool sets take {words} words ({} KiB); the limit is {MAX_TABLE_WORDS} words ({} KiB)",
                words * 8 / 1024,
                MAX_TABLE_WORDS * 8 / 1024
            ),
        )
        .note(format!(
            "each distinct `availableTools` set or sequence takes {} words for {} tools; steps with the same tools share one",
            ir.words(),
            ir.tools.len()
        ))
        .help("give steps fewer distinct `availableTools` sets, or split the template")
    })
}

/// Drops the warnings `allow` allows (the template's allow list), then sorts the rest
/// into source order (stable: diagnostics at one place keep the order found).
pub(crate) fn allow_and_sort(allow: &[Spanned<String>], diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let allowed: Vec<Code> = allow
        .iter()
        .filter_map(|a| Code::parse(&a.value))
        .filter(|c| c.severity() == Severity::Warning)
        .collect();
    let mut diags: Vec<Diagnostic> = diags
        .into_iter()
        .filter(|d| !(d.severity() == Severity::Warning && allowed.contains(&d.code)))
        .collect();
    diags.sort_by_key(|d| d.span.map_or((0, 0), Span::order));
    diags
}

impl<'t> Checker<'t> {
    /// semantics §14: `orchestration.properties`. E022: two properties with one name.
    /// E006: an empty `tool` or `after`. E015: a name (not a pattern) that is not a
    /// declared tool, when tools are declared (a misspelt name would make the property
    /// hold vacuously).
    fn properties(&mut self, universe: &Universe<'t>) -> Vec<IrProperty> {
        let t = self.t;
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut out = Vec::new();
        for p in &t.properties {
            if let Some(first) = seen.insert(&p.name.value, p.name.span) {
                self.push(
                    Diagnostic::new(
                        Code::InvalidProperty,
                        Some(p.name.span),
                        format!("two properties are named `{}`", p.name.value),
                    )
                    .label("the second")
                    .related(first, "the first")
                    .help("give every property its own name"),
                );
                continue;
            }
            let mut ok = true;
            let after = match &p.rule {
                PropertyRule::After(q) => Some(q),
                _ => None,
            };
            for (names, what) in [
                (Some(&p.tool), "a property's `tool`"),
                (after, "a property's `after`"),
            ] {
                let Some(n) = names else { continue };
                // Empty (E006), or a name that is not a declared tool (E015).
                let bad = self.empty_tool_name(n)
                    || (!orch_runtime::compiled::is_pattern(&n.value)
                        && universe.declared
                        && self.resolve(universe, n, what).is_none());
                ok &= !bad;
            }
            if !ok {
                continue;
            }
            let when = match &p.when {
                Some(w) => match self.property_when(w, universe) {
                    Some(w) => Some(w),
                    None => continue,
                },
                None => None,
            };
            out.push(IrProperty {
                when,
                name: p.name.value.clone(),
                tool: p.tool.value.clone(),
                rule: match &p.rule {
                    PropertyRule::After(q) => IrRule::After(q.value.clone()),
                    PropertyRule::AtMost(n) => IrRule::AtMost(n.value),
                    PropertyRule::Never => IrRule::Never,
                    PropertyRule::Approved => IrRule::Approved,
                },
                span: p.name.span,
            });
        }
        out
    }
}

/// The closest of `candidates` to `name`, if close enough to suggest.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The tool universe (semantics §2), resolved.
struct Universe<'t> {
    /// The tools, in declaration (or first-mention) order; a tool's index is its
    /// position here.
    tools: Vec<&'t Spanned<String>>,
    /// Was it declared (`tools`/`nodes`)? Only then is an unknown name an error.
    declared: bool,
    /// Tool name → index.
    index: HashMap<&'t str, usize>,
    /// "Did you mean" over the tools, built at the first unknown name.
    suggester: std::cell::OnceCell<suggest::Suggester<'t>>,
}

impl<'t> Universe<'t> {
    fn len(&self) -> usize {
        self.tools.len()
    }

    /// The declared tool closest to `name`, if close enough to suggest.
    fn closest(&self, name: &str) -> Option<&'t str> {
        self.suggester
            .get_or_init(|| suggest::Suggester::new(self.tools.iter().map(|t| t.value.as_str())))
            .closest(name)
    }
}

/// The step names: the unique ones (in order), and which steps the lints leave alone
/// (nameless and duplicate steps, already errors).
struct StepNames<'t> {
    unique: Vec<&'t Spanned<String>>,
    skip: Vec<bool>,
}

impl StepInfo<'_> {
    /// The span to underline for the step as a whole: its name, else the step.
    fn name_span(&self) -> Span {
        self.model.name.as_ref().map_or(self.model.span, |n| n.span)
    }
}

/// The checker's state: the template, the diagnostics so far, and the message pools
/// (`message_contains` needles and `message_regex` sources, interned).
struct Checker<'t> {
    t: &'t Template,
    diags: Vec<Diagnostic>,
    contains: Vec<String>,
    regexes: Vec<String>,
    /// `regexes`, compiled (to validate them; handed on to the machine).
    compiled_regexes: Vec<MessageRegex>,
    /// Bytes the compiled regexes take, all together.
    regex_memory: usize,
    /// The tools declared trusted (what a `from` test's `"trusted"` stands for).
    trusted: Vec<usize>,
    /// The budgets' names, in template order (what a budget test names).
    budget_names: Vec<String>,
    /// Checking a budget's `where`, which may not test budgets.
    in_budget_where: bool,
    /// The budget tests step conditions read, each once (what
    /// [`IrCondition::Budget`](crate::ir::IrCondition::Budget) indexes).
    budget_conditions: Vec<crate::ir::IrTest>,
}

impl<'t> Checker<'t> {
    fn new(t: &'t Template) -> Self {
        Checker {
            t,
            diags: Vec::new(),
            contains: Vec::new(),
            regexes: Vec::new(),
            compiled_regexes: Vec::new(),
            regex_memory: 0,
            trusted: Vec::new(),
            budget_names: Vec::new(),
            in_budget_where: false,
            budget_conditions: Vec::new(),
        }
    }

    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// E020: every entry of an allow list names a warning.
    fn check_allow_list(&mut self) {
        let warnings: Vec<&str> = Code::ALL
            .iter()
            .filter(|c| c.severity() == Severity::Warning)
            .map(|c| c.name())
            .collect();
        for a in &self.t.allow {
            if Code::parse(&a.value).is_some_and(|c| c.severity() == Severity::Warning) {
                continue;
            }
            let d = Diagnostic::new(
                Code::UnknownLint,
                Some(a.span),
                format!("`{}` is not a warning that can be allowed", a.value),
            )
            .label("unknown warning");
            let d = match closest(&a.value, warnings.iter().copied()) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help(format!("warnings: {}", warnings.join(", "))),
            };
            self.push(d);
        }
    }

    /// E002: `options.maxSteps` (the agent loop's rounds per turn) is at least 1.
    fn check_max_rounds(&mut self) {
        if let Some(m) = self.t.max_rounds.as_ref().filter(|m| m.value == 0) {
            self.push(
                Diagnostic::new(
                    Code::WrongType,
                    Some(m.span),
                    "`options.maxSteps` must be at least 1",
                )
                .label("the agent could never call the model")
                .help("remove it for the default (10), or give the number of model calls a turn may take"),
            );
        }
    }

    /// E019: at most [`MAX_TOOLS`] tools and [`MAX_TEMPLATE_STEPS`] steps.
    fn check_size(&mut self, universe: &Universe<'_>) {
        if universe.len() > MAX_TOOLS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!(
                    "the template has {} tools; the limit is {MAX_TOOLS}",
                    universe.len()
                ),
            ));
        }
        if self.t.steps.len() > MAX_TEMPLATE_STEPS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!(
                    "the template has {} steps; the limit is {MAX_TEMPLATE_STEPS}",
                    self.t.steps.len()
                ),
            ));
        }
    }

    /// E019: at most [`MAX_MESSAGE_CONDITIONS`] distinct message conditions, and
    /// compiled regexes of at most [`MAX_REGEX_BYTES`] all together.
    fn check_message_conditions(&mut self) {
        if self.regex_memory > MAX_REGEX_BYTES {
            self.push(
                Diagnostic::new(
                    Code::LimitExceeded,
                    None,
                    format!(
                        "the {} `message_regex` patterns compile to {} MiB; the limit is {} MiB",
                        self.regexes.len(),
                        self.regex_memory >> 20,
                        MAX_REGEX_BYTES >> 20
                    ),
                )
                .help("use fewer or simpler patterns (`message_contains` for plain words costs no regex)"),
            );
        }
        let n = self.contains.len() + self.regexes.len();
        if n > MAX_MESSAGE_CONDITIONS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!(
                    "the template has {n} distinct message conditions; the limit is {MAX_MESSAGE_CONDITIONS}"
                ),
            ));
        }
    }

    /// semantics §4: H = max(10, `historyLength`, the longest sequence, the largest
    /// `window`). E019 when `historyLength` or a sequence exceeds [`MAX_HISTORY`]
    /// (windows are checked where they are read).
    fn history_capacity(&mut self, steps: &[StepInfo<'_>]) -> usize {
        let longest = steps.iter().map(|s| s.sequence.len()).max().unwrap_or(0);
        let max_window = steps.iter().map(|s| s.max_window).max().unwrap_or(0);
        let asked = self.t.history_length.as_ref().map_or(0, |h| h.value);
        if asked > MAX_HISTORY as u64 {
            self.push(
                Diagnostic::new(
                    Code::LimitExceeded,
                    self.t.history_length.as_ref().map(|h| h.span),
                    format!("`historyLength` of {asked} exceeds the limit of {MAX_HISTORY}"),
                )
                .help("the history is stored inline in every session; keep it small"),
            );
        }
        if longest > MAX_HISTORY {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!("a sequence of {longest} positions exceeds the limit of {MAX_HISTORY}"),
            ));
        }
        10usize
            .max(asked.min(MAX_HISTORY as u64) as usize)
            .max(longest.min(MAX_HISTORY))
            .max(max_window)
    }
}

/// `a, b, c, …` — the first dozen names of a tool list, for notes.
fn list_names(tools: &[&Spanned<String>]) -> String {
    const SHOW: usize = 12;
    let mut s: Vec<&str> = tools.iter().take(SHOW).map(|t| t.value.as_str()).collect();
    if tools.len() > SHOW {
        s.push("…");
    }
    if s.is_empty() {
        "(none)".to_owned()
    } else {
        s.join(", ")
    }
}
