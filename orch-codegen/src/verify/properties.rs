//! Safety properties (semantics §14), decided by exploring every reachable state.
//!
//! Each property is a small monitor run beside the session: nothing to remember for
//! `never` and `approved`, the number of executions so far for `atMost N` (0..=N), and
//! whether a tool matching `after` has run for `after`. The product of the session's
//! states (told apart by the engine's behaviour key, as in [`super::explore`]) and the
//! monitor's is finite, so a breadth-first search decides the property exactly: it
//! fails with a shortest witness, holds when the search completes without a violation,
//! and is undecided when the search stops at the state or work limit.
//!
//! The host model is [`super::explore`]'s: tools `check` admits (and gated tools a
//! human approves: `{"approve": t}` then `{"tool": t}`), one message per combination of
//! message conditions, `reset` (which starts a new session: the monitors start over).
//! A property's `tool` (and `after`) is a name or a `*` pattern matched against tool
//! names, foreign ones included: per step, a shortest admitted foreign name that matches
//! it is found exactly ([`super::foreign`]).

use super::arguments::{self, Formula};
use super::explore::{events_at, Event, Host, Options, Witness};
use super::foreign::{self, Budget};
use super::messages::MessageError;
use crate::ir::{IrProperty, IrRule};
use orch_runtime::compiled::{glob_match, OwnedRules, Span};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::hash::HashMap;

/// What the search found about one property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyFinding {
    /// The property's name.
    pub name: String,
    /// `Some(true)`: holds in every reachable state; `Some(false)`: violated (see
    /// `witness`); `None`: undecided (the search stopped at its limit).
    pub holds: Option<bool>,
    /// For a violated property, a shortest list of events from a fresh session whose
    /// last event is the violating tool call.
    pub witness: Option<Witness>,
    /// What was violated, in words (for a violated property).
    pub message: Option<String>,
    /// Distinct (state, monitor) pairs visited.
    pub states: usize,
}

/// Decides every property of `properties` on `machine`, with `options`' host model and
/// limits (each property gets `options.max_states`; they share `options.max_work`).
pub fn check(
    machine: &DynMachine,
    properties: &[IrProperty],
    options: &Options,
) -> Result<Vec<PropertyFinding>, MessageError> {
    if properties.is_empty() {
        return Ok(Vec::new());
    }
    Ok(check_with(
        machine,
        properties,
        options,
        &Host::new(machine, options)?,
    ))
}

/// [`check`] with the host model already prepared (shared with the exploration): the
/// properties draw on the work the host left.
pub fn check_with(
    machine: &DynMachine,
    properties: &[IrProperty],
    options: &Options,
    host: &Host,
) -> Vec<PropertyFinding> {
    let mut work = host.work;
    let mut found = Vec::new();
    for p in properties {
        let names = PropertyNames::new(machine, p, &mut work);
        let complete = host.complete() && names.complete;
        let mut search = Search {
            machine,
            property: p,
            when: p.when.as_ref().map(|w| {
                let rules = machine.tables().rules.view();
                let names: Vec<&str> = (0..rules.budgets.len())
                    .map(|b| rules.budget_name(b))
                    .collect();
                crate::ir::flatten_predicate(w, &names)
            }),
            options,
            host,
            names: &names,
            work: &mut work,
        };
        found.push(search.run(complete));
    }
    found
}

/// The foreign names worth trying for one property, per step and for "no step active":
/// one that matches the property's `tool` (and, for `approved`, is not gated), and one
/// that matches `after` and not `tool`, else one that matches both.
struct PropertyNames {
    /// Index `steps.len()` is "no step active".
    matching: Vec<Vec<String>>,
    complete: bool,
}

impl PropertyNames {
    fn new(machine: &DynMachine, p: &IrProperty, work: &mut u64) -> Self {
        let t = machine.tables();
        let declared: Vec<&str> = machine.tools().iter().map(String::as_str).collect();
        let patterns = |span: Span| -> Vec<&str> {
            t.patterns
                .get(span.range())
                .unwrap_or(&[])
                .iter()
                .map(String::as_str)
                .collect()
        };
        let mut budget = Budget(*work);
        let mut complete = true;
        let mut ask = |allow: &[&str], allow_all: bool, deny: &[&str], require: &[&str]| {
            match foreign::witness_matching(allow, allow_all, deny, &declared, require, &mut budget)
            {
                Ok(found) => found,
                Err(foreign::Undecided) => {
                    complete = false;
                    None
                }
            }
        };
        // (allow, allow_all, deny, gate patterns) per step, then for "no step".
        type Place<'p> = (Vec<&'p str>, bool, Vec<&'p str>, Vec<&'p str>);
        let places: Vec<Place<'_>> = t
            .steps
            .iter()
            .map(|s| {
                (
                    patterns(s.allow_patterns),
                    s.allow_all,
                    patterns(s.deny_patterns),
                    patterns(s.approve.patterns),
                )
            })
            .chain([(Vec::new(), true, Vec::new(), patterns(t.approve.patterns))])
            .collect();
        let tool = p.tool.as_str();
        let matching = places
            .iter()
            .map(|(allow, all, deny, gate)| {
                let mut names = Vec::new();
                // Ungated first (what `approved` is about), then any.
                let mut refuse = deny.clone();
                refuse.extend(gate.iter().copied());
                names.extend(ask(allow, *all, &refuse, &[tool]));
                if names.is_empty() {
                    names.extend(ask(allow, *all, deny, &[tool]));
                }
                if let IrRule::After(q) = &p.rule {
                    let mut not_tool = deny.clone();
                    not_tool.push(tool);
                    match ask(allow, *all, &not_tool, &[q.as_str()]) {
                        Some(n) => names.push(n),
                        None => names.extend(ask(allow, *all, deny, &[q.as_str()])),
                    }
                }
                names.dedup();
                names
            })
            .collect();
        *work = budget.0;
        PropertyNames { matching, complete }
    }
}

/// One property's search.
struct Search<'a, 'm> {
    machine: &'m DynMachine,
    property: &'a IrProperty,
    /// The property's `when`, compiled on its own (semantics §16).
    when: Option<(OwnedRules, u32)>,
    options: &'a Options,
    host: &'a Host,
    names: &'a PropertyNames,
    work: &'a mut u64,
}

/// A node of the product: the session, the monitor, its parent and the event from it.
type Node<'m> = (DynSession<'m>, u64, usize, Option<Event>);

impl<'m> Search<'_, 'm> {
    fn matches(&self, pattern: &str, name: &str) -> bool {
        glob_match(pattern, name)
    }

    /// Can the call of `name` in step `active` run with arguments the property is about
    /// (its `when`) — and, when `ungated`, with no conditional `approve` holding? The
    /// arguments are the model's choice ([`super::arguments`]); when it can, the
    /// outcomes of the tests the choice assumed.
    fn arguments_allow(
        &self,
        session: &DynSession<'_>,
        name: &str,
        active: Option<usize>,
        ungated: bool,
    ) -> Option<Vec<String>> {
        let rules = self.machine.tables().rules.view();
        let tools = &self.machine.tables().tools;
        let when = self.when.as_ref().map(|(r, root)| Formula {
            rules: r.view(),
            root: *root,
            tools,
        });
        let tool = self.machine.tables().view().tool_index(name);
        let totals = |b: usize| super::budgets::exact_total(session, b, tool);
        arguments::can_run(rules, tools, tool, active, when, ungated, &totals)
    }

    /// " with arguments for which … (assuming …)" for a property with `when`: the
    /// property's condition, and the outcome of each test on arguments the witness
    /// assumed.
    fn with_arguments(&self, assumed: &[String]) -> String {
        let assuming = if assumed.is_empty() {
            String::new()
        } else {
            format!(" (assuming {})", assumed.join("; "))
        };
        match &self.when {
            Some((r, root)) => format!(
                ", with arguments for which {}{assuming}",
                r.view().describe(*root, &|i| self
                    .machine
                    .tools()
                    .get(i as usize)
                    .map_or("", String::as_str))
            ),
            None => assuming,
        }
    }

    /// The violation running `event`'s tool from monitor `monitor` in step `active`
    /// would be, if any.
    fn violation(
        &self,
        session: &DynSession<'_>,
        event: &Event,
        monitor: u64,
        active: Option<usize>,
    ) -> Option<String> {
        let (name, _) = event.tool()?;
        let approved = matches!(event, Event::ApprovedTool(_));
        let p = self.property;
        if !self.matches(&p.tool, name) {
            return None;
        }
        match &p.rule {
            IrRule::Never => self
                .arguments_allow(session, name, active, false)
                .map(|assumed| format!("`{name}` can run{}", self.with_arguments(&assumed))),
            IrRule::Approved if !approved => {
                self.arguments_allow(session, name, active, true)
                    .map(|assumed| {
                        format!(
                            "`{name}` can run without a human's approval{}",
                            self.with_arguments(&assumed)
                        )
                    })
            }
            IrRule::Approved => None,
            IrRule::AtMost(n)
                if monitor >= *n
                    && self.arguments_allow(session, name, active, false).is_some() =>
            {
                Some(format!("`{name}` can run {} times", n + 1))
            }
            IrRule::AtMost(_) => None,
            IrRule::After(q)
                if monitor == 0 && self.arguments_allow(session, name, active, false).is_some() =>
            {
                Some(format!(
                    "`{name}` can run before any tool matching `{q}` has"
                ))
            }
            IrRule::After(_) => None,
        }
    }

    /// The monitor after `event` from `monitor`.
    fn next_monitor(&self, event: &Event, monitor: u64) -> u64 {
        let name = match event.tool() {
            Some((n, _)) => n,
            None if *event == Event::Reset => return 0,
            None => return monitor,
        };
        match &self.property.rule {
            IrRule::AtMost(_) if self.matches(&self.property.tool, name) => monitor + 1,
            IrRule::After(q) if self.matches(q, name) => 1,
            _ => monitor,
        }
    }

    fn run(&mut self, mut complete: bool) -> PropertyFinding {
        let name = self.property.name.clone();
        let step_index: HashMap<&str, usize> = self
            .machine
            .steps()
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let tools: Vec<String> = self.machine.tools().to_vec();
        let mut key = Vec::new();
        let (first, prefix) = Host::first_session(self.machine, self.options);
        first.behaviour_key(&mut key);
        key.push(0);
        let mut seen: HashMap<Vec<u64>, usize> = HashMap::default();
        seen.insert(key.clone(), 0);
        let mut nodes: Vec<Node<'m>> = vec![(first, 0, usize::MAX, None)];
        let when_caps = self
            .when
            .as_ref()
            .map_or_else(Vec::new, |(r, _)| r.view().budget_caps());
        let mut head = 0;
        let witness = |nodes: &[Node<'m>], mut at: usize, last: Event| -> Witness {
            let mut events = vec![last];
            while at != usize::MAX {
                let (_, _, parent, event) = &nodes[at];
                events.extend(event.clone());
                at = *parent;
            }
            events.reverse();
            let mut w = prefix.clone();
            w.extend(events);
            w
        };
        while head < nodes.len() {
            let at = head;
            head += 1;
            let active = nodes[at].0.step().and_then(|s| step_index.get(s).copied());
            let place = active.unwrap_or(self.machine.steps().len());
            let extra = self
                .names
                .matching
                .get(place)
                .map_or(&[][..], Vec::as_slice);
            let events = events_at(
                &nodes[at].0,
                active,
                &tools,
                self.host,
                extra,
                self.options.permissive,
            );
            let cost = events.len() as u64 * (key.len() as u64 + 8);
            match self.work.checked_sub(cost) {
                Some(left) => *self.work = left,
                None => {
                    complete = false;
                    break;
                }
            }
            let monitor = nodes[at].1;
            for (event, flags) in events {
                if let Some(message) = self.violation(&nodes[at].0, &event, monitor, active) {
                    return PropertyFinding {
                        name,
                        holds: Some(false),
                        witness: Some(witness(&nodes, at, event)),
                        message: Some(message),
                        states: nodes.len(),
                    };
                }
                if let Some((n, _)) = event.tool() {
                    if !super::budgets::rules_admit(
                        &nodes[at].0,
                        n,
                        active,
                        self.options.permissive,
                    ) {
                        continue;
                    }
                }
                let mut next = nodes[at].0.clone();
                match &event {
                    Event::Tool(_) | Event::ApprovedTool(_) | Event::Later(..) => {
                        let (n, when) = event.tool().unwrap_or_default();
                        super::budgets::run_tool(&mut next, n, when);
                    }
                    Event::Message(_) => next.on_message_flags(flags.unwrap_or(&[])),
                    Event::Reset => next.reset(),
                    Event::Available(_) => {}
                }
                let m = self.next_monitor(&event, monitor);
                next.behaviour_key(&mut key);
                {
                    // The property's budget tests tell totals apart up to its own bounds.
                    for (b, cap) in when_caps.iter().enumerate() {
                        let total = next.budget_total(b).clamp(0, *cap);
                        key.push(u64::try_from(total).unwrap_or(u64::MAX));
                    }
                }
                key.push(m);
                if seen.contains_key(&key) {
                    continue;
                }
                if nodes.len() >= self.options.max_states {
                    complete = false;
                    break;
                }
                seen.insert(key.clone(), nodes.len());
                nodes.push((next, m, at, Some(event)));
            }
            if !complete {
                break;
            }
        }
        PropertyFinding {
            name,
            holds: complete.then_some(true),
            witness: None,
            message: None,
            states: nodes.len(),
        }
    }
}
