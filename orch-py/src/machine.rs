//! A compiled template (`Machine`: `compile`, `load`, its tools, steps, warnings and
//! verification) and the sessions it makes (`Session`, driven by tool names). The two
//! classes refer to each
//! other (a machine makes sessions, a session keeps its machine), so they live together.

use crate::answers::{Answered, Begin, Refusal};
use crate::errors::{diagnostics, Diagnostic, SnapshotError, TemplateError};
use orch_agent::hosted::HostedSession;
use orch_agent::run_host;
use orch_codegen::diagnostic::{placed, summary};
use orch_codegen::verify::explore::Options as ExploreOptions;
use orch_codegen::verify::report::{self, Kind};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::OutcomeKind;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::sync::Arc;

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
    /// Enforce the template, or only judge and record (every session made from it).
    pub(crate) mode: orch_agent::Mode,
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
    mode: &str,
) -> PyResult<Machine> {
    let mode: orch_agent::Mode = mode
        .parse()
        .map_err(|e: orch_agent::UnknownMode| PyValueError::new_err(e.to_string()))?;
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
        mode,
    })
}

/// Compiles a template from its JSON text. Raises `TemplateError` (every diagnostic in
/// `.diagnostics`) when it has errors; warnings are on the machine. With
/// `prove_properties=False` a violated safety property is not an error: `verify()`
/// reports it with its witness. `mode="observe"`: the machine's sessions judge every
/// call as in `"enforce"` mode but refuse and ask nothing (docs/rollout.md).
#[pyfunction]
#[pyo3(signature = (template, /, *, prove_properties = true, mode = "enforce"))]
pub(crate) fn compile(
    py: Python<'_>,
    template: &str,
    prove_properties: bool,
    mode: &str,
) -> PyResult<Machine> {
    build(py, template, "template.json", prove_properties, mode)
}

/// Reads and compiles a template file (`str` or `os.PathLike`), as [`compile`].
#[pyfunction]
#[pyo3(signature = (path, /, *, prove_properties = true, mode = "enforce"))]
pub(crate) fn load(
    py: Python<'_>,
    path: std::path::PathBuf,
    prove_properties: bool,
    mode: &str,
) -> PyResult<Machine> {
    let source = std::fs::read_to_string(&path).map_err(|e| {
        pyo3::exceptions::PyOSError::new_err(format!("cannot read {}: {e}", path.display()))
    })?;
    build(
        py,
        &source,
        &path.display().to_string(),
        prove_properties,
        mode,
    )
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

    /// `"enforce"`, or `"observe"`: sessions judge and record every call and refuse
    /// and ask nothing.
    #[getter]
    fn mode(&self) -> &'static str {
        self.mode.as_str()
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
        let mut hosted = HostedSession::new(Arc::clone(&slf.get().machine), available);
        hosted.set_mode(slf.get().mode);
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
        let mut hosted =
            HostedSession::restore(Arc::clone(&slf.get().machine), snapshot, available)
                .map_err(|e| SnapshotError::new_err(e.to_string()))?;
        hosted.set_mode(slf.get().mode);
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
            report::Step::ToolAt(t, at) => {
                d.set_item("tool", t)?;
                d.set_item("at", at)?;
            }
            report::Step::Approve(t) => d.set_item("approve", t)?,
            report::Step::Reset => d.set_item("reset", true)?,
        }
        out.append(d)?;
    }
    Ok(out)
}

/// A question's identity from its 16 hex digits (`None`: not one `ask` returned).
pub(crate) fn question_id(text: &str) -> Option<orch_runtime::QuestionId> {
    (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
        .map(orch_runtime::QuestionId::new)
}

/// One conversation's workflow state. Not thread-safe by design: one per conversation,
/// used from one thread at a time (Python enforces it).
#[pyclass(module = "orch._orch")]
pub(crate) struct Session {
    pub(crate) machine: Py<Machine>,
    pub(crate) hosted: HostedSession,
    pub(crate) fast: Fast,
}

/// What lets `allowed()`, `check` and `record` skip work a turn repeats: the allowed set
/// as of the session's last event, and the lists already made for recent sets.
#[derive(Default)]
pub(crate) struct Fast {
    /// `bits` and `foreign` are the session's allowed set now.
    pub(crate) fresh: bool,
    /// The declared tools allowed (bit `i`: the machine's `i`-th tool).
    pub(crate) bits: Vec<u64>,
    /// A foreign tool is allowed too.
    pub(crate) foreign: bool,
    /// Lists made for recent allowed sets (at most [`RECENT_SETS`]), newest last.
    pub(crate) recent: Vec<(Box<[u64]>, Py<PyList>)>,
}

/// How many allowed sets a session keeps a list for.
pub(crate) const RECENT_SETS: usize = 16;

impl Fast {
    /// The session changed: the allowed set is asked again when next needed.
    fn stale(&mut self) {
        self.fresh = false;
    }

    fn refresh(&mut self, hosted: &HostedSession) {
        if !self.fresh {
            self.foreign = hosted.allowed_bits(&mut self.bits);
            self.fresh = true;
        }
    }

    /// Is the declared tool `i` allowed now?
    fn allows(&mut self, hosted: &HostedSession, i: usize) -> bool {
        self.refresh(hosted);
        self.bits
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
}

#[pymethods]
impl Session {
    /// The tools that may run now, in declaration order (then allowed foreign tools).
    fn allowed<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let machine = self.machine.get();
        self.fast.refresh(&self.hosted);
        if !self.fast.foreign {
            // A set seen lately: a copy of its list (the caller may change its own).
            let fast = &mut self.fast;
            if let Some((_, list)) = fast.recent.iter().rev().find(|(b, _)| **b == *fast.bits) {
                let list = list.bind(py);
                return Ok(list.get_slice(0, list.len()));
            }
            let out = PyList::empty(py);
            for i in DynSession::bit_indices(&fast.bits) {
                if let Some(name) = machine.names.get(i) {
                    out.append(name.bind(py))?;
                }
            }
            if fast.recent.len() >= RECENT_SETS {
                fast.recent.remove(0);
            }
            fast.recent
                .push((fast.bits.as_slice().into(), out.clone().unbind()));
            return Ok(out.get_slice(0, out.len()));
        }
        let out = PyList::empty(py);
        let mut failed = None;
        self.hosted.for_each_allowed(|i, name| {
            if failed.is_some() {
                return;
            }
            let appended = match i.and_then(|i| machine.names.get(i)) {
                Some(interned) => out.append(interned.bind(py)),
                None => out.append(name),
            };
            if let Err(e) = appended {
                failed = Some(e);
            }
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// `None` when `tool` may run now, else the `Refusal` (the same words orch uses
    /// everywhere).
    fn check(&mut self, tool: &Bound<'_, PyString>) -> PyResult<Option<Refusal>> {
        let machine = self.machine.get();
        // An allowed declared tool on a machine without gates: nothing to refuse.
        if !machine.gates {
            if let Some(i) = machine.tool_index(tool) {
                if self.fast.allows(&self.hosted, i) {
                    return Ok(None);
                }
            }
        }
        Ok(self.hosted.check(tool.to_str()?).map(refusal))
    }

    /// `check` for this exact call (`arguments`: its JSON text): a gated tool passes on a
    /// human's approval of this call held by the session, and is refused as `rejected`
    /// on a held rejection (semantics §13). Changes nothing. `now_ms`: the host's clock
    /// (milliseconds since the Unix epoch; default: this machine's), which budgets with a
    /// window judge by (semantics §17).
    #[pyo3(signature = (tool, arguments = "{}", now_ms = None))]
    fn check_call(&self, tool: &str, arguments: &str, now_ms: Option<u64>) -> Option<Refusal> {
        let now = now_ms.unwrap_or_else(orch_agent::protocol::now_ms);
        self.hosted.check_call_at(tool, arguments, now).map(refusal)
    }

    /// Admits this exact call before the host runs it: `check_call`, but an approval it
    /// passes on is consumed (one approval, one call) and budgets charge it. `None` when
    /// it may run. `now_ms`: as in `check_call`.
    #[pyo3(signature = (tool, arguments = "{}", now_ms = None))]
    fn admit(&mut self, tool: &str, arguments: &str, now_ms: Option<u64>) -> Option<Refusal> {
        self.fast.stale();
        let now = now_ms.unwrap_or_else(orch_agent::protocol::now_ms);
        self.hosted.admit_at(tool, arguments, now).map(refusal)
    }

    /// This exact call was put to a human: the session holds the question (until the
    /// next event), and the call still needs an approval. Returns the question's identity
    /// (16 hex digits), which `answer` needs.
    #[pyo3(signature = (tool, arguments = "{}"))]
    fn ask(&mut self, tool: &str, arguments: &str) -> String {
        self.fast.stale();
        self.hosted.ask(tool, arguments).to_string()
    }

    /// A human's answer to the question `question` (what `ask` returned) about this exact
    /// call: applied only while the session holds that very question, once. `False`:
    /// nothing changed (answered already, an event since, another question asked).
    #[pyo3(signature = (tool, arguments, question, approved))]
    fn answer(&mut self, tool: &str, arguments: &str, question: &str, approved: bool) -> bool {
        match question_id(question) {
            Some(question) => {
                self.fast.stale();
                self.hosted.answer(tool, arguments, question, approved)
            }
            None => false,
        }
    }

    /// The run host: the call `call_id` of `tool` with `arguments` (JSON text) is about
    /// to run. `Begin.action`: `run` (run it, then `finish` it), `refused`, `ask` (the
    /// session holds a question about this call, bound to its id: put it to a human and
    /// give the answer to `answer_call`), or `again` (the same call delivered again: not
    /// run again). `Begin.refusal` is what the model is told when it does not run.
    /// `ask=False`: a call that needs a human's approval is refused as
    /// `needs_approval` and nothing is asked (for a framework that asks elsewhere).
    /// `now_ms`: the host's clock (milliseconds since the Unix epoch; default: this
    /// machine's), for the question's expiry.
    #[pyo3(signature = (call_id, tool, arguments = "{}", ask = true, now_ms = None))]
    fn begin(
        &mut self,
        py: Python<'_>,
        call_id: &str,
        tool: &str,
        arguments: &str,
        ask: bool,
        now_ms: Option<u64>,
    ) -> PyResult<Begin> {
        self.fast.stale();
        let now = now_ms.unwrap_or_else(orch_agent::protocol::now_ms);
        let on_gate = if ask {
            run_host::OnGate::Ask
        } else {
            run_host::OnGate::Refuse
        };
        let begun = self.hosted.begin(call_id, tool, arguments, on_gate, now);
        let refused = match begun.refusal() {
            Some(r) => Some(Py::new(py, refusal(r.clone()))?),
            None => None,
        };
        Ok(Begin {
            action: begun.as_str(),
            refusal: refused,
            question: begun.question().map(|q| q.to_string()),
        })
    }

    /// The run host: a human's answer about the call `call_id` (`tool` with `arguments`,
    /// as it was shown). Applied once, to the question `begin` asked about that very
    /// call, before it expires, while the run still holds it. `Answered.outcome`:
    /// `applied`, or why not — `repeated`, `late`, `foreign`, `unknown` (then
    /// `Answered.refusal` is what the model is told; nothing changed).
    /// `now_ms`: the host's clock, as for `begin`.
    #[pyo3(signature = (call_id, tool, arguments, approved, now_ms = None))]
    fn answer_call(
        &mut self,
        py: Python<'_>,
        call_id: &str,
        tool: &str,
        arguments: &str,
        approved: bool,
        now_ms: Option<u64>,
    ) -> PyResult<Answered> {
        self.fast.stale();
        let now = now_ms.unwrap_or_else(orch_agent::protocol::now_ms);
        let answered = self
            .hosted
            .answer_call(call_id, tool, arguments, approved, now);
        let refused = match answered.refusal() {
            Some(r) => Some(Py::new(py, refusal(r.clone()))?),
            None => None,
        };
        Ok(Answered {
            outcome: answered.as_str(),
            refusal: refused,
        })
    }

    /// The run host: the call `call_id` that `begin` admitted ended. `ran`: the tool
    /// returned (rather than failed); `result`: what it returned (JSON text; a result in
    /// MCP's shape is read by orch's one rule, and rules on arguments read its values).
    /// The record's outcome word when it is recorded, `not_run` when it did not run, or
    /// `not_admitted` when `begin` did not admit that call (nothing recorded).
    #[pyo3(signature = (call_id, tool, ran = true, result = None))]
    fn finish(
        &mut self,
        call_id: &str,
        tool: &str,
        ran: bool,
        result: Option<&str>,
    ) -> &'static str {
        self.fast.stale();
        match self.hosted.finish(call_id, tool, ran, result) {
            run_host::Finished::Recorded(word) => word,
            run_host::Finished::NotRun(_) => "not_run",
            run_host::Finished::NotAdmitted => "not_admitted",
        }
    }

    /// The refusal of a call whose arguments are not JSON (`why`: the parser's words),
    /// in orch's words.
    fn malformed_arguments(&self, tool: &str, why: &str) -> Refusal {
        refusal(self.hosted.malformed_arguments(tool, why))
    }

    /// The refusal of a call of a tool the host does not have, in orch's words.
    fn no_such_tool(&self, tool: &str) -> Refusal {
        refusal(self.hosted.no_such_tool(tool))
    }

    /// The refusal of a call whose id another call of the same model response has too.
    fn shared_id(&self, tool: &str, call_id: &str) -> Refusal {
        refusal(self.hosted.shared_id(tool, call_id))
    }

    /// How long a question `begin` asks stays answerable, in seconds (24 hours unless
    /// set).
    fn set_question_ttl(&mut self, seconds: f64) -> PyResult<()> {
        let ttl = std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|e| PyValueError::new_err(format!("question_ttl: {e}")))?;
        self.hosted.set_question_ttl(ttl);
        Ok(())
    }

    /// A human approved this exact call: the session holds the approval (until the next
    /// event), and `admit` lets the call through once.
    #[pyo3(signature = (tool, arguments = "{}"))]
    fn approve(&mut self, tool: &str, arguments: &str) {
        self.fast.stale();
        self.hosted.approve(tool, arguments);
    }

    /// A human rejected this exact call: the session holds the rejection, and the call
    /// is refused as `rejected` until the next event.
    #[pyo3(signature = (tool, arguments = "{}"))]
    fn reject(&mut self, tool: &str, arguments: &str) {
        self.fast.stale();
        self.hosted.reject(tool, arguments);
    }

    /// The verdict the session holds on a call, if any: `(digest, verdict)` with the
    /// call's SHA-256 digest in hex and `pending`, `approved` or `rejected`.
    #[getter]
    fn approval(&self) -> Option<(String, &'static str)> {
        self.hosted.approval()
    }

    /// Records that `tool` ran: the outcome (`advanced`, `completed`, `free`,
    /// `out_of_sequence`, `not_allowed`).
    /// `result`: what it returned (its JSON text), for rules on arguments that read
    /// values from it (semantics §16).
    #[pyo3(signature = (tool, result = None))]
    fn record<'py>(
        &mut self,
        py: Python<'py>,
        tool: &Bound<'py, PyString>,
        result: Option<&str>,
    ) -> PyResult<Bound<'py, PyString>> {
        self.fast.stale();
        let declared = match result {
            None => self.machine.get().tool_index(tool),
            Some(_) => None,
        };
        let kind = match (declared, result) {
            (Some(i), _) => match self.hosted.record_index_kind(i) {
                Some(kind) => kind,
                None => self.hosted.record_outcome(tool.to_str()?).kind(),
            },
            (None, Some(result)) => self
                .hosted
                .record_result_outcome(tool.to_str()?, result)
                .kind(),
            (None, None) => self.hosted.record_outcome(tool.to_str()?).kind(),
        };
        // The outcome's word as a Python string made once per process, not per call.
        Ok(match kind {
            OutcomeKind::Advanced => pyo3::intern!(py, "advanced"),
            OutcomeKind::Completed => pyo3::intern!(py, "completed"),
            OutcomeKind::Free => pyo3::intern!(py, "free"),
            OutcomeKind::OutOfSequence => pyo3::intern!(py, "out_of_sequence"),
            OutcomeKind::NotAllowed => pyo3::intern!(py, "not_allowed"),
        }
        .clone())
    }

    /// A user message: message conditions and sequence resets are evaluated.
    fn on_user_message(&mut self, text: &str) {
        self.fast.stale();
        self.hosted.on_user_message(text);
    }

    /// The host's tools (names the template does not declare are foreign tools).
    fn set_available(&mut self, tools: Vec<String>) {
        self.fast.stale();
        self.hosted.set_available(tools);
    }

    /// Back to a fresh session's state (the host's tools are kept).
    fn reset(&mut self) {
        self.fast.stale();
        self.hosted.reset();
    }

    /// The active step, if any.
    #[getter]
    fn step(&self) -> Option<&str> {
        self.hosted.session().step()
    }

    /// The position in the active step's sequence.
    #[getter]
    fn sequence_index(&self) -> usize {
        self.hosted.session().sequence_index()
    }

    /// The tools the active step's unfinished sequence accepts next, if any.
    #[getter]
    fn expected(&self) -> Option<Vec<&str>> {
        self.hosted.session().expected()
    }

    /// The tool the next model call must call, if any: the one an unfinished sequence
    /// expects when it is the only tool allowed, and no human's question or rejection is
    /// held (the rule every orch host follows).
    #[getter]
    fn forced_tool(&self) -> Option<String> {
        self.hosted.forced_tool()
    }

    /// `"enforce"`, or `"observe"` (its machine's mode): every call is judged as in
    /// enforce mode, and none is refused or asked about.
    #[getter]
    fn mode(&self) -> &'static str {
        self.hosted.mode().as_str()
    }

    /// The tools the sequence waits for when the host has none of them, if so.
    #[getter]
    fn blocked_on(&self) -> Option<Vec<&str>> {
        self.hosted.session().blocked_on()
    }

    /// The tools recorded, most recent last (`None` for a slot before the first).
    #[getter]
    fn history(&self) -> Vec<Option<&str>> {
        self.hosted.session().history()
    }

    /// Where the values of a call of `tool` with `arguments` (JSON text) were seen, one
    /// line each, to show the human asked about it: "`/iban` "GB33…": seen only in
    /// untrusted results of `read_file`; not in the user's messages". Empty when the
    /// template remembers nothing.
    #[pyo3(signature = (tool, arguments = "{}"))]
    fn origins(&self, tool: &str, arguments: &str) -> Vec<String> {
        self.hosted.session().origins(tool, arguments)
    }

    /// How many remembered values the session forgot to make room for newer ones (the
    /// template's `rememberedValues` is its bound).
    #[getter]
    fn forgotten(&self) -> u32 {
        self.hosted.session().forgotten()
    }

    /// Each budget's total now (at the newest time given), by name, as a decimal string;
    /// budgets that hold nothing are left out.
    #[getter]
    fn budgets(&self) -> std::collections::BTreeMap<String, String> {
        self.hosted
            .session()
            .budget_totals()
            .into_iter()
            .map(|(name, total)| (name.to_owned(), total))
            .collect()
    }

    /// The session as bytes: the binary snapshot format of the Rust crates.
    fn snapshot<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.hosted.snapshot())
    }

    /// The machine this session runs on.
    #[getter]
    fn machine(&self, py: Python<'_>) -> Py<Machine> {
        self.machine.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        let s = self.hosted.session();
        match s.step() {
            Some(step) => format!("<Session step={step:?} index={}>", s.sequence_index()),
            None => "<Session step=None>".to_owned(),
        }
    }
}

/// The Python face of a policy refusal.
pub(crate) fn refusal(r: orch_agent::Refusal) -> Refusal {
    Refusal {
        tool: r.tool,
        kind: r.kind.as_str(),
        message: r.reason,
        rule: r.rule,
    }
}
