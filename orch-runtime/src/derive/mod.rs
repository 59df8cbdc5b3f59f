//! Deriving the engine's precomputed tables from the rest of a machine's [`Tables`]:
//! the incremental conditions ([`OwnedPlan::derive`], `plan.rs`) and the transition
//! table of a small machine ([`OwnedMoves::derive`], `moves.rs`). This sits above the
//! engine: it builds the data the engine reads (and, for the transition table, runs the
//! engine itself to explore every state), and the engine's data modules know nothing of
//! it.
//!
//! [`Tables`]: crate::tables::Tables
//! [`OwnedPlan::derive`]: crate::plan::OwnedPlan::derive
//! [`OwnedMoves::derive`]: crate::moves::OwnedMoves::derive

mod moves;
mod plan;
