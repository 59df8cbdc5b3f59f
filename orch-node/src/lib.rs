//! The native half of the `@orch/core` npm package: templates compiled with every
//! diagnostic, and sessions driven by tool names, over the same engine, wording and
//! snapshot format as the Rust crates. Built twice from this one source by napi-rs: a
//! Node-API addon per platform, and a `wasm32-wasip1-threads` module for runtimes where
//! the native addon cannot be installed. The TypeScript declarations (`index.d.ts`) are
//! generated from the items below; the JavaScript half (`js/`) adds the AI SDK adapter
//! and the AgentDock drop-in.
#![deny(missing_docs)]

use napi::bindgen_prelude::{
    Env, Error, JsObjectValue, Result, Status, Uint8Array, Uint8ArraySlice,
};
use napi_derive::napi;
use orch_agent::hosted::HostedSession;
use orch_agent::run_host;
use orch_codegen::diagnostic::{placed, summary, Placed};
use orch_codegen::verify::explore::Options as ExploreOptions;
use orch_codegen::verify::report::{self, Kind};
use orch_runtime::dynamic::DynMachine;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

// Reached only through the module's registration, which napi-derive leaves out of test
// builds.
#[cfg_attr(test, allow(dead_code))]
mod fast;
mod kinds;
mod machine;
mod session;

pub use kinds::*;
pub use machine::*;
pub use session::*;

/// One finding of the compiler.
#[napi(object)]
#[derive(Clone)]
pub struct Diagnostic {
    /// The stable code, e.g. `E003`.
    pub code: String,
    /// The code's name, e.g. `unknown_tool`.
    pub name: String,
    /// `error` or `warning`.
    pub severity: Severity,
    /// What was found.
    pub message: String,
    /// 1-based line of the offending value (absent when it is not at one place).
    pub line: Option<u32>,
    /// 1-based column, in characters.
    pub column: Option<u32>,
    /// Where the offending value ends (line), exclusive.
    pub end_line: Option<u32>,
    /// Where the offending value ends (column), exclusive.
    pub end_column: Option<u32>,
    /// How to fix it, when known.
    pub help: Option<String>,
    /// The diagnostic as `orch check` prints it (rustc style, no colour).
    pub rendered: String,
}

fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn diagnostic(d: Placed) -> Diagnostic {
    Diagnostic {
        code: d.code.to_owned(),
        name: d.name.to_owned(),
        severity: match d.severity {
            "error" => Severity::Error,
            _ => Severity::Warning,
        },
        message: d.message,
        line: d.start.map(|p| small(p.0)),
        column: d.start.map(|p| small(p.1)),
        end_line: d.end.map(|p| small(p.0)),
        end_column: d.end.map(|p| small(p.1)),
        help: d.help,
        rendered: d.rendered,
    }
}

/// How to compile a template.
#[napi(object)]
pub struct CompileOptions {
    /// The file name diagnostics are rendered with (default `template.json`).
    pub path: Option<String>,
    /// A violated safety property is an error (E023), as for `orch check` (default
    /// `true`). With `false` it is left to `Machine.verify()`, as for `orch verify`.
    pub prove_properties: Option<bool>,
}

/// Every diagnostic of a template, errors and warnings, without throwing: what `orch
/// check` reports.
#[napi]
pub fn check(template: String, options: Option<CompileOptions>) -> Vec<Diagnostic> {
    let (path, prove) = settings(options.as_ref());
    let opts = orch_codegen::CheckOptions {
        prove_properties: prove,
        ..Default::default()
    };
    let compiled = orch_codegen::compile_json_with(&template, None, opts);
    placed(&compiled.diagnostics, &template, path)
        .into_iter()
        .map(diagnostic)
        .collect()
}

fn settings(options: Option<&CompileOptions>) -> (&str, bool) {
    let path = options
        .and_then(|o| o.path.as_deref())
        .unwrap_or("template.json");
    let prove = options.and_then(|o| o.prove_properties).unwrap_or(true);
    (path, prove)
}

/// Throws a JavaScript `Error` named `name` with `message` and, when given, a
/// `diagnostics` property; the returned error tells napi-rs that one is pending.
fn throw_named(
    env: &Env,
    name: &str,
    message: String,
    diagnostics: Option<Vec<Diagnostic>>,
) -> Error {
    let thrown = (|| -> Result<()> {
        let mut error = env.create_error(Error::new(Status::GenericFailure, message.clone()))?;
        error.set_named_property("name", name)?;
        error.set_named_property("code", name)?;
        if let Some(found) = diagnostics {
            error.set_named_property("diagnostics", found)?;
        }
        env.throw(error)
    })();
    match thrown {
        Ok(()) => Error::new(Status::PendingException, message),
        Err(e) => e,
    }
}

/// What a tool result (JSON text, an MCP `CallToolResult`) says about the call: `'ran'`
/// when it completed successfully, else why not (orch's one rule: only a call that ran
/// is recorded).
#[napi]
pub fn result_kind(result: String) -> ResultKind {
    use orch_agent::protocol::{classify_text, NotRun, ToolResult};
    match classify_text(&result) {
        ToolResult::Ran => ResultKind::Ran,
        ToolResult::NotRun(NotRun::Error) => ResultKind::Error,
        ToolResult::NotRun(NotRun::InputRequired) => ResultKind::InputRequired,
        ToolResult::NotRun(NotRun::Task) => ResultKind::Task,
        ToolResult::NotRun(NotRun::Other(_)) => ResultKind::Other,
        ToolResult::NotRun(NotRun::Malformed(_)) => ResultKind::Malformed,
        // `NotRun` is non-exhaustive: a kind this package does not name is another one.
        ToolResult::NotRun(_) => ResultKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::RefusalKind;

    /// Each of the engine's refusal kinds becomes the string enum value of its own name.
    #[test]
    fn every_refusal_kind_has_its_name() {
        for kind in orch_agent::RefusalKind::ALL {
            let ours = format!("{:?}", RefusalKind::from(kind));
            let snake: String = ours
                .chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
                    sep.into_iter()
                        .chain(std::iter::once(c.to_ascii_lowercase()))
                })
                .collect();
            assert_eq!(snake, kind.as_str());
        }
    }
}
