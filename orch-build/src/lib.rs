//! Compile **orch** orchestration templates from build.rs, the way `prost-build` and
//! `tonic-build` compile `.proto` files.
//!
//! ```toml
//! [dependencies]
//! orch = "0.1"
//!
//! [build-dependencies]
//! orch-build = "0.1"
//! ```
//!
//! ```no_run
//! // build.rs, in `fn main()`
//! orch_build::Builder::new()
//!     .template("agents/cognitive-reasoner/template.json")
//!     .compile()
//!     .expect("orchestration templates");
//! ```
//!
//! ```ignore
//! // src/main.rs
//! orch::include_machine!("cognitive-reasoner");
//! use cognitive_reasoner::{Session, Step, Tool};
//! ```
//!
//! Each template becomes `$OUT_DIR/orch/<key>.rs`, a module named after the template's
//! `agentId` in snake_case. Errors fail the build with every diagnostic rendered at its
//! `file:line:column`; warnings are printed as `cargo:warning` lines (or are errors
//! under [`Builder::deny_warnings`]). Editing a template reruns the build script.
//!
//! The generated code names the runtime `::orch`; a crate that depends on
//! `orch-runtime` alone sets [`Builder::runtime_path`]`("::orch_runtime")`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use orch_codegen::{BuildError, BuildErrorKind, Builder, Report};
