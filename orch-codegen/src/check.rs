//! The checks of SPEC §3, and lowering of a valid template to the [`Ir`]. Every front
//! end calls [`check`]; no rule is implemented anywhere else.

use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::ident;
use crate::ir::{Ir, IrCondition, IrStep, IrTool};
use crate::model::{Span, Spanned, Template};
use orch_runtime::tables::reset;
use orch_runtime::{fold_case, glob_match, is_pattern};
use std::collections::HashMap;

/// The largest history capacity H a template may ask for (it sizes every session).
pub const MAX_HISTORY: usize = 1024;
/// The most tools a machine may have.
pub const MAX_TOOLS: usize = 16_384;
/// The most steps a machine may have.
pub const MAX_STEPS: usize = 16_384;
/// The most distinct message conditions a machine may have.
pub const MAX_MESSAGE_CONDITIONS: usize = 4096;

/// The condition types SPEC §7 defines.
pub const CONDITION_TYPES: [&str; 5] = [
    "tool_used",
    "sequence_match",
    "message_contains",
    "message_regex",
    "not_recently_used",
];

/// The `resetSequenceOn` triggers SPEC §7 defines.
pub const RESET_TRIGGERS: [&str; 3] = ["user_message", "message_contains", "message_regex"];

/// Checks a template. Returns the IR when there is no error, and every diagnostic
/// (errors and the warnings that were not allowed), in source order.
pub fn check(t: &Template) -> (Option<Ir>, Vec<Diagnostic>) {
    let mut c = Checker {
        diags: Vec::new(),
        t,
    };
    let ir = c.run();
    let allowed: Vec<Code> = t
        .allow
        .iter()
        .filter_map(|a| Code::parse(&a.value))
        .filter(|c| c.severity() == Severity::Warning)
        .collect();
    let mut diags: Vec<Diagnostic> = c
        .diags
        .into_iter()
        .filter(|d| !(d.severity() == Severity::Warning && allowed.contains(&d.code)))
        .collect();
    diags.sort_by_key(|d| d.span.map_or(0, |s| s.start));
    // A step without a name has been reported by the front end (E003); there is no IR
    // without it.
    let ok = !diags.iter().any(Diagnostic::is_error) && t.steps.iter().all(|s| s.name.is_some());
    (ir.filter(|_| ok), diags)
}

/// The closest of `candidates` to `name`, if close enough to suggest.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A tool reference resolved against the universe.
enum Resolved {
    Tool(usize),
    Unknown,
}

struct Checker<'t> {
    diags: Vec<Diagnostic>,
    t: &'t Template,
}

impl Checker<'_> {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn run(&mut self) -> Option<Ir> {
        let t = self.t;
        for a in &t.allow {
            match Code::parse(&a.value) {
                Some(c) if c.severity() == Severity::Warning => {}
                _ => {
                    let names: Vec<&str> = Code::ALL
                        .iter()
                        .filter(|c| c.severity() == Severity::Warning)
                        .map(|c| c.name())
                        .collect();
                    let mut d = Diagnostic::new(
                        Code::UnknownLint,
                        Some(a.span),
                        format!("`{}` is not a warning that can be allowed", a.value),
                    )
                    .label("unknown warning");
                    d = match closest(&a.value, names.iter().copied()) {
                        Some(s) => d.help(format!("did you mean `{s}`?")),
                        None => d.help(format!("warnings: {}", names.join(", "))),
                    };
                    self.push(d);
                }
            }
        }

        // The machine's name and module.
        let (name, module) = match &t.name {
            Some(n) => match ident::module(&n.value) {
                Some(m) => (n.value.clone(), m),
                None => {
                    self.push(
                        Diagnostic::new(
                            Code::InvalidName,
                            Some(n.span),
                            format!("the machine name `{}` has no letters or digits to make a module name", n.value),
                        )
                        .help("use an `agentId` such as `my-agent`"),
                    );
                    (n.value.clone(), "machine".to_owned())
                }
            },
            None => {
                self.push(
                    Diagnostic::new(
                        Code::MissingField,
                        Some(Span::new(t.span.start, t.span.start + 1)),
                        "the template has no `agentId` or `name`",
                    )
                    .help("add `\"agentId\": \"my-agent\"`; the module is named after it"),
                );
                (String::new(), "machine".to_owned())
            }
        };

        let (tools, declared) = self.universe();
        let index: HashMap<&str, usize> = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.value.as_str(), i))
            .collect();
        let tool_idents = self.idents(&tools, "tool", ident::variant);
        if tools.len() > MAX_TOOLS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!(
                    "the template has {} tools; the limit is {MAX_TOOLS}",
                    tools.len()
                ),
            ));
        }
        if t.steps.len() > MAX_STEPS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!(
                    "the template has {} steps; the limit is {MAX_STEPS}",
                    t.steps.len()
                ),
            ));
        }

        // Step names.
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut named: Vec<Spanned<String>> = Vec::new();
        // Steps kept out of the reachability analysis: duplicates and nameless steps
        // (already errors; their warnings would only repeat them).
        let mut skip = vec![false; t.steps.len()];
        for (si, s) in t.steps.iter().enumerate() {
            let Some(n) = &s.name else {
                skip[si] = true;
                continue;
            };
            if n.value.is_empty() {
                self.push(Diagnostic::new(
                    Code::InvalidName,
                    Some(n.span),
                    "a step name is empty",
                ));
                continue;
            }
            if let Some(first) = seen.get(n.value.as_str()) {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateStep,
                        Some(n.span),
                        format!("duplicate step name `{}`", n.value),
                    )
                    .label("second definition")
                    .related(*first, "first defined here")
                    .help("step names must be unique; rename one of them"),
                );
                skip[si] = true;
                continue;
            }
            seen.insert(&n.value, n.span);
            named.push(n.clone());
        }
        let step_idents = self.idents(&named, "step", ident::variant);
        let step_ident = |name: &str| -> String {
            named
                .iter()
                .position(|n| n.value == name)
                .and_then(|i| step_idents.get(i).cloned())
                .unwrap_or_default()
        };

        let default_step = self.default_step();
        // A `defaultStep` naming no step is reported once (E008), not again as
        // unreachable steps.
        let default_unresolved = t.default_step.is_some() && default_step.is_none();

        // Steps.
        let mut contains: Vec<String> = Vec::new();
        let mut regexes: Vec<String> = Vec::new();
        let mut max_window = 0usize;
        let mut steps: Vec<IrStep> = Vec::with_capacity(t.steps.len());
        for (si, s) in t.steps.iter().enumerate() {
            let step_name = s.name.as_ref().map_or("<unnamed>", |n| n.value.as_str());
            let is_default = default_step == Some(si);
            let resolve = |this: &mut Self, r: &Spanned<String>, what: &str| -> Resolved {
                if let Some(i) = index.get(r.value.as_str()) {
                    return Resolved::Tool(*i);
                }
                if declared {
                    this.unknown_tool(r, what, &tools);
                }
                Resolved::Unknown
            };

            // Static set (SPEC §2).
            let mut allow_patterns = Vec::new();
            let mut deny_patterns = Vec::new();
            let allowed_list = s.allowed.as_deref().unwrap_or(&[]);
            let allow_all = allowed_list.is_empty();
            let mut permitted = vec![allow_all; tools.len()];
            let mut deny_by: Vec<Option<&Spanned<String>>> = vec![None; tools.len()];
            for (list, is_allow) in [
                (allowed_list, true),
                (s.denied.as_deref().unwrap_or(&[]), false),
            ] {
                for entry in list {
                    if entry.value.is_empty() {
                        self.push(Diagnostic::new(
                            Code::InvalidName,
                            Some(entry.span),
                            "an empty tool name",
                        ));
                        continue;
                    }
                    let mut hits = Vec::new();
                    if is_pattern(&entry.value) {
                        hits.extend(
                            tools
                                .iter()
                                .enumerate()
                                .filter(|(_, t)| glob_match(&entry.value, &t.value))
                                .map(|(i, _)| i),
                        );
                        if hits.is_empty() {
                            self.push(
                                Diagnostic::new(
                                    Code::UnmatchedPattern,
                                    Some(entry.span),
                                    format!(
                                        "the pattern `{}` in step `{step_name}` matches no tool",
                                        entry.value
                                    ),
                                )
                                .label("matches nothing")
                                .note(format!("tools: {}", list_names(&tools))),
                            );
                        }
                        if is_allow {
                            allow_patterns.push(entry.value.clone());
                        } else {
                            deny_patterns.push(entry.value.clone());
                        }
                    } else if let Resolved::Tool(i) =
                        resolve(self, entry, if is_allow { "allowed" } else { "denied" })
                    {
                        hits.push(i);
                    }
                    for i in hits {
                        if is_allow {
                            permitted[i] = true;
                        } else {
                            permitted[i] = false;
                            deny_by[i] = Some(entry);
                        }
                    }
                }
            }
            let static_set: Vec<usize> = (0..tools.len()).filter(|i| permitted[*i]).collect();
            if static_set.is_empty() && !tools.is_empty() {
                let span = s.name.as_ref().map_or(s.span, |n| n.span);
                self.push(
                    Diagnostic::new(
                        Code::EmptyToolSet,
                        Some(span),
                        format!("step `{step_name}` allows no tool"),
                    )
                    .label("no tool passes its `availableTools`")
                    .help("check `allowed` and `denied`: deny wins over allow"),
                );
            }

            // Sequence.
            let mut sequence: Vec<Vec<usize>> = Vec::new();
            if let Some(seq) = &s.sequence {
                if seq.value.is_empty() {
                    self.push(
                        Diagnostic::new(
                            Code::EmptySequence,
                            Some(seq.span),
                            format!("step `{step_name}` has an empty sequence"),
                        )
                        .help("remove `sequence`, or list the tools in order"),
                    );
                }
                for entry in &seq.value {
                    if entry.tools().is_empty() {
                        self.push(
                            Diagnostic::new(
                                Code::EmptySequence,
                                Some(entry.span()),
                                "an empty group in a sequence",
                            )
                            .label("no tool can satisfy this position")
                            .help("list at least one tool in the group, or remove it"),
                        );
                        continue;
                    }
                    let mut group = Vec::new();
                    for tool in entry.tools() {
                        if is_pattern(&tool.value) {
                            self.push(
                                Diagnostic::new(
                                    Code::PatternNotAllowed,
                                    Some(tool.span),
                                    format!(
                                        "the pattern `{}` is not allowed in a sequence",
                                        tool.value
                                    ),
                                )
                                .label("a sequence position needs literal tool names")
                                .help("name the tools; for alternatives use a group (`[\"a\", \"b\"]` in JSON, `(a | b)` in the DSL)"),
                            );
                            continue;
                        }
                        if tool.value.is_empty() {
                            self.push(Diagnostic::new(
                                Code::InvalidName,
                                Some(tool.span),
                                "an empty tool name",
                            ));
                            continue;
                        }
                        let Resolved::Tool(i) = resolve(self, tool, "sequence") else {
                            continue;
                        };
                        if !permitted[i] {
                            let mut d = Diagnostic::new(
                                Code::SequenceToolNotPermitted,
                                Some(tool.span),
                                format!(
                                    "`{}` is in the sequence of step `{step_name}`, but the step's tools do not permit it",
                                    tool.value
                                ),
                            )
                            .label("not permitted by this step's `availableTools`");
                            d = match deny_by[i] {
                                Some(den) => d
                                    .related(den.span, format!("`{}` is denied here", tool.value))
                                    .help(format!("remove `{}` from `denied`, or from the sequence", den.value)),
                                None => d.help(format!(
                                    "allow `{}` in this step (`availableTools.allowed` in JSON, `allow: [..]` in the DSL), or remove it from the sequence",
                                    tool.value
                                )),
                            };
                            self.push(d);
                        }
                        if !group.contains(&i) {
                            group.push(i);
                        }
                    }
                    group.sort_unstable();
                    sequence.push(group);
                }
            }

            // Conditions.
            let mut conditions = Vec::new();
            if is_default && !s.conditions.is_empty() {
                self.push(
                    Diagnostic::new(
                        Code::DefaultStepConditions,
                        Some(s.conditions_span),
                        format!("the conditions of the default step `{step_name}` are ignored"),
                    )
                    .label("ignored")
                    .note("the default step is active when no other step matches; its own conditions are never evaluated (as in AgentDock)")
                    .help("remove the conditions, or make another step the default"),
                );
            }
            for cond in &s.conditions {
                let Some(kind) = &cond.kind else { continue };
                let needs_value = kind.value != "sequence_match";
                if !CONDITION_TYPES.contains(&kind.value.as_str()) {
                    let mut d = Diagnostic::new(
                        Code::UnknownCondition,
                        Some(kind.span),
                        format!("unknown condition type `{}`", kind.value),
                    )
                    .label("unknown type");
                    if let Some(s) = closest(&kind.value, CONDITION_TYPES) {
                        d = d.help(format!("did you mean `{s}`?"));
                    }
                    d = d.note(format!("valid types: {}", CONDITION_TYPES.join(", ")));
                    self.push(d);
                    continue;
                }
                let value = match (&cond.value, needs_value) {
                    (Some(v), _) => Some(v),
                    (None, true) => {
                        self.push(
                            Diagnostic::new(
                                Code::MissingValue,
                                Some(cond.span),
                                format!("a `{}` condition needs a `value`", kind.value),
                            )
                            .label("no `value`")
                            .help(match kind.value.as_str() {
                                "message_contains" => "give the text to look for: `\"value\": \"plan\"` in JSON, `message_contains(\"plan\")` in the DSL",
                                "message_regex" => "give the pattern: `\"value\": \"(?i)plan\"` in JSON, `message_regex(\"(?i)plan\")` in the DSL",
                                "not_recently_used" => "name the tool: `\"value\": \"search\"` in JSON, `not_recently_used(search)` in the DSL",
                                _ => "name the tool: `\"value\": \"search\"` in JSON, `tool_used(search)` in the DSL",
                            }),
                        );
                        continue;
                    }
                    (None, false) => None,
                };
                let resolved = match (kind.value.as_str(), value) {
                    ("sequence_match", _) => {
                        if s.sequence.as_ref().is_none_or(|q| q.value.is_empty()) {
                            self.push(
                                Diagnostic::new(
                                    Code::SequenceMatchWithoutSequence,
                                    Some(kind.span),
                                    format!("`sequence_match` on step `{step_name}`, which has no sequence"),
                                )
                                .label("nothing to match")
                                .help("add a `sequence` to the step, or use `tool_used`"),
                            );
                            continue;
                        }
                        IrCondition::SequenceMatch
                    }
                    ("tool_used" | "not_recently_used", Some(v)) => {
                        if is_pattern(&v.value) {
                            self.push(
                                Diagnostic::new(
                                    Code::PatternNotAllowed,
                                    Some(v.span),
                                    format!("the pattern `{}` is not allowed in a condition", v.value),
                                )
                                .label("a condition names one tool")
                                .help("name the tool exactly; use one step per tool if several should trigger it"),
                            );
                            continue;
                        }
                        let Resolved::Tool(tool) = resolve(self, v, "condition") else {
                            continue;
                        };
                        if kind.value == "tool_used" {
                            IrCondition::ToolUsed(tool)
                        } else {
                            let window = match &cond.window {
                                Some(w) if w.value == 0 => {
                                    self.push(
                                        Diagnostic::new(Code::ZeroWindow, Some(w.span), "`window` of 0 looks at no history")
                                            .label("must be at least 1")
                                            .help("use a window of 1 or more, or omit it to look at the whole history"),
                                    );
                                    continue;
                                }
                                Some(w) if w.value as usize > MAX_HISTORY => {
                                    self.push(Diagnostic::new(
                                        Code::LimitExceeded,
                                        Some(w.span),
                                        format!("`window` of {} exceeds the history limit of {MAX_HISTORY}", w.value),
                                    ));
                                    continue;
                                }
                                Some(w) => w.value as usize,
                                None => 0, // the whole history: fixed up once H is known
                            };
                            max_window = max_window.max(window);
                            IrCondition::NotRecentlyUsed { tool, window }
                        }
                    }
                    ("message_contains", Some(v)) => {
                        let needle = fold_case(&v.value);
                        let i = intern(&mut contains, needle);
                        IrCondition::Contains(i)
                    }
                    ("message_regex", Some(v)) => {
                        if let Err(e) = regex::Regex::new(&v.value) {
                            self.push(
                                Diagnostic::new(Code::InvalidRegex, Some(v.span), format!("invalid regex `{}`", v.value))
                                    .label("does not compile")
                                    .note(e.to_string().lines().last().unwrap_or("").trim().to_owned())
                                    .help("the syntax is that of the Rust `regex` crate; add `(?i)` for case-insensitive matching"),
                            );
                            continue;
                        }
                        IrCondition::Regex(intern(&mut regexes, v.value.clone()))
                    }
                    _ => continue,
                };
                if !is_default {
                    conditions.push(resolved);
                }
            }

            // resetSequenceOn.
            let mut reset_flags = 0u8;
            for r in &s.reset_sequence_on {
                reset_flags |= match r.value.as_str() {
                    "user_message" => reset::USER_MESSAGE,
                    "message_contains" => reset::MESSAGE_CONTAINS,
                    "message_regex" => reset::MESSAGE_REGEX,
                    _ => {
                        let mut d = Diagnostic::new(
                            Code::UnknownResetTrigger,
                            Some(r.span),
                            format!("unknown `resetSequenceOn` entry `{}`", r.value),
                        )
                        .label("unknown trigger");
                        if let Some(s) = closest(&r.value, RESET_TRIGGERS) {
                            d = d.help(format!("did you mean `{s}`?"));
                        }
                        self.push(d.note(format!("valid entries: {}", RESET_TRIGGERS.join(", "))));
                        0
                    }
                };
            }

            let flagged_default = s.is_default.as_ref().is_some_and(|d| d.value);
            if !is_default && !flagged_default && !default_unresolved && s.conditions.is_empty() {
                let span = s.name.as_ref().map_or(s.span, |n| n.span);
                self.push(
                    Diagnostic::new(Code::UnreachableStep, Some(span), format!("step `{step_name}` can never become active"))
                        .label("no conditions, and not the default step")
                        .note("a step becomes active only when all its conditions hold, or as the default step")
                        .help("give it conditions (`conditions` in JSON, `when ...` in the DSL), or make it the default step"),
                );
            }

            steps.push(IrStep {
                name: step_name.to_owned(),
                ident: s
                    .name
                    .as_ref()
                    .map(|n| step_ident(&n.value))
                    .unwrap_or_default(),
                description: s.description.clone(),
                conditions,
                static_set,
                allow_all,
                allow_patterns,
                deny_patterns,
                sequence,
                reset: reset_flags,
            });
        }

        if contains.len() + regexes.len() > MAX_MESSAGE_CONDITIONS {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!("the template has {} distinct message conditions; the limit is {MAX_MESSAGE_CONDITIONS}", contains.len() + regexes.len()),
            ));
        }

        // History capacity (SPEC §4).
        let longest = steps.iter().map(|s| s.sequence.len()).max().unwrap_or(0);
        let asked = t.history_length.as_ref().map_or(0, |h| h.value);
        if asked > MAX_HISTORY as u64 {
            self.push(
                Diagnostic::new(
                    Code::LimitExceeded,
                    t.history_length.as_ref().map(|h| h.span),
                    format!("`historyLength` of {asked} exceeds the limit of {MAX_HISTORY}"),
                )
                .help("the history is stored inline in every session; keep it small"),
            );
        }
        if longest > MAX_HISTORY {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                None,
                format!("a sequence of {longest} positions exceeds the limit of {MAX_HISTORY}"),
            ));
        }
        let history = 10usize
            .max(asked.min(MAX_HISTORY as u64) as usize)
            .max(longest.min(MAX_HISTORY))
            .max(max_window);
        for s in &mut steps {
            for c in &mut s.conditions {
                if let IrCondition::NotRecentlyUsed { window, .. } = c {
                    if *window == 0 {
                        *window = history;
                    }
                }
            }
        }

        self.reachability(&steps, default_step, &contains, &tools, &skip);

        let ir = Ir {
            name,
            module,
            description: t.description.clone(),
            tools: tools
                .iter()
                .zip(tool_idents)
                .map(|(t, ident)| IrTool {
                    name: t.value.clone(),
                    ident,
                })
                .collect(),
            steps,
            default_step,
            history,
            contains,
            regexes,
            max_steps: t.max_steps.as_ref().map(|m| m.value),
        };
        Some(ir)
    }

    /// The tool universe (SPEC §2) and whether it was declared.
    fn universe(&mut self) -> (Vec<Spanned<String>>, bool) {
        let mut out: Vec<Spanned<String>> = Vec::new();
        let add = |out: &mut Vec<Spanned<String>>, n: &Spanned<String>| {
            if !n.value.is_empty()
                && !is_pattern(&n.value)
                && !out.iter().any(|o| o.value == n.value)
            {
                out.push(n.clone());
            }
        };
        if let Some(declared) = &self.t.universe {
            for n in declared {
                if n.value.is_empty() {
                    self.push(Diagnostic::new(
                        Code::InvalidName,
                        Some(n.span),
                        "an empty tool name",
                    ));
                } else if is_pattern(&n.value) {
                    self.push(
                        Diagnostic::new(
                            Code::PatternNotAllowed,
                            Some(n.span),
                            format!("the pattern `{}` is not allowed in the tool list", n.value),
                        )
                        .label("the tool list declares tools by name")
                        .help("list every tool by its exact name; patterns belong in `allowed`/`denied`"),
                    );
                }
                add(&mut out, n);
            }
            return (out, true);
        }
        for s in &self.t.steps {
            for n in s.allowed.iter().flatten() {
                add(&mut out, n);
            }
            for e in s.sequence.iter().flat_map(|q| q.value.iter()) {
                for n in e.tools() {
                    add(&mut out, n);
                }
            }
            for n in s.denied.iter().flatten() {
                add(&mut out, n);
            }
            for c in &s.conditions {
                if let (Some(k), Some(v)) = (&c.kind, &c.value) {
                    if k.value == "tool_used" || k.value == "not_recently_used" {
                        add(&mut out, v);
                    }
                }
            }
        }
        (out, false)
    }

    /// Rust identifiers for `names`, reporting invalid names and collisions.
    fn idents(
        &mut self,
        names: &[Spanned<String>],
        what: &str,
        make: fn(&str) -> Option<String>,
    ) -> Vec<String> {
        let mut by_ident: HashMap<String, &Spanned<String>> = HashMap::new();
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let Some(id) = make(&n.value) else {
                self.push(
                    Diagnostic::new(
                        Code::InvalidName,
                        Some(n.span),
                        format!(
                            "the {what} name `{}` cannot be made into a Rust identifier",
                            n.value
                        ),
                    )
                    .label("no ASCII letters or digits")
                    .help(format!("give the {what} a name with letters or digits")),
                );
                out.push(String::new());
                continue;
            };
            if let Some(first) = by_ident.get(&id) {
                self.push(
                    Diagnostic::new(
                        Code::NameCollision,
                        Some(n.span),
                        format!(
                            "the {what} names `{}` and `{}` both become `{id}` in Rust",
                            first.value, n.value
                        ),
                    )
                    .label(format!("becomes `{id}`"))
                    .related(first.span, format!("also becomes `{id}`"))
                    .help(format!("rename one of the {what}s")),
                );
            } else {
                by_ident.insert(id.clone(), n);
            }
            out.push(id);
        }
        out
    }

    /// Resolves the default step (SPEC §1/§6): `defaultStep` and `isDefault` must agree.
    fn default_step(&mut self) -> Option<usize> {
        let t = self.t;
        let flagged: Vec<(usize, Span)> = t
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.is_default
                    .as_ref()
                    .filter(|d| d.value)
                    .map(|d| (i, d.span))
            })
            .collect();
        let by_name = |name: &str| {
            t.steps
                .iter()
                .position(|s| s.name.as_ref().is_some_and(|n| n.value == name))
        };
        match &t.default_step {
            Some(d) => {
                let Some(i) = by_name(&d.value) else {
                    let names: Vec<&str> = t
                        .steps
                        .iter()
                        .filter_map(|s| s.name.as_ref().map(|n| n.value.as_str()))
                        .collect();
                    let mut diag = Diagnostic::new(
                        Code::UnknownDefaultStep,
                        Some(d.span),
                        format!(
                            "`defaultStep` names `{}`, but there is no such step",
                            d.value
                        ),
                    )
                    .label("no step has this name");
                    if let Some(s) = closest(&d.value, names.iter().copied()) {
                        diag = diag.help(format!("did you mean `{s}`?"));
                    }
                    self.push(diag);
                    return None;
                };
                for (j, span) in &flagged {
                    if *j != i {
                        self.push(
                            Diagnostic::new(
                                Code::ConflictingDefault,
                                Some(*span),
                                format!(
                                    "step `{}` has `isDefault: true`, but `defaultStep` is `{}`",
                                    t.steps[*j]
                                        .name
                                        .as_ref()
                                        .map_or("<unnamed>", |n| n.value.as_str()),
                                    d.value
                                ),
                            )
                            .related(d.span, "the default is named here")
                            .help("keep one default: remove `isDefault` or change `defaultStep`"),
                        );
                    }
                }
                if let Some(f) = t.steps[i].is_default.as_ref().filter(|f| !f.value) {
                    self.push(
                        Diagnostic::new(
                            Code::ConflictingDefault,
                            Some(f.span),
                            format!(
                                "`defaultStep` is `{}`, but that step says `isDefault: false`",
                                d.value
                            ),
                        )
                        .related(d.span, "the default is named here")
                        .help("remove `isDefault: false`"),
                    );
                }
                Some(i)
            }
            None => {
                for (_, span) in flagged.iter().skip(1) {
                    self.push(
                        Diagnostic::new(
                            Code::ConflictingDefault,
                            Some(*span),
                            "more than one step has `isDefault: true`",
                        )
                        .label("second default")
                        .related(flagged[0].1, "first default")
                        .help("keep one default step"),
                    );
                }
                flagged.first().map(|(i, _)| *i)
            }
        }
    }

    fn unknown_tool(&mut self, r: &Spanned<String>, what: &str, tools: &[Spanned<String>]) {
        let mut d = Diagnostic::new(
            Code::UnknownTool,
            Some(r.span),
            format!("unknown tool `{}`", r.value),
        )
        .label(format!("not in the declared tools ({what})"));
        d = match closest(&r.value, tools.iter().map(|t| t.value.as_str())) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help("add it to the template's `tools` (or `nodes`)"),
        };
        self.push(d.note(format!("declared tools: {}", list_names(tools))));
    }

    /// Shadowed steps (W002) and sequences that can never complete (W006).
    fn reachability(
        &mut self,
        steps: &[IrStep],
        default_step: Option<usize>,
        contains: &[String],
        tools: &[Spanned<String>],
        skip: &[bool],
    ) {
        let model = &self.t.steps;
        let name_span = |i: usize| model[i].name.as_ref().map_or(model[i].span, |n| n.span);
        let conditional = |i: usize| {
            Some(i) != default_step
                && !steps[i].conditions.is_empty()
                && !skip.get(i).copied().unwrap_or(false)
        };
        let mut shadowed = vec![false; steps.len()];
        for s in 0..steps.len() {
            if !conditional(s) {
                continue;
            }
            if let Some(e) = (0..s).find(|&e| {
                conditional(e)
                    && steps[e]
                        .conditions
                        .iter()
                        .all(|c| implies(steps, contains, s, e, *c))
            }) {
                shadowed[s] = true;
                self.push(
                    Diagnostic::new(
                        Code::ShadowedStep,
                        Some(name_span(s)),
                        format!("step `{}` can never become active: the earlier step `{}` matches whenever it does", steps[s].name, steps[e].name),
                    )
                    .label("shadowed")
                    .related(name_span(e), "this step is checked first and wins")
                    .note("steps are checked in order and the first whose conditions all hold wins")
                    .help(format!("move `{}` before `{}`, or make its conditions more specific", steps[s].name, steps[e].name)),
                );
            }
        }
        for s in 0..steps.len() {
            let n = steps[s].sequence.len();
            if n == 0 || shadowed[s] || !(conditional(s) || Some(s) == default_step) {
                continue;
            }
            // Tools certainly in the used set before the last position is recorded:
            // the step's own tool_used values (they held when it activated) and the
            // single-tool positions before the last, each with the position it is
            // first used at (-1: before the sequence starts).
            let mut used_at: Vec<(usize, isize)> = Vec::new();
            if Some(s) != default_step {
                for c in &steps[s].conditions {
                    if let IrCondition::ToolUsed(x) = c {
                        used_at.push((*x, -1));
                    }
                }
            }
            for (pos, group) in steps[s].sequence.iter().enumerate().take(n - 1) {
                if let [x] = group.as_slice() {
                    if !used_at.iter().any(|(y, _)| y == x) {
                        used_at.push((*x, pos as isize));
                    }
                }
            }
            let earlier: Vec<usize> = if Some(s) == default_step {
                (0..steps.len())
                    .filter(|&e| e != s && conditional(e))
                    .collect()
            } else {
                (0..s).filter(|&e| conditional(e)).collect()
            };
            for e in earlier {
                let mut at = -1isize;
                let all = steps[e].conditions.iter().all(|c| match c {
                    IrCondition::ToolUsed(x) => match used_at.iter().find(|(y, _)| y == x) {
                        Some((_, p)) => {
                            at = at.max(*p);
                            true
                        }
                        None => false,
                    },
                    _ => false,
                });
                if !all || at < 0 {
                    continue;
                }
                let pos = at as usize;
                let span = model[s]
                    .sequence
                    .as_ref()
                    .and_then(|q| q.value.get(pos))
                    .map_or(name_span(s), |en| en.span());
                let tool_names: Vec<String> = steps[e]
                    .conditions
                    .iter()
                    .filter_map(|c| match c {
                        IrCondition::ToolUsed(x) => Some(format!(
                            "tool_used `{}`",
                            tools.get(*x).map_or("", |t| t.value.as_str())
                        )),
                        _ => None,
                    })
                    .collect();
                self.push(
                    Diagnostic::new(
                        Code::SequenceNeverCompletes,
                        Some(span),
                        format!(
                            "the sequence of step `{}` can never complete: recording `{}` (position {pos}) activates the earlier step `{}`",
                            steps[s].name,
                            steps[s].sequence[pos].first().and_then(|x| tools.get(*x)).map_or("", |t| t.value.as_str()),
                            steps[e].name
                        ),
                    )
                    .label(format!("recording this satisfies {}", tool_names.join(" and ")))
                    .related(name_span(e), "this step wins from then on")
                    .note("a recorded tool enters the used set, and activation is evaluated again within the same turn")
                    .help(format!("move `{}` after `{}`, or give `{}` more specific conditions", steps[e].name, steps[s].name, steps[e].name)),
                );
                break;
            }
        }
    }
}

/// Does every state where step `s`'s conditions all hold satisfy condition `c` of step `e`?
/// (Conservative: `false` when not provable.)
fn implies(steps: &[IrStep], contains: &[String], s: usize, e: usize, c: IrCondition) -> bool {
    let sc = &steps[s].conditions;
    let s_seq = &steps[s].sequence;
    let s_matches_seq = sc.contains(&IrCondition::SequenceMatch);
    match c {
        IrCondition::ToolUsed(x) => {
            sc.contains(&IrCondition::ToolUsed(x)) || (s_matches_seq && s_seq.iter().any(|g| g.as_slice() == [x]))
        }
        IrCondition::SequenceMatch => {
            let e_seq = &steps[e].sequence;
            s_matches_seq
                && !e_seq.is_empty()
                && e_seq.len() <= s_seq.len()
                && e_seq
                    .iter()
                    .zip(&s_seq[s_seq.len() - e_seq.len()..])
                    .all(|(eg, sg)| sg.iter().all(|t| eg.contains(t)))
        }
        // A message containing `b` contains every substring of `b`.
        IrCondition::Contains(a) => sc.iter().any(|d| match *d {
            IrCondition::Contains(b) => match (contains.get(b), contains.get(a)) {
                (Some(b), Some(a)) => b.contains(a.as_str()),
                _ => false,
            },
            _ => false,
        }),
        IrCondition::Regex(_) => sc.contains(&c),
        IrCondition::NotRecentlyUsed { tool, window } => sc.iter().any(|d| {
            matches!(*d, IrCondition::NotRecentlyUsed { tool: t2, window: w2 } if t2 == tool && w2 >= window)
        }),
    }
}

fn intern(pool: &mut Vec<String>, value: String) -> usize {
    match pool.iter().position(|p| *p == value) {
        Some(i) => i,
        None => {
            pool.push(value);
            pool.len() - 1
        }
    }
}

fn list_names(tools: &[Spanned<String>]) -> String {
    const SHOW: usize = 12;
    let mut s: Vec<&str> = tools.iter().take(SHOW).map(|t| t.value.as_str()).collect();
    if tools.len() > SHOW {
        s.push("…");
    }
    if s.is_empty() {
        "(none)".to_owned()
    } else {
        s.join(", ")
    }
}

/// A machine with the template's tool and step names and no behaviour (every step
/// without conditions, every tool allowed), for front ends to emit after an error, so
/// that code using `Tool::X`/`Step::Y` does not produce a cascade of unrelated errors.
pub fn placeholder(t: &Template) -> Ir {
    let mut tools: Vec<IrTool> = Vec::new();
    let mut add_tool = |name: &str| {
        if let Some(ident) = ident::variant(name) {
            if !is_pattern(name) && !tools.iter().any(|t| t.ident == ident) {
                tools.push(IrTool {
                    name: name.to_owned(),
                    ident,
                });
            }
        }
    };
    for n in t.universe.iter().flatten() {
        add_tool(&n.value);
    }
    for s in &t.steps {
        for n in s.allowed.iter().chain(s.denied.iter()).flatten() {
            add_tool(&n.value);
        }
        for e in s.sequence.iter().flat_map(|q| q.value.iter()) {
            for n in e.tools() {
                add_tool(&n.value);
            }
        }
        for c in &s.conditions {
            if let (Some(k), Some(v)) = (&c.kind, &c.value) {
                if k.value == "tool_used" || k.value == "not_recently_used" {
                    add_tool(&v.value);
                }
            }
        }
    }
    let mut steps: Vec<IrStep> = Vec::new();
    for s in &t.steps {
        let Some(name) = &s.name else { continue };
        let Some(ident) = ident::variant(&name.value) else {
            continue;
        };
        if steps.iter().any(|x| x.ident == ident) {
            continue;
        }
        steps.push(IrStep {
            name: name.value.clone(),
            ident,
            description: s.description.clone(),
            conditions: Vec::new(),
            static_set: (0..tools.len()).collect(),
            allow_all: true,
            allow_patterns: Vec::new(),
            deny_patterns: Vec::new(),
            sequence: Vec::new(),
            reset: 0,
        });
    }
    let name = t
        .name
        .as_ref()
        .map_or_else(|| "machine".to_owned(), |n| n.value.clone());
    Ir {
        module: ident::module(&name).unwrap_or_else(|| "machine".to_owned()),
        name,
        description: t.description.clone(),
        tools: tools.into_iter().take(MAX_TOOLS).collect(),
        steps: steps.into_iter().take(MAX_STEPS).collect(),
        default_step: None,
        history: 10,
        contains: Vec::new(),
        regexes: Vec::new(),
        max_steps: None,
    }
}
