//! The reference model of a session: semantics §4–§8 written out the straightforward way,
//! over the compiled tables of a [`DynMachine`], with nothing precomputed. Every
//! condition is evaluated over the history each time activation runs (the engine did
//! exactly this before conditions became incremental state), and message conditions are
//! decided pattern by pattern with `regex::Regex` and the reference `contains_folded`.
//! It exists only to be compared with the engine, event by event.
#![allow(dead_code)]

use orch::dynamic::DynMachine;
use orch_runtime::compiled::{contains_folded, glob_match, reset, Condition, Tables};
use std::collections::VecDeque;

/// Why the reference refuses a tool (the fields of `orch::Refusal`, by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefDenied {
    NotInStep(String),
    SequenceExpects {
        step: String,
        index: usize,
        expected: Vec<String>,
    },
    Unavailable,
}

/// `machine`'s `message_regex` patterns, compiled by the `regex` crate.
pub fn compile_regexes(machine: &DynMachine) -> Vec<regex::Regex> {
    machine
        .tables()
        .regexes
        .iter()
        .map(|r| regex::Regex::new(r).expect("the compiler accepted it"))
        .collect()
}

/// One session of the reference model.
pub struct Reference<'m> {
    t: Tables<'m, String>,
    regexes: Vec<regex::Regex>,
    step: Option<usize>,
    index: usize,
    /// Oldest first; `None` is a foreign tool.
    history: VecDeque<Option<usize>>,
    used: Vec<bool>,
    flags: Vec<bool>,
    available: Vec<bool>,
    foreign_available: Vec<String>,
}

impl<'m> Reference<'m> {
    /// A fresh session over `machine`'s tables.
    pub fn new(machine: &'m DynMachine) -> Self {
        Self::with_regexes(machine, compile_regexes(machine))
    }

    /// A fresh session over `machine`'s tables, with its `message_regex` patterns
    /// already compiled by [`compile_regexes`] (regexes are cheap to clone).
    pub fn with_regexes(machine: &'m DynMachine, regexes: Vec<regex::Regex>) -> Self {
        let t = machine.tables().view();
        let mut r = Reference {
            regexes,
            step: None,
            index: 0,
            history: VecDeque::new(),
            used: vec![false; t.tools.len()],
            flags: vec![false; t.message_flags()],
            available: vec![true; t.tools.len()],
            foreign_available: Vec::new(),
            t,
        };
        r.activate();
        r
    }

    /// Back to a fresh session (the host's tools stay).
    pub fn reset(&mut self) {
        self.step = None;
        self.index = 0;
        self.history.clear();
        self.used.iter_mut().for_each(|u| *u = false);
        self.flags.iter_mut().for_each(|f| *f = false);
        self.activate();
    }

    /// The host's tool list (declared names are `A`; others are foreign host tools).
    pub fn set_available<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        self.available.iter_mut().for_each(|a| *a = false);
        self.foreign_available.clear();
        for name in names {
            match self.tool(name) {
                Some(i) => self.available[i] = true,
                None => {
                    if !self.foreign_available.iter().any(|f| f == name) {
                        self.foreign_available.push(name.to_owned());
                    }
                }
            }
        }
    }

    fn tool(&self, name: &str) -> Option<usize> {
        self.t.tools.iter().position(|t| t == name)
    }

    fn name(&self, i: usize) -> String {
        self.t.tools[i].clone()
    }

    pub fn step(&self) -> Option<&str> {
        self.step.map(|s| self.t.step_names[s].as_str())
    }

    pub fn sequence_index(&self) -> usize {
        self.index
    }

    fn sequence_len(&self, step: usize) -> usize {
        self.t.steps[step].sequence.len as usize
    }

    fn group(&self, step: usize, pos: usize) -> Vec<usize> {
        (0..self.t.tools.len())
            .filter(|&i| {
                let w = self.t.group(step, pos);
                w.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
            })
            .collect()
    }

    fn in_static_set(&self, step: usize, i: usize) -> bool {
        let w = self.t.static_set(step);
        w.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// The pending sequence position: `(step, index, its tools)`.
    fn expected(&self) -> Option<(usize, usize, Vec<usize>)> {
        let step = self.step?;
        (self.index < self.sequence_len(step))
            .then(|| (step, self.index, self.group(step, self.index)))
    }

    /// semantics §7, evaluated from scratch.
    fn holds(&self, step: usize, c: Condition) -> bool {
        let newest = |k: usize| self.history[self.history.len() - 1 - k];
        match c {
            Condition::ToolUsed(t) => self.used[t as usize],
            Condition::Message(f) => self.flags[f as usize],
            Condition::NotRecentlyUsed { tool, window } => {
                let n = (window as usize).min(self.history.len());
                (0..n).all(|k| newest(k) != Some(tool as usize))
            }
            Condition::SequenceMatch => {
                let n = self.sequence_len(step);
                n > 0
                    && n <= self.history.len()
                    && (0..n).all(|pos| match newest(n - 1 - pos) {
                        Some(tool) => self.group(step, pos).contains(&tool),
                        None => false,
                    })
            }
            // The generated templates this reference judges declare no budgets; budget
            // conditions are tested against their own expectations
            // (tests/budget_conditions.rs).
            Condition::Budget(_) => false,
        }
    }

    /// semantics §6.
    fn activate(&mut self) {
        let default = self.t.default_step.map(usize::from);
        let winner = (0..self.t.steps.len()).find(|&i| {
            Some(i) != default
                && !self.t.steps[i].conditions.is_empty()
                && self.t.step_conditions(i).iter().all(|c| self.holds(i, *c))
        });
        let winner = match (winner, self.step) {
            (Some(w), _) => Some(w),
            (None, Some(_)) => return,
            (None, None) => default,
        };
        if winner != self.step {
            self.step = winner;
            self.index = 0;
        }
    }

    /// semantics §5 "user message".
    pub fn on_user_message(&mut self, message: &str) {
        let n_contains = self.t.contains.len();
        for (i, needle) in self.t.contains.iter().enumerate() {
            self.flags[i] = contains_folded(message, needle);
        }
        for (j, re) in self.regexes.iter().enumerate() {
            self.flags[n_contains + j] = re.is_match(message);
        }
        if let Some(step) = self.step {
            let rules = self.t.steps[step].reset;
            let own = |kind: u8| {
                self.t.step_conditions(step).iter().any(|c| match *c {
                    Condition::Message(f) if self.flags[f as usize] => {
                        let this = if (f as usize) < n_contains {
                            reset::MESSAGE_CONTAINS
                        } else {
                            reset::MESSAGE_REGEX
                        };
                        this == kind
                    }
                    _ => false,
                })
            };
            if rules & reset::USER_MESSAGE != 0
                || (rules & reset::MESSAGE_CONTAINS != 0 && own(reset::MESSAGE_CONTAINS))
                || (rules & reset::MESSAGE_REGEX != 0 && own(reset::MESSAGE_REGEX))
            {
                self.index = 0;
            }
        }
        self.activate();
    }

    /// semantics §5 "check tool", §8.
    pub fn check(&self, name: &str) -> Result<(), RefDenied> {
        let tool = self.tool(name);
        if let Some(step) = self.step {
            let step_name = self.t.step_names[step].clone();
            if let Some((_, index, group)) = self.expected() {
                if !tool.is_some_and(|i| group.contains(&i)) {
                    return Err(RefDenied::SequenceExpects {
                        step: step_name,
                        index,
                        expected: group.iter().map(|&i| self.name(i)).collect(),
                    });
                }
            } else {
                let permitted = match tool {
                    Some(i) => self.in_static_set(step, i),
                    None => self.foreign_permitted(step, name),
                };
                if !permitted {
                    return Err(RefDenied::NotInStep(step_name));
                }
            }
        }
        match tool {
            Some(i) if !self.available[i] => Err(RefDenied::Unavailable),
            _ => Ok(()),
        }
    }

    fn foreign_permitted(&self, step: usize, name: &str) -> bool {
        let s = &self.t.steps[step];
        let any = |span: orch_runtime::compiled::Span| {
            self.t.patterns[span.range()]
                .iter()
                .any(|p| glob_match(p, name))
        };
        (s.allow_all || any(s.allow_patterns)) && !any(s.deny_patterns)
    }

    /// semantics §8: declared tools in order, then the host's foreign tools that pass.
    pub fn allowed(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..self.t.tools.len())
            .filter(|&i| self.check(&self.t.tools[i]).is_ok())
            .map(|i| self.name(i))
            .collect();
        out.extend(
            self.foreign_available
                .iter()
                .filter(|n| self.check(n).is_ok())
                .cloned(),
        );
        out
    }

    /// semantics §8: the pending position's tools when none is available.
    pub fn blocked_on(&self) -> Option<Vec<String>> {
        let (_, _, group) = self.expected()?;
        (!group.iter().any(|&i| self.available[i]))
            .then(|| group.iter().map(|&i| self.name(i)).collect())
    }

    /// semantics §5 "record tool": the outcome as `advanced N`, `completed`, `free`,
    /// `not_allowed` or `out_of_sequence [names]`.
    pub fn record(&mut self, name: &str) -> String {
        self.activate();
        let tool = self.tool(name);
        let outcome = match self.expected() {
            Some((step, index, group)) => match tool {
                Some(i) if group.contains(&i) => {
                    self.index += 1;
                    if index + 1 >= self.sequence_len(step) {
                        "completed".to_owned()
                    } else {
                        format!("advanced {}", self.index)
                    }
                }
                _ => format!(
                    "out_of_sequence {:?}",
                    group.iter().map(|&i| self.name(i)).collect::<Vec<_>>()
                ),
            },
            None if self.check(name).is_ok() => "free".to_owned(),
            None => "not_allowed".to_owned(),
        };
        if let Some(i) = tool {
            self.used[i] = true;
        }
        self.history.push_back(tool);
        if self.history.len() > self.t.history.max(1) {
            self.history.pop_front();
        }
        self.activate();
        outcome
    }
}
