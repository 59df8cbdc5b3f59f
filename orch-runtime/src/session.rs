//! The typed session over a generated machine.

use crate::approval::{Approval, Call, CallDigest, QuestionId, Verdict};
use crate::args::Broken;
use crate::bits::{self, Entries, ToolEnum, ToolSet, Words};
use crate::machine::{Machine, StepEnum};
use crate::moves::{kind, Packed};
use crate::refusal::Refusal;
use crate::state::{RawOutcome, RawRefusal, State, ToolRef, Usage, FOREIGN, NO_STEP};
use core::fmt;
use core::marker::PhantomData;

/// What recording a tool did (semantics §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome<T: ToolEnum> {
    /// It was the expected tool of an unfinished sequence; the index is now `index`.
    Advanced {
        /// The new sequence index.
        index: usize,
    },
    /// It was the last tool of the sequence; the sequence is complete.
    Completed,
    /// No sequence was waiting, and the tool was allowed.
    Free,
    /// No sequence was waiting, and the tool was not allowed (it ran anyway).
    NotAllowed,
    /// A sequence was waiting for one of `expected`; the index did not move.
    OutOfSequence {
        /// The tools the sequence expected.
        expected: ToolSet<T>,
    },
}

/// What recording a tool did, without its data: the kind of an [`Outcome`] (and of a
/// [`crate::dynamic::DynOutcome`]), for hosts that need only that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// [`Outcome::Advanced`].
    Advanced,
    /// [`Outcome::Completed`].
    Completed,
    /// [`Outcome::Free`].
    Free,
    /// [`Outcome::NotAllowed`].
    NotAllowed,
    /// [`Outcome::OutOfSequence`].
    OutOfSequence,
}

impl OutcomeKind {
    /// The trace name of the outcome: `advanced`, `completed`, `free`,
    /// `out_of_sequence` or `not_allowed` (semantics §10).
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Advanced => "advanced",
            OutcomeKind::Completed => "completed",
            OutcomeKind::Free => "free",
            OutcomeKind::OutOfSequence => "out_of_sequence",
            OutcomeKind::NotAllowed => "not_allowed",
        }
    }
}

impl<T: ToolEnum> Outcome<T> {
    /// The outcome's kind.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Advanced { .. } => OutcomeKind::Advanced,
            Outcome::Completed => OutcomeKind::Completed,
            Outcome::Free => OutcomeKind::Free,
            Outcome::OutOfSequence { .. } => OutcomeKind::OutOfSequence,
            Outcome::NotAllowed => OutcomeKind::NotAllowed,
        }
    }

    /// The trace name of the outcome ([`OutcomeKind::as_str`]).
    pub fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }
}

impl<T: ToolEnum> fmt::Display for Outcome<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::OutOfSequence { expected } => {
                write!(f, "out_of_sequence (expected {expected})")
            }
            other => f.write_str(other.as_str()),
        }
    }
}

/// One entry of a session's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HistoryEntry<T> {
    /// A tool of the machine.
    Tool(T),
    /// A tool the host ran that the machine does not know (semantics §5).
    Foreign,
}

impl RawOutcome {
    /// The outcome's kind.
    pub(crate) fn kind(self) -> OutcomeKind {
        use OutcomeKind as K;
        match self {
            RawOutcome::Advanced(_) => K::Advanced,
            RawOutcome::Completed => K::Completed,
            RawOutcome::Free => K::Free,
            RawOutcome::OutOfSequence(_) => K::OutOfSequence,
            RawOutcome::NotAllowed => K::NotAllowed,
        }
    }
}

/// The refusal of a typed session over `M`.
pub type SessionRefusal<M> = Refusal<<M as Machine>::Step, ToolSet<<M as Machine>::Tool>>;

/// The former name of [`SessionRefusal`].
#[deprecated(since = "0.1.0", note = "renamed `SessionRefusal`")]
pub type SessionDenied<M> = SessionRefusal<M>;

pub(crate) type StateOf<M> = State<
    <<M as Machine>::Tool as ToolEnum>::Words,
    <M as Machine>::Flags,
    <M as Machine>::History,
    <M as Machine>::Derived,
    <M as Machine>::Counters,
    <M as Machine>::Memory,
>;

/// A fresh engine state of machine `M` (activation evaluated).
pub(crate) fn fresh_state<M: Machine>() -> StateOf<M> {
    State::fresh(
        M::tables(),
        <<M::Tool as ToolEnum>::Words as Words>::ZERO,
        <M::Flags as Words>::ZERO,
        <M::History as Entries>::ZERO,
        <M::Derived as Words>::ZERO,
        <M::Counters as Entries>::ZERO,
        <M::Memory as Words>::ZERO,
    )
}

/// One conversation's orchestration state over machine `M` (generated code names it
/// `Session`). No heap memory, `Copy`, a few dozen bytes.
///
/// ```
/// # orch_runtime::__doc_machine!();
/// use demo::{Outcome, Session, Step, Tool};
/// let mut s = Session::new();
/// assert_eq!(s.step(), Some(Step::Chat));
/// s.on_user_message("Please research the topic");
/// assert_eq!(s.step(), Some(Step::Research));
/// assert_eq!(s.allowed().names().collect::<Vec<_>>(), ["search"]);
/// assert!(s.check(Tool::Think).is_err());
/// assert_eq!(s.record(Tool::Search), Outcome::Advanced { index: 1 });
/// assert_eq!(s.allowed().names().collect::<Vec<_>>(), ["think"]);
/// ```
pub struct Session<M: Machine> {
    state: StateOf<M>,
    available: <M::Tool as ToolEnum>::Words,
    _machine: PhantomData<fn() -> M>,
}

impl<M: Machine> Clone for Session<M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: Machine> Copy for Session<M> {}

impl<M: Machine> PartialEq for Session<M> {
    /// Equal when they behave the same from here on: same step, index, history (in
    /// order), used set, message flags, usage, available tools and held verdict. (Where the history
    /// ring happens to start is not part of the state.)
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.state, &other.state);
        a.step == b.step
            && a.index == b.index
            && a.used == b.used
            && a.flags == b.flags
            && a.usage == b.usage
            && self.available == other.available
            && a.approval == b.approval
            && a.history().eq(b.history())
    }
}
impl<M: Machine> Eq for Session<M> {}

impl<M: Machine> Default for Session<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Machine> fmt::Debug for Session<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("machine", &M::tables().name)
            .field("step", &self.step())
            .field("sequence_index", &self.state.index)
            .field("history", &self.history().collect::<Vec<_>>())
            .field("used", &self.used())
            .field("usage", &self.state.usage)
            .field("available", &self.available())
            .finish()
    }
}

impl<M: Machine> Session<M> {
    /// A fresh session: activation already evaluated, so the default step is active.
    /// Also compiles the machine's regexes (once per process) and warms them on this
    /// thread, so the hot path does not allocate.
    pub fn new() -> Self {
        M::warm_up();
        Session {
            state: fresh_state::<M>(),
            available: ToolSet::<M::Tool>::all().words().to_owned(),
            _machine: PhantomData,
        }
    }

    /// The same session with the host's available tools set to `tools` (semantics §8: `A`).
    #[must_use]
    pub fn with_available(mut self, tools: impl IntoIterator<Item = M::Tool>) -> Self {
        self.set_available(tools);
        self
    }

    /// Sets the host's available tools (default: every tool of the machine).
    pub fn set_available(&mut self, tools: impl IntoIterator<Item = M::Tool>) {
        self.available = *tools.into_iter().collect::<ToolSet<M::Tool>>().words();
    }

    /// The host's available tools.
    pub fn available(&self) -> ToolSet<M::Tool> {
        ToolSet::from_words(self.available)
    }

    /// The active step (`None` only for a machine without a default step before any
    /// step matched).
    pub fn step(&self) -> Option<M::Step> {
        self.state
            .active()
            .and_then(|i| <M::Step as StepEnum>::ALL.get(i).copied())
    }

    /// The position in the active step's sequence (0 when it has none).
    pub fn sequence_index(&self) -> usize {
        self.state.index as usize
    }

    /// The tools the active step's unfinished sequence accepts next, if any.
    pub fn expected(&self) -> Option<ToolSet<M::Tool>> {
        self.state
            .expected(M::tables())
            .map(|(_, _, group)| self.set_from(M::tables().set_at(group)))
    }

    /// The active step's sequence, position by position (empty without a sequence).
    pub fn sequence(&self) -> impl Iterator<Item = ToolSet<M::Tool>> + '_ {
        let t = M::tables();
        let (step, len) = match self
            .state
            .active()
            .and_then(|i| t.steps.get(i).map(|s| (i, s.sequence.len)))
        {
            Some((i, len)) => (i, len as usize),
            None => (0, 0),
        };
        (0..len).map(move |pos| self.set_from(t.group(step, pos)))
    }

    /// When the sequence waits for tools none of which the host made available, those
    /// tools: `allowed()` is then empty, and stays so until the host provides one
    /// (semantics §8 — it never silently widens).
    pub fn blocked_on(&self) -> Option<ToolSet<M::Tool>> {
        let t = M::tables();
        let (_, _, group) = self.state.expected(t)?;
        let set = t.set_at(group);
        (!bits::intersects(set, self.available.as_ref())).then(|| self.set_from(set))
    }

    /// The tools the LLM may use now (semantics §8). A copy of a few words; no allocation.
    #[inline]
    pub fn allowed(&self) -> ToolSet<M::Tool> {
        let mut out = <<M::Tool as ToolEnum>::Words as Words>::ZERO;
        self.state
            .allowed_into(M::tables(), self.available.as_ref(), out.as_mut());
        // The tables' sets and the host's (kept as a `ToolSet`'s words) have no bit past
        // the last tool, and neither has their intersection.
        ToolSet::from_valid_words(out)
    }

    /// May `tool` run now? The `Err` says why not. Changes nothing.
    #[inline]
    pub fn check(&self, tool: M::Tool) -> Result<(), SessionRefusal<M>> {
        self.check_ref(ToolRef::Declared(tool.index()))
    }

    /// [`Session::check`] by name. A name the machine does not know is a foreign tool:
    /// the host names it, so it is available, and the active step judges it by its
    /// `allowed`/`denied` patterns (a pending sequence position never accepts it).
    pub fn check_name(&self, name: &str) -> Result<(), SessionRefusal<M>> {
        self.check_ref(Self::tool_ref(name))
    }

    fn check_ref(&self, tool: ToolRef<'_>) -> Result<(), SessionRefusal<M>> {
        self.state
            .check(M::tables(), self.available.as_ref(), tool)
            .map_err(|d| self.denied(d))
    }

    fn tool_ref(name: &str) -> ToolRef<'_> {
        match <M::Tool as ToolEnum>::from_name(name) {
            Some(tool) => ToolRef::Declared(tool.index()),
            None => ToolRef::Foreign(name),
        }
    }

    /// May this exact call of `tool` run now (semantics §13, §16)? As [`Session::check`],
    /// then the template's rules on the call's arguments: a broken rule refuses it
    /// ([`Refusal::BrokenRule`]), a conditional `approve` that holds gates it. A gated
    /// call passes when the session holds a human's approval of this call, and is
    /// refused as [`Refusal::Rejected`] when it holds a rejection of it. Changes nothing.
    pub fn check_call(&self, tool: M::Tool, call: &Call<'_>) -> Result<(), SessionRefusal<M>> {
        self.check_call_ref(ToolRef::Declared(tool.index()), call)
    }

    /// [`Session::check_call`] by name (a name the machine does not know is a foreign
    /// tool, as in [`Session::check_name`]).
    pub fn check_call_name(&self, name: &str, call: &Call<'_>) -> Result<(), SessionRefusal<M>> {
        self.check_call_ref(Self::tool_ref(name), call)
    }

    fn check_call_ref(&self, tool: ToolRef<'_>, call: &Call<'_>) -> Result<(), SessionRefusal<M>> {
        self.state
            .check_call(
                M::tables(),
                self.available.as_ref(),
                tool,
                call,
                M::matchers(),
            )
            .map(|_| ())
            .map_err(|d| self.denied(d))
    }

    /// Admits this exact call of `tool` before the host runs it: [`Session::check_call`],
    /// and when the call passes on an approval, the approval is consumed — one approval
    /// lets one call run.
    pub fn admit_call(&mut self, tool: M::Tool, call: &Call<'_>) -> Result<(), SessionRefusal<M>> {
        self.admit_ref(ToolRef::Declared(tool.index()), call)
    }

    /// [`Session::admit_call`] by name.
    pub fn admit_call_name(
        &mut self,
        name: &str,
        call: &Call<'_>,
    ) -> Result<(), SessionRefusal<M>> {
        self.admit_ref(Self::tool_ref(name), call)
    }

    /// A call of the tool `name` that ran without this session admitting it (a host in
    /// observe mode, a simulation), stored as admitting it would store it: its arguments
    /// remembered where rules read them, its charges made to the budgets. Nothing is
    /// judged; record it with [`Session::record_name`] as any call.
    pub fn ran_call_name(&mut self, name: &str, call: &Call<'_>) {
        self.state
            .ran_call(M::tables(), Self::tool_ref(name), call, M::matchers());
    }

    fn admit_ref(&mut self, tool: ToolRef<'_>, call: &Call<'_>) -> Result<(), SessionRefusal<M>> {
        let result = self.state.admit_call(
            M::tables(),
            self.available.as_ref(),
            tool,
            call,
            M::matchers(),
        );
        result.map_err(|d| self.denied(d))
    }

    /// Why a call broke a rule on arguments ([`Refusal::BrokenRule`]), in words, given
    /// its arguments: "`/to` is "x@evil.example": it must be a string matching
    /// `*@corp.example`".
    pub fn explain_broken(&self, broken: &Broken, arguments: &str) -> String {
        let t = M::tables();
        let tool = |i: u16| t.tools.get(i as usize).copied().unwrap_or("");
        t.rules.explain(broken, arguments, &tool)
    }

    /// Records that `tool` ran and returned `result` (its text, as the host got it): as
    /// [`Session::record`], and the values the rules on arguments read from that tool's
    /// results are remembered (semantics §16; nothing is when no rule reads them).
    pub fn record_result(&mut self, tool: M::Tool, result: &str) -> Outcome<M::Tool> {
        let outcome = self.record(tool);
        self.state
            .remember_result(M::tables(), tool.index(), result);
        outcome
    }

    /// Where the values of a call of `tool` with `arguments` were seen (semantics §16),
    /// one line per value, for the human asked about it: the values the rules' `from`
    /// tests read and, when the template declares untrusted tools, every scalar at the
    /// top of the arguments ("`/iban` "DE89…": seen only in untrusted results of
    /// `read_file`; not in the user's messages").
    /// Empty when the template remembers nothing.
    pub fn origins(&self, tool: M::Tool, arguments: &str) -> Vec<String> {
        let t = M::tables();
        let name = |i: u16| t.tools.get(i as usize).copied().unwrap_or("");
        t.rules.origins(
            tool.index(),
            self.state.step,
            arguments,
            self.state.memory_words(),
            &name,
        )
    }

    /// How many remembered values (semantics §16) the session forgot to make room for
    /// newer ones: a template whose `rememberedValues` is too small for its runs shows
    /// it here.
    pub fn forgotten(&self) -> u32 {
        self.state.forgotten(M::tables())
    }

    /// Each budget's total now (at the newest time a host gave), by name, as a decimal:
    /// what a budget test reads before adding the call it judges (semantics §17).
    /// Budgets that hold nothing are left out.
    pub fn budget_totals(&self) -> Vec<(&'static str, String)> {
        M::tables().rules.budget_totals(self.state.memory_words())
    }

    /// Does admitting a call of `tool` change what the session remembers — the call's
    /// arguments (an `arguments` origin, semantics §16), or a budget's clock and charges
    /// (semantics §17)? A host that stores the session only when it changed must store
    /// it after such an admission, even when no approval was consumed.
    pub fn admit_changes_memory(&self, tool: M::Tool) -> bool {
        M::tables().rules.admit_changes_memory(tool.index())
    }

    /// Does refusing a call change the session — a budget counts refusals (semantics
    /// §17)? A host that stores the session only when it changed must store it after
    /// such a refusal.
    pub fn refusal_changes_memory(&self) -> bool {
        M::tables().rules.counts_refusals()
    }

    /// [`Session::record_result`] by name (a foreign tool is recorded, and no rule
    /// reads its results).
    pub fn record_result_name(&mut self, name: &str, result: &str) -> Outcome<M::Tool> {
        match <M::Tool as ToolEnum>::from_name(name) {
            Some(tool) => self.record_result(tool, result),
            None => self.record_name(name),
        }
    }

    /// The name of argument rule `rule` (as [`Broken::rule`] gives it).
    pub fn rule_name(&self, rule: u16) -> &'static str {
        M::tables().rules.name(rule)
    }

    /// A human approved this exact call (semantics §13): it may run once, in the
    /// session's current state. Replaces any verdict the session held.
    pub fn approve(&mut self, call: CallDigest) {
        self.state.hold(call, Verdict::Approved, QuestionId::NONE);
    }

    /// A human rejected this exact call: in the current state, checking it again answers
    /// [`Refusal::Rejected`] instead of asking again. Replaces any verdict the session held.
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
    /// or the human dismissed it): no verdict is held afterwards. `false`, changing
    /// nothing, when the session holds no such question.
    pub fn dismiss(&mut self, call: CallDigest, question: QuestionId) -> bool {
        self.state.dismiss(call, question)
    }

    /// The glob of the active step's `denied` list that refuses the tool `name`, if one
    /// does: what to name as the rule behind a "not allowed" (exact names in `denied`
    /// are not kept apart from "not in `allowed`").
    pub fn deny_pattern(&self, name: &str) -> Option<&'static str> {
        let step = self.state.active()?;
        M::tables().deny_pattern(step, name)
    }

    /// The verdict the session holds, if any (cleared by the next event).
    pub fn approval(&self) -> Option<Approval> {
        self.state.approval
    }

    /// Records that the host ran `tool` (semantics §5): history, used set, sequence, and the
    /// transitions it triggers, within this call.
    #[inline(always)]
    pub fn record(&mut self, tool: M::Tool) -> Outcome<M::Tool> {
        let i = tool.index();
        let t = M::tables();
        if t.moves.is_empty() {
            let raw = self
                .state
                .record_engine(t, self.available.as_ref(), ToolRef::Declared(i));
            return self.outcome(raw);
        }
        match self.state.record_move(t, i) {
            Some(packed) => self.moved(packed, i),
            // Nothing is live across this call: it is a tail call.
            None => self.record_off_table(i),
        }
    }

    /// The outcome of the table's move of the declared tool `i`. `Outcome`'s variants
    /// without a set are declared in the order of the kinds, so the match below is
    /// the identity on the tag (no second dispatch); the commonest kind, a tool the
    /// step allows, is told apart first.
    #[inline(always)]
    fn moved(&self, packed: Packed, i: usize) -> Outcome<M::Tool> {
        let k = packed.kind();
        if k == kind::FREE {
            return if bits::test(self.available.as_ref(), i) {
                Outcome::Free
            } else {
                Outcome::NotAllowed
            };
        }
        if k >= kind::OUT_OF_SEQUENCE {
            return Outcome::OutOfSequence {
                expected: self.set_from(M::tables().set_at(packed.payload())),
            };
        }
        // Every arm is written, `FREE`'s too, so that the tag is `k` itself.
        match k & 3 {
            kind::ADVANCED => Outcome::Advanced {
                index: packed.payload() as usize,
            },
            kind::COMPLETED => Outcome::Completed,
            kind::FREE => Outcome::Free,
            _ => Outcome::NotAllowed,
        }
    }

    /// [`Session::record`] of the declared tool `i` when the session's node is not
    /// known (after a message, a restore or a reset), out of line.
    #[inline(never)]
    fn record_off_table(&mut self, i: usize) -> Outcome<M::Tool> {
        let raw = self
            .state
            .record_declared_off_table(M::tables(), self.available.as_ref(), i);
        self.outcome(raw)
    }

    /// [`Session::record`] by name; a name the machine does not know is recorded as a
    /// foreign tool (it enters the history, never advances a sequence).
    pub fn record_name(&mut self, name: &str) -> Outcome<M::Tool> {
        let raw = self
            .state
            .record(M::tables(), self.available.as_ref(), Self::tool_ref(name));
        self.outcome(raw)
    }

    /// A new user message (semantics §5): message conditions, `resetSequenceOn`, activation.
    pub fn on_user_message(&mut self, message: &str) {
        self.state.on_message(M::tables(), M::matchers(), message);
    }

    /// Adds token usage (saturating).
    pub fn record_usage(&mut self, prompt: u64, completion: u64) {
        self.state.add_usage(prompt, completion);
    }

    /// Cumulative token usage.
    pub fn usage(&self) -> Usage {
        self.state.usage
    }

    /// Back to a fresh session (the host's available tools are kept: they describe the
    /// host, not the conversation).
    pub fn reset(&mut self) {
        self.state.reset(M::tables());
    }

    /// The history (the last H tool uses), oldest first.
    pub fn history(&self) -> impl Iterator<Item = HistoryEntry<M::Tool>> + '_ {
        self.state.history().map(|i| match i {
            FOREIGN => HistoryEntry::Foreign,
            i => match <M::Tool as ToolEnum>::ALL.get(i as usize) {
                Some(t) => HistoryEntry::Tool(*t),
                None => HistoryEntry::Foreign,
            },
        })
    }

    /// Every tool used since the session began or was reset.
    pub fn used(&self) -> ToolSet<M::Tool> {
        ToolSet::from_words(self.state.used)
    }

    /// Filters the host's own tool list by name, lazily and without allocating: yields
    /// the names the LLM may see now. The list itself is the host's available set `A`
    /// for this call; names the machine does not know are foreign tools, judged by the
    /// active step's patterns.
    ///
    /// ```
    /// # orch_runtime::__doc_machine!();
    /// let mut s = demo::Session::new();
    /// s.on_user_message("research it");
    /// let host = ["think", "search", "weather"];
    /// assert_eq!(s.filter_names(host).collect::<Vec<_>>(), ["search"]);
    /// ```
    pub fn filter_names<'n, I>(&self, names: I) -> impl Iterator<Item = &'n str> + 'n
    where
        I: IntoIterator<Item = &'n str>,
        I::IntoIter: 'n,
    {
        let everything = ToolSet::<M::Tool>::all();
        let mut permitted = <<M::Tool as ToolEnum>::Words as Words>::ZERO;
        self.state
            .allowed_into(M::tables(), everything.words().as_ref(), permitted.as_mut());
        let foreign_ok_state = self.state;
        names
            .into_iter()
            .filter(move |name| match <M::Tool as ToolEnum>::from_name(name) {
                Some(t) => bits::test(permitted.as_ref(), t.index()),
                None => foreign_ok_state.foreign_allowed(M::tables(), name),
            })
    }

    /// The engine state (for snapshots).
    pub(crate) fn raw_state(&self) -> &StateOf<M> {
        &self.state
    }

    /// A session from validated parts (for restoring snapshots).
    pub(crate) fn from_parts(state: StateOf<M>, available: <M::Tool as ToolEnum>::Words) -> Self {
        Session {
            state,
            available,
            _machine: PhantomData,
        }
    }

    fn set_from(&self, words: &[u64]) -> ToolSet<M::Tool> {
        let mut out = <<M::Tool as ToolEnum>::Words as Words>::ZERO;
        for (o, w) in out.as_mut().iter_mut().zip(words) {
            *o = *w;
        }
        ToolSet::from_words(out)
    }

    fn step_at(&self, i: u16) -> M::Step {
        let all = <M::Step as StepEnum>::ALL;
        // Indices come from the machine's own tables, so they are in range; the
        // fallback keeps this total without a panic path.
        all.get(i as usize)
            .or(all.first())
            .copied()
            .unwrap_or_else(|| unreachable!("a session with an active step has at least one step"))
    }

    fn denied(&self, d: RawRefusal) -> SessionRefusal<M> {
        match d {
            RawRefusal::NotInStep(step) => Refusal::NotInStep {
                step: self.step_at(step),
            },
            RawRefusal::SequenceExpects { step, index, group } => Refusal::SequenceExpects {
                step: self.step_at(step),
                index: index as usize,
                expected: self.set_from(M::tables().set_at(group)),
            },
            RawRefusal::Unavailable => Refusal::Unavailable,
            RawRefusal::NeedsApproval(step) => Refusal::NeedsApproval {
                step: (step != NO_STEP).then(|| self.step_at(step)),
            },
            RawRefusal::Rejected(step) => Refusal::Rejected {
                step: (step != NO_STEP).then(|| self.step_at(step)),
            },
            RawRefusal::Broken(step, broken) => Refusal::BrokenRule {
                step: (step != NO_STEP).then(|| self.step_at(step)),
                broken,
            },
        }
    }

    fn outcome(&self, raw: RawOutcome) -> Outcome<M::Tool> {
        match raw {
            RawOutcome::Advanced(index) => Outcome::Advanced {
                index: index as usize,
            },
            RawOutcome::Completed => Outcome::Completed,
            RawOutcome::Free => Outcome::Free,
            RawOutcome::OutOfSequence(group) => Outcome::OutOfSequence {
                expected: self.set_from(M::tables().set_at(group)),
            },
            RawOutcome::NotAllowed => Outcome::NotAllowed,
        }
    }
}
