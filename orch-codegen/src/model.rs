//! The template model: what a front end (JSON file, `orchestration!` DSL) read, with the
//! location of every value, before any rule is applied. Front ends fill it in; `check`
//! judges it; nothing here knows about JSON or tokens.

/// A location in the front end's source. For a JSON file: a byte range. For the DSL:
/// whatever the front end maps back to its tokens (it only needs to be consistent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// Start (inclusive).
    pub start: usize,
    /// End (exclusive).
    pub end: usize,
}

impl Span {
    /// The span `start..end`.
    pub const fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
}

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// `value` at `span`.
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// A whole template (SPEC §1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Template {
    /// The machine's name: `agentId`, else `name` (else the front end's fallback).
    pub name: Option<Spanned<String>>,
    /// Where the template as a whole is (for diagnostics about it).
    pub span: Span,
    /// The declared tool universe (`tools`, else `nodes` without `llm.*`), if any.
    pub universe: Option<Vec<Spanned<String>>>,
    /// `orchestration.description`, one entry per line.
    pub description: Vec<String>,
    /// `orchestration.defaultStep`.
    pub default_step: Option<Spanned<String>>,
    /// `orchestration.historyLength` (extension, SPEC §4).
    pub history_length: Option<Spanned<u64>>,
    /// `options.maxSteps`: the agent loop's cap on model steps per turn.
    pub max_steps: Option<Spanned<u64>>,
    /// The steps, in priority order.
    pub steps: Vec<Step>,
    /// Warnings the author allowed (lint names such as `unreachable_step`).
    pub allow: Vec<Spanned<String>>,
}

/// One step of `orchestration.steps`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The whole step.
    pub span: Span,
    /// `name` (required; `None` when missing, which is an error).
    pub name: Option<Spanned<String>>,
    /// `description`.
    pub description: Option<String>,
    /// `conditions`, in order; `conditions_span` covers the list.
    pub conditions: Vec<Condition>,
    /// Where the `conditions` list is (the step's span when absent).
    pub conditions_span: Span,
    /// `availableTools.allowed` (absent: `None`).
    pub allowed: Option<Vec<Spanned<String>>>,
    /// `availableTools.denied`.
    pub denied: Option<Vec<Spanned<String>>>,
    /// `sequence` (absent: `None`).
    pub sequence: Option<Spanned<Vec<SequenceEntry>>>,
    /// `isDefault`.
    pub is_default: Option<Spanned<bool>>,
    /// `resetSequenceOn`.
    pub reset_sequence_on: Vec<Spanned<String>>,
}

/// One entry of a sequence: a tool, or a group of alternatives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SequenceEntry {
    /// A single tool.
    Tool(Spanned<String>),
    /// Any one of these tools.
    Group(Spanned<Vec<Spanned<String>>>),
}

impl SequenceEntry {
    /// The tools of the entry.
    pub fn tools(&self) -> &[Spanned<String>] {
        match self {
            SequenceEntry::Tool(t) => core::slice::from_ref(t),
            SequenceEntry::Group(g) => &g.value,
        }
    }

    /// Where the entry is.
    pub fn span(&self) -> Span {
        match self {
            SequenceEntry::Tool(t) => t.span,
            SequenceEntry::Group(g) => g.span,
        }
    }
}

/// One condition of a step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    /// The whole condition.
    pub span: Span,
    /// `type` (required).
    pub kind: Option<Spanned<String>>,
    /// `value`.
    pub value: Option<Spanned<String>>,
    /// `window` (for `not_recently_used`).
    pub window: Option<Spanned<u64>>,
}
