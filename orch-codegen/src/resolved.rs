//! The hand-off from the checks to lowering, in one place: a template with its names
//! resolved ([`Parts`]) — what `check` produces and `lower` makes the IR of, so neither
//! stage reaches into the other.

use crate::ir::{IrCondition, IrGate, IrLost, IrProperty, ToolBits};
use crate::model::{Span, Spanned, Step};

/// Everything the IR is made of: the template with its names resolved by the checks.
pub(crate) struct Parts<'t> {
    pub machine: MachineName,
    pub tools: Vec<&'t Spanned<String>>,
    pub tool_idents: Vec<String>,
    pub steps: Vec<StepInfo<'t>>,
    pub step_names: Vec<&'t Spanned<String>>,
    pub step_idents: Vec<String>,
    pub default_step: Option<usize>,
    pub history: usize,
    pub contains: Vec<String>,
    pub regexes: Vec<String>,
    pub max_rounds: Option<u64>,
    pub description: Vec<String>,
    pub approve: IrGate,
    pub lost: IrLost,
    pub properties: Vec<IrProperty>,
    pub arg_rules: Vec<crate::ir::IrArgRule>,
    pub memory: crate::ir::IrMemory,
}

/// The machine's name and its module name.
pub(crate) struct MachineName {
    pub(crate) name: String,
    pub(crate) module: String,
}

/// A step with its names resolved: what the lints judge and [`crate::lower`] turns into IR.
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
    /// Where each of `conditions` is written.
    pub(crate) condition_spans: Vec<Span>,
    /// The largest `window` its conditions give (the default step's included: H
    /// counts every window written).
    pub(crate) max_window: usize,
    /// `resetSequenceOn`, as `orch_runtime` reset flags.
    pub(crate) reset: u8,
    /// Its approval gate: its own `approve` and the orchestration's (semantics §13).
    pub(crate) approve: IrGate,
}
