//! The **orch** compiler: turns AgentDock-style orchestration templates into typed Rust
//! state machines driven by `orch-runtime`.
//!
//! One pipeline, shared by every front end (build.rs, the `orchestration!` macro, the
//! `orch` CLI):
//!
//! ```text
//! template.json ─ parse::json ─┐
//!                              ├─> model::Template ─ check ─> lower ─> ir::Ir ─ build ─> tables + DynMachine ─ analyse ─> Compiled
//! orchestration! { .. } ─ parse::dsl ─┘    (diagnostics: E001–E027, W001–W009, each at its span)     ├─ emit::module (Rust)
//!                                                                                                   └─ the machine (run time)
//! ```
//!
//! [`compile`] runs those stages, each once (see its module's docs for what each
//! stage does); [`emit`] writes a [`Compiled`] as Rust.
//!
//! In build.rs (users reach this through the `orch-build` crate, which re-exports it):
//!
//! ```no_run
//! orch_codegen::Builder::new()
//!     .template("agents/cognitive-reasoner/template.json")
//!     .compile()
//!     .expect("orchestration templates");
//! ```
//!
//! As a library:
//!
//! ```
//! let src = r#"{"agentId": "demo", "orchestration": {"steps": [
//!     {"name": "Chat", "isDefault": true},
//!     {"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}],
//!      "sequence": ["search", "think"]}]}}"#;
//! let compiled = orch_codegen::compile_json(src, None);
//! assert!(compiled.diagnostics.is_empty());
//! let ir = compiled.ir.unwrap();
//! assert_eq!(ir.module, "demo");
//! assert_eq!(ir.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["search", "think"]);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod analyse;
mod builder;
mod check;
mod compile;
pub mod diagnostic;
pub mod emit;
mod expand;
pub mod explain;
mod ident;
pub mod ir;
pub mod limits;
mod lower;
pub mod model;
mod parse;
mod resolved;
mod surface;
pub mod verify;

/// The `orchestration!` macro's expansion for the `orch-macros` crate, and the JSON
/// reader for this crate's own tests and benchmarks. Not a public API: use [`compile`],
/// [`Builder`] and the macro.
#[doc(hidden)]
pub mod __private {
    pub use crate::expand::orchestration;
    pub use crate::parse::json::parse;
}

pub use builder::{BuildError, BuildErrorKind, Builder, Report};
pub use compile::{
    compile, compile_and_verify, CheckOptions, Compiled, Source, Surface, Verification,
};
pub use diagnostic::{Code, Diagnostic, Severity, Subject};
pub use ir::Ir;
pub use model::Span;
pub use surface::surface_lints;

use std::path::Path;

/// Parses and checks a JSON template ([`compile`] of a [`Source::Json`]).
/// `fallback_name` names the machine when the template has neither `agentId` nor
/// `name` (see [`fallback_name`]).
pub fn compile_json(source: &str, fallback_name: Option<&str>) -> Compiled {
    compile_json_with(source, fallback_name, CheckOptions::default())
}

/// [`compile_json`] with check options (`orch simulate` leaves the properties to
/// itself: see [`CheckOptions::prove_properties`]).
pub fn compile_json_with(
    source: &str,
    fallback_name: Option<&str>,
    options: CheckOptions,
) -> Compiled {
    compile(
        Source::Json {
            text: source,
            fallback_name,
        },
        options,
    )
}

/// The name a template file gets when it has no `agentId`/`name`: its file stem, or its
/// directory's name for a file called `template.json`.
pub fn fallback_name(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    if stem == "template" {
        if let Some(dir) = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|d| d.to_str())
        {
            return Some(dir.to_owned());
        }
    }
    Some(stem.to_owned())
}

/// The JSON Schema (draft 2020-12) of `template.json`: what `orch schema` prints. A
/// template is valid against it exactly when the compiler finds no shape error (E001
/// invalid JSON aside: E002 wrong type, E003 missing field, E009 unknown condition
/// type). Fields the compiler does not read are allowed.
pub const TEMPLATE_SCHEMA: &str = include_str!("template.schema.json");
