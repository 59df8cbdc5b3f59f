//! The `orchestration!` macro of **orch**: orchestration workflows written in Rust, or
//! read from a template file, compiled to the same typed module build.rs generates
//! (`Tool`, `Step`, `Session`, ...).
//!
//! This crate is deliberately thin: it parses the macro input and maps diagnostics back
//! to tokens; checking and code generation are `orch-codegen`'s, shared with build.rs
//! and the CLI.
//!
//! Use it as `orch::orchestration!` (the `orch` crate's default `macros` feature): the
//! generated code then names the `orch` crate. Used directly, as below, it names
//! `::orch_runtime`.
//!
//! # Inline form
//!
//! ```
//! use orch_macros::orchestration;
//!
//! orchestration! {
//!     pub machine CognitiveReasoner {
//!         tools: [search, think, reflect, compare, critique, debate],
//!         default step DefaultMode;
//!         /// Research-based cognitive flow
//!         step ResearchMode {
//!             when message_regex("(?i)research");
//!             sequence: [search, think, reflect];
//!             allow: [search, think, reflect];
//!         }
//!         step EvaluationMode {
//!             when message_regex("(?i)critique|evaluate|assess");
//!             sequence: [critique, (debate | compare), reflect];
//!             allow: [critique, debate, compare, reflect, search];
//!             reset_sequence_on: [message_regex];
//!         }
//!     }
//! }
//!
//! let mut s = cognitive_reasoner::Session::new();
//! s.on_user_message("Critique this plan");
//! assert_eq!(s.step(), Some(cognitive_reasoner::Step::EvaluationMode));
//! ```
//!
//! The grammar is documented in the repository's `docs/macro-and-build.md`. Every
//! error of the compiler is a compile error on the exact token (the unknown tool in the
//! sequence, the duplicate step name, ...), with `help:` where a fix is known. Stable
//! Rust has no macro warnings, so warnings are errors unless allowed with
//! `#![allow(unreachable_step, ...)]` at the top of the invocation.
//!
//! # File form
//!
//! ```ignore
//! orch_macros::orchestration!(file = "agents/cognitive-reasoner/template.json");
//! orch_macros::orchestration!(file = "agents/dr-house.json", allow = [shadowed_step, sequence_never_completes]);
//! ```
//!
//! The path is relative to `CARGO_MANIFEST_DIR`. Errors name `file:line:column` of the
//! offending JSON value. Editing the file rebuilds the crate: the expansion contains
//! `include_bytes!` of it, which cargo tracks.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// Compiles an orchestration workflow (inline DSL or `file = "..."`) into a module.
/// See the crate documentation.
#[proc_macro]
pub fn orchestration(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    orch_codegen::__private::orchestration(input.into()).into()
}
