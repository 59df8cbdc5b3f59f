//! The normalized IR: a checked template with every name resolved to an index, every
//! pattern expanded against the universe, and every Rust identifier chosen. Emission and
//! the run-time tables are both made from it, by [`Ir::to_tables`], so the generated
//! statics and a template loaded at run time are the same data.

use orch_runtime::compiled::{
    reset, Condition, Gate, OwnedMoves, OwnedPlan, OwnedTables, Span, StepTable,
};
use std::collections::HashMap;

#[path = "ir_rules.rs"]
mod rules;
pub use rules::{flatten_predicate, IrArgRule, IrBudget, IrMemory, IrPred, IrTest};

/// Where an IR item was written: bytes of a JSON template, or a token of the
/// `orchestration!` macro's input ([`crate::model::Span`]). Every IR item that a
/// diagnostic, a report or an editor points at carries one, so no caller parses the
/// template again to find it.
pub type SourceSpan = crate::model::Span;

/// A compiled machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ir {
    /// The machine's name (`agentId`, else `name`).
    pub name: String,
    /// The Rust module name (snake_case of `name`).
    pub module: String,
    /// `orchestration.description`, one entry per line.
    pub description: Vec<String>,
    /// The tool universe, in declaration (or first-mention) order.
    pub tools: Vec<IrTool>,
    /// The steps, in priority order.
    pub steps: Vec<IrStep>,
    /// The default step.
    pub default_step: Option<usize>,
    /// History capacity H (semantics §4).
    pub history: usize,
    /// Distinct `message_contains` needles, lowercased; condition `Contains(i)` is `contains[i]`.
    pub contains: Vec<String>,
    /// Distinct `message_regex` sources; condition `Regex(i)` is `regexes[i]`.
    pub regexes: Vec<String>,
    /// `options.maxSteps`: the agent loop's cap on rounds (model calls) per turn.
    pub max_rounds: Option<u64>,
    /// The tools that need a human's approval while no step is active (the
    /// orchestration's `approve`; semantics §13).
    pub approve: IrGate,
    /// `orchestration.lostResults` (semantics §15): what a lost result means, per tool.
    pub lost: IrLost,
    /// `orchestration.properties` (semantics §14): what `orch verify` proves.
    pub properties: Vec<IrProperty>,
    /// The rules on arguments (semantics §16): the orchestration's, then each step's,
    /// in template order.
    pub arg_rules: Vec<IrArgRule>,
    /// What sessions remember besides what rules read: trusted and untrusted tools, and
    /// how many values (semantics §16).
    pub memory: IrMemory,
}

/// The tools of each `orchestration.lostResults` list (semantics §15).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrLost {
    /// A lost result counts as not run.
    pub retry: IrGate,
    /// A lost result counts as run.
    pub ran: IrGate,
    /// A lost result holds the run for an operator (also every tool in no list).
    pub hold: IrGate,
}

/// Tools that need a human's approval of each call (semantics §13).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrGate {
    /// The declared tools it gates.
    pub tools: ToolBits,
    /// Glob patterns: the foreign tools it gates.
    pub patterns: Vec<String>,
}

impl IrGate {
    /// The tools either gate holds.
    pub fn union(mut self, other: &IrGate) -> IrGate {
        if self.tools.len() < other.tools.len() {
            self.tools.resize(other.tools.len());
        }
        for i in other.tools.iter() {
            self.tools.insert(i);
        }
        for p in &other.patterns {
            if !self.patterns.contains(p) {
                self.patterns.push(p.clone());
            }
        }
        self
    }

    /// Does it gate nothing?
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.patterns.is_empty()
    }
}

/// A safety property (semantics §14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrProperty {
    /// Its name.
    pub name: String,
    /// The tools it is about: a name or a glob pattern, matched against tool names.
    pub tool: String,
    /// What must hold of them.
    pub rule: IrRule,
    /// `when`: only the calls whose arguments satisfy it (with `never` and `approved`).
    pub when: Option<IrPred>,
    /// Where its `name` is written.
    pub span: SourceSpan,
}

/// What an [`IrProperty`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrRule {
    /// Every execution comes after some execution of a tool matching this (a name or a
    /// pattern) since the session began (or was reset).
    After(String),
    /// At most this many executions since the session began (or was reset).
    AtMost(u64),
    /// No execution.
    Never,
    /// No execution without a human's approval of the call.
    Approved,
}

impl IrRule {
    /// The rule's key as written in a template (`after`, `atMost`, `never`, `approved`).
    pub fn key(&self) -> &'static str {
        match self {
            IrRule::After(_) => "after",
            IrRule::AtMost(_) => "atMost",
            IrRule::Never => "never",
            IrRule::Approved => "approved",
        }
    }
}

/// A tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrTool {
    /// Its name as written.
    pub name: String,
    /// Its `enum Tool` variant.
    pub ident: String,
    /// Where it is declared (its entry in `tools`/`nodes`), or, in a template that
    /// declares no tools, its first mention.
    pub span: SourceSpan,
}

/// A step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrStep {
    /// Its name as written.
    pub name: String,
    /// Its `enum Step` variant.
    pub ident: String,
    /// `description`.
    pub description: Option<String>,
    /// Its conditions (empty for the default step: they are ignored).
    pub conditions: Vec<IrCondition>,
    /// Its static set (semantics §2).
    pub static_set: ToolBits,
    /// `allowed` absent or empty.
    pub allow_all: bool,
    /// Glob entries of `allowed` (for foreign tools).
    pub allow_patterns: Vec<String>,
    /// Glob entries of `denied` (for foreign tools).
    pub deny_patterns: Vec<String>,
    /// The sequence: per position, the accepted tool indices (ascending).
    pub sequence: Vec<Vec<usize>>,
    /// `resetSequenceOn`, as `orch_runtime` reset flags.
    pub reset: u8,
    /// The tools that need a human's approval of each call while it is active (its own
    /// `approve` and the orchestration's).
    pub approve: IrGate,
    /// Where it is written: the step as a whole, its name, each condition.
    pub spans: IrStepSpans,
}

/// Where a step and its parts are written ([`IrStep::spans`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrStepSpans {
    /// The whole step.
    pub step: SourceSpan,
    /// Its `name`.
    pub name: SourceSpan,
    /// Each of [`IrStep::conditions`], in the same order.
    pub conditions: Vec<SourceSpan>,
}

/// A set of the universe's tools, one bit per tool (a step's static set is as large
/// as the universe, so it is never a list of indices).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ToolBits {
    words: Vec<u64>,
    len: usize,
}

impl ToolBits {
    /// No tool of a universe of `len` tools.
    pub fn empty(len: usize) -> Self {
        ToolBits {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Every tool of a universe of `len` tools.
    pub fn full(len: usize) -> Self {
        let mut set = ToolBits {
            words: vec![u64::MAX; len.div_ceil(64)],
            len,
        };
        if !len.is_multiple_of(64) {
            if let Some(last) = set.words.last_mut() {
                *last = (1u64 << (len % 64)) - 1;
            }
        }
        set
    }

    /// The size of its universe.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The same tools in a universe of `len` tools (tools past it dropped).
    pub fn resize(&mut self, len: usize) {
        self.words.resize(len.div_ceil(64), 0);
        for i in len..self.len.min(self.words.len() * 64) {
            self.words[i / 64] &= !(1 << (i % 64));
        }
        self.len = len;
    }

    /// Adds tool `i` (ignored past the universe).
    pub fn insert(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] |= 1 << (i % 64);
        }
    }

    /// Removes tool `i`.
    pub fn remove(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Is tool `i` in the set?
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Is it empty?
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The tools in it, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        orch_runtime::BitIter::new(&self.words)
    }

    /// The words, bit `i % 64` of word `i / 64` for tool `i`.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

/// A resolved condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IrCondition {
    /// `tool_used`.
    ToolUsed(usize),
    /// `sequence_match`.
    SequenceMatch,
    /// `message_contains`: index into [`Ir::contains`].
    Contains(usize),
    /// `message_regex`: index into [`Ir::regexes`].
    Regex(usize),
    /// `not_recently_used`.
    NotRecentlyUsed {
        /// The tool.
        tool: usize,
        /// The window.
        window: usize,
    },
    /// `budget`: an index into [`IrMemory::conditions`].
    Budget(usize),
}

impl Ir {
    /// Does the orchestration or any step gate a tool behind a human's approval?
    pub fn has_gates(&self) -> bool {
        !self.approve.is_empty() || self.steps.iter().any(|s| !s.approve.is_empty())
    }

    /// `u64` words per tool set.
    pub fn words(&self) -> usize {
        self.tools.len().div_ceil(64).max(1)
    }

    /// `u64` words of message flags.
    pub fn flag_words(&self) -> usize {
        (self.contains.len() + self.regexes.len()).div_ceil(64)
    }

    /// The flat run-time tables (the generated statics hold exactly these values).
    pub fn to_tables(&self) -> OwnedTables {
        let words = self.words();
        let mut t = OwnedTables {
            name: self.name.clone(),
            words,
            history: self.history,
            default_step: self.default_step.map(|d| d as u16),
            fingerprint: 0,
            tools: self.tools.iter().map(|t| t.name.clone()).collect(),
            step_names: self.steps.iter().map(|s| s.name.clone()).collect(),
            steps: Vec::with_capacity(self.steps.len()),
            conditions: Vec::new(),
            bits: Vec::new(),
            patterns: Vec::new(),
            contains: self.contains.clone(),
            regexes: self.regexes.clone(),
            approve: Gate::NONE,
            lost_retry: Gate::NONE,
            lost_ran: Gate::NONE,
            lost_hold: Gate::NONE,
            rules: rules::flatten(&self.arg_rules, &self.memory),
            plan: OwnedPlan::default(),
            moves: OwnedMoves::default(),
        };
        // Every run of words (a static set, a whole sequence) is stored once: steps
        // with the same tools share it, so the pool grows with the distinct sets, not
        // with steps × tools.
        let mut runs: HashMap<Vec<u64>, u32> = HashMap::new();
        let mut intern = |bits: &mut Vec<u64>, run: Vec<u64>| -> u32 {
            if run.is_empty() {
                return bits.len() as u32;
            }
            *runs.entry(run).or_insert_with_key(|run| {
                let at = bits.len() as u32;
                bits.extend_from_slice(run);
                at
            })
        };
        let set_words = |set: &ToolBits| -> Vec<u64> {
            let mut run = set.words().to_vec();
            run.resize(words, 0);
            run
        };
        let sequence_words = |groups: &[Vec<usize>]| -> Vec<u64> {
            let mut run = vec![0u64; groups.len() * words];
            for (pos, group) in groups.iter().enumerate() {
                for &i in group {
                    run[pos * words + i / 64] |= 1 << (i % 64);
                }
            }
            run
        };
        let n_contains = self.contains.len();
        for s in &self.steps {
            let cond_start = t.conditions.len() as u32;
            t.conditions.extend(s.conditions.iter().map(|c| match *c {
                IrCondition::ToolUsed(i) => Condition::ToolUsed(i as u16),
                IrCondition::SequenceMatch => Condition::SequenceMatch,
                IrCondition::Contains(i) => Condition::Message(i as u16),
                IrCondition::Regex(i) => Condition::Message((n_contains + i) as u16),
                IrCondition::NotRecentlyUsed { tool, window } => Condition::NotRecentlyUsed {
                    tool: tool as u16,
                    window: window as u16,
                },
                IrCondition::Budget(k) => Condition::Budget(k as u16),
            }));
            let static_set = intern(&mut t.bits, set_words(&s.static_set));
            let seq_start = intern(&mut t.bits, sequence_words(&s.sequence));
            let allow_start = t.patterns.len() as u32;
            t.patterns.extend(s.allow_patterns.iter().cloned());
            let deny_start = t.patterns.len() as u32;
            t.patterns.extend(s.deny_patterns.iter().cloned());
            let approve = gate(&mut t, &s.approve, &mut intern);
            t.steps.push(StepTable {
                conditions: Span::new(cond_start, s.conditions.len() as u32),
                static_set,
                sequence: Span::new(seq_start, s.sequence.len() as u32),
                allow_all: s.allow_all,
                allow_patterns: Span::new(allow_start, s.allow_patterns.len() as u32),
                deny_patterns: Span::new(deny_start, s.deny_patterns.len() as u32),
                reset: s.reset
                    & (reset::USER_MESSAGE | reset::MESSAGE_CONTAINS | reset::MESSAGE_REGEX),
                approve,
            });
        }
        t.approve = gate(&mut t, &self.approve, &mut intern);
        t.fingerprint = fingerprint(&t);
        // What a lost result means is the host's concern, not the session's: added after
        // the fingerprint, so that changing it keeps the runs' snapshots and approvals.
        t.lost_retry = gate(&mut t, &self.lost.retry, &mut intern);
        t.lost_ran = gate(&mut t, &self.lost.ran, &mut intern);
        t.lost_hold = gate(&mut t, &self.lost.hold, &mut intern);
        // Derived from the tables above (so not part of the fingerprint).
        t.plan = OwnedPlan::derive(&t.view());
        t.moves = OwnedMoves::derive(&t.view());
        t
    }
}

/// A gate's tool set interned in the bit pool and its patterns appended to the pattern
/// pool; [`Gate::NONE`] when it gates nothing (so a template without approvals has the
/// tables, and the fingerprint, it had before gates existed).
fn gate(
    t: &mut OwnedTables,
    g: &IrGate,
    intern: &mut impl FnMut(&mut Vec<u64>, Vec<u64>) -> u32,
) -> Gate {
    if g.is_empty() {
        return Gate::NONE;
    }
    let mut run = g.tools.words().to_vec();
    run.resize(t.words, 0);
    let set = intern(&mut t.bits, run);
    let start = t.patterns.len() as u32;
    t.patterns.extend(g.patterns.iter().cloned());
    Gate::new(set, (start, g.patterns.len() as u32))
}

/// FNV-1a over a canonical encoding of the tables: equal tables, equal fingerprint, on
/// every platform and build.
pub fn fingerprint(t: &OwnedTables) -> u64 {
    struct Fnv(u64);
    impl Fnv {
        fn bytes(&mut self, b: &[u8]) {
            for x in b {
                self.0 ^= u64::from(*x);
                self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
            }
        }
        fn num(&mut self, n: u64) {
            self.bytes(&n.to_le_bytes());
        }
        fn str(&mut self, s: &str) {
            self.num(s.len() as u64);
            self.bytes(s.as_bytes());
        }
        fn strs(&mut self, v: &[String]) {
            self.num(v.len() as u64);
            for s in v {
                self.str(s);
            }
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.str("orch-tables-v1");
    h.str(&t.name);
    h.num(t.words as u64);
    h.num(t.history as u64);
    h.num(t.default_step.map_or(u64::MAX, u64::from));
    h.strs(&t.tools);
    h.strs(&t.step_names);
    h.num(t.steps.len() as u64);
    for s in &t.steps {
        for n in [
            s.conditions.start,
            s.conditions.len,
            s.static_set,
            s.sequence.start,
            s.sequence.len,
            s.allow_all as u32,
            s.allow_patterns.start,
            s.allow_patterns.len,
            s.deny_patterns.start,
            s.deny_patterns.len,
            u32::from(s.reset),
        ] {
            h.num(u64::from(n));
        }
    }
    h.num(t.conditions.len() as u64);
    for c in &t.conditions {
        let (tag, a, b) = match *c {
            Condition::ToolUsed(x) => (0u64, u64::from(x), 0),
            Condition::SequenceMatch => (1, 0, 0),
            Condition::Message(f) => (2, u64::from(f), 0),
            Condition::NotRecentlyUsed { tool, window } => (3, u64::from(tool), u64::from(window)),
            Condition::Budget(k) => (4, u64::from(k), 0),
        };
        h.num(tag);
        h.num(a);
        h.num(b);
    }
    h.num(t.bits.len() as u64);
    for b in &t.bits {
        h.num(*b);
    }
    h.strs(&t.patterns);
    h.strs(&t.contains);
    h.strs(&t.regexes);
    // Approval gates, only when there are some: a template without them keeps the
    // fingerprint it had before gates existed (its snapshots still restore).
    let gates = t.steps.iter().map(|s| s.approve).chain([t.approve]);
    if gates.clone().any(|g| !g.is_none()) {
        h.str("approve");
        for g in gates {
            h.num(u64::from(g.set));
            h.num(u64::from(g.patterns.start));
            h.num(u64::from(g.patterns.len));
        }
    }
    // Rules on arguments, only when there are some (a template without keeps its
    // fingerprint): their compiled form, written out.
    if !t.rules.rules.is_empty() || !t.rules.budgets.is_empty() {
        h.str(if t.rules.rules.is_empty() {
            "budgets"
        } else {
            "rules"
        });
        let mut w = orch_runtime::compiled::LiteralWriter::new("", &[]);
        orch_runtime::compiled::Literal::write_literal(&t.rules, &mut w);
        // Fields that came later hash only when they hold something, so the runs of a
        // template that uses none of them keep their snapshots and approvals.
        let mut literal = w.finish();
        for empty in ["numbers: &[], ", "budget_conditions: &[], "] {
            literal = literal.replacen(empty, "", 1);
        }
        if t.rules.budgets.is_empty() {
            literal = literal.replacen("budgets: &[], budget_tools: &[], ", "", 1);
        }
        h.str(&literal);
    }
    h.0
}
