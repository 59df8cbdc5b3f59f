//! The **orch** compiler: turns AgentDock-style orchestration templates into typed Rust
//! state machines driven by `orch-runtime`.
//!
//! One pipeline, shared by every front end (build.rs, the `orchestration!` macro, the
//! `orch` CLI):
//!
//! ```text
//! template.json ─ parse::json ─┐
//!                              ├─> model::Template ─ check::check ─> ir::Ir ─┬─ emit::module  (Rust)
//! orchestration! { .. } ─ parse::dsl ─┘        (diagnostics: E001–E023, W001–W008)   └─ Ir::to_tables (run time)
//! ```
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

mod builder;
mod check;
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
pub mod verify;

/// The pipeline's stages for the `orchestration!` macro crate and this crate's own
/// tests and benchmarks. Not a public API: use [`compile_json`], [`Builder`] and the
/// macro.
#[doc(hidden)]
pub mod __private {
    pub use crate::check::{check, placeholder, Checked};

    pub use crate::expand::orchestration;
    pub use crate::parse::json::parse;
    /// The template model every front end fills in (now the public [`crate::model`]).
    pub mod model {
        pub use crate::model::*;
    }
}

pub use builder::{BuildError, BuildErrorKind, Builder, Report};
pub use check::CheckOptions;
pub use diagnostic::{Code, Diagnostic, Severity, Subject};
pub use ir::Ir;
pub use model::Span;

use orch_runtime::dynamic::DynMachine;
use std::path::Path;

/// The result of compiling one template.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The IR, when there was no error.
    pub ir: Option<Ir>,
    /// Every diagnostic, in source order.
    pub diagnostics: Vec<Diagnostic>,
    /// The machine the checks built (each regex compiled once), handed out by
    /// [`Compiled::to_machine`].
    machine: Option<DynMachine>,
}

impl Compiled {
    /// Was there an error?
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The machine the checks built (its tables are the ones the generated code holds),
    /// when there was no error.
    pub fn machine(&self) -> Option<&DynMachine> {
        self.machine.as_ref()
    }

    /// A machine to run at run time (the same tables the generated code holds).
    pub fn to_machine(&self) -> Option<DynMachine> {
        let ir = self.ir.as_ref()?;
        match &self.machine {
            Some(machine) => Some(machine.clone()),
            // Every regex was compiled by the checks already, so this cannot fail.
            None => DynMachine::new(ir.to_tables()).ok(),
        }
    }
}

/// Parses and checks a JSON template. `fallback_name` names the machine when the
/// template has neither `agentId` nor `name` (see [`fallback_name`]).
pub fn compile_json(source: &str, fallback_name: Option<&str>) -> Compiled {
    compile_json_keeping_model(source, fallback_name).1
}

/// [`compile_json`], also returning the parsed [`model::Template`] (for tools that map
/// positions back to the template, such as the language server), parsed once.
pub fn compile_json_keeping_model(
    source: &str,
    fallback_name: Option<&str>,
) -> (Option<model::Template>, Compiled) {
    compile_json_with(source, fallback_name, CheckOptions::default())
}

/// [`compile_json_keeping_model`] with check options (`orch verify` and `orch simulate`
/// leave the properties to themselves: see [`CheckOptions::prove_properties`]).
pub fn compile_json_with(
    source: &str,
    fallback_name: Option<&str>,
    options: CheckOptions,
) -> (Option<model::Template>, Compiled) {
    let (template, mut diagnostics) = parse::json::parse(source, fallback_name);
    let parse_failed = diagnostics.iter().any(Diagnostic::is_error);
    let (ir, machine) = match &template {
        Some(t) => {
            let checked = check::check_with(t, options);
            diagnostics.extend(checked.diagnostics);
            diagnostics.sort_by_key(|d| d.span.map_or((0, 0), Span::order));
            if parse_failed {
                (None, None)
            } else {
                (checked.ir, checked.machine)
            }
        }
        None => (None, None),
    };
    (
        template,
        Compiled {
            ir,
            diagnostics,
            machine,
        },
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
