//! The traits generated code implements, and the lazily compiled regexes it owns.

use crate::bits::{Entries, ToolEnum, Words};
use crate::tables::Tables;
use core::fmt;
use regex::Regex;
use std::sync::OnceLock;

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
    fn regexes() -> &'static [Option<Regex>];
}

/// The `message_regex` patterns of a generated machine, compiled on first use.
///
/// The compiler validated every pattern with the same `regex` crate, so compilation
/// cannot fail in practice; should it ever (say, a different `regex` version with a
/// different size limit), that pattern's slot is `None` and its condition never holds,
/// and [`Regexes::failures`] names it — there is no panic.
pub struct Regexes {
    sources: &'static [&'static str],
    compiled: OnceLock<Box<[Option<Regex>]>>,
}

impl Regexes {
    /// Patterns to compile on first use.
    pub const fn new(sources: &'static [&'static str]) -> Self {
        Regexes {
            sources,
            compiled: OnceLock::new(),
        }
    }

    /// The compiled patterns (compiling them the first time).
    pub fn get(&self) -> &[Option<Regex>] {
        self.compiled
            .get_or_init(|| self.sources.iter().map(|s| Regex::new(s).ok()).collect())
    }

    /// The sources that did not compile (expected: none).
    pub fn failures(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.sources
            .iter()
            .zip(self.get().iter())
            .filter(|(_, re)| re.is_none())
            .map(|(s, _)| *s)
    }
}

impl fmt::Debug for Regexes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Regexes")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}
