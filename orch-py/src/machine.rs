//! A compiled template (`Machine`): `compile`, `load`, its tools, steps, warnings and
//! verification.

use super::*;

/// A compiled template: its tools and steps, its warnings, and sessions over it.
#[pyclass(frozen, module = "orch._orch")]
pub(crate) struct Machine {
    pub(crate) machine: Arc<DynMachine>,
    /// Does any step (or the orchestration) gate a tool behind a human's approval?
    pub(crate) gates: bool,
    pub(crate) properties: Vec<orch_codegen::ir::IrProperty>,
    pub(crate) warnings: Vec<Diagnostic>,
    /// The tools' names as Python strings, made once (what `allowed()` hands out).
    pub(crate) names: Vec<Py<PyString>>,
    /// The tools' indices by name.
    pub(crate) index: std::collections::HashMap<Box<str>, usize>,
}

impl Machine {
    /// The declared tool `tool` names: found by identity among the machine's own name
    /// objects (what `allowed()` hands out, so a host passing them back is not hashed),
    /// else by its text.
    pub(crate) fn tool_index(&self, tool: &Bound<'_, PyString>) -> Option<usize> {
        let wanted = tool.as_ptr();
        if self.names.len() <= 64 {
            if let Some(i) = self.names.iter().position(|n| n.as_ptr() == wanted) {
                return Some(i);
            }
        }
        self.index.get(tool.to_str().ok()?).copied()
    }
}

/// Compiles `source` (named `path` in diagnostics): the machine, or `TemplateError`.
/// `prove_properties`: a violated property is an error (E023), as for `orch check`;
/// without, properties are left to [`Machine::verify`], as for `orch verify`.
pub(crate) fn build(
    py: Python<'_>,
    source: &str,
    path: &str,
    prove_properties: bool,
) -> PyResult<Machine> {
    let options = orch_codegen::CheckOptions {
        prove_properties,
        ..Default::default()
    };
    let compiled = orch_codegen::compile_json_with(source, None, options);
    let placed = placed(&compiled.diagnostics, source, path);
    let (Some(ir), Some(machine)) = (compiled.ir.as_ref(), compiled.to_machine()) else {
        let err = TemplateError::new_err(summary(&placed, path));
        err.value(py)
            .setattr("diagnostics", PyList::new(py, diagnostics(placed))?)?;
        return Err(err);
    };
    let names = machine
        .tools()
        .iter()
        .map(|n| PyString::intern(py, n).unbind())
        .collect();
    let index = machine
        .tools()
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str().into(), i))
        .collect();
    Ok(Machine {
        gates: ir.has_gates(),
        properties: ir.properties.clone(),
        machine: Arc::new(machine),
        warnings: diagnostics(placed),
        names,
        index,
    })
}

/// Compiles a template from its JSON text. Raises `TemplateError` (every diagnostic in
/// `.diagnostics`) when it has errors; warnings are on the machine. With
/// `prove_properties=False` a violated safety property is not an error: `verify()`
/// reports it with its witness.
#[pyfunction]
#[pyo3(signature = (template, /, *, prove_properties = true))]
pub(crate) fn compile(py: Python<'_>, template: &str, prove_properties: bool) -> PyResult<Machine> {
    build(py, template, "template.json", prove_properties)
}

/// Reads and compiles a template file (`str` or `os.PathLike`), as [`compile`].
#[pyfunction]
#[pyo3(signature = (path, /, *, prove_properties = true))]
pub(crate) fn load(
    py: Python<'_>,
    path: std::path::PathBuf,
    prove_properties: bool,
) -> PyResult<Machine> {
    let source = std::fs::read_to_string(&path).map_err(|e| {
        pyo3::exceptions::PyOSError::new_err(format!("cannot read {}: {e}", path.display()))
    })?;
    build(py, &source, &path.display().to_string(), prove_properties)
}

#[pymethods]
impl Machine {
    /// The template's name (`agentId`, or `name`).
    #[getter]
    fn name(&self) -> &str {
        self.machine.name()
    }

    /// The fingerprint snapshots carry, as 16 hex digits.
    #[getter]
    fn fingerprint(&self) -> String {
        format!("{:016x}", self.machine.fingerprint())
    }

    /// The declared tools, in declaration order.
    #[getter]
    fn tools(&self, py: Python<'_>) -> Vec<Py<PyString>> {
        self.names.iter().map(|n| n.clone_ref(py)).collect()
    }

    /// Does the template gate any tool behind a human's approval (`approve`)?
    #[getter]
    fn has_gates(&self) -> bool {
        self.gates
    }

    /// What a lost result of a call of `tool` means (`lostResults`): `"retry"` (not
    /// run), `"ran"` (recorded) or `"hold"` (the run waits for an operator; the
    /// default), for a host that runs tools elsewhere and may never hear how a call
    /// ended.
    fn lost_rule(&self, tool: &str) -> &'static str {
        self.machine.lost_rule(tool).as_str()
    }

    /// The steps, in declaration order.
    #[getter]
    fn steps(&self) -> Vec<String> {
        self.machine.steps().to_vec()
    }

    /// The compiler's warnings.
    #[getter]
    fn warnings(&self) -> Vec<Diagnostic> {
        self.warnings.clone()
    }

    /// A fresh session. `available`: the tools the host has (default: every declared
    /// tool); names the template does not declare are foreign tools, judged by the
    /// step's patterns.
    #[pyo3(signature = (available = None))]
    fn session(slf: &Bound<'_, Self>, available: Option<Vec<String>>) -> Session {
        let hosted = HostedSession::new(Arc::clone(&slf.get().machine), available);
        Session {
            machine: slf.clone().unbind(),
            hosted,
            fast: Fast::default(),
        }
    }

    /// A session restored from `snapshot` (bytes from `Session.snapshot()`, or from the
    /// Rust crates: the format is one). Raises `SnapshotError` when the bytes cannot be
    /// restored; a snapshot of an older version of the template restores by names.
    #[pyo3(signature = (snapshot, available = None))]
    fn restore(
        slf: &Bound<'_, Self>,
        snapshot: &[u8],
        available: Option<Vec<String>>,
    ) -> PyResult<Session> {
        let hosted = HostedSession::restore(Arc::clone(&slf.get().machine), snapshot, available)
            .map_err(|e| SnapshotError::new_err(e.to_string()))?;
        Ok(Session {
            machine: slf.clone().unbind(),
            hosted,
            fast: Fast::default(),
        })
    }

    /// Explores every state a session can reach (`orch verify`): one dict per finding,
    /// in the order `orch verify --format json` prints them — `"property"` (`name`,
    /// `holds`, `witness`), `{"kind": "step", "step", "reachable", "witness"}`,
    /// `"sequence"` (`completes`), `"trap"`, `"blocked"`, `"no_tools"` and a `"summary"`
    /// (`states`, `complete`). Undecided answers (past `max_states`) are `None`.
    #[pyo3(signature = (max_states = 1_000_000, available = None, permissive = false))]
    fn verify<'py>(
        &self,
        py: Python<'py>,
        max_states: usize,
        available: Option<Vec<String>>,
        permissive: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let options = ExploreOptions {
            permissive,
            available,
            max_states,
            max_work: orch_codegen::verify::explore::DEFAULT_WORK,
        };
        let found = report::verify(&self.machine, &self.properties, &options)
            .map_err(PyValueError::new_err)?;
        let out = PyList::empty(py);
        for f in found {
            let d = PyDict::new(py);
            d.set_item("kind", f.kind.as_str())?;
            if let Some(step) = &f.step {
                d.set_item("step", step)?;
            }
            if let Some(name) = &f.name {
                d.set_item("name", name)?;
            }
            match f.kind {
                Kind::Step => d.set_item("reachable", f.answer)?,
                Kind::Sequence => d.set_item("completes", f.answer)?,
                Kind::Property => d.set_item("holds", f.answer)?,
                _ => {}
            }
            if let Some(w) = &f.witness {
                d.set_item("witness", witness(py, w)?)?;
            }
            if let Some(r) = &f.reason {
                d.set_item("reason", r)?;
            }
            if let Some(m) = &f.message {
                d.set_item("message", m)?;
            }
            if let (Some(states), Some(complete)) = (f.states, f.complete) {
                d.set_item("states", states)?;
                d.set_item("complete", complete)?;
            }
            out.append(d)?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "<Machine {:?}: {} tools, {} steps>",
            self.machine.name(),
            self.machine.tools().len(),
            self.machine.steps().len()
        )
    }
}

/// A witness as `orch simulate` event dicts.
pub(crate) fn witness<'py>(
    py: Python<'py>,
    events: &[report::Step],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for e in events {
        let d = PyDict::new(py);
        match e {
            report::Step::Available(names) => d.set_item("available", names)?,
            report::Step::Message(text) => d.set_item("message", text)?,
            report::Step::Tool(t) => d.set_item("tool", t)?,
            report::Step::Approve(t) => d.set_item("approve", t)?,
            report::Step::Reset => d.set_item("reset", true)?,
        }
        out.append(d)?;
    }
    Ok(out)
}
