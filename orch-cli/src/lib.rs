//! The library behind the `orch` command-line tool: the language server (`orch lsp`),
//! usable in-process on any [`lsp_server::Connection`], and the trace grader behind
//! `orch check-trace`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod lsp;
pub mod trace;
