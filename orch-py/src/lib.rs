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

use orch_agent::RefusalKind;
use pyo3::prelude::*;

mod answers;
mod errors;
mod machine;

use answers::*;
use errors::*;
use machine::*;

/// The refusal kinds, for `Refusal.kind` comparisons.
fn kinds() -> Vec<&'static str> {
    RefusalKind::ALL.iter().map(|k| k.as_str()).collect()
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
