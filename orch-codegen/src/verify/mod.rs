//! Verification of a template's reachable behaviour, as `orch verify` and the bindings'
//! `verify()` report it: what the engine can do from a fresh session, decided exactly.
//!
//! - [`explore`]: every state a session can reach (the runtime's engine, states told
//!   apart by its behaviour key), with shortest witnesses;
//! - [`messages`]: which combinations of message conditions a single user message can
//!   satisfy, with a shortest witness message each;
//! - [`foreign`]: whether a step admits some foreign tool name, and a shortest one;
//! - `budgets`: the budgets a session's calls charge in the model, and what it cannot
//!   count;
//! - [`properties`]: the template's safety properties (semantics §14), each held,
//!   violated (with a shortest witness) or undecided;
//! - [`report`]: all of it as one flat list of findings, for the language bindings.

mod arguments;
mod budgets;
pub mod explore;
mod feasible;
pub mod foreign;
pub mod messages;
pub mod properties;
pub mod report;
