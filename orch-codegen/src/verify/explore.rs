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
//!
//! A step condition that reads a budget (semantics §17) makes the budgets part of a
//! state: every recorded call is charged as `orch simulate` charges a tool event without
//! arguments, at a clock that does not move, and a state's key holds each budget's total
//! up to one past the largest bound a test compares it with — exact for a count of a
//! tool's calls over the run, a step or a message. A budget whose charges depend on the
//! arguments (`sum`, `where`) or on time (`within`) is not modelled: a step whose
//! condition reads one is never reported unreachable, only undecided, with that reason.

use super::budgets::{abstracted, rules_admit, run_tool};
use super::foreign;
use super::messages::{Combinations, MessageConditions, MessageError};
use orch_runtime::compiled::{glob_match, Condition};
use orch_runtime::dynamic::{DynMachine, DynOutcome, DynSession};
use orch_runtime::hash::HashMap;

/// How the host behaves.
#[derive(Clone, Debug)]
pub struct Options {
    /// The host records any tool, allowed or not (AgentDock does not enforce).
    pub permissive: bool,
    /// The host's tools (default: every tool of the template).
    pub available: Option<Vec<String>>,
    /// Stop after this many distinct states (the result then says it is incomplete).
    pub max_states: usize,
    /// Stop after this much work (the result then says it is incomplete): units
    /// counted, not time, so the same template always gets the same answer. The message
    /// analysis, the foreign-name questions and the exploration draw on it in turn; a
    /// unit is an automaton state visited or a byte fed to one, a value stored, an event
    /// tried.
    pub max_work: u64,
}

/// The default [`Options::max_work`]: the templates of this repository's fixtures take
/// at most 0.5 million units (most under 10,000); a pathological one stops here in about
/// a second of a release build (about 20 million units a second).
pub const DEFAULT_WORK: u64 = 20_000_000;

impl Default for Options {
    fn default() -> Self {
        Options {
            permissive: false,
            available: None,
            max_states: 20_000,
            max_work: DEFAULT_WORK,
        }
    }
}

/// One event of a witness (semantics §10 event objects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `{"available": [...]}`.
    Available(Vec<String>),
    /// `{"message": "..."}`.
    Message(String),
    /// `{"tool": "..."}`.
    Tool(String),
    /// `{"approve": "..."}` then `{"tool": "..."}`: a human approves the call of a gated
    /// tool (semantics §13), which then runs.
    ApprovedTool(String),
    /// `{"tool": "...", "at": ms}`: the tool runs once every budget window has passed
    /// since the session's newest call (with windowed budgets, time is the model's
    /// choice: it stands still, or passes every window).
    Later(String, u64),
    /// `{"reset": true}`.
    Reset,
}

/// A list of events that `orch simulate` replays from a fresh session.
pub type Witness = Vec<Event>;

impl Event {
    /// The event as `orch simulate` reads it (semantics §10): one JSON object, two for
    /// [`Event::ApprovedTool`] (`{"approve": t}` then `{"tool": t}`), comma-separated.
    pub fn to_json(&self) -> String {
        let s = |text: &str| {
            let mut out = String::from("\"");
            for c in text.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        match self {
            Event::Available(list) => {
                let items: Vec<String> = list.iter().map(|t| s(t)).collect();
                format!("{{\"available\": [{}]}}", items.join(", "))
            }
            Event::Message(m) => format!("{{\"message\": {}}}", s(m)),
            Event::Tool(t) => format!("{{\"tool\": {}}}", s(t)),
            Event::Later(t, at) => format!("{{\"tool\": {}, \"at\": {at}}}", s(t)),
            Event::ApprovedTool(t) => {
                format!("{{\"approve\": {}}}, {{\"tool\": {}}}", s(t), s(t))
            }
            Event::Reset => "{\"reset\": true}".to_owned(),
        }
    }
}

impl Event {
    /// The tool a tool event runs, and the time a [`Event::Later`] carries.
    pub fn tool(&self) -> Option<(&str, Option<u64>)> {
        match self {
            Event::Tool(t) | Event::ApprovedTool(t) => Some((t, None)),
            Event::Later(t, at) => Some((t, Some(*at))),
            _ => None,
        }
    }
}

/// A witness as JSON text: `[{"message": "..."}, {"tool": "..."}]`.
pub fn witness_to_json(w: &[Event]) -> String {
    let items: Vec<String> = w.iter().map(Event::to_json).collect();
    format!("[{}]", items.join(", "))
}

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
    /// For a step found unreachable: why, in the template's terms.
    pub reason: Option<String>,
    /// The step traps the session: once it is active, no event but `reset` ever makes
    /// another step active (informational; decided only by a complete exploration).
    pub traps: bool,
    /// Why the exploration cannot decide that the step is unreachable, when a condition
    /// of it reads a budget whose amounts or window it does not model.
    pub abstracted: Option<String>,
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
    /// Work spent ([`Options::max_work`] units).
    pub work: u64,
    /// Was everything explored? When `false`, a step or sequence without a witness is
    /// undecided, not unreachable.
    pub complete: bool,
}

/// The foreign tool names the exploration records: one for states without an active
/// step (where every name is admitted) and per step one it admits, if any.
pub(crate) struct ForeignNames {
    pub(crate) anywhere: Option<String>,
    pub(crate) per_step: Vec<Option<String>>,
    /// Was every step's question decided within the budget?
    pub(crate) complete: bool,
}

/// Decides, per step, whether it admits some foreign name, exactly ([`foreign`]);
/// readable names (`foreign_tool`, a pattern with `foreign` for its `*`) are preferred
/// when admitted.
pub(crate) fn foreign_names(machine: &DynMachine, work: &mut u64) -> ForeignNames {
    let t = machine.tables();
    let declared: Vec<&str> = machine.tools().iter().map(String::as_str).collect();
    let mut budget = foreign::Budget(*work);
    let mut complete = true;
    let mut decide = |allow: &[&str], allow_all: bool, deny: &[&str]| {
        let readable = std::iter::once("foreign_tool".to_owned())
            .chain(allow.iter().map(|p| p.replace('*', "foreign")));
        for name in readable {
            let ok = !declared.contains(&name.as_str())
                && (allow_all || allow.iter().any(|p| glob_match(p, &name)))
                && !deny.iter().any(|p| glob_match(p, &name));
            if ok {
                return Some(name);
            }
        }
        match foreign::witness(allow, allow_all, deny, &declared, &mut budget) {
            Ok(found) => found,
            Err(foreign::Undecided) => {
                complete = false;
                None
            }
        }
    };
    let anywhere = decide(&[], true, &[]);
    let patterns = |span: orch_runtime::compiled::Span| -> Vec<&str> {
        t.patterns
            .get(span.range())
            .unwrap_or(&[])
            .iter()
            .map(String::as_str)
            .collect()
    };
    let per_step = t
        .steps
        .iter()
        .map(|s| {
            decide(
                &patterns(s.allow_patterns),
                s.allow_all,
                &patterns(s.deny_patterns),
            )
        })
        .collect();
    *work = budget.0;
    ForeignNames {
        anywhere,
        per_step,
        complete,
    }
}

/// The states found so far, each with its parent and the event that led to it, and
/// the transitions between them (other than `reset`, for the trap analysis).
struct Graph<'m> {
    nodes: Vec<(DynSession<'m>, usize, Option<Event>)>,
    seen: HashMap<Vec<u64>, usize>,
    edges: Vec<Vec<u32>>,
    /// What every witness starts with (the host's tools, when given).
    prefix: Witness,
    /// A buffer for behaviour keys.
    key: Vec<u64>,
}

/// What adding a state to a [`Graph`] did.
enum Added {
    /// It was known (or new and added).
    Done,
    /// It was new, but the graph is at its state limit.
    Full,
}

impl<'m> Graph<'m> {
    fn new(first: DynSession<'m>, prefix: Witness) -> Self {
        let mut key = Vec::new();
        first.behaviour_key(&mut key);
        let mut seen = HashMap::default();
        seen.insert(key.clone(), 0);
        Graph {
            nodes: vec![(first, usize::MAX, None)],
            seen,
            edges: Vec::new(),
            prefix,
            key,
        }
    }

    /// The events from a fresh session to state `at`.
    fn witness(&self, mut at: usize) -> Witness {
        let mut events = Vec::new();
        while at != usize::MAX {
            let (_, parent, event) = &self.nodes[at];
            if let Some(e) = event {
                events.push(e.clone());
            }
            at = *parent;
        }
        events.reverse();
        let mut w = self.prefix.clone();
        w.extend(events);
        w
    }

    /// Adds the state `next` that `event` leads to from `at`.
    fn add(&mut self, at: usize, next: DynSession<'m>, event: Event, max_states: usize) -> Added {
        next.behaviour_key(&mut self.key);
        let is_reset = event == Event::Reset;
        if let Some(&to) = self.seen.get(&self.key) {
            if !is_reset {
                edges_push(&mut self.edges, at, to);
            }
            return Added::Done;
        }
        if self.nodes.len() >= max_states {
            return Added::Full;
        }
        self.seen.insert(self.key.clone(), self.nodes.len());
        if !is_reset {
            edges_push(&mut self.edges, at, self.nodes.len());
        }
        self.nodes.push((next, at, Some(event)));
        Added::Done
    }
}

/// What the states seen so far show, per step.
struct Findings {
    steps: Vec<StepFinding>,
    /// Per step and condition: did it ever hold in a reachable state?
    ever: Vec<Vec<bool>>,
    /// Per step, the first state where all its conditions held at once.
    all_at: Vec<Option<usize>>,
    blocked: Option<Witness>,
    no_tools: Option<Witness>,
}

impl Findings {
    fn new(machine: &DynMachine) -> Self {
        let t = machine.tables();
        let steps = machine
            .steps()
            .iter()
            .enumerate()
            .map(|(i, name)| StepFinding {
                name: name.clone(),
                reachable: None,
                has_sequence: t.steps.get(i).is_some_and(|s| s.sequence.len > 0),
                completes: None,
                reason: None,
                traps: false,
                abstracted: abstracted(machine, i),
            })
            .collect();
        let n_conditions: Vec<usize> = t.steps.iter().map(|s| s.conditions.len as usize).collect();
        Findings {
            steps,
            ever: n_conditions.iter().map(|n| vec![false; *n]).collect(),
            all_at: vec![None; n_conditions.len()],
            blocked: None,
            no_tools: None,
        }
    }

    /// Notes what state `at` shows (its step active, blocked, without tools, which
    /// conditions hold).
    fn observe(&mut self, graph: &Graph<'_>, at: usize, active: Option<usize>) {
        let s = &graph.nodes[at].0;
        if let Some(i) = active {
            if self.steps[i].reachable.is_none() {
                self.steps[i].reachable = Some(graph.witness(at));
            }
        }
        if self.blocked.is_none() && s.blocked_on().is_some() {
            self.blocked = Some(graph.witness(at));
        }
        if self.no_tools.is_none() && s.allowed().is_empty() {
            self.no_tools = Some(graph.witness(at));
        }
        for (i, seen) in self.ever.iter_mut().enumerate() {
            let mut all = !seen.is_empty();
            for (k, e) in seen.iter_mut().enumerate() {
                let holds = s.condition_holds(i, k) == Some(true);
                *e |= holds;
                all &= holds;
            }
            if all && self.all_at[i].is_none() {
                self.all_at[i] = Some(at);
            }
        }
    }

    /// After a complete exploration: which steps trap the session, and why each
    /// unreachable step is.
    fn conclude(
        &mut self,
        machine: &DynMachine,
        options: &Options,
        graph: &Graph<'_>,
        step_index: impl Fn(Option<&str>) -> Option<usize>,
    ) {
        let active: Vec<Option<usize>> = graph
            .nodes
            .iter()
            .map(|(s, _, _)| step_index(s.step()))
            .collect();
        for (i, step) in self.steps.iter_mut().enumerate() {
            if step.reachable.is_some() {
                step.traps = traps(&graph.edges, &active, i);
            }
        }
        let reachable: Vec<bool> = self.steps.iter().map(|s| s.reachable.is_some()).collect();
        for (i, step) in self.steps.iter_mut().enumerate() {
            if step.reachable.is_none() && step.abstracted.is_some() {
                step.reason.clone_from(&step.abstracted);
            } else if step.reachable.is_none() {
                let winner =
                    self.all_at[i].and_then(|at| graph.nodes[at].0.step().map(str::to_owned));
                step.reason = Some(reason(
                    machine,
                    options,
                    i,
                    &self.ever[i],
                    winner,
                    &reachable,
                ));
            }
        }
    }
}

/// Every event the host model allows in state `session` (whose active step is
/// `active`), each message with the combination of flags it stands for. `extra` are
/// more foreign names to try (a property's, [`super::properties`]).
pub(crate) fn events_at<'c>(
    session: &DynSession<'_>,
    active: Option<usize>,
    tools: &[String],
    host: &'c Host,
    extra: &[String],
    permissive: bool,
) -> Vec<(Event, Option<&'c [u64]>)> {
    let (foreign, combos) = (&host.foreign, &host.combos);
    let mut events: Vec<(Event, Option<&[u64]>)> = Vec::new();
    let here = active.and_then(|i| foreign.per_step[i].as_ref());
    let foreign_here = foreign
        .anywhere
        .iter()
        .chain(here.filter(|&w| Some(w) != foreign.anywhere.as_ref()));
    for name in tools.iter().chain(foreign_here) {
        if let Some(event) = tool_event(session, name, permissive) {
            events.push((event, None));
        }
    }
    for name in extra {
        if let Some(event) = tool_event(session, name, permissive) {
            if !events.iter().any(|(e, _)| *e == event) {
                events.push((event, None));
            }
        }
    }
    // With windowed budgets, each ungated call may also come after every window passed.
    if let Some(at) = super::budgets::past_every_window(session) {
        let later: Vec<(Event, Option<&[u64]>)> = events
            .iter()
            .filter_map(|(e, _)| match e {
                Event::Tool(t) => Some((Event::Later(t.clone(), at), None)),
                _ => None,
            })
            .collect();
        events.extend(later);
    }
    events.extend(
        combos
            .combinations
            .iter()
            .map(|c| (Event::Message(c.witness.clone()), Some(c.flags.as_slice()))),
    );
    events.push((Event::Reset, None));
    events
}

/// The event that runs tool `name` in state `session`, if the host model lets it run:
/// admitted by `check` (any tool when `permissive`), or gated and approved by a human.
pub(crate) fn tool_event(session: &DynSession<'_>, name: &str, permissive: bool) -> Option<Event> {
    match session.check(name) {
        _ if permissive => Some(Event::Tool(name.to_owned())),
        Ok(()) => Some(Event::Tool(name.to_owned())),
        Err(d) if d.needs_approval() => Some(Event::ApprovedTool(name.to_owned())),
        Err(_) => None,
    }
}

/// What the host model can do with one machine, prepared once and shared by the
/// exploration and the property searches: one message per combination of message
/// conditions ([`super::messages`]) and the foreign names worth trying ([`foreign`]).
pub struct Host {
    pub(crate) combos: Combinations,
    pub(crate) foreign: ForeignNames,
    /// Work units left after preparing it (of [`Options::max_work`]).
    pub(crate) work: u64,
}

impl Host {
    /// Prepares the host model of `machine`, drawing on `options.max_work`.
    pub fn new(machine: &DynMachine, options: &Options) -> Result<Host, MessageError> {
        let t = machine.tables();
        let mut work = options.max_work;
        let combos: Combinations = MessageConditions {
            contains: &t.contains,
            regexes: &t.regexes,
        }
        .combinations(options.max_states, &mut work)?;
        // Foreign tools: all foreign names act alike on the state once recorded; which
        // steps admit one is what differs, decided exactly per step.
        let foreign = foreign_names(machine, &mut work);
        Ok(Host {
            combos,
            foreign,
            work,
        })
    }

    /// Were the message combinations and the foreign names all decided?
    pub(crate) fn complete(&self) -> bool {
        self.combos.complete && self.foreign.complete
    }

    /// A fresh session with `options`' host tools, and the events that set them (what
    /// every witness starts with).
    pub(crate) fn first_session<'m>(
        machine: &'m DynMachine,
        options: &Options,
    ) -> (DynSession<'m>, Witness) {
        let mut first = machine.session();
        let mut prefix: Witness = Vec::new();
        if let Some(list) = &options.available {
            first.set_available(list.iter().map(String::as_str));
            prefix.push(Event::Available(list.clone()));
        }
        (first, prefix)
    }
}

/// Explores `machine` from a fresh session.
pub fn explore(machine: &DynMachine, options: &Options) -> Result<Exploration, MessageError> {
    Ok(explore_with(
        machine,
        options,
        &Host::new(machine, options)?,
    ))
}

/// [`explore`] with the host model already prepared (shared with the property searches).
pub fn explore_with(machine: &DynMachine, options: &Options, host: &Host) -> Exploration {
    let mut work = host.work;
    let tools: Vec<String> = machine.tools().to_vec();
    let (first, prefix) = Host::first_session(machine, options);
    let mut graph = Graph::new(first, prefix);
    let mut findings = Findings::new(machine);
    let mut complete = host.complete();
    // Names to indices once (looked up for every state and every transition).
    let index_of: HashMap<&str, usize> = machine
        .steps()
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let step_index = |name: Option<&str>| name.and_then(|n| index_of.get(n).copied());

    let mut head = 0;
    'explore: while head < graph.nodes.len() {
        let at = head;
        head += 1;
        let active = step_index(graph.nodes[at].0.step());
        findings.observe(&graph, at, active);
        let events = events_at(
            &graph.nodes[at].0,
            active,
            &tools,
            host,
            &[],
            options.permissive,
        );
        // Each event costs a copy of the session and its key.
        let cost = events.len() as u64 * (graph.key.len() as u64 + 8);
        match work.checked_sub(cost) {
            Some(left) => work = left,
            None => {
                complete = false;
                break;
            }
        }
        for (event, flags) in events {
            if let Some((name, _)) = event.tool() {
                if !rules_admit(&graph.nodes[at].0, name, active, options.permissive) {
                    continue;
                }
            }
            let mut next = graph.nodes[at].0.clone();
            match &event {
                Event::Tool(_) | Event::ApprovedTool(_) | Event::Later(..) => {
                    let (name, when) = event.tool().unwrap_or_default();
                    let completed = run_tool(&mut next, name, when) == DynOutcome::Completed;
                    if let Some(i) = active.filter(|_| completed) {
                        if findings.steps[i].completes.is_none() {
                            let mut w = graph.witness(at);
                            w.push(event.clone());
                            findings.steps[i].completes = Some(w);
                        }
                    }
                }
                // The combination's flags, exactly what its witness message sets.
                Event::Message(_) => next.on_message_flags(flags.unwrap_or(&[])),
                Event::Reset => next.reset(),
                Event::Available(_) => {}
            }
            if let Added::Full = graph.add(at, next, event, options.max_states) {
                // Stop: what is known stays known, the rest is undecided.
                complete = false;
                break 'explore;
            }
        }
    }
    if complete {
        findings.conclude(machine, options, &graph, step_index);
    }
    Exploration {
        steps: findings.steps,
        blocked: findings.blocked,
        no_tools: findings.no_tools,
        states: graph.nodes.len(),
        work: options.max_work - work,
        complete,
    }
}

fn edges_push(edges: &mut Vec<Vec<u32>>, from: usize, to: usize) {
    if edges.len() <= from {
        edges.resize(from + 1, Vec::new());
    }
    edges[from].push(to as u32);
}

/// Does step `step` trap the session: from no state where it is active does a path
/// (without `reset`) lead to a state where another step is active?
fn traps(edges: &[Vec<u32>], active: &[Option<usize>], step: usize) -> bool {
    // Backwards from every state with another step: the states that can escape.
    let mut reverse: Vec<Vec<u32>> = vec![Vec::new(); active.len()];
    for (from, tos) in edges.iter().enumerate() {
        for &to in tos {
            reverse[to as usize].push(from as u32);
        }
    }
    let mut escapes = vec![false; active.len()];
    let mut stack: Vec<usize> = (0..active.len())
        .filter(|&n| active[n] != Some(step))
        .collect();
    for &n in &stack {
        escapes[n] = true;
    }
    while let Some(n) = stack.pop() {
        for &p in &reverse[n] {
            if !escapes[p as usize] {
                escapes[p as usize] = true;
                stack.push(p as usize);
            }
        }
    }
    (0..active.len()).any(|n| active[n] == Some(step))
        && (0..active.len()).all(|n| active[n] != Some(step) || !escapes[n])
}

/// A condition in the template's words.
fn describe(machine: &DynMachine, c: Condition) -> String {
    let t = machine.tables();
    let tool = |i: u16| t.tools.get(i as usize).cloned().unwrap_or_default();
    match c {
        Condition::ToolUsed(x) => format!("`tool_used {}`", tool(x)),
        Condition::SequenceMatch => "`sequence_match`".to_owned(),
        Condition::Message(f) if (f as usize) < t.contains.len() => {
            format!("`message_contains {:?}`", t.contains[f as usize])
        }
        Condition::Message(f) => format!(
            "`message_regex {:?}`",
            t.regexes
                .get(f as usize - t.contains.len())
                .cloned()
                .unwrap_or_default()
        ),
        Condition::NotRecentlyUsed { tool: x, window } => {
            format!("`not_recently_used {} (window {window})`", tool(x))
        }
        Condition::Budget(k) => format!("`budget {}`", t.rules.view().describe_budget_condition(k)),
    }
}

/// Why step `i` never becomes active, from what held in the reachable states.
fn reason(
    machine: &DynMachine,
    options: &Options,
    i: usize,
    ever: &[bool],
    winner: Option<String>,
    reachable: &[bool],
) -> String {
    let t = machine.tables();
    let view = t.view();
    let conditions = view.step_conditions(i);
    if conditions.is_empty() {
        return "it has no conditions and is not the default step".to_owned();
    }
    if t.default_step == Some(i as u16) {
        return "it is the default step of a template whose default never becomes active"
            .to_owned();
    }
    let never: Vec<String> = conditions
        .iter()
        .zip(ever)
        .filter(|(_, e)| !**e)
        .map(|(c, _)| {
            let mut text = format!("{} never holds", describe(machine, *c));
            if let Condition::ToolUsed(x) = c {
                text.push_str(&tool_note(machine, options, *x as usize, reachable));
            }
            text
        })
        .collect();
    if !never.is_empty() {
        return never.join("; ");
    }
    match winner {
        Some(w) => format!(
            "its conditions hold together, but an earlier step wins then (for example `{w}`)"
        ),
        None => format!(
            "its conditions never hold together: {}",
            conditions
                .iter()
                .map(|c| describe(machine, *c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Why a tool is never used: not available, or allowed only in dead steps.
fn tool_note(machine: &DynMachine, options: &Options, tool: usize, reachable: &[bool]) -> String {
    let t = machine.tables();
    let name = t.tools.get(tool).cloned().unwrap_or_default();
    if let Some(list) = &options.available {
        if !list.contains(&name) {
            return format!(": the host does not have `{name}`");
        }
    }
    if options.permissive {
        return String::new();
    }
    let view = t.view();
    let allowing: Vec<usize> = (0..t.steps.len())
        .filter(|&s| {
            let set = view.static_set(s);
            set.get(tool / 64)
                .is_some_and(|w| w >> (tool % 64) & 1 == 1)
        })
        .collect();
    let dead: Vec<&str> = allowing
        .iter()
        .filter(|&&s| !reachable[s])
        .map(|&s| machine.steps()[s].as_str())
        .collect();
    if allowing.is_empty() {
        format!(": no step allows `{name}`")
    } else if dead.len() == allowing.len() {
        format!(
            ": `{name}` is allowed only in {}, which never become{} active",
            dead.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if dead.len() == 1 { "s" } else { "" }
        )
    } else {
        String::new()
    }
}
