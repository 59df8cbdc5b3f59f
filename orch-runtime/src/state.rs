//! Session state (semantics §4) and the engine that applies events to it (semantics §5–§8).
//!
//! The engine is written once, over slices: the typed [`crate::Session`] keeps its state
//! in fixed arrays, a run-time loaded [`crate::dynamic::DynSession`] in boxed slices, and
//! both call the same methods here.

use crate::approval::{Approval, Call, CallDigest, QuestionId, Verdict};
use crate::args::{Broken, Judged};
use crate::bits;
use crate::moves::{self, kind, Node, Packed};
use crate::plan::{Plan, NONE, SOLE};
use crate::regexes::Matchers;
use crate::tables::{reset, Condition, Gate, Tables};

mod approvals;
mod conditions;
mod lifecycle;
mod messages;

/// Marks "no step is active" in [`State::step`].
pub(crate) const NO_STEP: u16 = u16::MAX;
/// The history entry of a foreign tool: equals no tool of the universe.
pub(crate) const FOREIGN: u16 = u16::MAX;
/// A slot of the history ring that holds no entry yet: equals no tool of the universe
/// (at most 16,384) and not [`FOREIGN`].
pub(crate) const EMPTY: u16 = u16::MAX - 1;

/// Cumulative token usage of a session (saturating).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt: u64,
    /// Completion (output) tokens.
    pub completion: u64,
}

impl Usage {
    /// `prompt + completion`, saturating.
    pub fn total(&self) -> u64 {
        self.prompt.saturating_add(self.completion)
    }
}

/// What recording a tool did (semantics §5), in table indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawOutcome {
    /// Advanced the sequence to this index (not yet complete).
    Advanced(u16),
    /// Advanced the sequence to its end.
    Completed,
    /// No unfinished sequence, and the tool was allowed.
    Free,
    /// An unfinished sequence expected the group at this word offset of the bit pool.
    OutOfSequence(u32),
    /// No unfinished sequence, and the tool was not allowed.
    NotAllowed,
}

/// A record's outcome and its packed form in a transition table's cell
/// ([`crate::moves`]).
impl Packed {
    /// The packed form of an outcome.
    #[inline(always)]
    pub(crate) fn of(outcome: RawOutcome) -> Packed {
        Packed(match outcome {
            RawOutcome::Advanced(index) => kind::ADVANCED << 16 | u64::from(index) << 32,
            RawOutcome::Completed => kind::COMPLETED << 16,
            RawOutcome::Free => kind::FREE << 16,
            RawOutcome::NotAllowed => kind::NOT_ALLOWED << 16,
            RawOutcome::OutOfSequence(group) => {
                kind::OUT_OF_SEQUENCE << 16 | u64::from(group) << 32
            }
        })
    }

    /// The outcome.
    #[inline(always)]
    pub(crate) fn unpack(self) -> RawOutcome {
        match self.kind() {
            kind::ADVANCED => RawOutcome::Advanced(self.payload() as u16),
            kind::COMPLETED => RawOutcome::Completed,
            kind::FREE => RawOutcome::Free,
            kind::NOT_ALLOWED => RawOutcome::NotAllowed,
            _ => RawOutcome::OutOfSequence(self.payload()),
        }
    }
}

/// A tool as the engine sees it: one the template declares (its index), or a foreign
/// one, by name (semantics §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolRef<'a> {
    /// A tool of the universe.
    Declared(usize),
    /// A tool the template does not declare.
    Foreign(&'a str),
}

/// Why a tool may not run now (semantics §5 "check tool"), in table indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawRefusal {
    /// Not in the active step's static set.
    NotInStep(u16),
    /// The active step's sequence expects the group at this bit-pool offset.
    SequenceExpects { step: u16, index: u16, group: u32 },
    /// Permitted by the orchestration, but the host has not made it available.
    Unavailable,
    /// Permitted and available, but gated: it needs a human's approval of the call
    /// (semantics §13). The active step, or `NO_STEP`.
    NeedsApproval(u16),
    /// Gated, and a human rejected this very call in this state. The active step, or
    /// `NO_STEP`.
    Rejected(u16),
    /// The call's arguments break a rule (semantics §16). The active step, or `NO_STEP`.
    Broken(u16, Broken),
}

/// The state of one session. `U` holds the used set (tool words), `F` the message flags,
/// `H` the history ring, `D` the derived condition state (holds, eligible and shift-and
/// words, laid out by the machine's [`crate::plan::Plan`]), `C` the
/// `not_recently_used` counters.
///
/// `D` and `C` are a function of the rest (see [`State::rebuild`]); the engine keeps
/// them current event by event, so activation never walks the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State<U, F, H, D, C, R> {
    /// Active step index, or [`NO_STEP`].
    pub step: u16,
    /// Position in the active step's sequence.
    pub index: u16,
    /// Next write position of the history ring (its slots from here on are [`EMPTY`]
    /// until it first wraps around).
    pub hist_next: u16,
    /// Tools used since the session began (or was reset).
    pub used: U,
    /// Which message conditions the latest user message satisfied.
    pub flags: F,
    /// The history ring: tool indices, [`FOREIGN`] for foreign tools.
    pub hist: H,
    /// Cumulative token usage.
    pub usage: Usage,
    /// Derived: which atoms hold, which steps are eligible, the sequences' shift-and bits.
    pub derived: D,
    /// Derived: per `not_recently_used` counter, entries recorded since its tool's
    /// newest use (saturating at the counter's cap).
    pub counters: C,
    /// A human's verdict on one call (semantics §13), valid in this state only: every
    /// event clears it.
    pub approval: Option<Approval>,
    /// Values earlier results held that rules read (semantics §16): a ring of keys
    /// (`crate::args::memory`'s layout; empty when no rule reads results).
    pub memory: R,
    /// The node of the machine's transition table this state is at, if known (a
    /// cache, ignored by equality: see [`crate::moves`]).
    pub(crate) node: Node,
}

impl<U, F, H, D, C, R> State<U, F, H, D, C, R>
where
    U: AsRef<[u64]> + AsMut<[u64]>,
    F: AsRef<[u64]> + AsMut<[u64]>,
    H: AsRef<[u16]> + AsMut<[u16]>,
    D: AsRef<[u64]> + AsMut<[u64]>,
    C: AsRef<[u16]> + AsMut<[u16]>,
    R: AsRef<[u64]> + AsMut<[u64]>,
{
    /// Advances the `not_recently_used` counters by one recorded entry.
    #[inline(always)]
    fn count(&mut self, p: &Plan<'_>, entry: u16) {
        for (c, (tool, cap)) in self.counters.as_mut().iter_mut().zip(p.counters) {
            *c = if *tool == entry {
                0
            } else {
                (*c).saturating_add(1).min(*cap)
            };
        }
    }

    /// Brings the derived state up to date after `entry` was recorded (the used set and
    /// the history already hold it).
    #[inline(always)]
    fn observe<S: AsRef<str>>(&mut self, t: &Tables<'_, S>, entry: u16) {
        let p = &t.plan;
        if entry != FOREIGN {
            if let Some(&atom) = p.used_atom.get(entry as usize) {
                if atom != NONE {
                    let (holds, eligible, _) = split(self.derived.as_mut(), p);
                    set_atom(holds, eligible, p, atom as usize, true);
                }
            }
        }
        if p.seq_words != 0 {
            let (holds, eligible, seq) = split(self.derived.as_mut(), p);
            shift_sequences(seq, p, entry, |atom, value| {
                set_atom(holds, eligible, p, atom as usize, value)
            });
        }
        if !p.counters.is_empty() {
            self.count(p, entry);
            let (holds, eligible, _) = split(self.derived.as_mut(), p);
            let counters = self.counters.as_ref();
            for (k, (counter, window)) in p.nru_atoms.iter().enumerate() {
                let value = counters.get(*counter as usize).copied().unwrap_or(0) >= *window;
                set_atom(holds, eligible, p, p.nru_atom_base as usize + k, value);
            }
        }
        if !p.budget_atoms.is_empty() {
            self.sync_budget_atoms(t);
        }
    }

    /// Brings the `budget` atoms up to date with the budgets' totals at the session's
    /// clock (semantics §17): after a recorded call (charged when it was admitted), a user
    /// message and a change of step (which may empty budgets).
    pub(super) fn sync_budget_atoms<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        let p = &t.plan;
        for (k, &cond) in p.budget_atoms.iter().enumerate() {
            let value = t
                .rules
                .budget_condition_holds(self.memory.as_ref(), cond as usize);
            let (holds, eligible, _) = split(self.derived.as_mut(), p);
            set_atom(holds, eligible, p, p.budget_atom_base as usize + k, value);
        }
    }

    /// Copies the message flags into their atoms.
    fn sync_message_atoms<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        let p = &t.plan;
        let n_flags = t.message_flags();
        for w in 0..n_flags.div_ceil(64) {
            let valid = flag_mask(n_flags, w);
            let flags = self.flags.as_ref().get(w).copied().unwrap_or(0);
            let (holds, eligible, _) = split(self.derived.as_mut(), p);
            let mut diff = (flags ^ holds.get(w).copied().unwrap_or(0)) & valid;
            while diff != 0 {
                let bit = diff.trailing_zeros() as usize;
                diff &= diff - 1;
                set_atom(holds, eligible, p, w * 64 + bit, flags >> bit & 1 == 1);
            }
        }
    }

    /// The active step, if any.
    #[inline(always)]
    pub fn active(&self) -> Option<usize> {
        (self.step != NO_STEP).then_some(self.step as usize)
    }

    /// Live entries of the history ring: all of it once it has wrapped around (the slot
    /// written next holds an entry), else those before [`State::hist_next`].
    pub fn hist_len(&self) -> usize {
        let ring = self.hist.as_ref();
        match ring.get(self.hist_next as usize) {
            Some(&entry) if entry != EMPTY => ring.len(),
            _ => (self.hist_next as usize).min(ring.len()),
        }
    }

    /// The `k`-th newest history entry (0 = newest). `k < hist_len()`.
    #[inline(always)]
    fn recent(&self, k: usize) -> u16 {
        let ring = self.hist.as_ref();
        let cap = ring.len();
        ring[(self.hist_next as usize + cap - 1 - k) % cap]
    }

    /// History entries, oldest first.
    pub fn history(&self) -> impl Iterator<Item = u16> + '_ {
        let len = self.hist_len();
        (0..len).rev().map(move |k| self.recent(k))
    }

    /// Appends a tool to the history ring.
    #[inline(always)]
    fn push_history(&mut self, tool: u16) {
        let ring = self.hist.as_mut();
        let cap = ring.len();
        // `hist_next < cap` always (0 for a ring of none); the ring wraps without a
        // division. One comparison both proves the slot in range and says the cursor
        // does not wrap.
        let next = self.hist_next as usize;
        if next + 1 < cap {
            if let Some(slot) = ring.get_mut(next) {
                *slot = tool;
            }
            self.hist_next = next as u16 + 1;
        } else {
            // Once every `cap` records.
            cold();
            if let Some(slot) = ring.get_mut(next) {
                *slot = tool;
            }
            self.hist_next = 0;
        }
    }

    /// Step activation (semantics §6): the first eligible step in template order wins (the
    /// lowest bit of *eligible*: candidates exclude the default step and steps without
    /// conditions); else the active step stays; else the default. A change of step
    /// resets the index to 0.
    #[inline(always)]
    pub fn activate<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        let p = &t.plan;
        let start = p.atom_words as usize;
        let end = start + p.step_words as usize;
        let winner = match self.derived.as_ref().get(start..end).and_then(bits::first) {
            Some(step) => step as u16,
            None if self.step != NO_STEP => return,
            None => t.default_step.unwrap_or(NO_STEP),
        };
        if winner != self.step {
            self.step = winner;
            self.index = 0;
            if !t.rules.budgets.is_empty() {
                cold();
                t.rules
                    .clear_budgets(self.memory.as_mut(), crate::args::Per::Step);
                self.sync_budget_atoms(t);
            }
        }
    }

    /// The unfinished sequence position of the active step: `(step, index, group offset)`.
    #[inline(always)]
    pub fn expected<S: AsRef<str>>(&self, t: &Tables<'_, S>) -> Option<(usize, usize, u32)> {
        let step = self.active()?;
        let s = t.steps.get(step)?;
        let index = self.index as usize;
        (index < s.sequence.len as usize)
            .then(|| (step, index, s.sequence.start + (index * t.words) as u32))
    }

    /// `allowed()` (semantics §8) given the host's available tools, written into `out`.
    #[inline(always)]
    pub fn allowed_into<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        available: &[u64],
        out: &mut [u64],
    ) {
        if !t.moves.is_empty() {
            // `Node::UNKNOWN` and `Node::MISSING` are past every row: none.
            if let Some(set) = t.moves.allowed(self.node.0 as usize) {
                bits::and_into(out, set, available);
                return;
            }
            // After a message, a restore or a reset, until the next record.
            cold();
        }
        match self.active() {
            None => {
                for (o, a) in out.iter_mut().zip(available) {
                    *o = *a;
                }
            }
            Some(step) => {
                let set = match self.expected(t) {
                    Some((_, _, group)) => t.set_at(group),
                    None => t.static_set(step),
                };
                bits::and_into(out, set, available);
            }
        }
    }

    /// Is the foreign tool `name` allowed now? (See [`State::check`].)
    pub fn foreign_allowed<S: AsRef<str>>(&self, t: &Tables<'_, S>, name: &str) -> bool {
        // A gated tool is allowed: the model may ask for it, a human decides the call.
        self.permit(t, &[], ToolRef::Foreign(name)).is_ok()
    }

    /// Steps 1 and 2 of [`State::check`]: does the orchestration permit `tool` now and
    /// does the host have it? A gated tool passes (it is allowed; `check` adds the gate).
    #[inline(always)]
    pub fn permit<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> Result<(), RawRefusal> {
        if let Some(step) = self.active() {
            let permitted = match (self.expected(t), tool) {
                (Some((step, index, group)), tool) => {
                    if !matches!(tool, ToolRef::Declared(i) if bits::test(t.set_at(group), i)) {
                        return Err(RawRefusal::SequenceExpects {
                            step: step as u16,
                            index: index as u16,
                            group,
                        });
                    }
                    true
                }
                (None, ToolRef::Declared(i)) => bits::test(t.static_set(step), i),
                (None, ToolRef::Foreign(name)) => t.foreign_permitted(step, name),
            };
            if !permitted {
                return Err(RawRefusal::NotInStep(step as u16));
            }
        }
        if let ToolRef::Declared(i) = tool {
            if !bits::test(available, i) {
                return Err(RawRefusal::Unavailable);
            }
        }
        Ok(())
    }

    /// Check tool (semantics §5): may `tool` run now? The one rule for every session type,
    /// declared and foreign tools alike:
    ///
    /// 1. The active step decides whether the orchestration permits it: with no active
    ///    step, every tool; while a sequence position is pending, only that position's
    ///    tools (a sequence names declared tools only, so never a foreign one);
    ///    otherwise the step's static set — for a foreign tool, the step's `allowed`
    ///    patterns (every tool when `allowed` is empty) minus its `denied` patterns.
    /// 2. Then the host's availability: a declared tool must be in `available`; a
    ///    foreign tool is one the host itself names, so it is available.
    /// 3. Then the approval gate (semantics §13): a tool the active step's `approve` (or,
    ///    with no active step, the orchestration's) names needs a human's approval.
    #[inline(always)]
    pub fn check<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> Result<(), RawRefusal> {
        self.permit(t, available, tool)?;
        if self.gated(t, tool) {
            Err(RawRefusal::NeedsApproval(self.step))
        } else {
            Ok(())
        }
    }

    /// Step 3 of [`State::check`]: does the approval gate of the active step (of the
    /// orchestration without one) hold `tool`?
    #[inline(always)]
    fn gated<S: AsRef<str>>(&self, t: &Tables<'_, S>, tool: ToolRef<'_>) -> bool {
        let gate = match self.active() {
            Some(step) => t.steps.get(step).map_or(Gate::NONE, |s| s.approve),
            None => t.approve,
        };
        if gate.is_none() {
            return false;
        }
        match tool {
            ToolRef::Declared(i) => t.gates(gate, i),
            ToolRef::Foreign(name) => t.gates_foreign(gate, name),
        }
    }

    /// Record tool (semantics §5): by the machine's transition table when it has one
    /// and the state is in it ([`crate::moves`]), else by the incremental engine. Both
    /// leave the same state and say the same.
    #[inline(always)]
    pub fn record<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> RawOutcome {
        match tool {
            ToolRef::Declared(i) => self.record_declared(t, available, i),
            ToolRef::Foreign(_) if t.moves.is_empty() => self.record_engine(t, available, tool),
            ToolRef::Foreign(_) => self.record_off_table(t, available, tool),
        }
    }

    /// [`State::record`] of the declared tool `i`.
    #[inline(always)]
    pub fn record_declared<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        i: usize,
    ) -> RawOutcome {
        if t.moves.is_empty() {
            return self.record_engine(t, available, ToolRef::Declared(i));
        }
        match self.record_move(t, i) {
            Some(outcome) => outcome.resolve(|| bits::test(available, i)).unpack(),
            None => self.record_declared_off_table(t, available, i),
        }
    }

    /// [`State::record_off_table`] of the declared tool `i`, out of line (the table's
    /// path stays small).
    #[inline(never)]
    pub(crate) fn record_declared_off_table<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        i: usize,
    ) -> RawOutcome {
        self.record_off_table(t, available, ToolRef::Declared(i))
    }

    /// Records the declared tool `i` by the transition table, when the state's node is
    /// known: the next node's key becomes the state, the tool enters the used set and
    /// the history. `None` (nothing changed) when the node is not known. The outcome
    /// is not yet [resolved](Packed::resolve) against the host's tools: `FREE` means
    /// the node allows the tool, and it is `NotAllowed` when the host lacks it.
    #[inline(always)]
    pub(crate) fn record_move<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        i: usize,
    ) -> Option<Packed> {
        // `Node::UNKNOWN` and `Node::MISSING` are past every row: no cell.
        let cell = t.moves.cell(self.node.0 as usize, i)?;
        let next = moves::next_of(cell);
        let key = t.moves.key(next as usize)?;
        self.approval = None;
        self.load_key(key);
        self.node = Node(next);
        bits::set(self.used.as_mut(), i);
        self.push_history(i as u16);
        Some(Packed::of_cell(cell))
    }

    /// [`State::record`] of a machine with a transition table, when the state's node is
    /// not known or the tool is foreign: finds the node (after a message, a restore or a
    /// reset) and records by the table, or records by the engine and follows the table's
    /// foreign column, or — for a state the table does not hold — by the engine alone.
    #[inline]
    fn record_off_table<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> RawOutcome {
        if self.node.0 == Node::UNKNOWN.0 {
            self.node = t.moves.find(|| self.key_words());
            if let ToolRef::Declared(i) = tool {
                if let Some(outcome) = self.record_move(t, i) {
                    return outcome.resolve(|| bits::test(available, i)).unpack();
                }
            }
        }
        let foreign = match (self.node.0 < Node::MISSING.0, tool) {
            (true, ToolRef::Foreign(_)) => t
                .moves
                .cell(self.node.0 as usize, t.moves.width as usize - 1)
                .map(moves::next_of),
            _ => None,
        };
        let outcome = self.record_engine(t, available, tool);
        // A foreign tool's outcome depends on its name, so the engine records it; the
        // table says where it leads.
        self.node = foreign.map_or(Node::MISSING, Node);
        outcome
    }

    /// Record tool (semantics §5), by the incremental engine.
    #[inline(always)]
    pub(crate) fn record_engine<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> RawOutcome {
        // A verdict is bound to the state it was given in.
        self.approval = None;
        self.activate(t);
        // The outcome is judged on the state before the tool enters the history.
        let outcome = match self.expected(t) {
            Some((step, index, group)) => match tool {
                ToolRef::Declared(i) if bits::test(t.set_at(group), i) => {
                    self.index += 1;
                    let len = t.steps.get(step).map_or(0, |s| s.sequence.len as usize);
                    if index + 1 >= len {
                        RawOutcome::Completed
                    } else {
                        RawOutcome::Advanced(self.index)
                    }
                }
                _ => RawOutcome::OutOfSequence(group),
            },
            // A gated tool that runs was approved (the gate is the host's to enforce
            // before the call; recording says what happened): it was allowed.
            None if self.permit(t, available, tool).is_ok() => RawOutcome::Free,
            None => RawOutcome::NotAllowed,
        };
        let entry = match tool {
            ToolRef::Declared(i) => {
                bits::set(self.used.as_mut(), i);
                i as u16
            }
            ToolRef::Foreign(_) => FOREIGN,
        };
        self.push_history(entry);
        self.observe(t, entry);
        self.activate(t);
        outcome
    }

    /// Everything the session's future behaviour depends on, for a host whose available
    /// tools are fixed: the step, the index, and the derived condition state (which
    /// holds the message flags, the `tool_used` atoms, the sequences' shift-and bits and
    /// the `not_recently_used` counters). Two states with equal keys answer every
    /// future event identically; the history ring, the used set beyond the `tool_used`
    /// atoms and the usage do not matter for that.
    pub fn behaviour_key(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.key_words());
    }

    /// The words of [`State::behaviour_key`]: the index and the step (`index << 16 |
    /// step`), the derived state, the counters four to a word.
    pub fn key_words(&self) -> impl Iterator<Item = u64> + '_ {
        let head = u64::from(self.index) << 16 | u64::from(self.step);
        let counters = self.counters.as_ref().chunks(4).map(|c| {
            c.iter()
                .rev()
                .fold(0u64, |acc, x| acc << 16 | u64::from(*x))
        });
        core::iter::once(head)
            .chain(self.derived.as_ref().iter().copied())
            .chain(counters)
    }

    /// Takes the step, the index, the derived state and the counters from a behaviour
    /// key (the inverse of [`State::key_words`]; `key` has their words).
    #[inline(always)]
    fn load_key(&mut self, key: &[u64]) {
        let Some((&head, rest)) = key.split_first() else {
            return;
        };
        self.step = head as u16;
        self.index = (head >> 16) as u16;
        let derived = self.derived.as_mut();
        let (d, counters) = rest.split_at(derived.len().min(rest.len()));
        for (o, w) in derived.iter_mut().zip(d) {
            *o = *w;
        }
        for (j, c) in self.counters.as_mut().iter_mut().enumerate() {
            *c = counters
                .get(j / 4)
                .map_or(0, |w| (w >> (16 * (j % 4))) as u16);
        }
    }
}

/// The derived state's parts: holds (atom bits), eligible (step bits), shift-and bits.
#[inline(always)]
fn split<'d>(
    derived: &'d mut [u64],
    p: &Plan<'_>,
) -> (&'d mut [u64], &'d mut [u64], &'d mut [u64]) {
    let (holds, rest) = derived.split_at_mut((p.atom_words as usize).min(derived.len()));
    let (eligible, seq) = rest.split_at_mut((p.step_words as usize).min(rest.len()));
    (holds, eligible, seq)
}

/// Sets atom `atom` to `value`, and the eligibility of the steps that need it. An entry
/// of `atom_steps` with [`SOLE`] set is a step that needs this atom only.
#[inline(always)]
fn set_atom(holds: &mut [u64], eligible: &mut [u64], p: &Plan<'_>, atom: usize, value: bool) {
    let Some(word) = holds.get_mut(atom / 64) else {
        return;
    };
    let bit = 1u64 << (atom % 64);
    if (*word & bit != 0) == value {
        return;
    }
    *word ^= bit;
    for &entry in p.steps_of(atom) {
        let step = (entry & !SOLE) as usize;
        let ok = value && (entry & SOLE != 0 || covers(holds, p.atoms_of(step)));
        if let Some(e) = eligible.get_mut(step / 64) {
            let b = 1u64 << (step % 64);
            *e = if ok { *e | b } else { *e & !b };
        }
    }
}

/// Advances the shift-and bits by one recorded entry, reporting each sequence whose
/// match changed as `(atom, holds)`.
#[inline(always)]
fn shift_sequences(seq: &mut [u64], p: &Plan<'_>, entry: u16, mut changed: impl FnMut(u32, bool)) {
    let cells = if entry == FOREIGN {
        &[][..]
    } else {
        p.cells_of(entry as usize)
    };
    let mut cells = cells.iter().peekable();
    let mut carry = 0u64;
    for (w, d) in seq.iter_mut().enumerate() {
        let old = *d;
        let new = match cells.next_if(|(cw, _)| *cw as usize == w) {
            Some((_, positions)) => {
                ((old << 1) | carry | p.seq_first.get(w).copied().unwrap_or(0)) & positions
            }
            None => 0,
        };
        carry = old >> 63;
        *d = new;
        let mut flips = (old ^ new) & p.seq_last.get(w).copied().unwrap_or(0);
        while flips != 0 {
            let bit = flips.trailing_zeros();
            flips &= flips - 1;
            changed(seq_atom(p, w, bit), new >> bit & 1 == 1);
        }
    }
}

/// The atom of the sequence whose last position is bit `bit` of shift-and word `w`.
#[inline(always)]
fn seq_atom(p: &Plan<'_>, w: usize, bit: u32) -> u32 {
    p.seq_atom
        .get(w * 64 + bit as usize)
        .copied()
        .unwrap_or(NONE)
}

/// The bits of word `w` that are message flags, of `n_flags`.
#[inline(always)]
fn flag_mask(n_flags: usize, w: usize) -> u64 {
    match n_flags.saturating_sub(w * 64) {
        0 => 0,
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    }
}

/// Are all the `atoms` set in `holds`?
#[inline(always)]
fn covers(holds: &[u64], atoms: &[u32]) -> bool {
    atoms.iter().all(|&a| bits::test(holds, a as usize))
}

/// Marks the path that calls it as the unlikely one (the stable form of a branch
/// hint: the optimiser lays calls of a `#[cold]` function out of the hot path).
#[cold]
#[inline(always)]
fn cold() {}
