//! The library behind the `orch` command-line tool: the language server (`orch lsp`),
//! usable in-process on any [`lsp_server::Connection`], the trace grader behind
//! `orch check-trace`, the what-if replay behind `orch replay --template` and the
//! template learner behind `orch learn`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod learn;
pub mod lsp;
pub mod trace;
pub mod whatif;
