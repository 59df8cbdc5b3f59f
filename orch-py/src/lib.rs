//! `orch._orch`, the native half of the `orch` Python package: templates compiled with
//! every diagnostic, and sessions driven by tool names, over the same engine, wording and
//! snapshot format as the Rust crates. The Python half (`python/orch/`) re-exports it
//! and adds the framework adapters.
//!
//! Calls into a session allocate nothing on the Rust side beyond what Python itself
//! needs: tool names are passed as borrowed UTF-8, results are interned Python strings
//! made once per machine, and the allowed set is computed into a buffer the session
//! keeps.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use orch_agent::hosted::HostedSession;
use orch_agent::run_host;
use orch_agent::RefusalKind;
use orch_codegen::diagnostic::{placed, summary, Placed};
use orch_codegen::verify::explore::Options as ExploreOptions;
use orch_codegen::verify::report::{self, Kind};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::OutcomeKind;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::sync::Arc;

mod machine;
mod session;

use machine::*;
use session::*;

pyo3::create_exception!(
    orch,
    TemplateError,
    PyValueError,
    "A template with errors: `diagnostics` lists every one (and the warnings), each with its code, line and column."
);
pyo3::create_exception!(
    orch,
    SnapshotError,
    PyValueError,
    "Snapshot bytes that cannot be restored (corrupt, cut off, or from another template whose steps are gone)."
);

/// One finding of the compiler.
#[pyclass(frozen, get_all, skip_from_py_object, module = "orch._orch")]
#[derive(Clone)]
struct Diagnostic {
    /// The stable code, e.g. `E003`.
    code: String,
    /// The code's name, e.g. `unknown_tool`.
    name: String,
    /// `error` or `warning`.
    severity: &'static str,
    /// What was found.
    message: String,
    /// 1-based line of the offending value (`None` when it is not at one place).
    line: Option<usize>,
    /// 1-based column (in characters).
    column: Option<usize>,
    /// Where the offending value ends (line, column), exclusive.
    end_line: Option<usize>,
    /// See `end_line`.
    end_column: Option<usize>,
    /// How to fix it, when known.
    help: Option<String>,
    /// The diagnostic rendered as `orch check` prints it (rustc style, no colour).
    rendered: String,
}

#[pymethods]
impl Diagnostic {
    fn __repr__(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => {
                format!("<Diagnostic {} {}:{}: {}>", self.code, l, c, self.message)
            }
            _ => format!("<Diagnostic {}: {}>", self.code, self.message),
        }
    }

    fn __str__(&self) -> String {
        self.rendered.clone()
    }
}

fn diagnostics(placed: Vec<Placed>) -> Vec<Diagnostic> {
    placed
        .into_iter()
        .map(|d| Diagnostic {
            code: d.code.to_owned(),
            name: d.name.to_owned(),
            severity: d.severity,
            message: d.message,
            line: d.start.map(|p| p.0),
            column: d.start.map(|p| p.1),
            end_line: d.end.map(|p| p.0),
            end_column: d.end.map(|p| p.1),
            help: d.help,
            rendered: d.rendered,
        })
        .collect()
}

/// The refusal kinds, for `Refusal.kind` comparisons.
fn kinds() -> Vec<&'static str> {
    RefusalKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// A question's identity from its 16 hex digits (`None`: not one `ask` returned).
fn question_id(text: &str) -> Option<orch_runtime::QuestionId> {
    (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
        .map(orch_runtime::QuestionId::new)
}

/// What a model is told when it answered with text while `tool` is forced: the one
/// wording every surface sends.
#[pyfunction]
fn reminder(tool: &str) -> String {
    orch_agent::Policy::forced_reminder(tool)
}

/// What a tool result (JSON text, an MCP `CallToolResult`) says about the call: `ran`
/// when it completed successfully, else why not — `error`, `input_required`, `task`,
/// `other` or `malformed` (orch's one rule: only a call that ran is recorded).
#[pyfunction]
fn result_kind(result: &str) -> &'static str {
    orch_agent::protocol::result_kind(result)
}

/// The native module.
#[pymodule]
fn _orch(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(result_kind, m)?)?;
    m.add_function(wrap_pyfunction!(reminder, m)?)?;
    m.add_class::<Machine>()?;
    m.add_class::<Session>()?;
    m.add_class::<Refusal>()?;
    m.add_class::<Begin>()?;
    m.add_class::<Answered>()?;
    m.add_class::<Diagnostic>()?;
    m.add("TemplateError", m.py().get_type::<TemplateError>())?;
    m.add("SnapshotError", m.py().get_type::<SnapshotError>())?;
    m.add("REFUSAL_KINDS", kinds())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
