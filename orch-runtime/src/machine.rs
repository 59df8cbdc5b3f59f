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
    type Flags: Words;
    /// History storage: `[u16; H]` (SPEC §4).
    type History: Entries;
    /// The machine's tables.
    fn tables() -> &'static Tables<'static>;
    /// The machine's compiled `message_regex` patterns, in [`Tables::regexes`] order.
    fn regexes() -> &'static [Option<crate::MessageRegex>];
    /// The template's `options.maxSteps` (the cap on model steps per turn), if any.
    fn max_steps() -> Option<u64> {
        None
    }
    /// Prepares the regexes for allocation-free matching on this thread
    /// (see [`crate::Regexes::warm_up`]). The default does nothing.
    fn warm_up() {}
}
