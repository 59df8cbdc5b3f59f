//! The traits generated code implements, and the lazily compiled regexes it owns.

use crate::bits::{Entries, ToolEnum, Words};
use crate::tables::Tables;
use core::fmt;

/// The steps of a machine: a generated `enum Step`.
pub trait StepEnum:
    Copy + Eq + Ord + core::hash::Hash + fmt::Debug + Send + Sync + 'static
{
    /// Every step, in template order (`ALL[s.index()] == s`).
    const ALL: &'static [Self];
    /// The step's position in [`StepEnum::ALL`] (and in the template).
    fn index(self) -> usize;
    /// The step's name as written in the template.
    fn name(self) -> &'static str;
    /// The step with this exact name, if any.
    fn from_name(name: &str) -> Option<Self>;
    /// The step's `description`, if the template gives one.
    fn description(self) -> Option<&'static str> {
        None
    }
}

/// A compiled machine: its tool and step enums, its storage sizes and its tables.
///
/// Implemented by the `Machine` type that `orch-codegen` generates for each template;
/// [`crate::Session`] is generic over it.
pub trait Machine: 'static {
    /// The generated `enum Tool`.
    type Tool: ToolEnum;
    /// The generated `enum Step`.
    type Step: StepEnum;
    /// Message-flag storage: `[u64; ceil(message conditions / 64)]`.
    #[doc(hidden)]
    type Flags: Words;
    /// History storage: `[u16; H]` (semantics §4).
    #[doc(hidden)]
    type History: Entries;
    /// Derived condition state: `[u64; plan.derived_words()]` (see the runtime's `plan`).
    #[doc(hidden)]
    type Derived: Words;
    /// `not_recently_used` counters: `[u16; plan.counters.len()]`.
    #[doc(hidden)]
    type Counters: Entries;
    /// Values remembered from results for rules on arguments (semantics §16):
    /// `[u64; MEMORY_WORDS]` when a rule reads results, else `[u64; 0]`.
    #[doc(hidden)]
    type Memory: Words;
    /// The machine's tables.
    #[doc(hidden)]
    fn tables() -> &'static Tables<'static>;
    /// The machine's name (the template's `agentId`, else its `name`).
    fn name() -> &'static str {
        Self::tables().name
    }
    /// The fingerprint of the compiled template: equal for the same template however
    /// it was compiled (build.rs, the macro, or loaded at run time).
    fn fingerprint() -> u64 {
        Self::tables().fingerprint
    }
    /// The machine's compiled message conditions.
    #[doc(hidden)]
    fn matchers() -> &'static crate::regexes::Matchers;
    /// The template's `options.maxSteps`: the agent loop's cap on rounds (model calls) per turn, if any.
    fn max_rounds() -> Option<u64> {
        None
    }
    /// Prepares the regexes for allocation-free matching on this thread
    /// (see `MessageMatchers::warm_up`). The default does nothing.
    #[doc(hidden)]
    fn warm_up() {}
}
