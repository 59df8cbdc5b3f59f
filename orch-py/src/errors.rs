//! What a template or a snapshot that cannot be used raises: `TemplateError` with every
//! `Diagnostic` of the compiler, and `SnapshotError`.

use orch_codegen::diagnostic::Placed;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
pub(crate) struct Diagnostic {
    /// The stable code, e.g. `E003`.
    pub(crate) code: String,
    /// The code's name, e.g. `unknown_tool`.
    pub(crate) name: String,
    /// `error` or `warning`.
    pub(crate) severity: &'static str,
    /// What was found.
    pub(crate) message: String,
    /// 1-based line of the offending value (`None` when it is not at one place).
    pub(crate) line: Option<usize>,
    /// 1-based column (in characters).
    pub(crate) column: Option<usize>,
    /// Where the offending value ends (line, column), exclusive.
    pub(crate) end_line: Option<usize>,
    /// See `end_line`.
    pub(crate) end_column: Option<usize>,
    /// How to fix it, when known.
    pub(crate) help: Option<String>,
    /// The diagnostic rendered as `orch check` prints it (rustc style, no colour).
    pub(crate) rendered: String,
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

pub(crate) fn diagnostics(placed: Vec<Placed>) -> Vec<Diagnostic> {
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
