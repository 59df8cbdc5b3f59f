//! Verification of a template's reachable behaviour (work in progress towards
//! `orch verify`): what the engine can do from a fresh session, decided exactly.
//!
//! - [`messages`]: which combinations of message conditions a single user message can
//!   satisfy, with a shortest witness message each.

pub mod messages;
