//! The library behind the `orch` command-line tool: the language server (`orch lsp`),
//! usable in-process on any [`lsp_server::Connection`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod lsp;
