//! A verification run and its findings as one flat list, in the order `orch verify
//! --format json` prints them: one `property` per property, then per step (`step`, then
//! `sequence` when it has one and is reachable), `trap`s, `blocked`, `no_tools`, and a
//! closing `summary`. `orch verify` renders this list as JSON lines, the language
//! bindings (Python, JavaScript) hand it out in their own types; it decides nothing
//! itself.

use super::explore::{explore_with, Event, Exploration, Host, Options};
use super::messages::MessageError;
use super::properties::{check_with, PropertyFinding};
use crate::ir::IrProperty;
use orch_runtime::dynamic::DynMachine;

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
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
    /// How much was explored.
    Summary,
}

impl Kind {
    /// The word `orch verify --format json` prints as `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Step => "step",
            Kind::Sequence => "sequence",
            Kind::Trap => "trap",
            Kind::Blocked => "blocked",
            Kind::NoTools => "no_tools",
            Kind::Property => "property",
            Kind::Summary => "summary",
        }
    }
}

/// One event of a witness, as `orch simulate` reads it. An approved call of a gated
/// tool is two events: [`Step::Approve`] then [`Step::Tool`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `{"available": [...]}`.
    Available(Vec<String>),
    /// `{"message": "..."}`.
    Message(String),
    /// `{"tool": "..."}`.
    Tool(String),
    /// `{"tool": "...", "at": ms}`: the tool runs at this time (milliseconds since the
    /// epoch; the model let every budget window pass).
    ToolAt(String, u64),
    /// `{"approve": "..."}`.
    Approve(String),
    /// `{"reset": true}`.
    Reset,
}

/// One finding. Fields that do not apply to its kind are `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub kind: Kind,
    /// The step (step, sequence, trap).
    pub step: Option<String>,
    /// The property (property).
    pub name: Option<String>,
    /// The answer: reachable (step), completes (sequence), holds (property).
    /// `None` when the search stopped at its bounds before deciding.
    pub answer: Option<bool>,
    /// The events that show it, from a fresh session.
    pub witness: Option<Vec<Step>>,
    /// Why a step is unreachable, in the template's terms.
    pub reason: Option<String>,
    /// What a violated property forbade, in words.
    pub message: Option<String>,
    /// Distinct states visited (summary).
    pub states: Option<usize>,
    /// Was everything explored (summary)?
    pub complete: Option<bool>,
}

impl Finding {
    fn new(kind: Kind) -> Finding {
        Finding {
            kind,
            step: None,
            name: None,
            answer: None,
            witness: None,
            reason: None,
            message: None,
            states: None,
            complete: None,
        }
    }
}

/// Explores `machine` with `options` and decides `properties`, the host model prepared
/// once for both. `Err` when the host model cannot be built (a message condition the
/// verifier cannot read).
pub fn run(
    machine: &DynMachine,
    properties: &[IrProperty],
    options: &Options,
) -> Result<(Exploration, Vec<PropertyFinding>), MessageError> {
    let host = Host::new(machine, options)?;
    let found = explore_with(machine, options, &host);
    let props = check_with(machine, properties, options, &host);
    Ok((found, props))
}

/// [`run`], then every finding, in order. `Err` says in words why it could not run.
pub fn verify(
    machine: &DynMachine,
    properties: &[IrProperty],
    options: &Options,
) -> Result<Vec<Finding>, String> {
    let (found, props) =
        run(machine, properties, options).map_err(|e| format!("cannot explore: {e:?}"))?;
    Ok(findings(&found, &props))
}

/// The findings of an exploration and its properties, in order.
pub fn findings(found: &Exploration, props: &[PropertyFinding]) -> Vec<Finding> {
    let decided = |w: &Option<Vec<Event>>| match (w, found.complete) {
        (Some(_), _) => Some(true),
        (None, true) => Some(false),
        (None, false) => None,
    };
    let mut out = Vec::new();
    for p in props {
        out.push(Finding {
            name: Some(p.name.clone()),
            answer: p.holds,
            witness: p.witness.as_deref().map(witness),
            message: p.message.clone(),
            ..Finding::new(Kind::Property)
        });
    }
    for s in &found.steps {
        out.push(Finding {
            step: Some(s.name.clone()),
            answer: decided(&s.reachable).filter(|&reached| reached || s.abstracted.is_none()),
            witness: s.reachable.as_deref().map(witness),
            reason: s.reason.clone(),
            ..Finding::new(Kind::Step)
        });
        if s.has_sequence && s.reachable.is_some() {
            out.push(Finding {
                step: Some(s.name.clone()),
                answer: decided(&s.completes),
                witness: s.completes.as_deref().map(witness),
                ..Finding::new(Kind::Sequence)
            });
        }
    }
    for s in found.steps.iter().filter(|s| s.traps) {
        out.push(Finding {
            step: Some(s.name.clone()),
            witness: s.reachable.as_deref().map(witness),
            ..Finding::new(Kind::Trap)
        });
    }
    for (kind, w) in [
        (Kind::Blocked, &found.blocked),
        (Kind::NoTools, &found.no_tools),
    ] {
        if let Some(w) = w {
            out.push(Finding {
                witness: Some(witness(w)),
                ..Finding::new(kind)
            });
        }
    }
    out.push(Finding {
        states: Some(found.states),
        complete: Some(found.complete),
        ..Finding::new(Kind::Summary)
    });
    out
}

/// A witness as `orch simulate` events (an approved call is two).
pub fn witness(events: &[Event]) -> Vec<Step> {
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        match e {
            Event::Available(names) => out.push(Step::Available(names.clone())),
            Event::Message(text) => out.push(Step::Message(text.clone())),
            Event::Tool(t) => out.push(Step::Tool(t.clone())),
            Event::Later(t, at) => out.push(Step::ToolAt(t.clone(), *at)),
            Event::ApprovedTool(t) => {
                out.push(Step::Approve(t.clone()));
                out.push(Step::Tool(t.clone()));
            }
            Event::Reset => out.push(Step::Reset),
        }
    }
    out
}
