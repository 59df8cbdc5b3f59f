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

/// A compiler finding's severity.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The template is rejected.
    Error,
    /// The template is still compiled.
    Warning,
}

/// What a tool result says about its call ([`result_kind`]).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    /// It completed successfully: the call ran.
    Ran,
    /// `isError: true`.
    Error,
    /// `resultType: "input_required"`.
    InputRequired,
    /// A task, not a completed call.
    Task,
    /// Another `resultType`.
    Other,
    /// Not a tool result.
    Malformed,
}

/// Why a call is refused (`orch_agent::RefusalKind`).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The active step does not allow it.
    NotAllowed,
    /// The sequence expects another tool.
    OutOfSequence,
    /// No such tool.
    UnknownTool,
    /// Allowed, but the host has not made it available.
    Unavailable,
    /// A human must approve this call.
    NeedsApproval,
    /// A human rejected this call.
    Rejected,
    /// An answer to no question the session holds.
    StaleAnswer,
    /// Another call of the run is in flight.
    Busy,
    /// The run is held: an earlier call's outcome is unknown.
    OutcomeUnknown,
    /// The call's arguments break a rule on arguments (`Refusal.rule` names it).
    BrokenRule,
    /// The same call was delivered again after it ran: not run twice.
    AlreadyRan,
}

impl From<orch_agent::RefusalKind> for RefusalKind {
    fn from(kind: orch_agent::RefusalKind) -> Self {
        use orch_agent::RefusalKind as K;
        match kind {
            K::NotAllowed => RefusalKind::NotAllowed,
            K::OutOfSequence => RefusalKind::OutOfSequence,
            K::UnknownTool => RefusalKind::UnknownTool,
            K::Unavailable => RefusalKind::Unavailable,
            K::NeedsApproval => RefusalKind::NeedsApproval,
            K::Rejected => RefusalKind::Rejected,
            K::StaleAnswer => RefusalKind::StaleAnswer,
            K::Busy => RefusalKind::Busy,
            K::OutcomeUnknown => RefusalKind::OutcomeUnknown,
            K::BrokenRule => RefusalKind::BrokenRule,
            K::AlreadyRan => RefusalKind::AlreadyRan,
            // `RefusalKind` is non-exhaustive; every kind it has is above (the test
            // `every_refusal_kind_has_its_name` fails when one is missing).
            _ => RefusalKind::NotAllowed,
        }
    }
}

/// What `Session.begin` came to (the run host).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Run the tool now, then `finish` it.
    Run,
    /// Not run: `refusal` says why.
    Refused,
    /// A human must answer: the session holds `question` about this call.
    Ask,
    /// The same call delivered again: not run again; `refusal` says why.
    Again,
}

/// What `Session.begin` came to: the action, the refusal the model is told when the call
/// does not run, and for `ask` the question's identity (16 hex digits).
#[napi(object)]
pub struct Begin {
    /// `run`, `refused`, `ask` or `again`.
    pub action: Action,
    /// Why it does not run (absent for `run`).
    pub refusal: Option<Refusal>,
    /// The question asked (`ask` only).
    pub question: Option<String>,
}

/// What `Session.answerCall` came to.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// Applied to the question about that call.
    Applied,
    /// That question was answered already.
    Repeated,
    /// The question expired first (it is closed now).
    Late,
    /// The id names another call (another tool or other arguments).
    Foreign,
    /// No question the run holds matches.
    Unknown,
}

/// What `Session.answerCall` came to: the outcome and, when it did not apply, the
/// refusal the model is told.
#[napi(object)]
pub struct Answered {
    /// `applied`, or why not.
    pub outcome: AnswerOutcome,
    /// Why nothing runs on it (absent when it applied).
    pub refusal: Option<Refusal>,
}

/// What a model is told when it answered with text while `tool` is forced: the one
/// wording every surface sends.
#[napi]
pub fn reminder(tool: String) -> String {
    orch_agent::Policy::forced_reminder(&tool)
}

/// What a call whose result never came means (`lostResults`, semantics §15).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostRule {
    /// Counts as not run: the model may call it again.
    Retry,
    /// Holds the run until an operator says whether it ran (the default).
    Hold,
    /// Counts as run: recorded.
    Ran,
}

/// What a human said of a call, or that the question is open.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Asked, not answered.
    Pending,
    /// Approved: the call may run once.
    Approved,
    /// Rejected: the call must not run.
    Rejected,
}

/// What recording a tool did.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The sequence advanced.
    Advanced,
    /// The sequence completed.
    Completed,
    /// No sequence waited; the tool was allowed.
    Free,
    /// A sequence expected another tool.
    OutOfSequence,
    /// No sequence waited; the tool was not allowed.
    NotAllowed,
}

/// What a verification finding is about.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// Can the step become active?
    Step,
    /// Can the step's sequence complete?
    Sequence,
    /// Once active, does the step keep the session for good?
    Trap,
    /// A reachable state waits on tools the host does not have.
    Blocked,
    /// A reachable state allows no tool at all.
    NoTools,
    /// A safety property.
    Property,
    /// The exploration's summary.
    Summary,
}

/// A compiled template: its tools and steps, its warnings, and sessions over it.
#[napi]
pub struct Machine {
    machine: Arc<DynMachine>,
    gates: bool,
    properties: Vec<orch_codegen::ir::IrProperty>,
    warnings: Vec<Diagnostic>,
    /// The allowed sets its sessions have been in (the fast path, `fast.rs`).
    sets: fast::Sets,
}

/// Compiles a template from its JSON text. Throws a `TemplateError` (an `Error` with
/// `name === 'TemplateError'` and every diagnostic in `diagnostics`) when it has
/// errors; its warnings are on the machine.
#[napi]
pub fn compile(env: Env, template: String, options: Option<CompileOptions>) -> Result<Machine> {
    let (path, prove) = settings(options.as_ref());
    let opts = orch_codegen::CheckOptions {
        prove_properties: prove,
        ..Default::default()
    };
    let compiled = orch_codegen::compile_json_with(&template, None, opts);
    let found = placed(&compiled.diagnostics, &template, path);
    let (Some(ir), Some(machine)) = (compiled.ir.as_ref(), compiled.to_machine()) else {
        let message = summary(&found, path);
        let all = found.into_iter().map(diagnostic).collect();
        return Err(throw_named(&env, "TemplateError", message, Some(all)));
    };
    Ok(Machine {
        gates: ir.has_gates(),
        properties: ir.properties.clone(),
        machine: Arc::new(machine),
        warnings: found.into_iter().map(diagnostic).collect(),
        sets: fast::Sets::default(),
    })
}

/// How to explore a machine (`orch verify`).
#[napi(object)]
pub struct VerifyOptions {
    /// Stop after this many distinct states (default 1,000,000); past it, answers are
    /// left undecided.
    pub max_states: Option<u32>,
    /// The host's tools (default: every declared tool).
    pub available: Option<Vec<String>>,
    /// The host records any tool, allowed or not (AgentDock does not enforce).
    pub permissive: Option<bool>,
}

/// One event of a witness, as `orch simulate` reads it (exactly one field is set).
#[napi(object)]
pub struct WitnessEvent {
    /// The host's tools change.
    pub available: Option<Vec<String>>,
    /// A user message.
    pub message: Option<String>,
    /// A tool runs.
    pub tool: Option<String>,
    /// A human approves the next call of this gated tool.
    pub approve: Option<String>,
    /// The session is reset.
    pub reset: Option<bool>,
}

/// One finding of `Machine.verify()`, as `orch verify --format json` prints it.
#[napi(object)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// The step (`step`, `sequence`, `trap`).
    pub step: Option<String>,
    /// The property (`property`).
    pub name: Option<String>,
    /// `step`: can it become active? `null` when the search stopped before deciding.
    pub reachable: Option<Option<bool>>,
    /// `sequence`: can it complete? `null` when undecided.
    pub completes: Option<Option<bool>>,
    /// `property`: does it hold in every reachable state? `null` when undecided.
    pub holds: Option<Option<bool>>,
    /// The events that show it, from a fresh session.
    pub witness: Option<Vec<WitnessEvent>>,
    /// Why a step is unreachable, in the template's terms.
    pub reason: Option<String>,
    /// What a violated property forbade, in words.
    pub message: Option<String>,
    /// `summary`: distinct states visited.
    pub states: Option<u32>,
    /// `summary`: was everything explored?
    pub complete: Option<bool>,
}

fn witness(events: Vec<report::Step>) -> Vec<WitnessEvent> {
    events
        .into_iter()
        .map(|e| {
            let mut w = WitnessEvent {
                available: None,
                message: None,
                tool: None,
                approve: None,
                reset: None,
            };
            match e {
                report::Step::Available(names) => w.available = Some(names),
                report::Step::Message(text) => w.message = Some(text),
                report::Step::Tool(t) => w.tool = Some(t),
                report::Step::Approve(t) => w.approve = Some(t),
                report::Step::Reset => w.reset = Some(true),
            }
            w
        })
        .collect()
}

#[napi]
impl Machine {
    /// The template's name (`agentId`, or `name`).
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.machine.name().to_owned()
    }

    /// The fingerprint snapshots carry, as 16 hex digits.
    #[napi(getter)]
    pub fn fingerprint(&self) -> String {
        format!("{:016x}", self.machine.fingerprint())
    }

    /// The declared tools, in declaration order.
    #[napi(getter)]
    pub fn tools(&self) -> Vec<String> {
        self.machine.tools().to_vec()
    }

    /// The steps, in declaration order.
    #[napi(getter)]
    pub fn steps(&self) -> Vec<String> {
        self.machine.steps().to_vec()
    }

    /// Does the template gate any tool behind a human's approval (`approve`)?
    #[napi(getter)]
    pub fn has_gates(&self) -> bool {
        self.gates
    }

    /// What a lost result of a call of `tool` means (`lostResults`): for a host that runs
    /// tools elsewhere and may never hear how a call ended.
    #[napi]
    pub fn lost_rule(&self, tool: String) -> LostRule {
        match self.machine.lost_rule(&tool) {
            orch_runtime::LostRule::Retry => LostRule::Retry,
            orch_runtime::LostRule::Ran => LostRule::Ran,
            orch_runtime::LostRule::Hold => LostRule::Hold,
        }
    }

    /// The compiler's warnings.
    #[napi(getter)]
    pub fn warnings(&self) -> Vec<Diagnostic> {
        self.warnings.clone()
    }

    /// A fresh session. `available`: the tools the host has (default: every declared
    /// tool); names the template does not declare are foreign tools, judged by the
    /// step's patterns.
    #[napi]
    pub fn session(&self, available: Option<Vec<String>>) -> Session {
        self.wrap(HostedSession::new(Arc::clone(&self.machine), available))
    }

    /// A session restored from `snapshot` (bytes from `Session.snapshot()`, or from the
    /// Rust crates or the Python package: the format is one). Throws a `SnapshotError`
    /// when the bytes cannot be restored; a snapshot of an older version of the
    /// template restores by names.
    #[napi]
    pub fn restore(
        &self,
        env: Env,
        snapshot: Uint8Array,
        available: Option<Vec<String>>,
    ) -> Result<Session> {
        match HostedSession::restore(Arc::clone(&self.machine), &snapshot, available) {
            Ok(hosted) => Ok(self.wrap(hosted)),
            Err(e) => Err(throw_named(&env, "SnapshotError", e.to_string(), None)),
        }
    }

    /// Explores every state a session can reach (`orch verify`): the findings in the
    /// order `orch verify --format json` prints them, ending with a `summary`.
    #[napi]
    pub fn verify(&self, options: Option<VerifyOptions>) -> Result<Vec<Finding>> {
        let options = options.unwrap_or(VerifyOptions {
            max_states: None,
            available: None,
            permissive: None,
        });
        let explore = ExploreOptions {
            permissive: options.permissive.unwrap_or(false),
            available: options.available,
            max_states: options.max_states.map_or(1_000_000, |n| n as usize),
            max_work: orch_codegen::verify::explore::DEFAULT_WORK,
        };
        let found = report::verify(&self.machine, &self.properties, &explore)
            .map_err(|e| Error::new(Status::InvalidArg, e))?;
        Ok(found
            .into_iter()
            .map(|f| {
                let answer = |k: Kind| (f.kind == k).then_some(f.answer);
                Finding {
                    kind: match f.kind {
                        Kind::Step => FindingKind::Step,
                        Kind::Sequence => FindingKind::Sequence,
                        Kind::Trap => FindingKind::Trap,
                        Kind::Blocked => FindingKind::Blocked,
                        Kind::NoTools => FindingKind::NoTools,
                        Kind::Property => FindingKind::Property,
                        Kind::Summary => FindingKind::Summary,
                    },
                    reachable: answer(Kind::Step),
                    completes: answer(Kind::Sequence),
                    holds: answer(Kind::Property),
                    step: f.step,
                    name: f.name,
                    witness: f.witness.map(witness),
                    reason: f.reason,
                    message: f.message,
                    states: f.states.map(small),
                    complete: f.complete,
                }
            })
            .collect())
    }
}

impl Machine {
    /// A session of this machine, registered for the fast path.
    fn wrap(&self, hosted: HostedSession) -> Session {
        let hosted = Rc::new(RefCell::new(hosted));
        let handle = fast::register(Rc::clone(&hosted), Rc::clone(&self.sets));
        Session { hosted, handle }
    }
}

/// Why a tool may not run now, in the same words orch uses everywhere.
#[napi(object)]
pub struct Refusal {
    /// The tool refused.
    pub tool: String,
    /// Why, as a stable word.
    pub kind: RefusalKind,
    /// Why, in words for the model (what is expected next, what is allowed now).
    pub message: String,
    /// The rule on arguments that refused the call (`broken_rule`), by name.
    pub rule: Option<String>,
}

fn refusal(r: orch_agent::Refusal) -> Refusal {
    Refusal {
        tool: r.tool,
        kind: r.kind.into(),
        message: r.reason,
        rule: r.rule,
    }
}

/// The verdict a session holds on one exact call.
#[napi(object)]
pub struct Approval {
    /// The call's SHA-256 digest (tool and arguments), in hex.
    pub digest: String,
    /// What a human said, or that the question is open.
    pub verdict: Verdict,
}

/// One conversation's workflow state. One per conversation; calls on it are
/// synchronous, so a JavaScript host serialises them by construction (the AI SDK adapter
/// also keeps one tool call of a session at a time).
#[napi]
pub struct Session {
    hosted: Rc<RefCell<HostedSession>>,
    /// Its number in this thread's table of sessions (`fast.rs`); `-1` when it has none.
    handle: f64,
}

impl Drop for Session {
    fn drop(&mut self) {
        fast::unregister(self.handle);
    }
}

/// Names as owned strings.
fn owned(names: Option<Vec<&str>>) -> Option<Vec<String>> {
    names.map(|n| n.into_iter().map(str::to_owned).collect())
}

/// The words of a call's arguments (`{}` when none are given).
fn args(arguments: &Option<String>) -> &str {
    arguments.as_deref().unwrap_or("{}")
}

#[napi]
impl Session {
    /// The tools that may run now, in declaration order (then allowed foreign tools).
    #[napi]
    pub fn allowed(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.hosted
            .borrow_mut()
            .for_each_allowed(|_, name| out.push(name.to_owned()));
        out
    }

    /// `null` when `tool` may run now, else the refusal.
    #[napi]
    pub fn check(&self, tool: String) -> Option<Refusal> {
        self.hosted.borrow().check(&tool).map(refusal)
    }

    /// `check` for this exact call (`args`: its arguments as JSON text, default `{}`):
    /// a gated tool passes on a human's approval of this call held by the session, and
    /// is refused as `rejected` on a held rejection. Changes nothing.
    #[napi]
    pub fn check_call(&self, tool: String, args: Option<String>) -> Option<Refusal> {
        self.hosted
            .borrow()
            .check_call(&tool, self::args(&args))
            .map(refusal)
    }

    /// Admits this exact call before the host runs it: `checkCall`, but an approval it
    /// passes on is consumed (one approval, one call). `null` when it may run.
    #[napi]
    pub fn admit(&mut self, tool: String, args: Option<String>) -> Option<Refusal> {
        self.hosted
            .borrow_mut()
            .admit(&tool, self::args(&args))
            .map(refusal)
    }

    /// This exact call was put to a human: the session holds the question (until the
    /// next event), and the call still needs an approval. Returns the question's identity
    /// (16 hex digits), which `answer` needs.
    #[napi]
    pub fn ask(&mut self, tool: String, args: Option<String>) -> String {
        self.hosted
            .borrow_mut()
            .ask(&tool, self::args(&args))
            .to_string()
    }

    /// A human's answer to the question `question` (what `ask` returned) about this exact
    /// call: applied only while the session holds that very question, once. `false`:
    /// nothing changed (answered already, an event since, another question asked).
    #[napi]
    pub fn answer(&mut self, tool: String, args: String, question: String, approved: bool) -> bool {
        let id = (question.len() == 16)
            .then(|| u64::from_str_radix(&question, 16).ok())
            .flatten();
        match id {
            Some(id) => {
                let question = orch_runtime::QuestionId::new(id);
                self.hosted
                    .borrow_mut()
                    .answer(&tool, &args, question, approved)
            }
            None => false,
        }
    }

    /// What a model is told when it answered with text while `tool` is forced: the one
    /// wording every surface sends (the module's `reminder`).
    #[napi]
    pub fn reminder(&self, tool: String) -> String {
        orch_agent::Policy::forced_reminder(&tool)
    }

    /// The run host: the call `callId` of `tool` with `args` (JSON text, default `{}`)
    /// is about to run. `run`: run it, then `finish` it; `refused`; `ask`: the session
    /// holds a question bound to this call's id, to put to a human (their answer goes to
    /// `answerCall`); `again`: the same call delivered again, never run twice. `ask`
    /// (default `true`) `false`: a call that needs a human's approval is refused as
    /// `needs_approval` and nothing is asked (for a framework that asks elsewhere).
    /// `nowMs`: the host's clock (milliseconds since the Unix epoch; default: this
    /// machine's), for the question's expiry.
    #[napi]
    pub fn begin(
        &mut self,
        call_id: String,
        tool: String,
        args: Option<String>,
        ask: Option<bool>,
        now_ms: Option<f64>,
    ) -> Begin {
        let now = clock(now_ms);
        let on_gate = match ask {
            Some(false) => run_host::OnGate::Refuse,
            _ => run_host::OnGate::Ask,
        };
        let begun =
            self.hosted
                .borrow_mut()
                .begin(&call_id, &tool, self::args(&args), on_gate, now);
        let action = match begun {
            run_host::Begin::Run => Action::Run,
            run_host::Begin::Refused(_) => Action::Refused,
            run_host::Begin::Ask { .. } => Action::Ask,
            run_host::Begin::Again(_) => Action::Again,
        };
        Begin {
            action,
            refusal: begun.refusal().cloned().map(refusal),
            question: begun.question().map(|q| q.to_string()),
        }
    }

    /// The run host: a human's answer about the call `callId` (`tool` with `args`, as
    /// it was shown): applied once, to the question `begin` asked about that very call,
    /// before it expires, while the run still holds it; any other answer changes nothing
    /// and says why.
    /// `nowMs`: the host's clock, as for `begin`.
    #[napi]
    pub fn answer_call(
        &mut self,
        call_id: String,
        tool: String,
        args: String,
        approved: bool,
        now_ms: Option<f64>,
    ) -> Answered {
        let now = clock(now_ms);
        let answered = self
            .hosted
            .borrow_mut()
            .answer_call(&call_id, &tool, &args, approved, now);
        let outcome = match answered {
            run_host::Answered::Applied { .. } => AnswerOutcome::Applied,
            run_host::Answered::Repeated(_) => AnswerOutcome::Repeated,
            run_host::Answered::Late(_) => AnswerOutcome::Late,
            run_host::Answered::Foreign(_) => AnswerOutcome::Foreign,
            run_host::Answered::Unknown(_) => AnswerOutcome::Unknown,
        };
        Answered {
            outcome,
            refusal: answered.refusal().cloned().map(refusal),
        }
    }

    /// The run host: the call `callId` that `begin` admitted ended. `ran` (default
    /// `true`): the tool returned rather than failed; `result`: what it returned (JSON
    /// text; a result in MCP's shape is read by orch's one rule). The record's outcome
    /// word when recorded, `not_run`, or `not_admitted`.
    #[napi]
    pub fn finish(
        &mut self,
        call_id: String,
        tool: String,
        ran: Option<bool>,
        result: Option<String>,
    ) -> String {
        let finished = self.hosted.borrow_mut().finish(
            &call_id,
            &tool,
            ran.unwrap_or(true),
            result.as_deref(),
        );
        match finished {
            run_host::Finished::Recorded(word) => word,
            run_host::Finished::NotRun(_) => "not_run",
            run_host::Finished::NotAdmitted => "not_admitted",
        }
        .to_owned()
    }

    /// The refusal of a call whose arguments are not JSON (`why`: the parser's words),
    /// in orch's words.
    #[napi]
    pub fn malformed_arguments(&self, tool: String, why: String) -> Refusal {
        refusal(self.hosted.borrow().malformed_arguments(&tool, &why))
    }

    /// The refusal of a call of a tool the host does not have, in orch's words.
    #[napi]
    pub fn no_such_tool(&self, tool: String) -> Refusal {
        refusal(self.hosted.borrow().no_such_tool(&tool))
    }

    /// The refusal of a call whose id another call of the same model response has too.
    #[napi]
    pub fn shared_id(&self, tool: String, call_id: String) -> Refusal {
        refusal(self.hosted.borrow().shared_id(&tool, &call_id))
    }

    /// The refusal of a call whose answer applies to no question the run holds
    /// (`stale_answer`), in orch's words: for an adapter that knows an answer predates
    /// the question it would match.
    #[napi]
    pub fn stale_answer(&self, tool: String) -> Refusal {
        refusal(self.hosted.borrow().stale_answer(&tool))
    }

    /// How long a question `begin` asks stays answerable, in seconds (24 hours unless
    /// set).
    #[napi]
    pub fn set_question_ttl(&mut self, seconds: f64) -> napi::Result<()> {
        let ttl = std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|e| napi::Error::from_reason(format!("questionTtl: {e}")))?;
        self.hosted.borrow_mut().set_question_ttl(ttl);
        Ok(())
    }

    /// A human approved this exact call: the session holds the approval (until the next
    /// event), and `admit` lets the call through once.
    #[napi]
    pub fn approve(&mut self, tool: String, args: Option<String>) {
        self.hosted.borrow_mut().approve(&tool, self::args(&args));
    }

    /// A human rejected this exact call: the session holds the rejection, and the call
    /// is refused as `rejected` until the next event.
    #[napi]
    pub fn reject(&mut self, tool: String, args: Option<String>) {
        self.hosted.borrow_mut().reject(&tool, self::args(&args));
    }

    /// The verdict the session holds on a call, if any.
    #[napi(getter)]
    pub fn approval(&self) -> Option<Approval> {
        self.hosted.borrow().session().approval().map(|a| Approval {
            digest: a.call.to_string(),
            verdict: match a.verdict {
                orch_runtime::Verdict::Pending => Verdict::Pending,
                orch_runtime::Verdict::Approved => Verdict::Approved,
                orch_runtime::Verdict::Rejected => Verdict::Rejected,
            },
        })
    }

    /// Records that `tool` ran: the outcome. `result`: what it returned (its JSON
    /// text), for rules on arguments that read values from it (semantics §16).
    #[napi]
    pub fn record(&mut self, tool: String, result: Option<String>) -> Outcome {
        use orch_runtime::dynamic::DynOutcome as O;
        let outcome = match result {
            Some(result) => self
                .hosted
                .borrow_mut()
                .record_result_outcome(&tool, &result),
            None => self.hosted.borrow_mut().record_outcome(&tool),
        };
        match outcome {
            O::Advanced { .. } => Outcome::Advanced,
            O::Completed => Outcome::Completed,
            O::Free => Outcome::Free,
            O::OutOfSequence { .. } => Outcome::OutOfSequence,
            O::NotAllowed => Outcome::NotAllowed,
        }
    }

    /// A user message: message conditions and sequence resets are evaluated.
    #[napi]
    pub fn on_user_message(&mut self, text: String) {
        self.hosted.borrow_mut().on_user_message(&text);
    }

    /// The host's tools (names the template does not declare are foreign tools).
    #[napi]
    pub fn set_available(&mut self, tools: Vec<String>) {
        self.hosted.borrow_mut().set_available(tools);
    }

    /// Back to a fresh session's state (the host's tools are kept).
    #[napi]
    pub fn reset(&mut self) {
        self.hosted.borrow_mut().reset();
    }

    /// The active step, if any.
    #[napi(getter)]
    pub fn step(&self) -> Option<String> {
        self.hosted.borrow().session().step().map(str::to_owned)
    }

    /// The position in the active step's sequence.
    #[napi(getter)]
    pub fn sequence_index(&self) -> u32 {
        small(self.hosted.borrow().session().sequence_index())
    }

    /// The tools the active step's unfinished sequence accepts next, if any.
    #[napi(getter)]
    pub fn expected(&self) -> Option<Vec<String>> {
        owned(self.hosted.borrow().session().expected())
    }

    /// The tool the next model call must call, if any: the one an unfinished sequence
    /// expects when it is the only tool allowed, and no human's question or rejection is
    /// held (the rule every orch host follows).
    #[napi(getter)]
    pub fn forced_tool(&self) -> Option<String> {
        self.hosted.borrow().forced_tool()
    }

    /// The tools the sequence waits for when the host has none of them, if so.
    #[napi(getter)]
    pub fn blocked_on(&self) -> Option<Vec<String>> {
        owned(self.hosted.borrow().session().blocked_on())
    }

    /// The tools recorded, most recent last (`null` for a slot before the first).
    #[napi(getter)]
    pub fn history(&self) -> Vec<Option<String>> {
        self.hosted
            .borrow()
            .session()
            .history()
            .into_iter()
            .map(|t| t.map(str::to_owned))
            .collect()
    }

    /// Internal (`main.cjs`): the session's number in this thread's table of sessions,
    /// which the package's fast path (`__orch*` functions) takes.
    #[napi(getter, js_name = "__handle")]
    pub fn handle(&self) -> f64 {
        self.handle
    }

    /// The session as bytes: the binary snapshot format of the Rust crates.
    #[napi]
    pub fn snapshot<'env>(&self, env: &'env Env) -> Result<Uint8ArraySlice<'env>> {
        // Copied into memory JavaScript owns: cheaper than handing over the Rust
        // buffer as an external one (which V8 tracks with a finaliser).
        Uint8ArraySlice::copy_from(env, self.hosted.borrow().snapshot())
    }
}

/// The host's clock as given (milliseconds since the Unix epoch; a number that is not a
/// finite non-negative one is taken as 0), else this machine's.
fn clock(now_ms: Option<f64>) -> u64 {
    match now_ms {
        Some(ms) if ms.is_finite() && ms > 0.0 => ms as u64,
        Some(_) => 0,
        None => orch_agent::protocol::now_ms(),
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
