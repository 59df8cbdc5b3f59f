//! Rules about one step: its sequence, its conditions and its `resetSequenceOn`.

use super::tools::StaticSet;
use super::{closest, Checker, Universe, RESET_TRIGGERS};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::IrCondition;
use crate::ir::IrGate;
use crate::limits::MAX_HISTORY;
use crate::model::{Condition, ConditionKind, ConditionType, Span, Spanned, Step};
use crate::resolved::StepInfo;
use orch_runtime::compiled::{fold_case, is_pattern, reset, MessageRegex};

impl<'t> Checker<'t> {
    /// Resolves one step, applying the rules of its parts in order: static set,
    /// sequence, conditions, `resetSequenceOn`.
    pub(super) fn step(
        &mut self,
        s: &'t Step,
        universe: &Universe<'t>,
        is_default: bool,
        skip: bool,
    ) -> StepInfo<'t> {
        let name = s.name.as_ref().map_or("<unnamed>", |n| n.value.as_str());
        let set = self.static_set(s, universe);
        let sequence = self.sequence(s, name, universe, &set);
        let (conditions, condition_spans, max_window) = self.conditions(s, name, universe);
        let reset = self.reset_triggers(s, name);
        let allow_all = set.allow_all;
        StepInfo {
            model: s,
            name,
            is_default,
            skip,
            allow_all,
            patterns: set.patterns,
            static_set: set.permitted,
            sequence,
            // The default step's conditions are ignored (W003 says so).
            conditions: if is_default { Vec::new() } else { conditions },
            condition_spans: if is_default {
                Vec::new()
            } else {
                condition_spans
            },
            max_window,
            reset,
            approve: IrGate::default(),
        }
    }

    /// E012: a sequence is not empty, nor is any group in it. E013: its entries are
    /// tool names, not patterns. E006: not empty names. E015: known tools. E014: each
    /// tool is permitted by the step's own static set.
    fn sequence(
        &mut self,
        s: &Step,
        step: &str,
        universe: &Universe<'_>,
        set: &StaticSet<'_>,
    ) -> Vec<Vec<usize>> {
        let Some(seq) = &s.sequence else {
            return Vec::new();
        };
        if seq.value.is_empty() {
            self.push(
                Diagnostic::new(
                    Code::EmptySequence,
                    Some(seq.span),
                    format!("step `{step}` has an empty sequence"),
                )
                .help("remove `sequence`, or list the tools in order")
                .about_step(step),
            );
        }
        let mut sequence = Vec::with_capacity(seq.value.len());
        for (position, entry) in seq.value.iter().enumerate() {
            if entry.tools().is_empty() {
                self.push(
                    Diagnostic::new(
                        Code::EmptySequence,
                        Some(entry.span()),
                        "an empty group in a sequence",
                    )
                    .label("no tool can satisfy this position")
                    .help("list at least one tool in the group, or remove it")
                    .about_step(step)
                    .about_position(position),
                );
                continue;
            }
            let mut group = Vec::new();
            for tool in entry.tools() {
                if let Some(i) = self.sequence_tool(tool, step, position, universe, set) {
                    if !group.contains(&i) {
                        group.push(i);
                    }
                }
            }
            group.sort_unstable();
            sequence.push(group);
        }
        sequence
    }

    /// The rules for one tool of a sequence position (see [`Checker::sequence`]).
    fn sequence_tool(
        &mut self,
        tool: &Spanned<String>,
        step: &str,
        position: usize,
        universe: &Universe<'_>,
        set: &StaticSet<'_>,
    ) -> Option<usize> {
        if is_pattern(&tool.value) {
            self.push(
                Diagnostic::new(
                    Code::PatternNotAllowed,
                    Some(tool.span),
                    format!("the pattern `{}` is not allowed in a sequence", tool.value),
                )
                .label("a sequence position needs literal tool names")
                .help("name the tools; for alternatives use a group (`[\"a\", \"b\"]` in JSON, `(a | b)` in the DSL)")
                .about_step(step)
                .about_tool(&tool.value)
                .about_position(position),
            );
            return None;
        }
        if self.empty_tool_name(tool) {
            return None;
        }
        let i = self.resolve(universe, tool, "sequence")?;
        if !set.permitted.contains(i) {
            let d = Diagnostic::new(
                Code::SequenceToolNotPermitted,
                Some(tool.span),
                format!(
                    "`{}` is in the sequence of step `{step}`, but the step's tools do not permit it",
                    tool.value
                ),
            )
            .label("not permitted by this step's `availableTools`")
            .about_step(step)
            .about_tool(&tool.value)
            .about_position(position);
            let d = match set.denied_by[i] {
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
        Some(i)
    }

    /// Resolves every condition of a step (see [`Checker::condition`]), each with
    /// where it is written; also returns the largest `window` written.
    fn conditions(
        &mut self,
        s: &Step,
        step: &str,
        universe: &Universe<'_>,
    ) -> (Vec<IrCondition>, Vec<Span>, usize) {
        let mut out = Vec::with_capacity(s.conditions.len());
        let mut spans = Vec::with_capacity(s.conditions.len());
        let mut max_window = 0;
        for c in &s.conditions {
            if let Some(ir) = self.condition(c, s, step, universe) {
                if let IrCondition::NotRecentlyUsed { window, .. } = ir {
                    max_window = max_window.max(window);
                }
                out.push(ir);
                spans.push(c.span);
            }
        }
        (out, spans, max_window)
    }

    /// E009: a condition's type is one of semantics §7 (the valid ones listed). E010: it
    /// has the `value` its type needs. Then the rules of its kind.
    fn condition(
        &mut self,
        c: &Condition,
        s: &Step,
        step: &str,
        universe: &Universe<'_>,
    ) -> Option<IrCondition> {
        let ty = c.kind.as_ref()?;
        let kind = match &ty.value {
            ConditionType::Known(k) => *k,
            ConditionType::Unknown(name) => {
                let names = ConditionKind::ALL.map(ConditionKind::as_str);
                let mut d = Diagnostic::new(
                    Code::UnknownCondition,
                    Some(ty.span),
                    format!("unknown condition type `{name}`"),
                )
                .label("unknown type")
                .about_step(step);
                if let Some(s) = closest(name, names) {
                    d = d.help(format!("did you mean `{s}`?"));
                }
                self.push(d.note(format!("valid types: {}", ConditionKind::list())));
                return None;
            }
        };
        if kind == ConditionKind::Budget && !c.has_range {
            // E025 (a shape the schema rejects too): without bounds it would always hold.
            self.bad(
                c.span,
                "a `budget` condition has no `range`".to_owned(),
                "bound the total: `{\"type\": \"budget\", \"value\": \"refunds\", \"range\": {\"min\": 3}}` in JSON, `budget(refunds, min = 3)` in the DSL",
            );
            return None;
        }
        let value = match (&c.value, kind.needs_value()) {
            (None, true) => {
                self.missing_value(c, kind, step);
                return None;
            }
            (value, _) => value.as_ref(),
        };
        match (kind, value) {
            (ConditionKind::SequenceMatch, _) => self.sequence_match(ty, s, step),
            (ConditionKind::ToolUsed, Some(v)) => self
                .condition_tool(v, step, universe)
                .map(IrCondition::ToolUsed),
            (ConditionKind::NotRecentlyUsed, Some(v)) => {
                let tool = self.condition_tool(v, step, universe)?;
                let window = self.window(c, step)?;
                Some(IrCondition::NotRecentlyUsed { tool, window })
            }
            (ConditionKind::MessageContains, Some(v)) => Some(IrCondition::Contains(intern(
                &mut self.contains,
                fold_case(&v.value),
            ))),
            (ConditionKind::MessageRegex, Some(v)) => self.regex(v, step),
            (ConditionKind::Budget, Some(v)) => self.budget_condition(c, v),
            (_, None) => None,
        }
    }

    /// E010, with a help text for the kind.
    fn missing_value(&mut self, c: &Condition, kind: ConditionKind, step: &str) {
        let help = match kind {
            ConditionKind::MessageContains => "give the text to look for: `\"value\": \"plan\"` in JSON, `message_contains(\"plan\")` in the DSL",
            ConditionKind::MessageRegex => "give the pattern: `\"value\": \"(?i)plan\"` in JSON, `message_regex(\"(?i)plan\")` in the DSL",
            ConditionKind::NotRecentlyUsed => "name the tool: `\"value\": \"search\"` in JSON, `not_recently_used(search)` in the DSL",
            ConditionKind::Budget => "name the budget and bound its total: `\"value\": \"refunds\", \"range\": {\"min\": 3}` in JSON, `budget(refunds, min = 3)` in the DSL",
            ConditionKind::ToolUsed | ConditionKind::SequenceMatch => "name the tool: `\"value\": \"search\"` in JSON, `tool_used(search)` in the DSL",
        };
        self.push(
            Diagnostic::new(
                Code::MissingValue,
                Some(c.span),
                format!("a `{}` condition needs a `value`", kind.as_str()),
            )
            .label("no `value`")
            .help(help)
            .about_step(step),
        );
    }

    /// E011: `sequence_match` is on a step with a (non-empty) sequence.
    fn sequence_match(
        &mut self,
        ty: &Spanned<ConditionType>,
        s: &Step,
        step: &str,
    ) -> Option<IrCondition> {
        if s.sequence.as_ref().is_some_and(|q| !q.value.is_empty()) {
            return Some(IrCondition::SequenceMatch);
        }
        self.push(
            Diagnostic::new(
                Code::SequenceMatchWithoutSequence,
                Some(ty.span),
                format!("`sequence_match` on step `{step}`, which has no sequence"),
            )
            .label("nothing to match")
            .help("add a `sequence` to the step, or use `tool_used`")
            .about_step(step),
        );
        None
    }

    /// E013: a condition names one tool, not a pattern. E015: a known tool.
    fn condition_tool(
        &mut self,
        v: &Spanned<String>,
        step: &str,
        universe: &Universe<'_>,
    ) -> Option<usize> {
        if is_pattern(&v.value) {
            self.push(
                Diagnostic::new(
                    Code::PatternNotAllowed,
                    Some(v.span),
                    format!("the pattern `{}` is not allowed in a condition", v.value),
                )
                .label("a condition names one tool")
                .help("name the tool exactly; use one step per tool if several should trigger it")
                .about_step(step)
                .about_tool(&v.value),
            );
            return None;
        }
        self.resolve(universe, v, "condition")
    }

    /// E017: a `window` is at least 1. E019: at most [`MAX_HISTORY`]. An absent
    /// window is the whole history, written as 0 until H is known
    /// ([`whole_history_windows`]).
    fn window(&mut self, c: &Condition, step: &str) -> Option<usize> {
        let Some(w) = &c.window else {
            return Some(0);
        };
        if w.value == 0 {
            self.push(
                Diagnostic::new(
                    Code::ZeroWindow,
                    Some(w.span),
                    "`window` of 0 looks at no history",
                )
                .label("must be at least 1")
                .help("use a window of 1 or more, or omit it to look at the whole history")
                .about_step(step),
            );
            return None;
        }
        if w.value > MAX_HISTORY as u64 {
            self.push(
                Diagnostic::new(
                    Code::LimitExceeded,
                    Some(w.span),
                    format!(
                        "`window` of {} exceeds the history limit of {MAX_HISTORY}",
                        w.value
                    ),
                )
                .about_step(step),
            );
            return None;
        }
        Some(w.value as usize)
    }

    /// E016: a `message_regex` compiles (syntax of the `regex` crate), with the
    /// run time's own builder and its size limit.
    fn regex(&mut self, v: &Spanned<String>, step: &str) -> Option<IrCondition> {
        if let Some(i) = self.regexes.iter().position(|r| *r == v.value) {
            return Some(IrCondition::Regex(i));
        }
        let e = match MessageRegex::new(&v.value) {
            Ok(re) => {
                self.regex_memory += re.memory_usage();
                self.regexes.push(v.value.clone());
                self.compiled_regexes.push(re);
                return Some(IrCondition::Regex(self.regexes.len() - 1));
            }
            Err(e) => e,
        };
        let help = match e {
            regex::Error::CompiledTooBig(limit) => format!(
                "the pattern compiles to more than {} KiB: Unicode classes such as `\\w` repeated many times are large; use an ASCII class (`(?-u:\\w)`) or fewer repetitions",
                limit / 1024
            ),
            _ => "the syntax is that of the Rust `regex` crate; add `(?i)` for case-insensitive matching".to_owned(),
        };
        self.push(
            Diagnostic::new(
                Code::InvalidRegex,
                Some(v.span),
                format!("invalid regex `{}`", v.value),
            )
            .label("does not compile")
            .note(e.to_string().lines().last().unwrap_or("").trim().to_owned())
            .help(help)
            .about_step(step),
        );
        None
    }

    /// E018: every `resetSequenceOn` entry is a trigger of semantics §7.
    fn reset_triggers(&mut self, s: &Step, step: &str) -> u8 {
        let mut flags = 0u8;
        for r in &s.reset_sequence_on {
            flags |= match r.value.as_str() {
                "user_message" => reset::USER_MESSAGE,
                "message_contains" => reset::MESSAGE_CONTAINS,
                "message_regex" => reset::MESSAGE_REGEX,
                _ => {
                    let mut d = Diagnostic::new(
                        Code::UnknownResetTrigger,
                        Some(r.span),
                        format!("unknown `resetSequenceOn` entry `{}`", r.value),
                    )
                    .label("unknown trigger")
                    .about_step(step);
                    if let Some(s) = closest(&r.value, RESET_TRIGGERS) {
                        d = d.help(format!("did you mean `{s}`?"));
                    }
                    self.push(d.note(format!("valid entries: {}", RESET_TRIGGERS.join(", "))));
                    0
                }
            };
        }
        flags
    }
}

/// A `not_recently_used` without a `window` looks at the whole history: H, now that
/// it is known.
pub(super) fn whole_history_windows(
    mut steps: Vec<StepInfo<'_>>,
    history: usize,
) -> Vec<StepInfo<'_>> {
    for c in steps.iter_mut().flat_map(|s| &mut s.conditions) {
        if let IrCondition::NotRecentlyUsed { window, .. } = c {
            if *window == 0 {
                *window = history;
            }
        }
    }
    steps
}

/// The index of `value` in `pool`, adding it if new.
fn intern(pool: &mut Vec<String>, value: String) -> usize {
    match pool.iter().position(|p| *p == value) {
        Some(i) => i,
        None => {
            pool.push(value);
            pool.len() - 1
        }
    }
}
