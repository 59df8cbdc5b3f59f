//! The compiled form of a template: flat, index-based tables the engine walks.
//!
//! Generated code holds one `static` [`Tables`] per machine (borrowing `'static`
//! arrays); a template loaded at run time owns the same data in a
//! [`OwnedTables`] and lends it out as a `Tables<'_, String>`. Nothing in
//! here points anywhere but into the slices of the same `Tables`, so both forms share one
//! engine.

/// A run of entries in one of the pools of [`Tables`]: `start..start + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First entry.
    pub start: u32,
    /// Number of entries.
    pub len: u32,
}

impl Span {
    /// The span `start..start + len`.
    pub const fn new(start: u32, len: u32) -> Self {
        Span { start, len }
    }

    /// As a `usize` range.
    #[inline]
    pub fn range(self) -> core::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }

    /// Is it empty?
    #[inline]
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}

use crate::args::{OwnedRules, Rules};
use crate::form::{Literal, LiteralWriter};
use crate::moves::{Moves, OwnedMoves};
use crate::plan::{OwnedPlan, Plan};

impl Literal for Span {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.item("Span::new(");
        w.int(self.start);
        w.text(", ");
        w.int(self.len);
        w.text(")");
    }
}

/// Tools that need a human's approval of each call (semantics §13): a tool set in the
/// bit pool and glob patterns (in [`Tables::patterns`]) for foreign tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gate {
    /// Word offset in [`Tables::bits`] of the gated tools (`words` words), or
    /// [`Gate::NONE`]'s `u32::MAX` when no tool is gated.
    pub set: u32,
    /// Glob patterns, a span of [`Tables::patterns`]: gated foreign tools.
    pub patterns: Span,
}

impl Gate {
    /// No tool is gated.
    pub const NONE: Gate = Gate {
        set: u32::MAX,
        patterns: Span::new(0, 0),
    };

    /// A gate from the word offset of its tool set and its patterns as `(start, len)`.
    pub const fn new(set: u32, patterns: (u32, u32)) -> Self {
        Gate {
            set,
            patterns: Span::new(patterns.0, patterns.1),
        }
    }

    /// Does it gate any tool?
    #[inline]
    pub fn is_none(&self) -> bool {
        self.set == u32::MAX && self.patterns.is_empty()
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate::NONE
    }
}

impl Literal for Gate {
    fn write_literal(&self, w: &mut LiteralWriter) {
        if self.is_none() {
            return w.item("Gate::NONE");
        }
        w.item("Gate::new(");
        w.int(self.set);
        w.text(", ");
        (self.patterns.start, self.patterns.len).write_literal(w);
        w.text(")");
    }
}

/// One activation condition (semantics §7), with names resolved to indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Condition {
    /// `tool_used`: the tool (an index into [`Tables::tools`]) is in the used set.
    ToolUsed(u16),
    /// `sequence_match`: the newest history entries match this step's sequence.
    SequenceMatch,
    /// `message_contains` / `message_regex`: message flag `n` is set. Flags
    /// `0..contains.len()` are the `contains` needles, the rest the regexes in order.
    Message(u16),
    /// `not_recently_used`: the tool is not among the newest `window` history entries.
    NotRecentlyUsed {
        /// The tool (index into [`Tables::tools`]).
        tool: u16,
        /// How many of the newest history entries to look at (at least 1).
        window: u16,
    },
    /// `budget`: budget test `k` of the rules' `budget_conditions` holds of the budgets'
    /// totals at the session's clock (semantics §17).
    Budget(u16),
}

/// Bit flags of [`StepTable::reset`].
pub mod reset {
    /// `user_message`: every new user message resets the index.
    pub const USER_MESSAGE: u8 = 1;
    /// `message_contains`: a message satisfying one of the step's `message_contains`
    /// conditions resets the index.
    pub const MESSAGE_CONTAINS: u8 = 2;
    /// `message_regex`: a message satisfying one of the step's `message_regex`
    /// conditions resets the index.
    pub const MESSAGE_REGEX: u8 = 4;
}

/// One step, with every list stored as a span into a pool of [`Tables`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StepTable {
    /// Its conditions, a span of [`Tables::conditions`]. Empty: never activated by
    /// conditions (only as the default).
    pub conditions: Span,
    /// Word offset in [`Tables::bits`] of its static set (`words` words).
    pub static_set: u32,
    /// Its sequence: `start` is the word offset in [`Tables::bits`] of position 0,
    /// `len` the number of positions; position `i` is the `words` words at
    /// `start + i * words`. Empty: no sequence.
    pub sequence: Span,
    /// `allowed` was absent or empty: every tool passes the allow test.
    pub allow_all: bool,
    /// The glob entries of `allowed`, a span of [`Tables::patterns`] (judges foreign tools).
    pub allow_patterns: Span,
    /// The glob entries of `denied`, a span of [`Tables::patterns`] (judges foreign tools).
    pub deny_patterns: Span,
    /// `resetSequenceOn`, as [`reset`] flags.
    pub reset: u8,
    /// The tools that need a human's approval of each call while this step is active
    /// (its own `approve` and the orchestration's).
    pub approve: Gate,
}

impl StepTable {
    /// A step from its fields in declaration order, spans as `(start, len)` (the
    /// compact form generated code uses).
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        conditions: (u32, u32),
        static_set: u32,
        sequence: (u32, u32),
        allow_all: bool,
        allow_patterns: (u32, u32),
        deny_patterns: (u32, u32),
        reset: u8,
    ) -> Self {
        StepTable {
            conditions: Span::new(conditions.0, conditions.1),
            static_set,
            sequence: Span::new(sequence.0, sequence.1),
            allow_all,
            allow_patterns: Span::new(allow_patterns.0, allow_patterns.1),
            deny_patterns: Span::new(deny_patterns.0, deny_patterns.1),
            reset,
            approve: Gate::NONE,
        }
    }

    /// The step with approval gate `approve` (generated code writes
    /// `StepTable::new(..).with_approve(..)` for a step that has one).
    pub const fn with_approve(mut self, set: u32, patterns: (u32, u32)) -> Self {
        self.approve = Gate::new(set, patterns);
        self
    }
}

/// Written as [`StepTable::new`] with `(start, len)` spans, the compact form.
impl Literal for StepTable {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.item("StepTable::new(");
        let spans = [
            self.conditions,
            self.sequence,
            self.allow_patterns,
            self.deny_patterns,
        ];
        let span = |w: &mut LiteralWriter, s: Span| (s.start, s.len).write_literal(w);
        span(w, spans[0]);
        w.text(", ");
        self.static_set.write_literal(w);
        w.text(", ");
        span(w, spans[1]);
        w.text(", ");
        self.allow_all.write_literal(w);
        w.text(", ");
        span(w, spans[2]);
        w.text(", ");
        span(w, spans[3]);
        w.text(", ");
        self.reset.write_literal(w);
        w.text(")");
        if !self.approve.is_none() {
            w.text(".with_approve(");
            w.int(self.approve.set);
            w.text(", ");
            (self.approve.patterns.start, self.approve.patterns.len).write_literal(w);
            w.text(")");
        }
    }
}

impl Literal for Condition {
    fn write_literal(&self, w: &mut LiteralWriter) {
        match *self {
            Condition::ToolUsed(t) => {
                w.item("Condition::ToolUsed(");
                w.int(t);
            }
            Condition::SequenceMatch => {
                w.item("Condition::SequenceMatch");
                return;
            }
            Condition::Message(f) => {
                w.item("Condition::Message(");
                w.int(f);
            }
            Condition::Budget(k) => {
                w.item("Condition::Budget(");
                w.int(k);
            }
            Condition::NotRecentlyUsed { tool, window } => {
                w.item("Condition::NotRecentlyUsed { tool: ");
                w.int(tool);
                w.text(", window: ");
                w.int(window);
                w.text(" }");
                return;
            }
        }
        w.text(")");
    }
}

compiled_form! {
    /// A compiled machine: everything the engine reads, in flat pools.
    ///
    /// `S` is the string type of the name pools: `&'static str` in generated code,
    /// `String` for templates loaded at run time.
    #[derive(Debug)]
    pub struct Tables<'a, S: 'a = &'static str>;
    /// The owned form of [`Tables`]: the same fields, in `Vec`s; `orch-codegen` builds it
    /// from a checked template (hosts load templates with
    /// `orch_codegen::compile_json(..).to_machine()`), [`OwnedTables::view`] borrows it
    /// for the engine, and its [`Literal`](crate::form::Literal) is what generated code
    /// holds.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct OwnedTables;
    {
        /// The machine's name (`agentId`, else `name`).
        name: text,
        /// `u64` words per tool set: `ceil(tools / 64)`, at least 1.
        words: value(usize),
        /// History capacity H (semantics §4).
        history: value(usize),
        /// The default step, if any (index into [`Tables::steps`]).
        default_step: value(Option<u16>),
        /// A fingerprint of the compiled template (stable across builds of the same input).
        fingerprint: value(u64),
        /// Tool names; a tool's index is its position here.
        tools: names,
        /// Step names; a step's index is its position here.
        step_names: names,
        /// The steps, in template (priority) order.
        steps: slice(StepTable),
        /// The condition pool.
        conditions: slice(Condition),
        /// The bit pool: static sets and sequence groups, `words` words each.
        bits: slice(u64),
        /// The glob pool: allow/deny patterns for foreign tools.
        patterns: names,
        /// `message_contains` needles, already lowercased (`fold_case`).
        contains: names,
        /// `message_regex` sources (compiled separately, into `Matchers`).
        regexes: names,
        /// The tools that need a human's approval of each call while no step is active
        /// (the orchestration's `approve`).
        approve: value(Gate),
        /// The tools a lost result of which counts as not run (`lostResults.retry`,
        /// semantics §15).
        lost_retry: value(Gate),
        /// The tools a lost result of which counts as run (`lostResults.ran`).
        lost_ran: value(Gate),
        /// The tools a lost result of which holds the run (`lostResults.hold`; every
        /// tool in no list is held too).
        lost_hold: value(Gate),
        /// The rules on arguments (semantics §16): empty for a template without any.
        rules: nested(Rules OwnedRules),
        /// The incremental form of the conditions (derived from the fields above by
        /// [`crate::plan::OwnedPlan::derive`]).
        plan: nested(Plan OwnedPlan),
        /// The transition table of a small machine (derived from the fields above by
        /// [`crate::moves::OwnedMoves::derive`]; empty for a large one).
        moves: nested(Moves OwnedMoves),
    }
}

/// What a call whose result never came means (a *lost result*: the gateway that admitted
/// it never heard how it ended), declared per tool by the template's
/// `orchestration.lostResults` (semantics §15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostRule {
    /// The call counts as not run: the model may call the tool again. For tools that
    /// are harmless to run twice (reads, searches).
    Retry,
    /// The run is held: every call is refused until an operator says whether the call
    /// ran. The default, for tools that must not run twice.
    Hold,
    /// The call counts as run: it is recorded. For tools whose effect is certain once
    /// sent (a log line), or that are idempotent on the other side.
    Ran,
}

impl LostRule {
    /// The rule's name in templates: `"retry"`, `"hold"` or `"ran"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LostRule::Retry => "retry",
            LostRule::Hold => "hold",
            LostRule::Ran => "ran",
        }
    }
}

impl<S> Clone for Tables<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for Tables<'_, S> {}

impl<'a, S: AsRef<str>> Tables<'a, S> {
    /// Number of message flags (`contains` needles plus regexes).
    pub fn message_flags(&self) -> usize {
        self.contains.len() + self.regexes.len()
    }

    /// The `words` words at word offset `at` of the bit pool.
    #[inline]
    pub fn set_at(&self, at: u32) -> &'a [u64] {
        let start = at as usize;
        self.bits.get(start..start + self.words).unwrap_or(&[])
    }

    /// The static set of step `step`.
    #[inline]
    pub fn static_set(&self, step: usize) -> &'a [u64] {
        match self.steps.get(step) {
            Some(s) => self.set_at(s.static_set),
            None => &[],
        }
    }

    /// The tools of sequence position `pos` of step `step`.
    #[inline]
    pub fn group(&self, step: usize, pos: usize) -> &'a [u64] {
        match self.steps.get(step) {
            Some(s) if pos < s.sequence.len as usize => {
                self.set_at(s.sequence.start + (pos * self.words) as u32)
            }
            _ => &[],
        }
    }

    /// The conditions of step `step`.
    #[inline]
    pub fn step_conditions(&self, step: usize) -> &'a [Condition] {
        match self.steps.get(step) {
            Some(s) => self.conditions.get(s.conditions.range()).unwrap_or(&[]),
            None => &[],
        }
    }

    /// The first glob of step `step`'s `denied` list that matches `name`, if any: the
    /// rule that refused it, for an explanation (exact names in `denied` are folded
    /// into the step's static set and are not kept apart).
    pub fn deny_pattern(&self, step: usize, name: &str) -> Option<&'a str> {
        let s = self.steps.get(step)?;
        let patterns: &'a [S] = self.patterns.get(s.deny_patterns.range())?;
        patterns
            .iter()
            .map(AsRef::as_ref)
            .find(|p| crate::text::glob_match(p, name))
    }

    /// Would step `step`'s `allowed`/`denied` patterns let a foreign tool `name` through?
    pub fn foreign_permitted(&self, step: usize, name: &str) -> bool {
        let Some(s) = self.steps.get(step) else {
            return false;
        };
        let pats = |span: Span| {
            self.patterns
                .get(span.range())
                .unwrap_or(&[])
                .iter()
                .any(|p| crate::text::glob_match(p.as_ref(), name))
        };
        (s.allow_all || pats(s.allow_patterns)) && !pats(s.deny_patterns)
    }

    /// Does `gate` hold the declared tool `tool`?
    #[inline]
    pub fn gates(&self, gate: Gate, tool: usize) -> bool {
        gate.set != u32::MAX && crate::bits::test(self.set_at(gate.set), tool)
    }

    /// What a lost result of a call of `name` means (`tool`: its index when it is a
    /// declared tool; semantics §15): the safest list that names it wins (`hold` over
    /// `ran` over `retry`), and a tool in no list is held.
    pub fn lost_rule(&self, tool: Option<usize>, name: &str) -> LostRule {
        let holds = |gate: Gate| match tool {
            Some(i) => self.gates(gate, i),
            None => self.gates_foreign(gate, name),
        };
        if holds(self.lost_hold) {
            LostRule::Hold
        } else if holds(self.lost_ran) {
            LostRule::Ran
        } else if holds(self.lost_retry) {
            LostRule::Retry
        } else {
            LostRule::Hold
        }
    }

    /// Does `gate` hold the foreign tool `name` (one of its patterns matches it)?
    pub fn gates_foreign(&self, gate: Gate, name: &str) -> bool {
        self.patterns
            .get(gate.patterns.range())
            .unwrap_or(&[])
            .iter()
            .any(|p| crate::text::glob_match(p.as_ref(), name))
    }

    /// The index of the tool named `name`.
    pub fn tool_index(&self, name: &str) -> Option<usize> {
        self.tools.iter().position(|t| t.as_ref() == name)
    }

    /// The index of the step named `name`.
    pub fn step_index(&self, name: &str) -> Option<usize> {
        self.step_names.iter().position(|t| t.as_ref() == name)
    }
}
