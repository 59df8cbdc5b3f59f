//! Machines loaded at run time: the same tables and engine as generated code, owned in
//! `Vec`s and driven by tool *names*. The `orch` CLI simulates templates with this, and a
//! host that loads templates from a database can use it too. `orch-codegen` builds an
//! [`OwnedTables`] from a checked template (`Compiled::to_tables`).

use crate::approval::{Approval, Call, CallDigest, QuestionId, Verdict};
use crate::args::{Broken, OwnedRules};
use crate::bits::{self, BitIter};
use crate::refusal::Refusal;
use crate::regexes::{Matchers, MessageRegex};
use crate::state::{RawOutcome, RawRefusal, State, ToolRef, Usage, FOREIGN, NO_STEP};
pub use crate::tables::OwnedTables;
use crate::OutcomeKind;

mod budgets;

/// A machine loaded at run time: its tables and compiled message conditions.
#[derive(Clone, Debug)]
pub struct DynMachine {
    tables: OwnedTables,
    matchers: Matchers,
    /// Per budget, the total past which no budget test tells totals apart (what a
    /// behaviour key cuts totals at).
    budget_caps: Vec<i128>,
}

/// A `message_regex` source that does not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegexError {
    /// The pattern.
    pub pattern: String,
    /// The regex crate's message.
    pub message: String,
}

impl std::fmt::Display for RegexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid regex `{}`: {}", self.pattern, self.message)
    }
}
impl std::error::Error for RegexError {}

impl DynMachine {
    /// Compiles the message conditions of `tables` (code-generation plumbing: hosts get
    /// a machine from `orch_codegen::compile_json(..).to_machine()`).
    #[doc(hidden)]
    pub fn new(tables: OwnedTables) -> Result<Self, RegexError> {
        let matchers = Matchers::new(&tables.contains, &tables.regexes);
        Self::with_matchers(tables, matchers)
    }

    /// [`DynMachine::new`] with the `message_regex` patterns already compiled, one per
    /// pattern of `tables.regexes` in order (code-generation plumbing: the compiler
    /// compiles each pattern once, to validate it, and hands it on).
    #[doc(hidden)]
    pub fn with_regexes(
        tables: OwnedTables,
        regexes: Vec<MessageRegex>,
    ) -> Result<Self, RegexError> {
        if regexes.len() != tables.regexes.len() {
            return Self::new(tables);
        }
        let compiled = regexes.into_iter().map(Some).collect();
        let matchers = Matchers::with_compiled(&tables.contains, &tables.regexes, compiled);
        Self::with_matchers(tables, matchers)
    }

    fn with_matchers(tables: OwnedTables, matchers: Matchers) -> Result<Self, RegexError> {
        // Each pattern is compiled once; a slot that failed is compiled again only to
        // say why.
        if let Some(i) = matchers.regexes.iter().position(Option::is_none) {
            let pattern = tables.regexes.get(i).cloned().unwrap_or_default();
            let message = MessageRegex::new(&pattern)
                .err()
                .map_or_else(|| "does not compile".to_owned(), |e| e.to_string());
            return Err(RegexError { pattern, message });
        }
        let sources = tables.rules.view().regex_sources();
        let matchers = matchers.with_arguments(&sources);
        if let Some(i) = matchers.arguments.iter().position(Option::is_none) {
            let pattern = sources.get(i).map_or_else(String::new, |s| (*s).to_owned());
            let message = crate::regexes::argument_regex(&pattern)
                .err()
                .map_or_else(|| "does not compile".to_owned(), |e| e.to_string());
            return Err(RegexError { pattern, message });
        }
        let budget_caps = tables.rules.view().budget_caps();
        Ok(DynMachine {
            tables,
            matchers,
            budget_caps,
        })
    }

    /// Does a rule on arguments read the results of the tool `name` (semantics §16)? A
    /// host hands those results to `record_result`.
    pub fn reads_results_of(&self, name: &str) -> bool {
        let t = self.tables.view();
        t.tool_index(name).is_some_and(|i| t.rules.reads_results(i))
    }

    /// Does the template have rules on arguments, or remember values (semantics §16)? A
    /// host that must write a call's arguments out to judge them, or to say where their
    /// values were seen, does so only then.
    pub fn has_argument_rules(&self) -> bool {
        !self.tables.rules.rules.is_empty()
            || !self.tables.rules.sources.is_empty()
            || !self.tables.rules.budgets.is_empty()
    }

    /// The tables (code-generation plumbing).
    #[doc(hidden)]
    pub fn tables(&self) -> &OwnedTables {
        &self.tables
    }

    /// The machine's name (`agentId`, else `name`).
    pub fn name(&self) -> &str {
        &self.tables.name
    }

    /// The fingerprint of the compiled template (equal to the generated module's
    /// `FINGERPRINT` for the same template).
    pub fn fingerprint(&self) -> u64 {
        self.tables.fingerprint
    }

    /// The tool universe, in declaration order.
    pub fn tools(&self) -> &[String] {
        &self.tables.tools
    }

    /// What a lost result of a call of `tool` means (semantics §15): the template's
    /// `orchestration.lostResults`, for declared and foreign tools alike.
    pub fn lost_rule(&self, tool: &str) -> crate::LostRule {
        let index = self.tables.tools.iter().position(|t| t == tool);
        self.tables.view().lost_rule(index, tool)
    }

    /// The step names, in template order.
    pub fn steps(&self) -> &[String] {
        &self.tables.step_names
    }

    /// A fresh session over this machine.
    pub fn session(&self) -> DynSession<'_> {
        DynSession::new(self)
    }
}

/// A [`DynSession`] without its machine ([`DynSession::detach`]).
#[derive(Clone, Debug)]
pub struct DetachedSession {
    fingerprint: u64,
    state: DynState,
    available: Box<[u64]>,
    foreign_available: Vec<String>,
}

impl DetachedSession {
    /// The session again, over `machine`: `None` when `machine` is not the template it
    /// was detached from (another fingerprint), whose tables would not fit its state.
    pub fn attach(self, machine: &DynMachine) -> Option<DynSession<'_>> {
        (machine.fingerprint() == self.fingerprint).then_some(DynSession {
            machine,
            state: self.state,
            available: self.available,
            foreign_available: self.foreign_available,
        })
    }
}

/// What recording a tool did, by name (see [`crate::Outcome`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DynOutcome {
    /// Advanced the sequence to `index`.
    Advanced {
        /// The new index.
        index: usize,
    },
    /// Completed the sequence.
    Completed,
    /// No sequence waiting; allowed.
    Free,
    /// A sequence expected one of these tools.
    OutOfSequence {
        /// The expected tools' names.
        expected: Vec<String>,
    },
    /// No sequence waiting; not allowed.
    NotAllowed,
}

impl DynOutcome {
    /// The outcome's kind.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            DynOutcome::Advanced { .. } => OutcomeKind::Advanced,
            DynOutcome::Completed => OutcomeKind::Completed,
            DynOutcome::Free => OutcomeKind::Free,
            DynOutcome::OutOfSequence { .. } => OutcomeKind::OutOfSequence,
            DynOutcome::NotAllowed => OutcomeKind::NotAllowed,
        }
    }

    /// The trace name (`advanced`, `completed`, `free`, `out_of_sequence`, `not_allowed`;
    /// [`OutcomeKind::as_str`]).
    pub fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }
}

/// The refusal of a [`DynSession`], by names (see [`Refusal`]).
pub type DynDenied<'m> = Refusal<&'m str, Vec<&'m str>>;

/// The state of a [`DynSession`]: the engine's state over boxed slices.
type DynState = State<Box<[u64]>, Box<[u64]>, Box<[u16]>, Box<[u64]>, Box<[u16]>, Box<[u64]>>;

/// A session over a [`DynMachine`], driven by names.
#[derive(Clone, Debug)]
pub struct DynSession<'m> {
    machine: &'m DynMachine,
    state: DynState,
    available: Box<[u64]>,
    /// Host tools the machine does not know, as last set by [`DynSession::set_available`].
    foreign_available: Vec<String>,
}

impl<'m> DynSession<'m> {
    /// A fresh session (activation evaluated).
    pub fn new(machine: &'m DynMachine) -> Self {
        let t = machine.tables.view();
        let flag_words = t.message_flags().div_ceil(64);
        let state = State::fresh(
            &t,
            vec![0u64; t.words].into_boxed_slice(),
            vec![0u64; flag_words].into_boxed_slice(),
            vec![0u16; t.history.max(1)].into_boxed_slice(),
            vec![0u64; t.plan.derived_words()].into_boxed_slice(),
            vec![0u16; t.plan.counters.len()].into_boxed_slice(),
            vec![0u64; t.rules.memory_words()].into_boxed_slice(),
        );
        let mut available = vec![0u64; t.words].into_boxed_slice();
        for i in 0..t.tools.len() {
            bits::set(&mut available, i);
        }
        DynSession {
            machine,
            state,
            available,
            foreign_available: Vec::new(),
        }
    }

    /// The machine.
    pub fn machine(&self) -> &'m DynMachine {
        self.machine
    }

    /// The session without its borrow of the machine, to keep between two uses (a
    /// gateway's two phases of one call) and [`DetachedSession::attach`] again: cheaper
    /// than a snapshot and a restore.
    pub fn detach(self) -> DetachedSession {
        DetachedSession {
            fingerprint: self.machine.fingerprint(),
            state: self.state,
            available: self.available,
            foreign_available: self.foreign_available,
        }
    }

    /// Sets the host's tool list: the declared tools in it are the available set A
    /// (semantics §8); names the machine does not know are foreign tools, which
    /// [`DynSession::allowed`] lists when the active step permits them.
    pub fn set_available<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        let t = self.machine.tables.view();
        self.available.fill(0);
        self.foreign_available.clear();
        for name in names {
            match t.tool_index(name) {
                Some(i) => bits::set(&mut self.available, i),
                None => {
                    if !self.foreign_available.iter().any(|f| f == name) {
                        self.foreign_available.push(name.to_owned());
                    }
                }
            }
        }
    }

    /// The active step's name.
    pub fn step(&self) -> Option<&'m str> {
        let i = self.state.active()?;
        self.machine.tables.step_names.get(i).map(String::as_str)
    }

    /// The active step's position in [`DynMachine::steps`].
    pub fn step_index(&self) -> Option<usize> {
        self.state.active()
    }

    /// The sequence index.
    pub fn sequence_index(&self) -> usize {
        self.state.index as usize
    }

    /// The active step's sequence, position by position, as tool names (empty without
    /// a sequence): the run-time form of [`crate::Session::sequence`].
    pub fn sequence(&self) -> Vec<Vec<&'m str>> {
        let t = self.machine.tables.view();
        let Some(step) = self.state.active() else {
            return Vec::new();
        };
        let len = t.steps.get(step).map_or(0, |s| s.sequence.len as usize);
        (0..len).map(|pos| self.names(t.group(step, pos))).collect()
    }

    /// The allowed tools' names (machine tools in declaration order, then permitted
    /// foreign host tools in the order given).
    pub fn allowed(&self) -> Vec<&str> {
        let t = self.machine.tables.view();
        let mut out = vec![0u64; t.words];
        self.state.allowed_into(&t, &self.available, &mut out);
        let mut names: Vec<&str> = BitIter::new(&out)
            .filter_map(|i| self.machine.tables.tools.get(i).map(String::as_str))
            .collect();
        names.extend(
            self.foreign_available
                .iter()
                .filter(|n| self.state.foreign_allowed(&t, n))
                .map(String::as_str),
        );
        names
    }

    /// [`DynSession::allowed`] without allocating: `f` is called with each allowed tool's
    /// name — machine tools in declaration order (with their index in
    /// [`DynMachine::tools`]), then permitted foreign host tools (index `None`).
    /// `scratch` holds the allowed set while it runs (resized to the machine's words
    /// once).
    pub fn for_each_allowed(&self, scratch: &mut Vec<u64>, mut f: impl FnMut(Option<usize>, &str)) {
        let t = self.machine.tables.view();
        scratch.clear();
        scratch.resize(t.words, 0);
        self.state.allowed_into(&t, &self.available, scratch);
        for i in BitIter::new(scratch) {
            if let Some(name) = self.machine.tables.tools.get(i) {
                f(Some(i), name);
            }
        }
        for name in &self.foreign_available {
            if self.state.foreign_allowed(&t, name) {
                f(None, name);
            }
        }
    }

    /// The tools the active step's unfinished sequence accepts next, if any (the
    /// run-time form of [`crate::Session::expected`]).
    pub fn expected(&self) -> Option<Vec<&'m str>> {
        let t = self.machine.tables.view();
        let (_, _, group) = self.state.expected(&t)?;
        Some(self.names(t.set_at(group)))
    }

    /// The tools the sequence waits for when none of them is available (semantics §8).
    pub fn blocked_on(&self) -> Option<Vec<&'m str>> {
        let t = self.machine.tables.view();
        let (_, _, group) = self.state.expected(&t)?;
        let set = t.set_at(group);
        if bits::intersects(set, &self.available) {
            return None;
        }
        Some(self.names(set))
    }

    /// May `name` run now? The `Err` says why not, in the same words as a typed
    /// session's. A name the machine does not know is a foreign tool, judged by the
    /// active step alone (the rule of [`crate::Session::check_name`]).
    pub fn check(&self, name: &str) -> Result<(), DynDenied<'m>> {
        let t = self.machine.tables.view();
        self.state
            .check(&t, &self.available, self.tool_ref(name))
            .map_err(|d| self.denied(d))
    }

    /// May this exact call of `name` run now? The rule of [`crate::Session::check_call`].
    pub fn check_call(&self, name: &str, call: &Call<'_>) -> Result<(), DynDenied<'m>> {
        let t = self.machine.tables.view();
        self.state
            .check_call(
                &t,
                &self.available,
                self.tool_ref(name),
                call,
                &self.machine.matchers,
            )
            .map(|_| ())
            .map_err(|d| self.denied(d))
    }

    /// Admits this exact call before the host runs it, consuming the approval it passes
    /// on: the rule of [`crate::Session::admit_call`].
    pub fn admit_call(&mut self, name: &str, call: &Call<'_>) -> Result<(), DynDenied<'m>> {
        let t = self.machine.tables.view();
        let tool = match t.tool_index(name) {
            Some(i) => ToolRef::Declared(i),
            None => ToolRef::Foreign(name),
        };
        let result = self
            .state
            .admit_call(&t, &self.available, tool, call, &self.machine.matchers);
        result.map_err(|d| self.denied(d))
    }

    /// Why a call broke a rule on arguments, in words: the rule of
    /// [`crate::Session::explain_broken`].
    pub fn explain_broken(&self, broken: &Broken, arguments: &str) -> String {
        let tables = &self.machine.tables;
        let tool = |i: u16| tables.tools.get(i as usize).map_or("", String::as_str);
        tables.rules.view().explain(broken, arguments, &tool)
    }

    /// Where the values of a call of `name` with `arguments` were seen, one line each:
    /// [`crate::Session::origins`].
    pub fn origins(&self, name: &str, arguments: &str) -> Vec<String> {
        let tables = &self.machine.tables;
        let t = tables.view();
        let Some(i) = t.tool_index(name) else {
            return Vec::new();
        };
        let tool = |i: u16| tables.tools.get(i as usize).map_or("", String::as_str);
        tables.rules.view().origins(
            i,
            self.state.step,
            arguments,
            self.state.memory_words(),
            &tool,
        )
    }

    /// How many remembered values the session forgot to make room for newer ones
    /// (semantics §16): [`crate::Session::forgotten`].
    pub fn forgotten(&self) -> u32 {
        self.state.forgotten(&self.machine.tables.view())
    }

    /// Records that `name` ran and returned `result`: the rule of
    /// [`crate::Session::record_result`].
    pub fn record_result(&mut self, name: &str, result: &str) -> DynOutcome {
        let outcome = self.record(name);
        let t = self.machine.tables.view();
        if let Some(i) = t.tool_index(name) {
            self.state.remember_result(&t, i, result);
        }
        outcome
    }

    /// Does a rule on arguments read the results of `name` (semantics §16)? A host
    /// passes a result to [`DynSession::record_result`] then; otherwise `record` is
    /// enough.
    pub fn reads_results_of(&self, name: &str) -> bool {
        self.machine.reads_results_of(name)
    }

    /// Does a rule on arguments apply to a call of `name` in the active step, or does the
    /// session remember its arguments (semantics §16)?
    pub fn argument_rules_apply(&self, name: &str) -> bool {
        let rules = self.machine.tables.rules.view();
        !(rules.is_empty() && rules.budgets.is_empty())
            && self
                .machine
                .tables
                .view()
                .tool_index(name)
                .is_some_and(|i| rules.reads_arguments(i, self.state.step))
    }

    /// The name of argument rule `rule`: the rule of [`crate::Session::rule_name`].
    pub fn rule_name(&self, rule: u16) -> &'m str {
        let rules: &'m OwnedRules = &self.machine.tables.rules;
        rules.view().name(rule)
    }

    /// A human approved this exact call: the rule of [`crate::Session::approve`].
    pub fn approve(&mut self, call: CallDigest) {
        self.state.hold(call, Verdict::Approved, QuestionId::NONE);
    }

    /// A human rejected this exact call: the rule of [`crate::Session::reject`].
    pub fn reject(&mut self, call: CallDigest) {
        self.state.hold(call, Verdict::Rejected, QuestionId::NONE);
    }

    /// Holds the question `question` — "may this exact call run?" — put to a human (a
    /// pending verdict): the call still needs approval, and the answer, when it comes,
    /// applies only to this question and only if nothing happened meanwhile
    /// ([`Self::answer`]). Replaces any verdict held. A host that may be given the same
    /// answer twice (a retried request, a double submit) asks each question with an
    /// identity of its own ([`QuestionId`], a random nonce at least): an answer given
    /// for one question then never answers a later one about the same call.
    pub fn ask(&mut self, call: CallDigest, question: QuestionId) {
        self.state.hold(call, Verdict::Pending, question);
    }

    /// A human's answer to the question `question` that [`Self::ask`] put about `call`:
    /// approved (`true`) or rejected. Applied only while the session still holds that
    /// very question — no event since, no other question, not answered already — and
    /// `false` (nothing changed) otherwise: nothing is run on it, and the human must be
    /// asked anew.
    pub fn answer(&mut self, call: CallDigest, question: QuestionId, approved: bool) -> bool {
        self.state.answer(call, question, approved)
    }

    /// Closes the question `question` held about `call` without an answer (it expired,
    /// or the human dismissed it): no verdict is held afterwards, so nothing waits on
    /// it. `false`, changing nothing, when the session holds no such question.
    pub fn dismiss(&mut self, call: CallDigest, question: QuestionId) -> bool {
        self.state.dismiss(call, question)
    }

    /// The glob of the active step's `denied` list that refuses the tool `name`: the
    /// rule of [`crate::Session::deny_pattern`].
    pub fn deny_pattern(&self, name: &str) -> Option<&'m str> {
        let step = self.state.active()?;
        self.machine.tables.view().deny_pattern(step, name)
    }

    /// The verdict the session holds, if any (cleared by the next event).
    pub fn approval(&self) -> Option<Approval> {
        self.state.approval
    }

    fn denied(&self, d: RawRefusal) -> DynDenied<'m> {
        let t = self.machine.tables.view();
        let step_name = |step: u16| {
            let name = self.machine.tables.step_names.get(step as usize);
            name.map_or("", String::as_str)
        };
        let gated_step = |step: u16| (step != NO_STEP).then(|| step_name(step));
        match d {
            RawRefusal::NotInStep(step) => Refusal::NotInStep {
                step: step_name(step),
            },
            RawRefusal::SequenceExpects { step, index, group } => Refusal::SequenceExpects {
                step: step_name(step),
                index: index as usize,
                expected: self.names(t.set_at(group)),
            },
            RawRefusal::Unavailable => Refusal::Unavailable,
            RawRefusal::NeedsApproval(step) => Refusal::NeedsApproval {
                step: gated_step(step),
            },
            RawRefusal::Rejected(step) => Refusal::Rejected {
                step: gated_step(step),
            },
            RawRefusal::Broken(step, broken) => Refusal::BrokenRule {
                step: gated_step(step),
                broken,
            },
        }
    }

    fn tool_ref<'n>(&self, name: &'n str) -> ToolRef<'n> {
        match self.machine.tables.view().tool_index(name) {
            Some(i) => ToolRef::Declared(i),
            None => ToolRef::Foreign(name),
        }
    }

    /// Records that the host ran the tool `name`.
    pub fn record(&mut self, name: &str) -> DynOutcome {
        let tool = self.tool_ref(name);
        self.record_ref(tool)
    }

    /// Records that the host ran the declared tool `index` (its position in
    /// [`DynMachine::tools`]): [`DynSession::record`] without looking the name up, for
    /// hosts that resolve their tools' names once. `None` (nothing recorded) when the
    /// machine has no tool at `index`.
    pub fn record_index(&mut self, index: usize) -> Option<DynOutcome> {
        (index < self.machine.tables.tools.len()).then(|| self.record_ref(ToolRef::Declared(index)))
    }

    /// [`DynSession::record_index`] for hosts that need only the outcome's kind: an
    /// out-of-sequence record does not build the expected tools' names.
    pub fn record_index_kind(&mut self, index: usize) -> Option<OutcomeKind> {
        (index < self.machine.tables.tools.len())
            .then(|| self.record_raw(ToolRef::Declared(index)).kind())
    }

    /// The allowed set's declared tools as bits (bit `i` is [`DynMachine::tools`]`[i]`),
    /// written into `out` (resized to the machine's words); `true` when a foreign host
    /// tool is allowed as well (those have no bit: [`DynSession::for_each_allowed`]
    /// names them).
    pub fn allowed_bits(&self, out: &mut Vec<u64>) -> bool {
        let t = self.machine.tables.view();
        out.clear();
        out.resize(t.words, 0);
        self.state.allowed_into(&t, &self.available, out);
        self.foreign_available
            .iter()
            .any(|name| self.state.foreign_allowed(&t, name))
    }

    /// The tools of bits from [`DynSession::allowed_bits`], as indices into
    /// [`DynMachine::tools`], lowest first.
    pub fn bit_indices(bits: &[u64]) -> impl Iterator<Item = usize> + '_ {
        BitIter::new(bits)
    }

    fn record_ref(&mut self, tool: ToolRef<'_>) -> DynOutcome {
        match self.record_raw(tool) {
            RawOutcome::Advanced(i) => DynOutcome::Advanced { index: i as usize },
            RawOutcome::Completed => DynOutcome::Completed,
            RawOutcome::Free => DynOutcome::Free,
            RawOutcome::OutOfSequence(group) => DynOutcome::OutOfSequence {
                expected: self
                    .names(self.machine.tables.view().set_at(group))
                    .into_iter()
                    .map(String::from)
                    .collect(),
            },
            RawOutcome::NotAllowed => DynOutcome::NotAllowed,
        }
    }

    /// Records `tool`: the engine's outcome.
    fn record_raw(&mut self, tool: ToolRef<'_>) -> RawOutcome {
        let t = self.machine.tables.view();
        self.state.record(&t, &self.available, tool)
    }

    /// A new user message.
    pub fn on_user_message(&mut self, message: &str) {
        let t = self.machine.tables.view();
        self.state.on_message(&t, &self.machine.matchers, message);
    }

    /// A user message that satisfied exactly the message conditions whose flags are
    /// set in `flags` (flag `i < contains` is the `i`-th `message_contains` value, then
    /// the `message_regex` patterns, as in the machine's tables): stores them, applies
    /// `resetSequenceOn` and activation, as [`DynSession::on_user_message`] does after
    /// matching a message. For analyses that enumerate what messages can do
    /// (verification plumbing).
    #[doc(hidden)]
    pub fn on_message_flags(&mut self, flags: &[u64]) {
        let t = self.machine.tables.view();
        self.state.on_message_flags(&t, flags);
    }

    /// Everything this session's future depends on, with the host's tools fixed (see
    /// the engine's `behaviour_key`): equal keys, identical answers to every future
    /// event. Verification plumbing.
    #[doc(hidden)]
    pub fn behaviour_key(&self, out: &mut Vec<u64>) {
        self.state.behaviour_key(out);
        let rules = self.machine.tables.rules.view();
        if !rules.budgets.is_empty() {
            // Rules and conditions read budgets: their totals are part of the behaviour.
            rules.budget_key(self.state.memory.as_ref(), &self.machine.budget_caps, out);
        }
    }

    /// Does condition `k` (in template order) of step `step` hold now? `None` for a
    /// step activation never chooses. Verification plumbing.
    #[doc(hidden)]
    pub fn condition_holds(&self, step: usize, k: usize) -> Option<bool> {
        let t = self.machine.tables.view();
        self.state.condition_holds(&t, step, k)
    }

    /// Adds token usage.
    pub fn record_usage(&mut self, prompt: u64, completion: u64) {
        self.state.add_usage(prompt, completion);
    }

    /// Cumulative token usage.
    pub fn usage(&self) -> Usage {
        self.state.usage
    }

    /// Back to a fresh session (the host's tool list is kept).
    pub fn reset(&mut self) {
        let t = self.machine.tables.view();
        self.state.reset(&t);
    }

    /// The history, oldest first (`None` for a foreign tool).
    pub fn history(&self) -> Vec<Option<&'m str>> {
        let tools = &self.machine.tables.tools;
        self.state
            .history()
            .map(|i| match i {
                FOREIGN => None,
                i => tools.get(i as usize).map(String::as_str),
            })
            .collect()
    }

    /// The session's state by names (see [`crate::Snapshot`]).
    pub fn snapshot(&self) -> crate::Snapshot {
        let t = self.machine.tables.view();
        crate::snapshot::parts(&t, &self.state, &self.available, &self.foreign_available)
            .into_snapshot()
    }

    /// [`DynSession::snapshot`]`().to_bytes()`, the same bytes, without making the
    /// [`crate::Snapshot`] first (its names are borrowed from the machine).
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let t = self.machine.tables.view();
        crate::snapshot::parts(&t, &self.state, &self.available, &self.foreign_available).encode()
    }

    /// [`DynSession::snapshot_bytes`] written into `out` (cleared first): the same
    /// bytes, for a caller that snapshots often and keeps one buffer.
    pub fn snapshot_into(&self, out: &mut Vec<u8>) {
        let t = self.machine.tables.view();
        crate::snapshot::parts(&t, &self.state, &self.available, &self.foreign_available)
            .encode_into(out);
    }

    /// [`DynSession::snapshot_into`] with `host` carried in it ([`crate::Snapshot::host`]:
    /// what the host keeps with the session).
    pub fn snapshot_with_host_into(&self, host: &[u8], out: &mut Vec<u8>) {
        let t = self.machine.tables.view();
        let mut parts =
            crate::snapshot::parts(&t, &self.state, &self.available, &self.foreign_available);
        parts.host = host;
        parts.encode_into(out);
    }

    /// A session of `machine` from a snapshot (see [`crate::Session::restore`]).
    pub fn restore(
        machine: &'m DynMachine,
        snapshot: &crate::Snapshot,
    ) -> Result<(Self, crate::RestoreReport), crate::RestoreError> {
        let mut s = DynSession::new(machine);
        let report = crate::snapshot::restore_into(
            &machine.tables.view(),
            snapshot,
            &mut s.state,
            &mut s.available,
            Some(&mut s.foreign_available),
        )?;
        Ok((s, report))
    }

    fn names(&self, set: &[u64]) -> Vec<&'m str> {
        let tools = &self.machine.tables.tools;
        BitIter::new(set)
            .filter_map(|i| tools.get(i).map(String::as_str))
            .collect()
    }
}
