//! A compiled template (`Machine`): its tools, steps, warnings and verification.

use crate::compile::{diagnostic, settings, small, throw_named, CompileOptions, Diagnostic};
use crate::fast;
use crate::kinds::{FindingKind, LostRule, Mode};
use crate::session::Session;
use napi::bindgen_prelude::{Env, Error, Result, Status, Uint8Array};
use napi_derive::napi;
use orch_agent::hosted::HostedSession;
use orch_codegen::diagnostic::{placed, summary};
use orch_codegen::verify::explore::Options as ExploreOptions;
use orch_codegen::verify::report::{self, Kind};
use orch_runtime::dynamic::DynMachine;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// A compiled template: its tools and steps, its warnings, and sessions over it.
#[napi]
pub struct Machine {
    pub(crate) machine: Arc<DynMachine>,
    pub(crate) gates: bool,
    pub(crate) properties: Vec<orch_codegen::ir::IrProperty>,
    pub(crate) warnings: Vec<Diagnostic>,
    /// The allowed sets its sessions have been in (the fast path, `fast.rs`).
    pub(crate) sets: fast::Sets,
    /// Enforce the template, or only judge and record (every session made from it).
    pub(crate) mode: orch_agent::Mode,
}

/// Compiles a template from its JSON text. Throws a `TemplateError` (an `Error` with
/// `name === 'TemplateError'` and every diagnostic in `diagnostics`) when it has
/// errors; its warnings are on the machine.
#[napi]
pub fn compile(env: Env, template: String, options: Option<CompileOptions>) -> Result<Machine> {
    let (path, prove) = settings(options.as_ref());
    let mode = match options.as_ref().and_then(|o| o.mode) {
        None | Some(Mode::Enforce) => orch_agent::Mode::Enforce,
        Some(Mode::Observe) => orch_agent::Mode::Observe,
    };
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
        mode,
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
    /// When it runs (milliseconds since the Unix epoch): the model let every budget
    /// window pass.
    pub at: Option<f64>,
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
                at: None,
                approve: None,
                reset: None,
            };
            match e {
                report::Step::Available(names) => w.available = Some(names),
                report::Step::Message(text) => w.message = Some(text),
                report::Step::Tool(t) => w.tool = Some(t),
                report::Step::ToolAt(t, at) => {
                    w.tool = Some(t);
                    w.at = Some(at as f64);
                }
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

    /// `'enforce'`, or `'observe'`: its sessions judge and record every call and
    /// refuse and ask nothing.
    #[napi(getter)]
    pub fn mode(&self) -> Mode {
        Mode::of(self.mode)
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
    fn wrap(&self, mut hosted: HostedSession) -> Session {
        hosted.set_mode(self.mode);
        let hosted = Rc::new(RefCell::new(hosted));
        let handle = fast::register(Rc::clone(&hosted), Rc::clone(&self.sets));
        Session { hosted, handle }
    }
}
