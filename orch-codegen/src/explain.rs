//! Long explanations of every diagnostic (`orch explain CODE`), each with a wrong and a
//! fixed example. The examples are tested: the wrong one produces the code, the fixed
//! one compiles without it.

use crate::diagnostic::Code;

/// The language of an explanation's examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// A JSON template.
    Json,
    /// The input of `orchestration!`.
    Dsl,
}

/// The long explanation of a diagnostic.
#[derive(Clone, Copy, Debug)]
pub struct Explanation {
    /// What the diagnostic means and why it matters.
    pub text: &'static str,
    /// The language of the examples.
    pub lang: Lang,
    /// A template that triggers it.
    pub wrong: &'static str,
    /// The same template, fixed.
    pub fixed: &'static str,
    /// The surface the examples are checked for (its checks, W009 and E024, depend on
    /// it).
    pub surface: crate::Surface,
}

macro_rules! json {
    ($steps:literal) => {
        concat!(
            r#"{"agentId": "demo", "tools": ["search", "think", "reflect"], "orchestration": {"steps": [
  {"name": "Chat", "isDefault": true},
  "#,
            $steps,
            "\n]}}"
        )
    };
}

/// The explanation of `code`.
///
/// Longer than the project's 120-line bound on purpose: it is a data table, one entry
/// per code (text, wrong and fixed example), which reads best as one `match`.
#[allow(
    clippy::too_many_lines,
    reason = "a data table, one entry per diagnostic code"
)]
pub fn explain(code: Code) -> Explanation {
    use Code::*;
    let (text, lang, wrong, fixed) = match code {
        InvalidJson => (
            "The file is not valid JSON. Templates are plain JSON (RFC 8259): no comments, no trailing commas, double-quoted strings. The diagnostic points at the first offending character.",
            Lang::Json,
            r#"{"agentId": "demo", "orchestration": {"steps": [{"name": "Chat", "isDefault": true},]}}"#,
            r#"{"agentId": "demo", "orchestration": {"steps": [{"name": "Chat", "isDefault": true}]}}"#,
        ),
        WrongType => (
            "A field the orchestration uses has the wrong JSON type, for example a string where a boolean or an array is expected. The field is skipped, so the template would not do what it says.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "sequence": "search"}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "sequence": ["search"]}"#),
        ),
        MissingField => (
            "A required field is missing: the template's `orchestration` (or `steps`), a step's `name`, a condition's `type`, or the machine's `agentId`/`name`. Steps are found by name, so a nameless step cannot be used.",
            Lang::Json,
            json!(r#"{"conditions": [{"type": "tool_used", "value": "search"}]}"#),
            json!(r#"{"name": "AfterSearch", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        DuplicateStep => (
            "Two steps have the same name. Sessions store the active step by name, and the generated `enum Step` needs one variant per step.",
            Lang::Json,
            json!(r#"{"name": "Chat", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
            json!(r#"{"name": "AfterSearch", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        NameCollision => (
            "Two names become the same Rust identifier (`web-fetch` and `web_fetch` both become `WebFetch`), so the generated enum would have two equal variants.",
            Lang::Json,
            r#"{"agentId": "demo", "tools": ["web-fetch", "web_fetch"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}]}}"#,
            r#"{"agentId": "demo", "tools": ["web-fetch", "web_fetch_v2"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}]}}"#,
        ),
        InvalidName => (
            "A name has no letters or digits (or is empty), so no Rust identifier can be made from it.",
            Lang::Json,
            json!(r#"{"name": "---", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
            json!(r#"{"name": "Searched", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        ConflictingDefault => (
            "More than one step is the default: several steps say `isDefault: true`, or `isDefault` disagrees with `orchestration.defaultStep`. A session starts in exactly one default step.",
            Lang::Json,
            json!(r#"{"name": "Idle", "isDefault": true}"#),
            json!(r#"{"name": "Idle", "conditions": [{"type": "message_contains", "value": "wait"}]}"#),
        ),
        UnknownDefaultStep => (
            "`orchestration.defaultStep` names a step that does not exist (often a typo); the closest name is suggested.",
            Lang::Json,
            r#"{"agentId": "demo", "orchestration": {"defaultStep": "Caht", "steps": [{"name": "Chat"}]}}"#,
            r#"{"agentId": "demo", "orchestration": {"defaultStep": "Chat", "steps": [{"name": "Chat"}]}}"#,
        ),
        UnknownCondition => (
            "A condition's `type` is not one of tool_used, sequence_match, message_contains, message_regex, not_recently_used, budget. An unknown condition would never hold (AgentDock silently ignores it).",
            Lang::Json,
            json!(r#"{"name": "AfterSearch", "conditions": [{"type": "tool_use", "value": "search"}]}"#),
            json!(r#"{"name": "AfterSearch", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        MissingValue => (
            "`tool_used`, `message_contains`, `message_regex`, `not_recently_used` and `budget` test something named by `value`; without it the condition means nothing.",
            Lang::Json,
            json!(r#"{"name": "AfterSearch", "conditions": [{"type": "tool_used"}]}"#),
            json!(r#"{"name": "AfterSearch", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        SequenceMatchWithoutSequence => (
            "`sequence_match` compares the newest history entries with the step's own `sequence`; a step without a sequence can never match.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "sequence_match"}]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "sequence_match"}], "sequence": ["search", "think"]}"#),
        ),
        EmptySequence => (
            "A `sequence` is empty, or one of its positions is an empty group `[]`: no tool could ever satisfy it, so the step would block.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "sequence": ["think", []]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "sequence": ["think", ["reflect", "search"]]}"#),
        ),
        PatternNotAllowed => (
            "A name with `*` is a pattern, and patterns are only meaningful in `allowed`/`denied`. A sequence position, a condition value and the tool list name tools exactly; for alternatives in a sequence use a group.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "sequence": ["search", "th*"]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "sequence": ["search", ["think", "reflect"]]}"#),
        ),
        SequenceToolNotPermitted => (
            "A tool in the step's sequence is not in the step's own tool set (`allowed`, minus `denied`). While the sequence waits for it, the step would have to offer a tool it forbids; AgentDock lets this fail at run time.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search", "think"], "availableTools": {"allowed": ["search"]}}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search", "think"], "availableTools": {"allowed": ["search", "think"]}}"#),
        ),
        UnknownTool => (
            "The template declares its tools (`tools`, or `nodes` without `llm.*`) and a step names a tool that is not among them, usually a typo; the closest name is suggested.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["serch", "think"]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search", "think"]}"#),
        ),
        InvalidRegex => (
            "A `message_regex` value does not compile with the Rust `regex` crate (whose syntax is close to PCRE without look-around or backreferences). Add `(?i)` for case-insensitive matching.",
            Lang::Json,
            json!(r#"{"name": "Review", "conditions": [{"type": "message_regex", "value": "(critique|review"}]}"#),
            json!(r#"{"name": "Review", "conditions": [{"type": "message_regex", "value": "(?i)(critique|review)"}]}"#),
        ),
        ZeroWindow => (
            "`not_recently_used` with `window: 0` looks at no history entries, so it would always hold. Use 1 or more, or omit `window` to look at the whole history.",
            Lang::Json,
            json!(r#"{"name": "Fresh", "conditions": [{"type": "not_recently_used", "value": "search", "window": 0}]}"#),
            json!(r#"{"name": "Fresh", "conditions": [{"type": "not_recently_used", "value": "search", "window": 3}]}"#),
        ),
        UnknownResetTrigger => (
            "`resetSequenceOn` accepts `user_message`, `message_contains` and `message_regex`; anything else would never reset the sequence.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search"], "resetSequenceOn": ["new_message"]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search"], "resetSequenceOn": ["user_message"]}"#),
        ),
        LimitExceeded => (
            "The template exceeds a limit of the compiled form: the history (kept inline in every session) holds at most 1024 entries, a machine at most 16 384 tools and steps, a template file at most 16 MB.",
            Lang::Json,
            r#"{"agentId": "demo", "orchestration": {"historyLength": 5000, "steps": [{"name": "Chat", "isDefault": true}]}}"#,
            r#"{"agentId": "demo", "orchestration": {"historyLength": 50, "steps": [{"name": "Chat", "isDefault": true}]}}"#,
        ),
        UnknownLint => (
            "An `allow` (in the `orchestration!` macro) names something that is not a warning; only warnings can be allowed, by name or code.",
            Lang::Dsl,
            "#![allow(unreachable_stp)]\nmachine demo {\n    tools: [search],\n    default step Chat;\n    step Lonely;\n}",
            "#![allow(unreachable_step)]\nmachine demo {\n    tools: [search],\n    default step Chat;\n    step Lonely;\n}",
        ),
        UnknownField => (
            "`availableTools` and the entries of `orchestration.properties` are objects whose every key orch knows (`allowed`, `denied`, `approve`; `name`, `tool`, `after`, `atMost`, `never`, `approved`). An unknown key there is an error, not ignored: a misspelt `approve` would leave a tool without its approval gate. Other objects keep AgentDock's rule: fields orch does not read are ignored.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "availableTools": {"allowed": ["think"], "aprove": ["think"]}}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}], "availableTools": {"allowed": ["think"], "approve": ["think"]}}"#),
        ),
        InvalidProperty => (
            "Each entry of `orchestration.properties` has a `name`, a `tool` (a name or a pattern) and exactly one rule: `\"after\": Q`, `\"atMost\": N`, `\"never\": true` or `\"approved\": true`. Two rules in one entry, none, a rule set to `false`, or two properties with the same name are errors: write one property per rule.",
            Lang::Json,
            r#"{"agentId": "demo", "tools": ["search", "think"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "properties": [{"name": "think-rarely", "tool": "think", "atMost": 2, "after": "search"}]}}"#,
            r#"{"agentId": "demo", "tools": ["search", "think"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search"]}}, {"name": "Think", "conditions": [{"type": "tool_used", "value": "search"}]}],
  "properties": [{"name": "think-after-search", "tool": "think", "after": "search"}]}}"#,
        ),
        InvalidRule => (
            "A rule on arguments (`rules`, or a conditional `approve`) judges the JSON value at a `path` — a JSON pointer (RFC 6901: `\"\"`, `/to`, `/items/0/price`) — with exactly one test: `exists`, `equals`, `oneOf`, `glob`, `regex`, `range`, `length`, `hostIn`, `hostnameIn`, `addressesIn`, `linksIn`, `emailsIn`, `each`, `inResult` or `from`; or it combines predicates with one of `all`, `any`, `not`. No test or two in one object, an empty list, a path that is not a pointer, a `hostIn`, `hostnameIn` or `linksIn` entry with a scheme, a port or a path (`https://example.com` instead of `example.com`), or an `addressesIn` or `emailsIn` entry without exactly one `@` cannot be judged as written. A `range` bound from a result is `{\"result\": TOOL, \"path\": P}` and nothing else; a budget (`counts` is `admitted` or `refused`) is compared with numbers, and a `budget` test or step condition needs its `range`. The JSON Schema (`orch schema`) says the same.",
            Lang::Json,
            r#"{"agentId": "pay", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "rules": [{"name": "small", "tool": "send_money", "require": {"path": "amount", "range": {"max": 100}}}]}}"#,
            r#"{"agentId": "pay", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "rules": [{"name": "small", "tool": "send_money", "require": {"path": "/amount", "range": {"max": 100}}}]}}"#,
        ),
        ConflictingRule => (
            "A `range` or `length` whose `min` is above its `max` holds for no value: every call of the tool would be refused (or, in a conditional `approve`, none would be gated); so does a `from` origin `\"trusted\"` when `orchestration.trust.trusted` names no tool, and a tool declared both trusted and untrusted is a contradiction. Two rules of one scope (the orchestration's, or one step's) with the same name cannot be told apart in refusals and decision logs.",
            Lang::Json,
            r#"{"agentId": "pay", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "rules": [{"name": "amount", "tool": "send_money", "require": {"path": "/amount", "range": {"min": 100, "max": 10}}}]}}"#,
            r#"{"agentId": "pay", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "rules": [{"name": "amount", "tool": "send_money", "require": {"path": "/amount", "range": {"min": 10, "max": 100}}}]}}"#,
        ),
        UnknownBudget => (
            "A budget test (`{\"budget\": NAME, \"range\": {..}}`) or a `budget` step condition (`{\"type\": \"budget\", \"value\": NAME, \"range\": {..}}`) reads the total of a budget declared in `orchestration.budgets`: a count of calls or a sum of an argument, over the run, a step or a window. A name no budget has cannot be read; the compiler suggests the closest declared name.",
            Lang::Json,
            r#"{"agentId": "pay", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "budgets": [{"name": "daily-spend", "tool": "send_money", "sum": "/amount", "within": "24h"}],
  "rules": [{"name": "daily-limit", "tool": "send_money", "require": {"budget": "daily-spent", "range": {"max": 10000}}}]}}"#,
            r#"{"agentId": "pay", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "budgets": [{"name": "daily-spend", "tool": "send_money", "sum": "/amount", "within": "24h"}],
  "rules": [{"name": "daily-limit", "tool": "send_money", "require": {"budget": "daily-spend", "range": {"max": 10000}}}]}}"#,
        ),
        PropertyViolated => (
            "Every state a session can reach was explored with the tools `allowed()` admits, and in one of them the property fails: the tool runs before any tool its `after` names, runs more often than `atMost`, runs at all under `never`, or runs without an approval gate under `approved`. The message gives the shortest list of events that leads there; `orch verify` prints it as JSON that `orch simulate` replays. Reported with the same limits as W007; larger templates: run `orch verify`.",
            Lang::Json,
            r#"{"agentId": "demo", "tools": ["search", "think"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}],
  "properties": [{"name": "think-after-search", "tool": "think", "after": "search"}]}}"#,
            r#"{"agentId": "demo", "tools": ["search", "think"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search"]}}, {"name": "Think", "conditions": [{"type": "tool_used", "value": "search"}]}],
  "properties": [{"name": "think-after-search", "tool": "think", "after": "search"}]}}"#,
        ),
        UnreachableStep => (
            "A step without conditions that is not the default can never become active: activation only considers steps whose conditions all hold, and the default. Four of the six public AgentDock templates have such steps.",
            Lang::Json,
            json!(r#"{"name": "Fact Check", "availableTools": {"allowed": ["search"]}}"#),
            json!(r#"{"name": "Fact Check", "conditions": [{"type": "message_contains", "value": "check"}], "availableTools": {"allowed": ["search"]}}"#),
        ),
        ShadowedStep => (
            "Steps are checked in order and the first whose conditions all hold wins. If an earlier step holds whenever this one does, this one can never win.",
            Lang::Json,
            json!(r#"{"name": "Web", "conditions": [{"type": "tool_used", "value": "search"}]},
  {"name": "Deep", "conditions": [{"type": "tool_used", "value": "search"}, {"type": "tool_used", "value": "think"}]}"#),
            json!(r#"{"name": "Deep", "conditions": [{"type": "tool_used", "value": "search"}, {"type": "tool_used", "value": "think"}]},
  {"name": "Web", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        DefaultStepConditions => (
            "The default step is active when no other step matches; its own conditions are never evaluated (as in AgentDock), so they only mislead readers.",
            Lang::Json,
            r#"{"agentId": "demo", "tools": ["search"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true, "conditions": [{"type": "tool_used", "value": "search"}]}]}}"#,
            r#"{"agentId": "demo", "tools": ["search"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}]}}"#,
        ),
        UnmatchedPattern => (
            "A pattern in `allowed` or `denied` matches no declared tool, usually a typo. (Tools the host registers at run time are still matched against it.)",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "availableTools": {"allowed": ["search*", "*cognitive*"]}}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "availableTools": {"allowed": ["search*"]}}"#),
        ),
        EmptyToolSet => (
            "No tool passes the step's `availableTools`: deny wins over allow, so an allowed tool that is also denied is not available.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "availableTools": {"allowed": ["search"], "denied": ["s*"]}}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "availableTools": {"allowed": ["search"], "denied": ["t*"]}}"#),
        ),
        SequenceNeverCompletes => (
            "Recording a tool of this step's sequence makes an earlier step's `tool_used` conditions hold; activation runs again after every recorded tool, the earlier step wins, and this sequence is abandoned before its end. The public dr-house template has this.",
            Lang::Json,
            json!(r#"{"name": "Basic", "conditions": [{"type": "tool_used", "value": "search"}]},
  {"name": "Deep", "conditions": [{"type": "tool_used", "value": "think"}], "sequence": ["search", "think", "reflect"]}"#),
            json!(r#"{"name": "Deep", "conditions": [{"type": "tool_used", "value": "think"}], "sequence": ["search", "think", "reflect"]},
  {"name": "Basic", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        DeadStep => (
            "Every state a session can reach was explored (messages: every combination of message conditions one message can satisfy; tools: those `allowed()` admits), and none activates this step. The message says why: a condition that never holds (for `tool_used x`, because `x` is allowed only in steps that never become active), conditions that never hold together, or the earlier step that wins whenever they do. `orch verify` prints a witness for every reachable step. Reported for templates of up to 256 steps, 256 tools and 32 message conditions whose exploration finishes within 5,000 states; larger ones: run `orch verify`.",
            Lang::Json,
            json!(r#"{"name": "Audit", "conditions": [{"type": "message_regex", "value": "^audit"}, {"type": "message_regex", "value": "^review"}]}"#),
            json!(r#"{"name": "Audit", "conditions": [{"type": "message_regex", "value": "^audit"}, {"type": "message_regex", "value": "review"}]}"#),
        ),
        ReadsUserMessages => (
            "`orch policy` enforces the workflow on MCP traffic, which carries tool calls and results but never the user's messages: a `message_contains` or `message_regex` condition never holds there, so a step that needs one is never activated and the workflow would not be the one its author wrote. `orch policy` refuses such a template (checked for the policy host; `orch check` alone does not know where the template runs). Switch steps on tool use instead, or run orch inside the agent, where it sees every message.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search"]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        NoUserMessages => (
            "Behind an MCP gateway (`orch mcp`, or agentgateway with `orch policy`) no user message ever reaches the session: a step's message conditions never hold (`orch mcp` serves the template anyway, warning), and a `resetSequenceOn` on user messages never fires. Allow `no_user_messages` when another host of the same template does see the messages.",
            Lang::Json,
            json!(r#"{"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search"]}"#),
            json!(r#"{"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
        SequenceCannotComplete => (
            "The step can become active, but no continuation that records only allowed tools ever completes its sequence: for example, recording one of its tools activates another step first, or a message condition that keeps it active can never hold again. Same exploration and limits as W007.",
            Lang::Json,
            json!(r#"{"name": "Plan", "conditions": [{"type": "not_recently_used", "value": "search", "window": 3}, {"type": "message_contains", "value": "plan"}], "sequence": ["search", "think"]},
  {"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
            json!(r#"{"name": "Plan", "conditions": [{"type": "not_recently_used", "value": "search", "window": 3}, {"type": "message_contains", "value": "plan"}], "sequence": ["think", "search"]},
  {"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}]}"#),
        ),
    };
    let surface = match code {
        ReadsUserMessages => crate::Surface::Policy,
        NoUserMessages => crate::Surface::McpGateway,
        _ => crate::Surface::Agent,
    };
    Explanation {
        text,
        lang,
        wrong,
        fixed,
        surface,
    }
}

/// The explanation as text for a terminal.
pub fn render(code: Code) -> String {
    let e = explain(code);
    let lang = match e.lang {
        Lang::Json => "template.json",
        Lang::Dsl => "orchestration! { .. }",
    };
    let kind = match code.severity() {
        crate::Severity::Error => "error",
        crate::Severity::Warning => "warning",
    };
    format!(
        "{code} ({kind}, `{name}`): {summary}\n\n{text}\n\nWrong ({lang}):\n\n{wrong}\n\nFixed:\n\n{fixed}\n",
        name = code.name(),
        summary = code.summary(),
        text = e.text,
        wrong = indent(e.wrong),
        fixed = indent(e.fixed),
    )
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes_of(lang: Lang, surface: crate::Surface, src: &str) -> Vec<Code> {
        match lang {
            Lang::Json => crate::compile_json_with(
                src,
                None,
                crate::CheckOptions {
                    surface,
                    ..Default::default()
                },
            )
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect(),
            Lang::Dsl => {
                let tokens: proc_macro2::TokenStream = src.parse().expect("tokens");
                let out = crate::expand::orchestration(tokens).to_string();
                Code::ALL
                    .iter()
                    .copied()
                    .filter(|c| out.contains(&format!("\"{}: ", c.as_str())))
                    .collect()
            }
        }
    }

    #[test]
    fn every_wrong_example_triggers_its_code_and_every_fixed_one_does_not() {
        for &code in Code::ALL {
            let e = explain(code);
            let wrong = codes_of(e.lang, e.surface, e.wrong);
            assert!(
                wrong.contains(&code),
                "{code}: wrong example gives {wrong:?}"
            );
            let fixed = codes_of(e.lang, e.surface, e.fixed);
            assert!(fixed.is_empty(), "{code}: fixed example gives {fixed:?}");
            assert!(render(code).contains(code.as_str()));
        }
    }
}
