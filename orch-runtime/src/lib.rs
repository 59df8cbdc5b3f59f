//! The runtime of **orch**: drives orchestration machines compiled from AgentDock-style
//! templates by `orch-build` (build.rs) or the `orchestration!` macro. Users depend on the
//! `orch` crate, which re-exports this one at its root.
//!
//! A compiled machine is a module with `enum Tool`, `enum Step`, static tables and
//! `type Session = orch_runtime::Session<Machine>`. A [`Session`] is a few dozen bytes,
//! `Copy`, holds no heap memory, and answers "which tools may the LLM use now?" with a
//! bit-set AND ([`Session::allowed`]). The semantics are those of the project's `docs/semantics.md`:
//! events ([`Session::on_user_message`], [`Session::check`], [`Session::record`],
//! [`Session::record_usage`], [`Session::reset`]), step activation, conditions, sequences
//! and allowed tools.
//!
//! ```
//! # orch_runtime::__doc_machine!();
//! // `demo` stands for a generated module, e.g. `orch::include_machine!("demo");`
//! use demo::{Outcome, Session, Step, Tool};
//!
//! let mut s = Session::new();
//! s.on_user_message("Research the impact of AI on jobs");
//! assert_eq!(s.step(), Some(Step::Research));
//! assert!(s.allowed().contains(Tool::Search));
//! let denied = s.check(Tool::Reflect).unwrap_err();
//! assert_eq!(denied.to_string(), "the sequence of step `Research` expects `search` at position 0");
//! assert_eq!(s.record(Tool::Search), Outcome::Advanced { index: 1 });
//! assert_eq!(s.record(Tool::Think), Outcome::Advanced { index: 2 });
//! assert_eq!(s.record(Tool::Reflect), Outcome::Completed);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod approval;
mod bits;
mod derive;
#[macro_use]
mod form;
pub mod args;
mod doc_machine;
pub mod dynamic;
pub mod hash;
mod machine;
mod moves;
mod plan;
pub mod printable;
mod refusal;
mod regexes;
#[cfg(feature = "serde")]
mod serde_impl;
mod session;
pub mod snapshot;
mod state;
mod tables;
mod text;

pub use approval::{Approval, Call, CallDigest, QuestionId, Verdict};
pub use bits::{BitIter, ToolEnum, ToolIter, ToolSet};
pub use dynamic::{DynMachine, DynSession};
pub use machine::{Machine, StepEnum};
#[allow(deprecated)]
pub use refusal::{Denied, Refusal};
#[allow(deprecated)]
pub use session::{HistoryEntry, Outcome, OutcomeKind, Session, SessionDenied, SessionRefusal};
pub use snapshot::{AgentDockView, BudgetSnapshot, RestoreError, RestoreReport, Snapshot};
pub use state::Usage;
pub use tables::LostRule;

pub mod compiled {
    //! The compiled form of a template: the contract between the compiler (`orch-codegen`,
    //! which writes it, as literals in generated code or as [`OwnedTables`] at run time)
    //! and this engine (which reads it through [`Tables`]).
    //!
    //! - [`Tables`] (borrowed, what the engine reads) and [`OwnedTables`] (owned, built at
    //!   run time; [`OwnedTables::view`] borrows it): the machine's name, tools and steps,
    //!   each step's [`StepTable`] (its conditions, static set, sequence and patterns as
    //!   [`Span`]s into the pools), the [`Condition`] pool, the bit pool of tool sets, the
    //!   pattern, needle and regex pools, and the fingerprint;
    //! - [`Plan`] / [`OwnedPlan`]: the incremental form of the conditions, derived from the
    //!   tables ([`OwnedPlan::derive`]); [`NONE`] and [`SOLE`] are its sentinels;
    //! - [`Moves`] / [`OwnedMoves`]: a small machine's transition table, derived from the
    //!   tables and the plan ([`OwnedMoves::derive`]; empty past [`MAX_NODES`],
    //!   [`MAX_WORDS`] or [`MAX_FLAGS`]);
    //! - the message matchers ([`MessageRegex`], [`Matchers`], [`MessageMatchers`],
    //!   [`ContainsMatcher`]) and the string tests both sides share ([`glob_match`],
    //!   [`fold_case`], [`contains_folded`], [`is_pattern`]).
    //!
    //! - [`Literal`] and [`LiteralWriter`]: the owned forms written as Rust literals of
    //!   the borrowed ones (what generated code holds).
    //!
    //! Each structure's fields are declared once (a `compiled_form!` block in the
    //! runtime's source): the borrowed and owned forms, `view` and the literal writer
    //! follow from that one list.
    //!
    //! It changes when the compiled form does; the fingerprint and the snapshot format are
    //! what stays stable across versions.
    pub use crate::args::{
        ArgRule, Budget, Origin, OwnedRules, Per, Pred, RuleKind, Rules, Source, Test, ANY_STEP,
        EVERY_CALL, NO_TOOL, UNBOUNDED,
    };
    pub use crate::bits::{Entries, Words};
    pub use crate::form::{Literal, LiteralWriter};
    pub use crate::moves::{Moves, OwnedMoves, MAX_FLAGS, MAX_NODES, MAX_WORDS};
    pub use crate::plan::{OwnedPlan, Plan, NONE, SOLE};
    pub use crate::regexes::{
        argument_regex, Matchers, MessageMatchers, MessageRegex, REGEX_SIZE_LIMIT,
    };
    pub use crate::tables::{reset, Condition, Gate, OwnedTables, Span, StepTable, Tables};
    pub use crate::text::{
        contains_folded, fold_case, glob_match, is_pattern, ContainsMatcher, NeedleError,
    };
}

/// Includes a machine generated by `orch_build::Builder` in build.rs.
///
/// `include_machine!("cognitive-reasoner")` includes
/// `$OUT_DIR/orch/cognitive-reasoner.rs`, which defines `mod cognitive_reasoner` (the
/// snake_case of the template's `agentId`). The key is the template's `agentId` (else its
/// `name`), the module name, or the template's file stem (its directory's name for a
/// file called `template.json`).
///
/// ```ignore
/// orch::include_machine!("cognitive-reasoner");
/// use cognitive_reasoner::{Session, Step, Tool};
/// ```
#[macro_export]
macro_rules! include_machine {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/orch/", $name, ".rs"));
    };
}
