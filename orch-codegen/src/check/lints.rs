//! The warnings (W001–W006; W007 and W008, backed by the verifier, are in `check::verified_lints`): findings about a template that compiles. They read the
//! resolved steps and decide nothing the lowering depends on.

use super::{list_names, Checker, Universe};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::IrCondition;
use crate::resolved::StepInfo;

/// Runs every lint.
pub(super) fn run(
    c: &mut Checker<'_>,
    steps: &[StepInfo<'_>],
    universe: &Universe<'_>,
    default_step: Option<usize>,
) {
    for s in steps {
        unmatched_patterns(c, s, universe);
        empty_tool_set(c, s, universe);
        default_step_conditions(c, s);
        unreachable_step(c, s, default_step);
    }
    let shadowed = shadowed_steps(c, steps, default_step);
    sequences_that_never_complete(c, steps, universe, default_step, &shadowed);
}

/// Is step `i` entered by its conditions (not the default, has conditions, and is
/// not a nameless or duplicate step)?
fn conditional(steps: &[StepInfo<'_>], default_step: Option<usize>, i: usize) -> bool {
    Some(i) != default_step && !steps[i].conditions.is_empty() && !steps[i].skip
}

/// W004: every pattern of `allowed`/`denied` matches some tool of the universe.
fn unmatched_patterns(c: &mut Checker<'_>, s: &StepInfo<'_>, universe: &Universe<'_>) {
    for (entry, _, hits) in &s.patterns {
        if *hits == 0 {
            c.push(
                Diagnostic::new(
                    Code::UnmatchedPattern,
                    Some(entry.span),
                    format!(
                        "the pattern `{}` in step `{}` matches no tool",
                        entry.value, s.name
                    ),
                )
                .label("matches nothing")
                .note(format!("tools: {}", list_names(&universe.tools)))
                .about_step(s.name)
                .about_tool(&entry.value),
            );
        }
    }
}

/// W005: a step's static set is not empty (when there are tools at all).
fn empty_tool_set(c: &mut Checker<'_>, s: &StepInfo<'_>, universe: &Universe<'_>) {
    if s.static_set.is_empty() && universe.len() > 0 {
        c.push(
            Diagnostic::new(
                Code::EmptyToolSet,
                Some(s.name_span()),
                format!("step `{}` allows no tool", s.name),
            )
            .label("no tool passes its `availableTools`")
            .help("check `allowed` and `denied`: deny wins over allow")
            .about_step(s.name),
        );
    }
}

/// W003: the default step has no conditions (they would be ignored, as in AgentDock).
fn default_step_conditions(c: &mut Checker<'_>, s: &StepInfo<'_>) {
    if s.is_default && !s.model.conditions.is_empty() {
        c.push(
            Diagnostic::new(
                Code::DefaultStepConditions,
                Some(s.model.conditions_span),
                format!("the conditions of the default step `{}` are ignored", s.name),
            )
            .label("ignored")
            .note("the default step is active when no other step matches; its own conditions are never evaluated (as in AgentDock)")
            .help("remove the conditions, or make another step the default")
            .about_step(s.name),
        );
    }
}

/// W001: a step that is not the default has conditions (else it can never become
/// active). Not reported when `defaultStep` names no step (E008 says it once), nor for
/// a step without a name (E003 says it).
fn unreachable_step(c: &mut Checker<'_>, s: &StepInfo<'_>, default_step: Option<usize>) {
    let default_unresolved = c.t.default_step.is_some() && default_step.is_none();
    let flagged_default = s.model.is_default.as_ref().is_some_and(|d| d.value);
    if s.is_default
        || flagged_default
        || default_unresolved
        || s.model.name.is_none()
        || !s.model.conditions.is_empty()
    {
        return;
    }
    c.push(
        Diagnostic::new(
            Code::UnreachableStep,
            Some(s.name_span()),
            format!("step `{}` can never become active", s.name),
        )
        .label("no conditions, and not the default step")
        .note("a step becomes active only when all its conditions hold, or as the default step")
        .help("give it conditions (`conditions` in JSON, `when ...` in the DSL), or make it the default step")
        .about_step(s.name),
    );
}

/// W002: no conditional step is shadowed by an earlier one whose conditions it
/// implies (first match wins, so it could never become active). Returns which steps
/// are shadowed. Conservative: reports only what [`implies`] can prove.
fn shadowed_steps(
    c: &mut Checker<'_>,
    steps: &[StepInfo<'_>],
    default_step: Option<usize>,
) -> Vec<bool> {
    let index = ShadowIndex::new(steps, default_step, &c.contains);
    let mut shadowed = vec![false; steps.len()];
    for s in (0..steps.len()).filter(|&s| conditional(steps, default_step, s)) {
        let earlier = index.candidates(steps, s).into_iter().find(|&e| {
            steps[e]
                .conditions
                .iter()
                .all(|cond| implies(steps, &c.contains, s, e, *cond))
        });
        let Some(e) = earlier else { continue };
        shadowed[s] = true;
        let (sn, en) = (steps[s].name, steps[e].name);
        c.push(
            Diagnostic::new(
                Code::ShadowedStep,
                Some(steps[s].name_span()),
                format!("step `{sn}` can never become active: the earlier step `{en}` matches whenever it does"),
            )
            .label("shadowed")
            .related(steps[e].name_span(), "this step is checked first and wins")
            .note("steps are checked in order and the first whose conditions all hold wins")
            .help(format!("move `{sn}` before `{en}`, or make its conditions more specific"))
            .about_step(sn)
            .involving_step(en),
        );
    }
    shadowed
}

/// What a condition is about, for finding the earlier steps that could shadow a step
/// without comparing every pair of steps.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Tool(usize),
    Sequence,
    Contains(usize),
    Regex(usize),
    NotRecentlyUsed(usize),
    Budget(usize),
}

fn key(c: IrCondition) -> Key {
    match c {
        IrCondition::ToolUsed(x) => Key::Tool(x),
        IrCondition::SequenceMatch => Key::Sequence,
        IrCondition::Contains(a) => Key::Contains(a),
        IrCondition::Regex(r) => Key::Regex(r),
        IrCondition::NotRecentlyUsed { tool, .. } => Key::NotRecentlyUsed(tool),
        IrCondition::Budget(k) => Key::Budget(k),
    }
}

/// The conditional steps filed under one key each: the key of their rarest condition.
/// A step `e` can shadow `s` only if every condition of `e` — its filing key's
/// included — is implied by `s`, so the candidates for `s` are the steps filed under
/// the keys `s` implies.
struct ShadowIndex {
    by_key: std::collections::HashMap<Key, Vec<usize>>,
    /// For each `message_contains` needle, the needles it contains.
    substrings: Vec<Vec<usize>>,
}

impl ShadowIndex {
    fn new(steps: &[StepInfo<'_>], default_step: Option<usize>, contains: &[String]) -> Self {
        let mut count: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
        let conditional: Vec<usize> = (0..steps.len())
            .filter(|&i| conditional(steps, default_step, i))
            .collect();
        for &i in &conditional {
            for c in &steps[i].conditions {
                *count.entry(key(*c)).or_default() += 1;
            }
        }
        let mut by_key: std::collections::HashMap<Key, Vec<usize>> =
            std::collections::HashMap::new();
        for &i in &conditional {
            let rarest = steps[i]
                .conditions
                .iter()
                .map(|c| key(*c))
                .min_by_key(|k| count[k]);
            if let Some(k) = rarest {
                by_key.entry(k).or_default().push(i);
            }
        }
        let substrings = contains
            .iter()
            .map(|b| {
                (0..contains.len())
                    .filter(|&a| b.contains(contains[a].as_str()))
                    .collect()
            })
            .collect();
        ShadowIndex { by_key, substrings }
    }

    /// The steps before `s` that might shadow it, ascending.
    fn candidates(&self, steps: &[StepInfo<'_>], s: usize) -> Vec<usize> {
        let mut keys: Vec<Key> = Vec::new();
        for c in &steps[s].conditions {
            match *c {
                IrCondition::Contains(b) => keys.extend(
                    self.substrings
                        .get(b)
                        .into_iter()
                        .flatten()
                        .map(|a| Key::Contains(*a)),
                ),
                IrCondition::SequenceMatch => {
                    keys.push(Key::Sequence);
                    keys.extend(steps[s].sequence.iter().filter_map(|g| match g.as_slice() {
                        [x] => Some(Key::Tool(*x)),
                        _ => None,
                    }));
                }
                other => keys.push(key(other)),
            }
        }
        let mut out: Vec<usize> = keys
            .iter()
            .filter_map(|k| self.by_key.get(k))
            .flat_map(|list| list.iter().copied().take_while(|&e| e < s))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Does every state where step `s`'s conditions all hold satisfy condition `c` of
/// step `e`? (Conservative: `false` when not provable.)
fn implies(
    steps: &[StepInfo<'_>],
    contains: &[String],
    s: usize,
    e: usize,
    c: IrCondition,
) -> bool {
    let sc = &steps[s].conditions;
    let s_seq = &steps[s].sequence;
    let s_matches_seq = sc.contains(&IrCondition::SequenceMatch);
    match c {
        IrCondition::ToolUsed(x) => {
            sc.contains(&IrCondition::ToolUsed(x))
                || (s_matches_seq && s_seq.iter().any(|g| g.as_slice() == [x]))
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
        // Equal budget tests share one entry: the same test implies itself.
        IrCondition::Regex(_) | IrCondition::Budget(_) => sc.contains(&c),
        IrCondition::NotRecentlyUsed { tool, window } => sc.iter().any(|d| {
            matches!(*d, IrCondition::NotRecentlyUsed { tool: t2, window: w2 } if t2 == tool && w2 >= window)
        }),
    }
}

/// W006: no step's sequence is cut short because one of its tools satisfies the
/// `tool_used` conditions of a step that is checked first, which then wins (semantics §3;
/// the real `dr-house` template has this). Conservative: only tools certainly in the
/// used set before the sequence's last position are considered.
fn sequences_that_never_complete(
    c: &mut Checker<'_>,
    steps: &[StepInfo<'_>],
    universe: &Universe<'_>,
    default_step: Option<usize>,
    shadowed: &[bool],
) {
    let mut by_first_tool: std::collections::HashMap<usize, Vec<usize>> =
        std::collections::HashMap::new();
    for e in (0..steps.len()).filter(|&e| conditional(steps, default_step, e)) {
        if let Some(IrCondition::ToolUsed(x)) = steps[e].conditions.first() {
            by_first_tool.entry(*x).or_default().push(e);
        }
    }
    for s in 0..steps.len() {
        let is_default = Some(s) == default_step;
        if steps[s].sequence.is_empty()
            || shadowed[s]
            || !(conditional(steps, default_step, s) || is_default)
        {
            continue;
        }
        let used_at = used_before_last(&steps[s], is_default);
        // The default step is left whenever any conditional step matches; a
        // conditional step only for one that is checked before it. Only steps whose
        // first condition is a `tool_used` of a tool in `used_at` can qualify.
        let mut earlier: Vec<usize> = used_at
            .iter()
            .filter_map(|(x, _)| by_first_tool.get(x))
            .flatten()
            .copied()
            .filter(|&e| e != s && (is_default || e < s))
            .collect();
        earlier.sort_unstable();
        earlier.dedup();
        for e in earlier {
            let Some(pos) = position_that_activates(&steps[e], &used_at) else {
                continue;
            };
            report_never_completes(c, steps, universe, s, e, pos);
            break;
        }
    }
}

/// Tools certainly in the used set before step `s`'s last sequence position is
/// recorded, each with the position it is first used at (-1: before the sequence
/// starts): the step's own `tool_used` values (they held when it activated) and the
/// single-tool positions before the last.
fn used_before_last(s: &StepInfo<'_>, is_default: bool) -> Vec<(usize, isize)> {
    let mut used_at: Vec<(usize, isize)> = Vec::new();
    if !is_default {
        for c in &s.conditions {
            if let IrCondition::ToolUsed(x) = c {
                used_at.push((*x, -1));
            }
        }
    }
    let n = s.sequence.len();
    for (pos, group) in s.sequence.iter().enumerate().take(n - 1) {
        if let [x] = group.as_slice() {
            if !used_at.iter().any(|(y, _)| y == x) {
                used_at.push((*x, pos as isize));
            }
        }
    }
    used_at
}

/// When every condition of step `e` is a `tool_used` of a tool in `used_at`, and at
/// least one of them is first used inside the sequence: that position.
fn position_that_activates(e: &StepInfo<'_>, used_at: &[(usize, isize)]) -> Option<usize> {
    let mut at = -1isize;
    for c in &e.conditions {
        let IrCondition::ToolUsed(x) = c else {
            return None;
        };
        let (_, p) = used_at.iter().find(|(y, _)| y == x)?;
        at = at.max(*p);
    }
    usize::try_from(at).ok()
}

fn report_never_completes(
    c: &mut Checker<'_>,
    steps: &[StepInfo<'_>],
    universe: &Universe<'_>,
    s: usize,
    e: usize,
    pos: usize,
) {
    let tool_name = |x: usize| universe.tools.get(x).map_or("", |t| t.value.as_str());
    let (sn, en) = (steps[s].name, steps[e].name);
    let span = steps[s]
        .model
        .sequence
        .as_ref()
        .and_then(|q| q.value.get(pos))
        .map_or(steps[s].name_span(), |entry| entry.span());
    let conditions: Vec<String> = steps[e]
        .conditions
        .iter()
        .filter_map(|c| match c {
            IrCondition::ToolUsed(x) => Some(format!("tool_used `{}`", tool_name(*x))),
            _ => None,
        })
        .collect();
    let tool = steps[s].sequence[pos].first().map_or("", |x| tool_name(*x));
    c.push(
        Diagnostic::new(
            Code::SequenceNeverCompletes,
            Some(span),
            format!(
                "the sequence of step `{sn}` can never complete: recording `{tool}` (position {pos}) activates the earlier step `{en}`"
            ),
        )
        .label(format!("recording this satisfies {}", conditions.join(" and ")))
        .related(steps[e].name_span(), "this step wins from then on")
        .note("a recorded tool enters the used set, and activation is evaluated again within the same turn")
        .help(format!("move `{en}` after `{sn}`, or give `{en}` more specific conditions"))
        .about_step(sn)
        .about_tool(tool)
        .about_position(pos)
        .involving_step(en),
    );
}
