//! The checks of semantics §3. Every front end calls [`check`]; no rule is implemented
//! anywhere else.
//!
//! [`check`] reads as the list of rules it applies, in order. Each rule is a small
//! function whose doc comment states it; the rules that resolve names (tools, steps,
//! conditions) live in [`names`], [`tools`] and [`steps`], the warnings about a valid
//! template in [`lints`], and building the [`Ir`] from the resolved template is a
//! separate step, [`lower`].

mod lints;
mod names;
mod steps;
pub(crate) mod suggest;
mod tools;

use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::ir::{Ir, IrCondition, IrGate, IrProperty, IrRule, ToolBits};
use crate::limits::{
    MAX_HISTORY, MAX_MESSAGE_CONDITIONS, MAX_REGEX_BYTES, MAX_TABLE_WORDS, MAX_TEMPLATE_STEPS,
    MAX_TOOLS,
};
use crate::model::{PropertyRule, Span, Spanned, Step, Template};
use orch_runtime::compiled::MessageRegex;
use orch_runtime::dynamic::DynMachine;
use std::collections::HashMap;

pub use crate::lower::placeholder;

/// The `resetSequenceOn` triggers semantics §7 defines.
pub const RESET_TRIGGERS: [&str; 3] = ["user_message", "message_contains", "message_regex"];

/// How a template is checked ([`crate::compile_json_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Decide the template's properties (E023, within the bounds of W007). `orch verify`
    /// turns this off to decide them itself, without bounds, and `orch simulate` to
    /// replay a violating witness.
    pub prove_properties: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            prove_properties: true,
        }
    }
}

/// Checks a template: every diagnostic (errors and the warnings that were not allowed),
/// in source order, and, when there is no error, the IR and its machine.
pub fn check(t: &Template) -> Checked {
    check_with(t, CheckOptions::default())
}

/// [`check`] with `options`.
pub fn check_with(t: &Template, options: CheckOptions) -> Checked {
    let mut c = Checker::new(t);
    c.prove_properties = options.prove_properties;
    c.check_allow_list();
    c.check_max_rounds();
    let machine = c.machine_name();
    let universe = c.universe();
    let tool_names: Vec<&Spanned<String>> = universe.tools.clone();
    let tool_idents = c.idents(&tool_names, "tool");
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
    let properties = c.properties(&universe);
    c.check_message_conditions();
    let history = c.history_capacity(&steps);
    let steps = steps::whole_history_windows(steps, history);
    lints::run(&mut c, &steps, &universe, default_step);
    let ir = crate::lower::lower(crate::lower::Parts {
        machine,
        tools: &universe.tools,
        tool_idents,
        steps: &steps,
        step_names: &step_names.unique,
        step_idents,
        default_step,
        history,
        contains: c.contains.clone(),
        regexes: c.regexes.clone(),
        max_rounds: t.max_rounds.as_ref().map(|m| m.value),
        description: t.description.clone(),
        approve,
        lost,
        properties,
    });
    let tables = c.check_table_size(&ir);
    // The machine, its regexes compiled once (by the checks above): the lints explore
    // it, and `Compiled::to_machine` hands it out.
    let machine = if c.diags.iter().any(Diagnostic::is_error) {
        None
    } else {
        let regexes = std::mem::take(&mut c.compiled_regexes);
        DynMachine::with_regexes(tables, regexes).ok()
    };
    if let Some(machine) = &machine {
        c.verified_lints(&ir, machine, &steps);
    }
    let (ir, diagnostics) = c.finish(ir);
    Checked {
        machine: machine.filter(|_| ir.is_some()),
        ir,
        diagnostics,
    }
}

/// What [`check`] gives back.
pub struct Checked {
    /// The IR, when there was no error.
    pub ir: Option<Ir>,
    /// Every diagnostic, sorted.
    pub diagnostics: Vec<Diagnostic>,
    /// The run-time machine of the IR (its tables and compiled matchers), when there was
    /// no error.
    pub machine: Option<DynMachine>,
}

impl<'t> Checker<'t> {
    /// E023: every property a reachable state violates (the exploration of W007, bounded
    /// the same way; an undecided property is left to `orch verify`).
    fn verified_properties(
        &mut self,
        ir: &Ir,
        machine: &DynMachine,
        options: &crate::verify::explore::Options,
        host: &crate::verify::explore::Host,
    ) {
        let found = crate::verify::properties::check_with(machine, &ir.properties, options, host);
        for f in found.iter().filter(|f| f.holds == Some(false)) {
            let Some(p) = self.t.properties.iter().find(|p| p.name.value == f.name) else {
                continue;
            };
            let witness = f
                .witness
                .as_deref()
                .map(crate::verify::explore::witness_to_json)
                .unwrap_or_default();
            let d = Diagnostic::new(
                Code::PropertyViolated,
                Some(p.name.span),
                format!(
                    "property `{}` is violated: {}",
                    f.name,
                    f.message.as_deref().unwrap_or("a reachable state violates it")
                ),
            )
            .label(format!("violated ({})", p.rule.key()))
            .note(format!("witness (`orch simulate` events from a fresh session): {witness}"))
            .help("change the steps so that no path reaches the violating call, or the property if it says too much");
            self.push(d);
        }
    }

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
            out.push(IrProperty {
                name: p.name.value.clone(),
                tool: p.tool.value.clone(),
                rule: match &p.rule {
                    PropertyRule::After(q) => IrRule::After(q.value.clone()),
                    PropertyRule::AtMost(n) => IrRule::AtMost(n.value),
                    PropertyRule::Never => IrRule::Never,
                    PropertyRule::Approved => IrRule::Approved,
                },
            });
        }
        out
    }
}

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

impl Checker<'_> {
    /// W007 and W008: explores every reachable state (the default host model of
    /// `orch verify`) and reports the steps that never become active and the sequences
    /// that never complete, except where W001, W002 or W006 already said so. Only when
    /// the exploration is complete: nothing is claimed from a partial one.
    fn verified_lints(&mut self, ir: &Ir, machine: &DynMachine, steps: &[StepInfo<'_>]) {
        if self.diags.iter().any(Diagnostic::is_error)
            || self.t.steps.iter().any(|s| s.name.is_none())
            || ir.steps.len() > VERIFY_MAX_STEPS
            || ir.tools.len() > VERIFY_MAX_TOOLS
            || ir.contains.len() + ir.regexes.len() > VERIFY_MAX_MESSAGE_CONDITIONS
        {
            return;
        }
        let options = crate::verify::explore::Options {
            max_states: VERIFY_STATES,
            max_work: VERIFY_WORK,
            ..Default::default()
        };
        // The host model (message combinations, foreign names) is prepared once for
        // the properties and the exploration.
        let Ok(host) = crate::verify::explore::Host::new(machine, &options) else {
            return;
        };
        if self.prove_properties {
            self.verified_properties(ir, machine, &options, &host);
        }
        let found = crate::verify::explore::explore_with(machine, &options, &host);
        if !found.complete {
            return;
        }
        let already = |diags: &[Diagnostic], codes: &[Code], step: &str| {
            diags
                .iter()
                .any(|d| codes.contains(&d.code) && d.subject.step.as_deref() == Some(step))
        };
        for (i, finding) in found.steps.iter().enumerate() {
            let Some(info) = steps.get(i) else { continue };
            // The default step is left to `orch verify`: a default that a condition
            // pre-empts from the first event on is common and deliberate.
            if finding.reachable.is_none() && ir.default_step != Some(i) {
                if already(
                    &self.diags,
                    &[Code::UnreachableStep, Code::ShadowedStep],
                    &finding.name,
                ) {
                    continue;
                }
                let mut d = Diagnostic::new(
                    Code::DeadStep,
                    Some(info.name_span()),
                    format!(
                        "step `{}` can never become active: {}",
                        finding.name,
                        finding
                            .reason
                            .as_deref()
                            .unwrap_or("no reachable state activates it")
                    ),
                );
                d.label = Some("never active".to_owned());
                d.help = Some("run `orch verify` on the template for witnesses of the steps that are reachable".to_owned());
                d.subject.step = Some(finding.name.clone());
                self.push(d);
            } else if finding.has_sequence
                && finding.completes.is_none()
                && !already(&self.diags, &[Code::SequenceNeverCompletes], &finding.name)
            {
                let mut d = Diagnostic::new(
                    Code::SequenceCannotComplete,
                    Some(info.name_span()),
                    format!(
                        "the sequence of step `{}` can never complete: the step becomes active, but no continuation records its tools to the end",
                        finding.name
                    ),
                );
                d.label = Some("sequence never completes".to_owned());
                d.help = Some(
                    "run `orch verify` for a witness of how the step becomes active".to_owned(),
                );
                d.subject.step = Some(finding.name.clone());
                self.push(d);
            }
        }
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

/// The machine's name and its module name.
pub(crate) struct MachineName {
    pub(crate) name: String,
    pub(crate) module: String,
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

/// A step with its names resolved: what [`lints`] judge and [`crate::lower`] turns into IR.
pub(crate) struct StepInfo<'t> {
    /// The step as written.
    pub(crate) model: &'t Step,
    /// Its name (`<unnamed>` when it has none, which is an error).
    pub(crate) name: &'t str,
    /// Is it the default step?
    pub(crate) is_default: bool,
    /// Nameless or duplicate: left out of the reachability lints.
    pub(crate) skip: bool,
    /// Its static set (semantics §2).
    pub(crate) static_set: ToolBits,
    /// `allowed` absent or empty.
    pub(crate) allow_all: bool,
    /// The pattern entries of `allowed` then `denied`, each with whether it is an
    /// `allowed` entry and how many tools it matched.
    pub(crate) patterns: Vec<(&'t Spanned<String>, bool, usize)>,
    /// The sequence: per position, the accepted tool indices (ascending).
    pub(crate) sequence: Vec<Vec<usize>>,
    /// Its conditions (empty for the default step).
    pub(crate) conditions: Vec<IrCondition>,
    /// The largest `window` its conditions give (the default step's included: H
    /// counts every window written).
    pub(crate) max_window: usize,
    /// `resetSequenceOn`, as `orch_runtime` reset flags.
    pub(crate) reset: u8,
    /// Its approval gate: its own `approve` and the orchestration's (semantics §13).
    pub(crate) approve: IrGate,
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
    /// See [`CheckOptions::prove_properties`].
    prove_properties: bool,
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
            prove_properties: true,
        }
    }

    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Drops the warnings the template allows, sorts the rest into source order, and
    /// keeps the IR only when nothing is an error.
    fn finish(self, ir: Ir) -> (Option<Ir>, Vec<Diagnostic>) {
        let allowed: Vec<Code> = self
            .t
            .allow
            .iter()
            .filter_map(|a| Code::parse(&a.value))
            .filter(|c| c.severity() == Severity::Warning)
            .collect();
        let mut diags: Vec<Diagnostic> = self
            .diags
            .into_iter()
            .filter(|d| !(d.severity() == Severity::Warning && allowed.contains(&d.code)))
            .collect();
        diags.sort_by_key(|d| d.span.map_or((0, 0), Span::order));
        // A step without a name has been reported by the front end (E003); there is no
        // IR without it.
        let ok = !diags.iter().any(Diagnostic::is_error)
            && self.t.steps.iter().all(|s| s.name.is_some());
        (ok.then_some(ir), diags)
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

    /// E019: the compiled tool sets fit in [`MAX_TABLE_WORDS`] words.
    /// Returns the tables it built, for the checks that run them.
    fn check_table_size(&mut self, ir: &Ir) -> orch_runtime::compiled::OwnedTables {
        let tables = ir.to_tables();
        let words = tables.bits.len();
        if words > MAX_TABLE_WORDS {
            self.push(
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
                .help("give steps fewer distinct `availableTools` sets, or split the template"),
            );
        }
        tables
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
