//! Every state a session can reach, explored breadth first with the runtime's own engine.
//!
//! A state is identified by the engine's behaviour key (step, sequence index and the
//! derived condition state: equal keys answer every future event identically), so the
//! exploration is finite and exact. From each state the host may:
//!
//! - record a tool: by default only one that `check` admits (what orch's agent loop
//!   enforces); with `permissive`, any tool of the universe; a foreign tool too when
//!   the step's patterns admit one;
//! - send a user message: one per combination of message conditions a single message
//!   can satisfy ([`super::messages`]), with that combination's witness text;
//! - reset.
//!
//! Breadth first, so every witness is a shortest list of events.

use super::messages::{Combinations, MessageConditions, MessageError};
use orch_runtime::dynamic::{DynMachine, DynOutcome, DynSession};
use std::collections::HashMap;

/// How the host behaves.
#[derive(Clone, Debug)]
pub struct Options {
    /// The host records any tool, allowed or not (AgentDock does not enforce).
    pub permissive: bool,
    /// The host's tools (default: every tool of the template).
    pub available: Option<Vec<String>>,
    /// Stop after this many distinct states (the result then says it is incomplete).
    pub max_states: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            permissive: false,
            available: None,
            max_states: 200_000,
        }
    }
}

/// One event of a witness (SPEC §10 event objects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `{"available": [...]}`.
    Available(Vec<String>),
    /// `{"message": "..."}`.
    Message(String),
    /// `{"tool": "..."}`.
    Tool(String),
    /// `{"reset": true}`.
    Reset,
}

/// A list of events that `orch simulate` replays from a fresh session.
pub type Witness = Vec<Event>;

/// What the exploration found about one step.
#[derive(Clone, Debug)]
pub struct StepFinding {
    /// The step's name.
    pub name: String,
    /// A shortest witness that makes the step active, if it can become active.
    pub reachable: Option<Witness>,
    /// Does the step have a sequence?
    pub has_sequence: bool,
    /// A shortest witness that completes the step's sequence, if it can.
    pub completes: Option<Witness>,
}

/// Everything the exploration found.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// Per step, in template order.
    pub steps: Vec<StepFinding>,
    /// A shortest witness of a state blocked on tools the host does not have, if any.
    pub blocked: Option<Witness>,
    /// A shortest witness of a state where `allowed()` is empty, if any.
    pub no_tools: Option<Witness>,
    /// Distinct states visited.
    pub states: usize,
    /// Was everything explored? When `false`, a step or sequence without a witness is
    /// undecided, not unreachable.
    pub complete: bool,
}

/// A foreign tool name that `pattern` admits (a `*` filled in), if it names no tool
/// of the template.
fn foreign_name(pattern: &str, tools: &[String]) -> Option<String> {
    let name = pattern.replace('*', "foreign");
    (!tools.contains(&name)).then_some(name)
}

/// Explores `machine` from a fresh session.
pub fn explore(machine: &DynMachine, options: &Options) -> Result<Exploration, MessageError> {
    let t = machine.tables();
    let combos: Combinations = MessageConditions {
        contains: &t.contains,
        regexes: &t.regexes,
    }
    .combinations(options.max_states)?;
    let tools: Vec<String> = machine.tools().to_vec();
    // Foreign tools: one name per distinct admitting pattern (all foreign names act
    // alike on the state; which ones a step admits is what differs).
    let mut foreign: Vec<String> = vec!["foreign_tool".to_owned()];
    for p in &t.patterns {
        if let Some(name) = foreign_name(p, &tools) {
            if !foreign.contains(&name) {
                foreign.push(name);
            }
        }
    }
    foreign.retain(|f| !tools.contains(f));

    let mut first = machine.session();
    let mut prefix: Witness = Vec::new();
    if let Some(list) = &options.available {
        first.set_available(list.iter().map(String::as_str));
        prefix.push(Event::Available(list.clone()));
    }
    // Nodes: session, parent, event that led here.
    let mut nodes: Vec<(DynSession<'_>, usize, Option<Event>)> = vec![(first, usize::MAX, None)];
    let mut seen: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut key = Vec::new();
    nodes[0].0.behaviour_key(&mut key);
    seen.insert(key.clone(), 0);

    let witness = |nodes: &[(DynSession<'_>, usize, Option<Event>)], mut at: usize| {
        let mut events = Vec::new();
        while at != usize::MAX {
            let (_, parent, event) = &nodes[at];
            if let Some(e) = event {
                events.push(e.clone());
            }
            at = *parent;
        }
        events.reverse();
        let mut w = prefix.clone();
        w.extend(events);
        w
    };

    let step_names = machine.steps();
    let mut steps: Vec<StepFinding> = step_names
        .iter()
        .enumerate()
        .map(|(i, name)| StepFinding {
            name: name.clone(),
            reachable: None,
            has_sequence: t.steps.get(i).is_some_and(|s| s.sequence.len > 0),
            completes: None,
        })
        .collect();
    let mut blocked = None;
    let mut no_tools = None;
    let mut complete = combos.complete;
    let step_index = |name: Option<&str>| name.and_then(|n| step_names.iter().position(|s| s == n));

    let mut head = 0;
    while head < nodes.len() {
        let at = head;
        head += 1;
        {
            let s = &nodes[at].0;
            if let Some(i) = step_index(s.step()) {
                if steps[i].reachable.is_none() {
                    steps[i].reachable = Some(witness(&nodes, at));
                }
            }
            if blocked.is_none() && s.blocked_on().is_some() {
                blocked = Some(witness(&nodes, at));
            }
            if no_tools.is_none() && s.allowed().is_empty() {
                no_tools = Some(witness(&nodes, at));
            }
        }
        // Every event the host model allows here.
        // Each with the message combination it stands for, for messages.
        let mut events: Vec<(Event, Option<&[u64]>)> = Vec::new();
        for name in tools.iter().chain(&foreign) {
            if options.permissive || nodes[at].0.check(name).is_ok() {
                events.push((Event::Tool(name.clone()), None));
            }
        }
        events.extend(
            combos
                .combinations
                .iter()
                .map(|c| (Event::Message(c.witness.clone()), Some(c.flags.as_slice()))),
        );
        events.push((Event::Reset, None));
        for (event, flags) in events {
            let mut next = nodes[at].0.clone();
            let active = step_index(next.step());
            match &event {
                Event::Tool(name) => {
                    if next.record(name) == DynOutcome::Completed {
                        if let Some(i) = active {
                            if steps[i].completes.is_none() {
                                let mut w = witness(&nodes, at);
                                w.push(event.clone());
                                steps[i].completes = Some(w);
                            }
                        }
                    }
                }
                // The combination's flags, exactly what its witness message sets.
                Event::Message(_) => next.on_message_flags(flags.unwrap_or(&[])),
                Event::Reset => next.reset(),
                Event::Available(_) => {}
            }
            next.behaviour_key(&mut key);
            if seen.contains_key(&key) {
                continue;
            }
            if nodes.len() >= options.max_states {
                complete = false;
                continue;
            }
            seen.insert(key.clone(), nodes.len());
            nodes.push((next, at, Some(event)));
        }
    }
    Ok(Exploration {
        steps,
        blocked,
        no_tools,
        states: nodes.len(),
        complete,
    })
}
