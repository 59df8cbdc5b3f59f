//! What a session's calls answer: `Refusal`, `Begin`, `Answered`.

use pyo3::prelude::*;

/// Why a tool may not run now: `kind` (`not_allowed`, `out_of_sequence`,
/// `broken_rule`, `unknown_tool`, `unavailable`, `needs_approval`, `rejected`,
/// `stale_answer`, `busy`,
/// `outcome_unknown`, `already_ran`)
/// and `message`, the words
/// orch sends a model everywhere (what is expected next, what is allowed now).
#[pyclass(frozen, get_all, module = "orch._orch")]
pub(crate) struct Refusal {
    /// The tool refused.
    pub(crate) tool: String,
    /// Why, as a stable word.
    pub(crate) kind: &'static str,
    /// Why, in words for the model.
    pub(crate) message: String,
    /// The rule on arguments that refused the call (`broken_rule`), by name.
    pub(crate) rule: Option<String>,
}

#[pymethods]
impl Refusal {
    fn __repr__(&self) -> String {
        format!("<Refusal {} ({}): {}>", self.tool, self.kind, self.message)
    }

    fn __str__(&self) -> String {
        self.message.clone()
    }
}

/// What `Session.begin` came to: `action` (`run`, `refused`, `ask`, `again`), the
/// `refusal` the model is told when the call does not run, and for `ask` the
/// `question`'s identity (16 hex digits).
#[pyclass(frozen, get_all, module = "orch._orch")]
pub(crate) struct Begin {
    /// `run`, `refused`, `ask` or `again`.
    pub(crate) action: &'static str,
    /// Why it does not run (`None` for `run`).
    pub(crate) refusal: Option<Py<Refusal>>,
    /// The question asked (`ask` only).
    pub(crate) question: Option<String>,
}

#[pymethods]
impl Begin {
    fn __repr__(&self) -> String {
        format!("<Begin {}>", self.action)
    }
}

/// What `Session.answer_call` came to: `outcome` (`applied`, `repeated`, `late`,
/// `foreign`, `unknown`) and, when it did not apply, the `refusal` the model is told.
#[pyclass(frozen, get_all, module = "orch._orch")]
pub(crate) struct Answered {
    /// `applied`, `repeated`, `late`, `foreign` or `unknown`.
    pub(crate) outcome: &'static str,
    /// Why nothing runs on it (`None` when it applied).
    pub(crate) refusal: Option<Py<Refusal>>,
}

#[pymethods]
impl Answered {
    fn __repr__(&self) -> String {
        format!("<Answered {}>", self.outcome)
    }
}
