//! Rules about tools: the universe (semantics §2), resolving a name against it, and a
//! step's static set.

use super::{list_names, Checker, Universe};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{IrGate, ToolBits};
use crate::model::{Spanned, Step};
use orch_runtime::compiled::{glob_match, is_pattern};
use std::collections::HashMap;

/// A step's static set, resolved: see [`super::StepInfo`].
pub(super) struct StaticSet<'t> {
    /// Which tools pass.
    pub permitted: ToolBits,
    /// The `denied` entry that removed a tool, by index (for E014's hint).
    pub denied_by: Vec<Option<&'t Spanned<String>>>,
    /// `allowed` absent or empty.
    pub allow_all: bool,
    /// Pattern entries: (entry, is it in `allowed`, tools matched).
    pub patterns: Vec<(&'t Spanned<String>, bool, usize)>,
}

impl<'t> Checker<'t> {
    /// semantics §2: the universe is the declared tools (`tools`, else `nodes` without
    /// `llm.*`); with none declared, every literal tool name the steps mention, in
    /// order of first mention. E006: a declared name is not empty. E013: a declared
    /// name is not a pattern.
    pub(super) fn universe(&mut self) -> Universe<'t> {
        let t = self.t;
        let mut tools: Vec<&'t Spanned<String>> = Vec::new();
        let mut index: HashMap<&'t str, usize> = HashMap::new();
        let mut add = |n: &'t Spanned<String>| {
            if !n.value.is_empty() && !is_pattern(&n.value) && !index.contains_key(n.value.as_str())
            {
                index.insert(&n.value, tools.len());
                tools.push(n);
            }
        };
        let Some(declared) = &t.universe else {
            t.steps.iter().flat_map(Step::tool_mentions).for_each(add);
            return Universe {
                tools,
                declared: false,
                index,
                suggester: std::cell::OnceCell::new(),
            };
        };
        for n in declared {
            if self.empty_tool_name(n) {
                continue;
            }
            if is_pattern(&n.value) {
                self.push(
                    Diagnostic::new(
                        Code::PatternNotAllowed,
                        Some(n.span),
                        format!("the pattern `{}` is not allowed in the tool list", n.value),
                    )
                    .label("the tool list declares tools by name")
                    .help(
                        "list every tool by its exact name; patterns belong in `allowed`/`denied`",
                    )
                    .about_tool(&n.value),
                );
            }
            add(n);
        }
        Universe {
            tools,
            declared: true,
            index,
            suggester: std::cell::OnceCell::new(),
        }
    }

    /// E015: a tool name is in the declared universe (with the closest name as a
    /// suggestion). `what` says where the name was written. `None` when unknown.
    pub(super) fn resolve(
        &mut self,
        universe: &Universe<'_>,
        r: &Spanned<String>,
        what: &str,
    ) -> Option<usize> {
        if let Some(i) = universe.index.get(r.value.as_str()) {
            return Some(*i);
        }
        if universe.declared {
            let d = Diagnostic::new(
                Code::UnknownTool,
                Some(r.span),
                format!("unknown tool `{}`", r.value),
            )
            .label(format!("not in the declared tools ({what})"))
            .about_tool(&r.value);
            let d = match universe.closest(&r.value) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help("add it to the template's `tools` (or `nodes`)"),
            };
            self.push(d.note(format!("declared tools: {}", list_names(&universe.tools))));
        }
        None
    }

    /// semantics §2: the static set is the tools matching any `allowed` entry (every tool
    /// when `allowed` is absent or empty), minus those matching any `denied` entry.
    /// E006: an entry is not empty. E015: a literal entry is a known tool.
    pub(super) fn static_set(&mut self, s: &'t Step, universe: &Universe<'t>) -> StaticSet<'t> {
        let allowed: &'t [Spanned<String>] = s.allowed.as_deref().unwrap_or(&[]);
        let denied: &'t [Spanned<String>] = s.denied.as_deref().unwrap_or(&[]);
        let allow_all = allowed.is_empty();
        let mut set = StaticSet {
            permitted: if allow_all {
                ToolBits::full(universe.len())
            } else {
                ToolBits::empty(universe.len())
            },
            denied_by: vec![None; universe.len()],
            allow_all,
            patterns: Vec::new(),
        };
        for (list, is_allow) in [(allowed, true), (denied, false)] {
            for entry in list {
                if self.empty_tool_name(entry) {
                    continue;
                }
                let hits: Vec<usize> = if is_pattern(&entry.value) {
                    let hits: Vec<usize> = (0..universe.len())
                        .filter(|&i| glob_match(&entry.value, &universe.tools[i].value))
                        .collect();
                    set.patterns.push((entry, is_allow, hits.len()));
                    hits
                } else {
                    let what = if is_allow { "allowed" } else { "denied" };
                    self.resolve(universe, entry, what).into_iter().collect()
                };
                for i in hits {
                    if is_allow {
                        set.permitted.insert(i);
                    } else {
                        set.permitted.remove(i);
                        set.denied_by[i] = Some(entry);
                    }
                }
            }
        }
        set
    }

    /// semantics §13: the tools a list of `approve` entries gates. E006: an entry is not
    /// empty. A name is a declared tool (E015 when tools are declared and it is not one;
    /// without declared tools, an unknown name gates that foreign tool); a pattern gates
    /// the declared tools it matches and is kept for foreign ones.
    pub(super) fn gate(
        &mut self,
        entries: &'t [Spanned<String>],
        universe: &Universe<'t>,
        what: &str,
    ) -> IrGate {
        let mut gate = IrGate {
            tools: ToolBits::empty(universe.len()),
            patterns: Vec::new(),
        };
        for entry in entries {
            if self.empty_tool_name(entry) {
                continue;
            }
            if is_pattern(&entry.value) {
                (0..universe.len())
                    .filter(|&i| glob_match(&entry.value, &universe.tools[i].value))
                    .for_each(|i| gate.tools.insert(i));
                gate.patterns.push(entry.value.clone());
            } else if let Some(i) = self.resolve(universe, entry, what) {
                gate.tools.insert(i);
            } else if !universe.declared {
                gate.patterns.push(entry.value.clone());
            }
        }
        gate
    }

    /// E006: `name` is an empty tool name (reported here); `false` when it is not empty.
    pub(super) fn empty_tool_name(&mut self, name: &Spanned<String>) -> bool {
        if !name.value.is_empty() {
            return false;
        }
        self.push(Diagnostic::new(
            Code::InvalidName,
            Some(name.span),
            "an empty tool name",
        ));
        true
    }
}
