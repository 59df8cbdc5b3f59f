//! Proptest strategies for event streams and random templates, and a deterministic
//! runner whose failures arrive shrunk to their smallest case (the root package's
//! property tests and `orch-cli`'s agreement test).

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::fmt::Debug;

/// One event a host or a user causes. Indices pick from the test's own lists (of
/// messages, of tools), whatever their length.
#[derive(Clone, Debug)]
pub enum Event {
    /// A user message: `messages[i]`.
    Message(Index),
    /// The host records (or checks) a tool of the machine: `tools[i]`.
    Tool(Index),
    /// The host records (or checks) a tool the template does not declare.
    Foreign,
    /// The host's available tools: tool `i` is available when `mask[i % mask.len()]`
    /// (every tool for an empty mask).
    Available(Vec<bool>),
    /// Token usage.
    Usage(u64, u64),
    /// Back to a fresh session.
    Reset,
}

impl Event {
    /// Is tool `i` in an [`Event::Available`] mask?
    pub fn keeps(mask: &[bool], i: usize) -> bool {
        mask.is_empty() || mask[i % mask.len()]
    }

    /// The names an [`Event::Available`] mask keeps, in order.
    pub fn kept<'a>(mask: &'a [bool], names: &'a [String]) -> impl Iterator<Item = &'a str> + 'a {
        names
            .iter()
            .enumerate()
            .filter(|(i, _)| Event::keeps(mask, *i))
            .map(|(_, n)| n.as_str())
    }
}

/// One event, weighted as hosts produce them: mostly tools and messages.
pub fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        15 => any::<Index>().prop_map(Event::Message),
        23 => any::<Index>().prop_map(Event::Tool),
        2 => Just(Event::Foreign),
        5 => prop::collection::vec(prop::bool::weighted(0.7), 1..12).prop_map(Event::Available),
        4 => (0u64..1000, 0u64..1000).prop_map(|(p, c)| Event::Usage(p, c)),
        1 => Just(Event::Reset),
    ]
}

/// Up to `max` events.
pub fn events(max: usize) -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(event(), 0..=max)
}

/// Runs `test` on `cases` values of `strategy` with a fixed seed (the same cases on
/// every run and in CI), and panics with the smallest failing value proptest finds.
pub fn check<S>(cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: Debug,
{
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    match runner.run(&strategy, test) {
        Ok(()) => {}
        Err(TestError::Fail(why, value)) => {
            panic!("property failed: {why}\nsmallest failing case: {value:#?}")
        }
        Err(e) => panic!("{e}"),
    }
}

/// User messages for the property tests: the words random templates' message conditions
/// use (the first six), words of the example templates, and text that matches nothing.
pub const MESSAGES: [&str; 16] = [
    "research",
    "critique it",
    "EVALUATE",
    "fresh",
    "fetch",
    "again",
    "refund",
    "cancel",
    "down",
    "hi",
    "nothing",
    "",
    "Naïve RESEARCH über fetch",
    "re-evaluate: Fetch again, fresh 42",
    "ÉFRESH critiques évaluation",
    "researchers fetched 7",
];

/// The words random templates' message conditions use.
pub const TEMPLATE_WORDS: &[&str] = MESSAGES.split_at(6).0;

/// A condition of a random template, with tool indices.
#[derive(Clone, Debug)]
pub enum CondSpec {
    /// `tool_used` of the tool.
    ToolUsed(usize),
    /// `sequence_match` of the step's own sequence.
    SequenceMatch,
    /// `message_contains` of a word.
    Contains(usize),
    /// A word and a pattern form (see [`regex_form`]).
    Regex(usize, usize),
    /// `not_recently_used` of the tool within that many calls.
    NotRecentlyUsed(usize, u8),
}

/// A step of a random template.
#[derive(Clone, Debug)]
pub struct StepSpec {
    /// Positions of the sequence (empty: none), each one or two tools.
    pub sequence: Vec<Vec<usize>>,
    /// One or two conditions.
    pub conditions: Vec<CondSpec>,
    /// `allowed: ["tool_*"], denied: [tool]` (only on steps without a sequence).
    pub deny: Option<usize>,
    /// A `resetSequenceOn` trigger.
    pub reset: Option<usize>,
}

/// A random valid template: 2–10 tools, a default step and 1–6 steps with random
/// conditions, sequences (with groups), allow/deny lists (with patterns) and resets.
pub fn template() -> impl Strategy<Value = String> {
    template_with(2..11, 1..=6)
}

/// A random valid template with `tools` tools and `steps` steps besides the default.
pub fn template_with(
    tools: std::ops::Range<usize>,
    steps: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = String> {
    tools
        .prop_flat_map(move |n| {
            let tool = 0..n;
            let cond = prop_oneof![
                tool.clone().prop_map(CondSpec::ToolUsed),
                Just(CondSpec::SequenceMatch),
                (0..TEMPLATE_WORDS.len()).prop_map(CondSpec::Contains),
                (0..TEMPLATE_WORDS.len(), 0..REGEX_FORMS).prop_map(|(w, f)| CondSpec::Regex(w, f)),
                (tool.clone(), 1u8..5).prop_map(|(t, w)| CondSpec::NotRecentlyUsed(t, w)),
            ];
            let group = prop_oneof![
                3 => tool.clone().prop_map(|t| vec![t]),
                1 => (tool.clone(), tool.clone()).prop_map(|(a, b)| vec![a, b]),
            ];
            let sequence = prop_oneof![Just(Vec::new()), prop::collection::vec(group, 1..=3),];
            let step = (
                sequence,
                prop::collection::vec(cond, 1..=2),
                prop::option::weighted(0.33, tool.clone()),
                prop::option::weighted(0.33, 0usize..3),
            )
                .prop_map(|(sequence, conditions, deny, reset)| StepSpec {
                    sequence,
                    conditions,
                    deny,
                    reset,
                });
            (Just(n), prop::collection::vec(step, steps.clone()))
        })
        .prop_map(|(n, steps)| template_json(n, &steps))
}

/// How many pattern forms [`regex_form`] knows.
pub const REGEX_FORMS: usize = 6;

/// A `message_regex` pattern about `TEMPLATE_WORDS[w]`, in form `f`: anchored and
/// case-insensitive, between word boundaries, an alternation with the next word, a
/// case-sensitive word, an accented variant, or one without any required literal.
pub fn regex_form(w: usize, f: usize) -> String {
    let word = TEMPLATE_WORDS[w % TEMPLATE_WORDS.len()];
    let next = TEMPLATE_WORDS[(w + 1) % TEMPLATE_WORDS.len()];
    match f % REGEX_FORMS {
        0 => format!("(?i)^{word}"),
        1 => format!(r"(?i)\b{word}\b"),
        2 => format!("{word}|(?i:{next})"),
        3 => word.to_owned(),
        4 => format!("(?i)(ü|é)?{word}s?"),
        _ => r"[a-z]{5}\s?[0-9]*$".to_owned(),
    }
}

/// The JSON of a random template.
pub fn template_json(n_tools: usize, specs: &[StepSpec]) -> String {
    use serde_json::json;
    let tool = |i: usize| format!("tool_{}", i % n_tools);
    let tools: Vec<String> = (0..n_tools).map(tool).collect();
    let mut steps = vec![json!({"name": "Default", "isDefault": true})];
    for (s, spec) in specs.iter().enumerate() {
        let mut step = json!({"name": format!("Step{s}")});
        if !spec.sequence.is_empty() {
            let seq: Vec<serde_json::Value> = spec
                .sequence
                .iter()
                .map(|g| match g.as_slice() {
                    [one] => tool(*one).into(),
                    more => more.iter().map(|t| tool(*t)).collect::<Vec<_>>().into(),
                })
                .collect();
            step["sequence"] = seq.into();
        }
        let conds: Vec<serde_json::Value> = spec
            .conditions
            .iter()
            .map(|c| match *c {
                CondSpec::ToolUsed(t) => json!({"type": "tool_used", "value": tool(t)}),
                CondSpec::SequenceMatch if !spec.sequence.is_empty() => {
                    json!({"type": "sequence_match"})
                }
                // `sequence_match` needs a sequence: a step without one gets a
                // condition on the first tool instead.
                CondSpec::SequenceMatch => json!({"type": "tool_used", "value": tool(0)}),
                CondSpec::Contains(w) => {
                    json!({"type": "message_contains", "value": TEMPLATE_WORDS[w]})
                }
                CondSpec::Regex(w, f) => {
                    json!({"type": "message_regex", "value": regex_form(w, f)})
                }
                CondSpec::NotRecentlyUsed(t, w) => {
                    json!({"type": "not_recently_used", "value": tool(t), "window": w})
                }
            })
            .collect();
        step["conditions"] = conds.into();
        if let (Some(d), true) = (spec.deny, spec.sequence.is_empty()) {
            step["availableTools"] = json!({"allowed": ["tool_*"], "denied": [tool(d)]});
        }
        if let Some(r) = spec.reset {
            let trigger = ["user_message", "message_contains", "message_regex"][r];
            step["resetSequenceOn"] = json!([trigger]);
        }
        steps.push(step);
    }
    json!({"agentId": "random", "tools": tools, "orchestration": {"steps": steps}}).to_string()
}

/// Rules on arguments (semantics §16) for the run protocol's generated templates, whose
/// calls carry `{"n": ..}`: what a stream's template may say about its calls' arguments.
#[derive(Clone, Copy, Debug)]
pub struct ArgumentRules {
    /// A required rule named `small`: on tool `.0`, of kind `.1` — 0: `/n` at most 1;
    /// 1: `/n` one of 0 and 2; 2: `/n` names the host `a.example` or is not a list of
    /// `@a.example` addresses (a number never names a host nor is a list: it holds); 3:
    /// `/n` names the host `a.example` (never, for a number: the tool is always
    /// refused, in the same words everywhere); 4: `/n` a value an earlier result of
    /// tool `.2` held; 5: `/n` a value an earlier admitted call of tool `.2` was given,
    /// or the user wrote; 6 (and any kind past 9): `/n` a value the user wrote or tool
    /// `.2`, declared trusted, returned (the other tools' results untrusted); 7: tool
    /// `.2` admitted at most twice in the run, this call included (a count budget, semantics §17); 8: the
    /// sum of `/n` over the calls of tool `.0` admitted within a day at most 3 (a sum
    /// budget whose window no test outlives; a call without a number in `/n` is
    /// refused); 9: `/n` at most 1 while the session refused at most one call of any
    /// tool (a budget of refusals).
    pub rule: Option<(usize, usize, usize)>,
    /// A conditional approval named `large`: calls of this tool whose `/n` is 2 or more.
    pub conditional: Option<usize>,
}

impl ArgumentRules {
    /// Random rules: a required rule with probability `rule`, a conditional approval
    /// with probability one half.
    pub fn strategy(rule: f64) -> impl Strategy<Value = ArgumentRules> {
        (
            proptest::option::weighted(rule, (0..4usize, 0..10usize, 0..4usize)),
            proptest::option::of(0..4usize),
        )
            .prop_map(|(rule, conditional)| ArgumentRules { rule, conditional })
    }

    /// Writes them into a template's `orchestration` (whose `approve` is a list):
    /// `tools` names the tools by index, `results` is where in a tool's result values
    /// an `inResult` rule looks.
    pub fn apply(&self, orchestration: &mut serde_json::Value, tools: &[&str], results: &str) {
        use serde_json::json;
        if let Some(tool) = self.conditional {
            let approve = json!({"name": "large", "tool": tools[tool],
                "when": {"path": "/n", "range": {"min": 2}}});
            match orchestration["approve"].as_array_mut() {
                Some(list) => list.push(approve),
                None => orchestration["approve"] = json!([approve]),
            }
        }
        if let Some((tool, kind, source)) = self.rule {
            let require = match kind {
                0 => json!({"path": "/n", "range": {"max": 1}}),
                1 => json!({"path": "/n", "oneOf": [0, 2]}),
                2 => json!({"any": [{"path": "/n", "hostnameIn": ["a.example"]},
                                    {"not": {"path": "/n", "addressesIn": ["*@a.example"]}}]}),
                3 => json!({"path": "/n", "hostnameIn": ["a.example", "*.a.example"]}),
                4 => json!({"path": "/n", "inResult": {"tool": tools[source], "path": results}}),
                5 => {
                    json!({"path": "/n", "from": [{"arguments": tools[source], "path": "/n"}, "user"]})
                }
                7 => {
                    orchestration["budgets"] = json!([{"name": "calls", "tool": tools[source]}]);
                    json!({"budget": "calls", "range": {"max": 2}})
                }
                8 => {
                    orchestration["budgets"] = json!([{"name": "spent", "tool": tools[tool],
                        "sum": "/n", "within": "1d"}]);
                    json!({"budget": "spent", "range": {"max": 3}})
                }
                9 => {
                    orchestration["budgets"] =
                        json!([{"name": "refusals", "tool": "*", "counts": "refused"}]);
                    json!({"all": [{"path": "/n", "range": {"max": 1}},
                                   {"budget": "refusals", "range": {"max": 1}}]})
                }
                _ => {
                    let untrusted: Vec<&str> = tools
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != source)
                        .map(|(_, t)| *t)
                        .collect();
                    orchestration["trust"] =
                        json!({"trusted": [tools[source]], "untrusted": untrusted});
                    json!({"path": "/n", "from": ["user", "trusted"]})
                }
            };
            orchestration["rules"] =
                json!([{"name": "small", "tool": tools[tool], "require": require}]);
        }
    }
}
