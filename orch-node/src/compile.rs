//! Templates compiled and checked with every diagnostic: `check`, and what `compile`
//! shares with it (its options, the diagnostics, the errors it throws).

use crate::kinds::Severity;
use napi::bindgen_prelude::{Env, Error, JsObjectValue, Result, Status};
use napi_derive::napi;
use orch_codegen::diagnostic::{placed, Placed};

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

pub(crate) fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(crate) fn diagnostic(d: Placed) -> Diagnostic {
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
    /// `'enforce'` (the default), or `'observe'`: the machine's sessions judge every
    /// call as in enforce mode and refuse and ask nothing (docs/rollout.md).
    pub mode: Option<crate::kinds::Mode>,
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

pub(crate) fn settings(options: Option<&CompileOptions>) -> (&str, bool) {
    let path = options
        .and_then(|o| o.path.as_deref())
        .unwrap_or("template.json");
    let prove = options.and_then(|o| o.prove_properties).unwrap_or(true);
    (path, prove)
}

/// Throws a JavaScript `Error` named `name` with `message` and, when given, a
/// `diagnostics` property; the returned error tells napi-rs that one is pending.
pub(crate) fn throw_named(
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
