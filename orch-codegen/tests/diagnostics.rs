//! One case per diagnostic code: the template that triggers it, where the span points,
//! and what the message and help say. Plus agent templates in AgentDock's full shape
//! (the project's examples and `tests/fixtures/agentdock/`).

use orch_codegen::diagnostic::{line_col, render};
use orch_codegen::{compile_json, Code, Compiled, Diagnostic, Span};

/// The byte range of a span into a JSON source.
fn bytes(s: Span) -> std::ops::Range<usize> {
    s.byte_range().expect("a byte span")
}

fn compile(src: &str) -> Compiled {
    compile_json(src, Some("test"))
}

/// The only diagnostic with `code`, asserting that its span covers `snippet`.
fn find<'a>(c: &'a Compiled, src: &str, code: Code, snippet: &str) -> &'a Diagnostic {
    let found: Vec<&Diagnostic> = c.diagnostics.iter().filter(|d| d.code == code).collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {code}, got {:#?}",
        c.diagnostics
    );
    let d = found[0];
    let span = d.span.and_then(Span::byte_range).expect("a byte span");
    assert_eq!(&src[span], snippet, "span of {code}: {d:#?}");
    d
}

fn steps(steps: &str) -> String {
    format!(
        r#"{{"agentId": "t", "tools": ["search", "think", "reflect", "web_fetch"], "orchestration": {{"steps": [{steps}]}}}}"#
    )
}

#[test]
fn e001_invalid_json() {
    let src = "{\n  \"agentId\": \"x\",\n  \"orchestration\": {\"steps\": [}\n}";
    let c = compile(src);
    assert!(c.ir.is_none());
    let d = &c.diagnostics[0];
    assert_eq!(d.code, Code::InvalidJson);
    assert_eq!(line_col(src, bytes(d.span.unwrap()).start).0, 3);
    let text = render(
        d,
        "bad.json",
        &orch_codegen::diagnostic::SourceText::new(src),
        false,
    );
    assert!(text.contains("bad.json:3:"), "{text}");
}

#[test]
fn e002_wrong_type() {
    let src = steps(r#"{"name": "A", "isDefault": "yes"}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::WrongType, "\"yes\"");
    assert_eq!(d.message, "`isDefault` must be a boolean, found a string");
}

#[test]
fn e003_missing_field() {
    let src = steps(r#"{"isDefault": true}, {"name": "B", "conditions": [{"value": "x"}]}"#);
    let c = compile(&src);
    let missing: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::MissingField)
        .collect();
    assert_eq!(missing.len(), 2, "{:#?}", c.diagnostics);
    assert_eq!(missing[0].message, "a step has no `name`");
    assert_eq!(missing[1].message, "a condition has no `type`");
    let c = compile(r#"{"agentId": "x"}"#);
    assert_eq!(c.diagnostics[0].code, Code::MissingField);
}

#[test]
fn e004_duplicate_step() {
    let src = steps(r#"{"name": "A", "isDefault": true}, {"name": "A"}"#);
    let c = compile(&src);
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::DuplicateStep)
        .unwrap();
    assert_eq!(d.message, "duplicate step name `A`");
    assert_eq!(d.related.len(), 1, "points at the first definition too");
    assert!(d.span.unwrap().order() > d.related[0].0.order());
}

#[test]
fn e005_name_collision() {
    let src =
        r#"{"agentId": "t", "tools": ["web-fetch", "web_fetch"], "orchestration": {"steps": []}}"#;
    let c = compile(src);
    let d = find(&c, src, Code::NameCollision, "\"web_fetch\"");
    assert_eq!(
        d.message,
        "the tool names `web-fetch` and `web_fetch` both become `WebFetch` in Rust"
    );
    let src = steps(
        r#"{"name": "Web Mode", "isDefault": true}, {"name": "web_mode", "conditions": [{"type": "tool_used", "value": "search"}]}"#,
    );
    let c = compile(&src);
    find(&c, &src, Code::NameCollision, "\"web_mode\"");
}

#[test]
fn e006_invalid_name() {
    let src = steps(r#"{"name": "---", "isDefault": true}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidName, "\"---\"");
    assert!(d.message.contains("cannot be made into a Rust identifier"));
}

#[test]
fn e007_conflicting_default() {
    let src = steps(r#"{"name": "A", "isDefault": true}, {"name": "B", "isDefault": true}"#);
    let c = compile(&src);
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::ConflictingDefault)
        .unwrap();
    assert_eq!(d.message, "more than one step has `isDefault: true`");
    let src = r#"{"agentId": "t", "orchestration": {"defaultStep": "A", "steps": [{"name": "A"}, {"name": "B", "isDefault": true}]}}"#;
    let c = compile(src);
    let d = find(&c, src, Code::ConflictingDefault, "true");
    assert_eq!(
        d.message,
        "step `B` has `isDefault: true`, but `defaultStep` is `A`"
    );
}

#[test]
fn e008_unknown_default_step() {
    let src = r#"{"agentId": "t", "orchestration": {"defaultStep": "Idel", "steps": [{"name": "Idle"}]}}"#;
    let c = compile(src);
    let d = find(&c, src, Code::UnknownDefaultStep, "\"Idel\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `Idle`?"));
}

#[test]
fn e009_unknown_condition() {
    let src = steps(r#"{"name": "A", "conditions": [{"type": "tool_use", "value": "search"}]}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownCondition, "\"tool_use\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `tool_used`?"));
    assert!(d.notes[0]
        .contains("tool_used, sequence_match, message_contains, message_regex, not_recently_used"));
}

#[test]
fn e010_missing_value() {
    for kind in [
        "tool_used",
        "message_contains",
        "message_regex",
        "not_recently_used",
    ] {
        let cond = format!(r#"{{"type": "{kind}"}}"#);
        let src = steps(&format!(r#"{{"name": "A", "conditions": [{cond}]}}"#));
        let c = compile(&src);
        let d = find(&c, &src, Code::MissingValue, &cond);
        assert_eq!(d.message, format!("a `{kind}` condition needs a `value`"));
    }
}

#[test]
fn e011_sequence_match_without_sequence() {
    let src = steps(r#"{"name": "A", "conditions": [{"type": "sequence_match"}]}"#);
    let c = compile(&src);
    find(
        &c,
        &src,
        Code::SequenceMatchWithoutSequence,
        "\"sequence_match\"",
    );
}

#[test]
fn e012_empty_sequence_or_group() {
    let src = steps(r#"{"name": "A", "isDefault": true, "sequence": []}"#);
    let c = compile(&src);
    find(&c, &src, Code::EmptySequence, "[]");
    let src = steps(r#"{"name": "A", "isDefault": true, "sequence": ["search", []]}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::EmptySequence, "[]");
    assert_eq!(d.message, "an empty group in a sequence");
}

#[test]
fn e013_pattern_not_allowed() {
    let src = steps(r#"{"name": "A", "isDefault": true, "sequence": ["search", "web_*"]}"#);
    let c = compile(&src);
    find(&c, &src, Code::PatternNotAllowed, "\"web_*\"");
    let src = steps(r#"{"name": "A", "conditions": [{"type": "tool_used", "value": "*"}]}"#);
    let c = compile(&src);
    find(&c, &src, Code::PatternNotAllowed, "\"*\"");
}

#[test]
fn e014_sequence_tool_not_permitted() {
    // The configuration doc: tools in the sequence must be permitted by availableTools.
    let src = steps(
        r#"{"name": "A", "isDefault": true, "sequence": ["search", "think"], "availableTools": {"allowed": ["search"]}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::SequenceToolNotPermitted, "\"think\"");
    assert_eq!(
        d.message,
        "`think` is in the sequence of step `A`, but the step's tools do not permit it"
    );
    assert_eq!(
        d.help.as_deref(),
        Some("allow `think` in this step (`availableTools.allowed` in JSON, `allow: [..]` in the DSL), or remove it from the sequence")
    );
    // Deny wins over allow, and the diagnostic points at the deny entry.
    let src = steps(
        r#"{"name": "A", "isDefault": true, "sequence": [["think", "web_fetch"]], "availableTools": {"allowed": ["*"], "denied": ["web_*"]}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::SequenceToolNotPermitted, "\"web_fetch\"");
    assert_eq!(
        d.help.as_deref(),
        Some("remove `web_*` from `denied`, or from the sequence")
    );
    assert_eq!(&src[bytes(d.related[0].0)], "\"web_*\"");
}

#[test]
fn e015_unknown_tool() {
    let src = steps(r#"{"name": "A", "isDefault": true, "sequence": ["serch"]}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownTool, "\"serch\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `search`?"));
    // Without a declared universe every literal is a tool: no E015.
    let c = compile(
        r#"{"agentId": "t", "orchestration": {"steps": [{"name": "A", "isDefault": true, "sequence": ["serch"]}]}}"#,
    );
    assert!(c.diagnostics.is_empty(), "{:#?}", c.diagnostics);
}

#[test]
fn e016_invalid_regex() {
    let src =
        steps(r#"{"name": "A", "conditions": [{"type": "message_regex", "value": "(critique"}]}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRegex, "\"(critique\"");
    assert!(d.notes[0].contains("unclosed group"), "{d:#?}");
}

#[test]
fn e017_zero_window() {
    let src = steps(
        r#"{"name": "A", "conditions": [{"type": "not_recently_used", "value": "search", "window": 0}]}"#,
    );
    let c = compile(&src);
    find(&c, &src, Code::ZeroWindow, "0");
}

#[test]
fn e018_unknown_reset_trigger() {
    let src = steps(
        r#"{"name": "A", "isDefault": true, "sequence": ["search"], "resetSequenceOn": ["user_mesage"]}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownResetTrigger, "\"user_mesage\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `user_message`?"));
}

#[test]
fn e019_limit_exceeded() {
    let src = r#"{"agentId": "t", "orchestration": {"historyLength": 100000, "steps": []}}"#;
    let c = compile(src);
    find(&c, src, Code::LimitExceeded, "100000");
}

#[test]
fn e020_unknown_lint() {
    let mut t = orch_codegen::__private::parse(&steps(r#"{"name": "A", "isDefault": true}"#), None)
        .0
        .unwrap();
    t.allow.push(orch_codegen::model::Spanned::new(
        "unreachable_stp".into(),
        orch_codegen::model::Span::bytes(0, 1),
    ));
    let checked = compile_model(t);
    let (ir, d) = (checked.ir, checked.diagnostics);
    assert!(ir.is_none());
    assert_eq!(d[0].code, Code::UnknownLint);
    assert_eq!(
        d[0].help.as_deref(),
        Some("did you mean `unreachable_step`?")
    );
}

#[test]
fn w001_unreachable_step() {
    let src = steps(r#"{"name": "A", "isDefault": true}, {"name": "Lonely"}"#);
    let c = compile(&src);
    assert!(c.ir.is_some(), "warnings do not stop compilation");
    let d = find(&c, &src, Code::UnreachableStep, "\"Lonely\"");
    assert_eq!(d.message, "step `Lonely` can never become active");
}

#[test]
fn w002_shadowed_step() {
    let src = steps(
        r#"{"name": "Broad", "conditions": [{"type": "message_contains", "value": "plan"}]},
           {"name": "Narrow", "conditions": [{"type": "message_contains", "value": "Planning"}, {"type": "tool_used", "value": "think"}]},
           {"name": "Other", "conditions": [{"type": "message_contains", "value": "pla"}, {"type": "tool_used", "value": "think"}]}"#,
    );
    let c = compile(&src);
    // "planning" contains "plan": Narrow can never win. "pla" does not contain "plan".
    let d = find(&c, &src, Code::ShadowedStep, "\"Narrow\"");
    assert_eq!(
        d.message,
        "step `Narrow` can never become active: the earlier step `Broad` matches whenever it does"
    );
}

#[test]
fn w002_sequence_match_shadowing() {
    let src = steps(
        r#"{"name": "Short", "sequence": ["think", "reflect"], "conditions": [{"type": "sequence_match"}]},
           {"name": "Long", "sequence": ["search", "think", "reflect"], "conditions": [{"type": "sequence_match"}]}"#,
    );
    let c = compile(&src);
    find(&c, &src, Code::ShadowedStep, "\"Long\"");
}

#[test]
fn w003_default_step_conditions() {
    let src = steps(
        r#"{"name": "A", "isDefault": true, "conditions": [{"type": "tool_used", "value": "search"}]}"#,
    );
    let c = compile(&src);
    find(
        &c,
        &src,
        Code::DefaultStepConditions,
        r#"[{"type": "tool_used", "value": "search"}]"#,
    );
}

#[test]
fn w004_unmatched_pattern() {
    let src = steps(
        r#"{"name": "A", "isDefault": true, "availableTools": {"allowed": ["search", "*cognitive*"]}}"#,
    );
    let c = compile(&src);
    find(&c, &src, Code::UnmatchedPattern, "\"*cognitive*\"");
}

#[test]
fn w005_empty_tool_set() {
    let src = steps(r#"{"name": "A", "isDefault": true, "availableTools": {"denied": ["*"]}}"#);
    let c = compile(&src);
    find(&c, &src, Code::EmptyToolSet, "\"A\"");
}

#[test]
fn w006_sequence_never_completes() {
    let src = steps(
        r#"{"name": "Idle", "isDefault": true},
           {"name": "AfterSearch", "conditions": [{"type": "tool_used", "value": "search"}]},
           {"name": "Deep", "conditions": [{"type": "tool_used", "value": "think"}], "sequence": ["reflect", "search", "think"]}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::SequenceNeverCompletes, "\"search\"");
    assert_eq!(
        d.message,
        "the sequence of step `Deep` can never complete: recording `search` (position 1) activates the earlier step `AfterSearch`"
    );
}

#[test]
fn w007_dead_step() {
    // `audit` is allowed only in `Audit Desk`, whose two patterns never hold together.
    let src = steps(
        r#"{"name": "Idle", "isDefault": true, "availableTools": {"allowed": ["search", "think"]}},
           {"name": "Audit Desk", "conditions": [{"type": "message_regex", "value": "^a"}, {"type": "message_regex", "value": "^b"}], "availableTools": {"allowed": ["reflect"]}},
           {"name": "Review", "conditions": [{"type": "tool_used", "value": "reflect"}], "availableTools": {"allowed": ["think"]}}"#,
    );
    let c = compile(&src);
    let dead: Vec<&Diagnostic> = c
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::DeadStep)
        .collect();
    assert_eq!(dead.len(), 2, "{:#?}", c.diagnostics);
    assert_eq!(
        dead[0].message,
        r#"step `Audit Desk` can never become active: its conditions never hold together: `message_regex "^a"`, `message_regex "^b"`"#
    );
    assert_eq!(
        dead[1].message,
        "step `Review` can never become active: `tool_used reflect` never holds: `reflect` is allowed only in `Audit Desk`, which never becomes active"
    );
    let span = dead[1].span.and_then(Span::byte_range).unwrap();
    assert_eq!(&src[span], "\"Review\"");
    // Steps the syntactic lints already report are not reported twice.
    let src = steps(r#"{"name": "A", "isDefault": true}, {"name": "B"}"#);
    let codes: Vec<Code> = compile(&src).diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::UnreachableStep]);
}

#[test]
fn w008_sequence_cannot_complete() {
    // Recording `search` ends `Plan`'s `not_recently_used` and the later `Research` wins:
    // W006 looks at earlier steps only; the exploration sees it.
    let src = steps(
        r#"{"name": "Idle", "isDefault": true},
           {"name": "Plan", "conditions": [{"type": "not_recently_used", "value": "search", "window": 3}, {"type": "message_contains", "value": "plan"}], "sequence": ["search", "think"]},
           {"name": "Research", "conditions": [{"type": "tool_used", "value": "search"}]}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::SequenceCannotComplete, "\"Plan\"");
    assert_eq!(
        d.message,
        "the sequence of step `Plan` can never complete: the step becomes active, but no continuation records its tools to the end"
    );
}

#[test]
fn e025_invalid_rule() {
    let rules = |rule: &str| {
        format!(
            r#"{{"agentId": "t", "tools": ["send_money", "search"], "orchestration": {{"steps": [{{"name": "Chat", "isDefault": true}}], "rules": [{rule}]}}}}"#
        )
    };
    // A path that is not a JSON pointer, pointed at.
    let src = rules(
        r#"{"name": "small", "tool": "send_money", "require": {"path": "amount", "range": {"max": 100}}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, "\"amount\"");
    assert_eq!(d.message, "`amount` is not a JSON pointer");
    assert!(c.ir.is_none());
    // A regex that does not compile, at the regex.
    let src = rules(
        r#"{"name": "r", "tool": "send_money", "require": {"path": "/to", "regex": "(unclosed"}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRegex, r#""(unclosed""#);
    assert_eq!(d.message, "the regex `(unclosed` does not compile");
    // Two tests in one predicate, at the predicate's first byte.
    let src = rules(
        r#"{"name": "r", "tool": "send_money", "require": {"path": "/to", "glob": "a*", "equals": "b"}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, "{");
    assert_eq!(d.message, "a predicate has 2 tests (`equals`, `glob`)");
    // A host with a scheme; an empty list; two rules with one name.
    let src = rules(
        r#"{"name": "r", "tool": "search", "require": {"path": "/url", "hostIn": ["https://example.com"]}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, r#""https://example.com""#);
    assert_eq!(d.message, "`https://example.com` is not a host");
    let src = rules(r#"{"name": "r", "tool": "search", "require": {"path": "/q", "oneOf": []}}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, "[]");
    assert_eq!(d.message, "`oneOf` lists no value");
    // `hostnameIn` takes hosts alone too; `addressesIn` patterns with one `@` each.
    let src = rules(
        r#"{"name": "r", "tool": "search", "require": {"path": "/h", "hostnameIn": ["example.com:443"]}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, r#""example.com:443""#);
    assert_eq!(d.message, "`example.com:443` is not a host");
    let src = rules(
        r#"{"name": "r", "tool": "search", "require": {"path": "/to", "addressesIn": ["corp.example"]}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, r#""corp.example""#);
    assert_eq!(d.message, "`corp.example` is not an e-mail address pattern");
    let src =
        rules(r#"{"name": "r", "tool": "search", "require": {"path": "/to", "addressesIn": []}}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidRule, "[]");
    assert_eq!(d.message, "`addressesIn` lists no address");
    // Unknown keys are E021 with a suggestion; a pattern as the tool is E013.
    let src =
        rules(r#"{"name": "r", "tool": "search", "require": {"path": "/q", "oneof": ["a"]}}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownField, "\"oneof\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `oneOf`?"));
    let src =
        rules(r#"{"name": "r", "tool": "send_*", "require": {"path": "/q", "exists": true}}"#);
    find(&compile(&src), &src, Code::PatternNotAllowed, "\"send_*\"");
    // A conditional approve with an unknown tool is E015.
    let src = r#"{"agentId": "t", "tools": ["send_money"], "orchestration": {"steps": [{"name": "Chat", "isDefault": true}], "approve": [{"tool": "send_mony", "when": {"path": "/amount", "range": {"min": 100}}}]}}"#;
    let c = compile(src);
    let d = find(&c, src, Code::UnknownTool, "\"send_mony\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `send_money`?"));
}

#[test]
fn e026_conflicting_rule() {
    let rules = |rule: &str| {
        format!(
            r#"{{"agentId": "t", "tools": ["send_money", "search"], "orchestration": {{"steps": [{{"name": "Chat", "isDefault": true, "rules": [{rule}]}}]}}}}"#
        )
    };
    // Bounds out of order, compared as the decimals written, at the `range` object.
    let src = rules(
        r#"{"name": "r", "tool": "send_money", "require": {"path": "/amount", "range": {"min": 10, "max": 1e0}}}"#,
    );
    let c = compile(&src);
    let d = find(
        &c,
        &src,
        Code::ConflictingRule,
        r#"{"min": 10, "max": 1e0}"#,
    );
    assert_eq!(d.message, "`range` from 10 to 1e0 holds no number");
    let src = rules(
        r#"{"name": "r", "tool": "search", "require": {"path": "/q", "length": {"min": 3, "max": 2}}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::ConflictingRule, r#"{"min": 3, "max": 2}"#);
    assert_eq!(d.message, "`length` from 3 to 2 holds nothing");
    // Two rules of one step with one name, at the second; other steps may reuse it.
    let src = rules(
        r#"{"name": "r", "tool": "search", "require": {"path": "/q", "exists": true}}, {"name": "r", "tool": "send_money", "require": {"path": "/to", "exists": true}}"#,
    );
    let c = compile(&src);
    let second = src.rfind("\"r\"").unwrap();
    let d: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::ConflictingRule)
        .collect();
    assert_eq!(d.len(), 1, "{:#?}", c.diagnostics);
    assert_eq!(
        d[0].span.and_then(Span::byte_range),
        Some(second..second + 3)
    );
    assert_eq!(d[0].message, "two rules are named `r`");
}

/// A template with `budgets` and `rules` written in.
fn budgets(budgets: &str, rules: &str) -> String {
    format!(
        r#"{{"agentId": "t", "tools": ["send_money", "search"], "orchestration": {{"steps": [{{"name": "Chat", "isDefault": true}}], "budgets": [{budgets}], "rules": [{rules}]}}}}"#
    )
}

#[test]
fn e027_unknown_budget() {
    let src = budgets(
        r#"{"name": "daily-spend", "tool": "send_money", "sum": "/amount", "within": "24h"}"#,
        r#"{"name": "limit", "tool": "send_money", "require": {"budget": "daily-spent", "range": {"max": 10000}}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownBudget, "\"daily-spent\"");
    assert_eq!(d.message, "unknown budget `daily-spent`");
    assert_eq!(d.help.as_deref(), Some("did you mean `daily-spend`?"));
}

#[test]
fn budgets_of_the_wrong_shape_or_past_a_limit() {
    let rule = r#"{"name": "limit", "tool": "send_money", "require": {"budget": "b", "range": {"max": 3}}}"#;
    for (budget, code, snippet, message) in [
        (
            r#"{"name": "b", "tool": "send_money", "within": "1w"}"#,
            Code::InvalidRule,
            "\"1w\"",
            "`within` is `1w`",
        ),
        (
            r#"{"name": "b", "tool": "send_money", "per": "day"}"#,
            Code::InvalidRule,
            "\"day\"",
            "`per` is `day`",
        ),
        (
            r#"{"name": "b", "tool": "send_money", "sum": "amount"}"#,
            Code::InvalidRule,
            "\"amount\"",
            "`amount` is not a JSON pointer",
        ),
        (
            r#"{"name": "b", "tool": "send_money", "events": 8}"#,
            Code::InvalidRule,
            "8",
            "`events` on a budget without a window",
        ),
        (
            r#"{"name": "b", "tool": "send_money", "within": "500d"}"#,
            Code::LimitExceeded,
            "\"500d\"",
            "the window `500d` is over 400 days",
        ),
        (
            r#"{"name": "b", "tool": "send_money", "within": "1h", "events": 5000}"#,
            Code::LimitExceeded,
            "5000",
            "`events` is 5000; a windowed budget keeps from 1 to 4096 charges",
        ),
        (
            r#"{"name": "b", "tool": "send_mony"}"#,
            Code::UnknownTool,
            "\"send_mony\"",
            "unknown tool `send_mony`",
        ),
        (
            r#"{"name": "b", "tool": "pay_*"}"#,
            Code::UnknownTool,
            "\"pay_*\"",
            "the pattern `pay_*` matches no tool",
        ),
        (
            r#"{"name": "b", "tool": "send_money"}, {"name": "b", "tool": "search"}"#,
            Code::ConflictingRule,
            "\"b\"",
            "two budgets are named `b`",
        ),
    ] {
        let src = budgets(budget, rule);
        let c = compile(&src);
        let found: Vec<_> = c.diagnostics.iter().filter(|d| d.code == code).collect();
        assert_eq!(found.len(), 1, "{budget}: {:#?}", c.diagnostics);
        let span = found[0].span.and_then(Span::byte_range).expect("a span");
        if code == Code::ConflictingRule {
            let second = src.find(r#""b", "tool": "search""#).unwrap();
            assert_eq!(span.start, second, "{budget}");
        } else {
            assert_eq!(&src[span], snippet, "{budget}");
        }
        assert_eq!(found[0].message, message, "{budget}");
    }
    // A bound a budget cannot hold exactly, and a budget test inside a budget's `where`.
    let src = budgets(
        r#"{"name": "b", "tool": "send_money", "sum": "/amount"}"#,
        r#"{"name": "limit", "tool": "send_money", "require": {"budget": "b", "range": {"max": 0.0000000001}}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::ConflictingRule, "0.0000000001");
    assert_eq!(
        d.message,
        "a budget cannot be compared with `0.0000000001` exactly"
    );
    let src = budgets(
        r#"{"name": "b", "tool": "send_money", "where": {"budget": "b", "range": {"max": 1}}}"#,
        rule,
    );
    let c = compile(&src);
    assert!(
        c.diagnostics
            .iter()
            .any(|d| d.code == Code::UnknownBudget
                && d.message == "a budget's `where` tests budget `b`"),
        "{:#?}",
        c.diagnostics
    );
    // A budget test without `range`, or with another test, is a shape error.
    for test in [
        r#"{"budget": "b"}"#,
        r#"{"budget": "b", "range": {"max": 1}, "glob": "x"}"#,
    ] {
        let src = budgets(
            r#"{"name": "b", "tool": "send_money"}"#,
            &format!(r#"{{"name": "limit", "tool": "send_money", "require": {test}}}"#),
        );
        let c = compile(&src);
        assert!(
            c.diagnostics
                .iter()
                .any(|d| matches!(d.code, Code::InvalidRule | Code::UnknownField)),
            "{test}: {:#?}",
            c.diagnostics
        );
        assert!(c.ir.is_none(), "{test}");
    }
}

#[test]
fn warnings_can_be_allowed() {
    let mut t = orch_codegen::__private::parse(
        &steps(r#"{"name": "A", "isDefault": true}, {"name": "B"}"#),
        None,
    )
    .0
    .unwrap();
    let d = compile_model(t.clone()).diagnostics;
    assert_eq!(d.len(), 1);
    t.allow.push(orch_codegen::model::Spanned::new(
        "W001".into(),
        Default::default(),
    ));
    let checked = compile_model(t);
    let (ir, d) = (checked.ir, checked.diagnostics);
    assert!(d.is_empty() && ir.is_some());
}

#[test]
fn every_code_has_a_case_here() {
    let me = include_str!("diagnostics.rs");
    for code in Code::ALL {
        let tag = format!("fn {}_", code.as_str().to_lowercase());
        assert!(me.contains(&tag), "no test for {code} ({})", code.name());
    }
}

#[test]
fn errors_are_collected_not_stopped_at_the_first() {
    let src = steps(
        r#"{"name": "A", "isDefault": true, "sequence": ["serch", "thnk"]}, {"name": "A"}, {"name": "C", "conditions": [{"type": "nope"}]}"#,
    );
    let c = compile(&src);
    let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(
        codes,
        [
            Code::UnknownTool,
            Code::UnknownTool,
            Code::DuplicateStep,
            Code::UnreachableStep,
            Code::UnknownCondition
        ]
    );
}

/// Agent templates in AgentDock's full shape (personality, nodes with `llm.*`, node
/// configurations, chat settings): the project's examples are clean; the clinic
/// assistant fixture has the bugs real templates have — a shadowed step, a sequence an
/// earlier step's `tool_used` cuts short, a step without conditions — and exactly those
/// are reported, at the step's name.
#[test]
fn agent_templates() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let warned = |file: &str| -> Vec<(Code, String)> {
        let src = std::fs::read_to_string(root.join(file)).unwrap();
        let c = compile_json(&src, None);
        assert!(!c.has_errors(), "{file}: {:#?}", c.diagnostics);
        c.diagnostics
            .iter()
            .map(|d| {
                let s = bytes(d.span.unwrap());
                (d.code, src[s].trim_matches('"').to_owned())
            })
            .collect()
    };
    let w = |code: Code, what: &str| (code, what.to_owned());
    assert_eq!(
        warned("examples/agents/cognitive-reasoner/template.json"),
        []
    );
    assert_eq!(warned("examples/agents/support-triage/template.json"), []);
    assert_eq!(
        warned("tests/fixtures/agentdock/clinic-assistant.json"),
        [
            w(Code::ShadowedStep, "Quick Lookup Mode"),
            w(Code::SequenceNeverCompletes, "search"),
            w(Code::UnreachableStep, "Second Opinion Mode"),
        ]
    );
}

/// Messages say what is wrong: numbers too large, negative numbers, `null` (the same
/// as absent), a byte order mark (accepted), `maxSteps: 0`, and the DSL's integers.
#[test]
fn messages_say_what_is_wrong() {
    let one = |src: &str| -> Vec<String> {
        compile_json(src, None)
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect()
    };
    let wrap =
        |orch: &str| format!(r#"{{"agentId": "m", "tools": ["a"], "orchestration": {orch}}}"#);
    assert_eq!(
        one(&wrap(
            r#"{"historyLength": 18446744073709551616, "steps": []}"#
        )),
        ["E002: `orchestration.historyLength` of 18446744073709551616 is too large"]
    );
    assert_eq!(
        one(&wrap(
            r#"{"steps": [{"name": "A", "conditions": [{"type": "not_recently_used", "value": "a", "window": -1}]}]}"#
        )),
        ["E002: `window` must be a non-negative integer, found -1"]
    );
    assert_eq!(
        one(&wrap(
            r#"{"steps": [{"name": "A", "isDefault": true}, {"name": null}]}"#
        )),
        ["E003: a step has no `name`"],
        "null is the same as absent"
    );
    assert!(one(r#"{"agentId": "m", "tools": null, "orchestration": {"description": null, "defaultStep": null, "steps": [{"name": "A", "isDefault": true, "sequence": null, "conditions": null}]}}"#).is_empty());
    let bom = format!(
        "\u{feff}{}",
        wrap(r#"{"steps": [{"name": "A", "isDefault": true}]}"#)
    );
    assert!(
        one(&bom).is_empty(),
        "a byte order mark is accepted: {:?}",
        one(&bom)
    );
    assert_eq!(
        one(r#"{"agentId": "m", "options": {"maxSteps": 0}, "orchestration": {"steps": []}}"#),
        ["E002: `options.maxSteps` must be at least 1"]
    );
    for (dsl, says) in [
        (
            "machine m { tools: [a]; step A { when not_recently_used(a, window = -1); } }",
            "`window` must be a non-negative integer",
        ),
        (
            "machine m { history: 18446744073709551616; }",
            "`history` of 18446744073709551616 is too large",
        ),
        (
            "machine m { max_steps: 0; }",
            "`options.maxSteps` must be at least 1",
        ),
    ] {
        let tokens: proc_macro2::TokenStream = dsl.parse().unwrap();
        let out = orch_codegen::__private::orchestration(tokens).to_string();
        assert!(out.contains(says), "{dsl}: {out}");
    }
}

/// A diagnostic renders the few lines around it: a related place far away (on the
/// same very long line, or many lines up) is named in a note with its location.
#[test]
fn far_related_places_become_notes() {
    use orch_codegen::diagnostic::{render, SourceText};
    // One long line: `Step 400` is shadowed by `Step 0`, 30 KB before it.
    let mut steps = vec![r#"{"name": "Idle", "isDefault": true}"#.to_owned()];
    steps.push(
        r#"{"name": "Step 0", "conditions": [{"type": "tool_used", "value": "a"}]}"#.to_owned(),
    );
    for i in 1..400 {
        steps.push(format!(r#"{{"name": "Step {i}", "conditions": [{{"type": "message_contains", "value": "w{i}"}}]}}"#));
    }
    steps.push(
        r#"{"name": "Step 400", "conditions": [{"type": "tool_used", "value": "a"}]}"#.to_owned(),
    );
    let src = format!(
        r#"{{"agentId": "m", "tools": ["a"], "orchestration": {{"steps": [{}]}}}}"#,
        steps.join(", ")
    );
    let c = compile_json(&src, None);
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::ShadowedStep)
        .expect("W002");
    let out = render(d, "t.json", &SourceText::new(&src), false);
    assert!(out.len() < 2000, "{} bytes:\n{out}", out.len());
    assert!(
        out.contains("note: this step is checked first and wins: t.json:1:"),
        "{out}"
    );
    // Many lines apart: a duplicate step 300 lines after the first.
    let pretty: String = std::iter::once("{\"agentId\": \"m\", \"orchestration\": {\"steps\": [\n".to_owned())
        .chain(std::iter::once("{\"name\": \"A\", \"isDefault\": true},\n".to_owned()))
        .chain((0..300).map(|i| format!("{{\"name\": \"S{i}\", \"conditions\": [{{\"type\": \"message_contains\", \"value\": \"w{i}\"}}]}},\n")))
        .chain(std::iter::once("{\"name\": \"A\"}\n]}}\n".to_owned()))
        .collect();
    let c = compile_json(&pretty, None);
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == Code::DuplicateStep)
        .expect("E004");
    let out = render(d, "t.json", &SourceText::new(&pretty), false);
    assert!(out.lines().count() < 15, "{out}");
    assert!(
        out.contains("note: first defined here: t.json:2:10"),
        "{out}"
    );
}

/// A template with `properties` (and the default step `Chat`, which allows `steps`).
fn with_properties(steps: &str, properties: &str) -> String {
    format!(
        r#"{{"agentId": "t", "tools": ["search", "think", "reflect", "pay"], "orchestration": {{"steps": [{steps}], "properties": [{properties}]}}}}"#
    )
}

#[test]
fn e021_unknown_field() {
    // A misspelt `approve` in `availableTools` is an error, never ignored.
    let src = steps(
        r#"{"name": "A", "isDefault": true, "availableTools": {"allowed": ["search"], "aprove": ["search"]}}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownField, "\"aprove\"");
    assert_eq!(d.message, "`aprove` is not a key of `availableTools`");
    assert_eq!(d.help.as_deref(), Some("did you mean `approve`?"));
    assert!(c.ir.is_none());
    // And in a property.
    let src = with_properties(
        r#"{"name": "A", "isDefault": true}"#,
        r#"{"name": "p", "tool": "pay", "nevr": true}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownField, "\"nevr\"");
    assert_eq!(d.help.as_deref(), Some("did you mean `never`?"));
    // Other objects keep AgentDock's rule: unknown fields are ignored.
    let src = steps(r#"{"name": "A", "isDefault": true, "someUiHint": 3}"#);
    assert!(compile(&src).diagnostics.is_empty());
}

#[test]
fn e022_invalid_property() {
    let chat = r#"{"name": "A", "isDefault": true}"#;
    let cases = [
        (
            r#"{"name": "p", "tool": "pay", "never": true, "atMost": 1}"#,
            "a property has 2 rules (`atMost`, `never`)",
        ),
        (r#"{"name": "p", "tool": "pay"}"#, "a property has no rule"),
        (
            r#"{"name": "p", "tool": "pay", "never": false}"#,
            "`\"never\": false` says nothing",
        ),
    ];
    for (property, message) in cases {
        let src = with_properties(chat, property);
        let c = compile(&src);
        let d: Vec<&Diagnostic> = c
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::InvalidProperty)
            .collect();
        assert_eq!(d.len(), 1, "{property}: {:#?}", c.diagnostics);
        assert_eq!(d[0].message, message);
        assert!(c.ir.is_none());
    }
    let src = with_properties(
        chat,
        r#"{"name": "p", "tool": "pay", "never": true}, {"name": "p", "tool": "think", "atMost": 3}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::InvalidProperty, "\"p\"");
    assert_eq!(d.message, "two properties are named `p`");
    // A misspelt tool name is E015 with a suggestion (it would make the property hold
    // vacuously); a pattern is taken as written.
    let src = with_properties(chat, r#"{"name": "p", "tool": "pya", "never": true}"#);
    let c = compile(&src);
    let d = find(&c, &src, Code::UnknownTool, "\"pya\"").clone();
    assert_eq!(d.help.as_deref(), Some("did you mean `pay`?"));
    let src = with_properties(
        r#"{"name": "A", "isDefault": true, "availableTools": {"allowed": ["search"]}}"#,
        r#"{"name": "p", "tool": "delete_*", "never": true}"#,
    );
    assert!(compile(&src).diagnostics.is_empty());
}

#[test]
fn e023_property_violated() {
    // `think` is allowed from the start: it can run before `search`.
    let src = with_properties(
        r#"{"name": "Chat", "isDefault": true}"#,
        r#"{"name": "think-after-search", "tool": "think", "after": "search"}"#,
    );
    let c = compile(&src);
    let d = find(&c, &src, Code::PropertyViolated, "\"think-after-search\"");
    assert_eq!(
        d.message,
        "property `think-after-search` is violated: `think` can run before any tool matching `search` has"
    );
    assert_eq!(
        d.notes,
        ["witness (`orch simulate` events from a fresh session): [{\"tool\": \"think\"}]"]
    );
    assert!(c.ir.is_none(), "a violated property is an error");
    // Holds once the default step allows only `search` and `think` comes after it.
    let src = with_properties(
        r#"{"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search"]}},
           {"name": "Think", "conditions": [{"type": "tool_used", "value": "search"}]}"#,
        r#"{"name": "think-after-search", "tool": "think", "after": "search"}"#,
    );
    let c = compile(&src);
    assert!(c.diagnostics.is_empty(), "{:#?}", c.diagnostics);
    // `approved`: `pay` gated in the step that allows it holds; ungated it fails, with
    // the shortest way there.
    let gated = with_properties(
        r#"{"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search"]}},
           {"name": "Checkout", "conditions": [{"type": "tool_used", "value": "search"}], "availableTools": {"allowed": ["pay", "search"], "approve": ["pay"]}}"#,
        r#"{"name": "pay-approved", "tool": "pay", "approved": true}"#,
    );
    assert!(compile(&gated).diagnostics.is_empty());
    let ungated = gated.replace(r#", "approve": ["pay"]"#, "");
    let c = compile(&ungated);
    let d = find(&c, &ungated, Code::PropertyViolated, "\"pay-approved\"");
    assert_eq!(
        d.notes,
        ["witness (`orch simulate` events from a fresh session): [{\"tool\": \"search\"}, {\"tool\": \"pay\"}]"]
    );
    // `atMost`: with the gate, `pay` runs (approved) any number of times.
    let at_most = gated.replace(r#""approved": true"#, r#""atMost": 2"#);
    let d = find(
        &compile(&at_most),
        &at_most,
        Code::PropertyViolated,
        "\"pay-approved\"",
    )
    .clone();
    assert_eq!(
        d.notes,
        ["witness (`orch simulate` events from a fresh session): [{\"tool\": \"search\"}, {\"approve\": \"pay\"}, {\"tool\": \"pay\"}, {\"approve\": \"pay\"}, {\"tool\": \"pay\"}, {\"approve\": \"pay\"}, {\"tool\": \"pay\"}]"]
    );
    // `never` on a pattern: a foreign tool the step admits matches it.
    let src = with_properties(
        r#"{"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search", "delete_*"], "denied": ["delete_a*"]}}"#,
        r#"{"name": "no-deletes", "tool": "delete_*", "never": true}"#,
    );
    let d = find(
        &compile(&src),
        &src,
        Code::PropertyViolated,
        "\"no-deletes\"",
    )
    .clone();
    assert_eq!(
        d.message,
        "property `no-deletes` is violated: `delete_foreign` can run"
    );
}

/// Compiles a template built in code (as a front end other than JSON hands it over).
fn compile_model(template: orch_codegen::model::Template) -> orch_codegen::Compiled {
    orch_codegen::compile(
        orch_codegen::Source::Template {
            template: Box::new(template),
            diagnostics: Vec::new(),
        },
        orch_codegen::CheckOptions::default(),
    )
}

/// Compiles `src` for `surface`.
fn compile_for(src: &str, surface: orch_codegen::Surface) -> Compiled {
    orch_codegen::compile_json_with(
        src,
        None,
        orch_codegen::CheckOptions {
            surface,
            ..Default::default()
        },
    )
}

#[test]
fn e024_reads_user_messages() {
    let src = steps(
        r#"{"name": "Chat", "isDefault": true},
           {"name": "Refund", "conditions": [{"type": "message_contains", "value": "Refund"}, {"type": "tool_used", "value": "search"}]}"#,
    );
    // Only where the template runs behind `orch policy`.
    assert!(compile(&src).diagnostics.is_empty());
    let c = compile_for(&src, orch_codegen::Surface::Policy);
    // At the condition that reads the message, not the step.
    let d = find(
        &c,
        &src,
        Code::ReadsUserMessages,
        r#"{"type": "message_contains", "value": "Refund"}"#,
    );
    assert_eq!(
        d.message,
        "step `Refund`: message_contains \"refund\" reads the user's message, which MCP traffic never carries: orch policy cannot enforce it"
    );
    assert_eq!(d.subject.step.as_deref(), Some("Refund"));
    assert!(c.ir.is_none(), "an error: no machine to serve");
}

#[test]
fn w009_no_user_messages() {
    let src = steps(
        r#"{"name": "Chat", "isDefault": true},
           {"name": "Research", "conditions": [{"type": "message_regex", "value": "(?i)research"}], "sequence": ["search", "think"], "resetSequenceOn": ["user_message"]}"#,
    );
    assert!(compile(&src).diagnostics.is_empty());
    let c = compile_for(&src, orch_codegen::Surface::McpGateway);
    let found: Vec<&str> = c
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::NoUserMessages)
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        found,
        [
            "step `Research` has 1 message condition(s), which never hold through `orch mcp`: MCP carries no user messages",
            "step `Research` resets its sequence on user messages, which never arrive through `orch mcp`",
        ]
    );
    assert!(c.ir.is_some(), "a warning: the gateway serves it");
    // Behind `orch policy` the condition is an error and the reset a warning.
    let c = compile_for(&src, orch_codegen::Surface::Policy);
    let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
    // In source order: the reset at the step's name, the condition after it.
    assert_eq!(codes, [Code::NoUserMessages, Code::ReadsUserMessages]);
    // Allowed like any warning (`allow = [no_user_messages]` in the macro's file form).
    let mut t = orch_codegen::__private::parse(&src, None).0.unwrap();
    t.allow.push(orch_codegen::model::Spanned::new(
        "no_user_messages".into(),
        Default::default(),
    ));
    let allowed = orch_codegen::compile(
        orch_codegen::Source::Template {
            template: Box::new(t),
            diagnostics: Vec::new(),
        },
        orch_codegen::CheckOptions {
            surface: orch_codegen::Surface::McpGateway,
            ..Default::default()
        },
    );
    assert!(allowed.diagnostics.is_empty(), "{:#?}", allowed.diagnostics);
}

/// A rule whose `from` trusts the user's messages is served behind a gateway, where no
/// message ever vouches for a value: W009 says so at the rule.
#[test]
fn w009_a_rule_that_trusts_user_messages_behind_a_gateway() {
    let src = r#"{"agentId": "pay", "tools": ["send_money", "get_contacts"],
      "orchestration": {"trust": {"trusted": ["get_contacts"]},
        "rules": [{"name": "known-payee", "tool": "send_money",
                   "require": {"path": "/to", "from": ["user", "trusted"]}}],
        "steps": [{"name": "Pay", "isDefault": true}]}}"#;
    assert!(compile(src).diagnostics.is_empty());
    for surface in [
        orch_codegen::Surface::McpGateway,
        orch_codegen::Surface::Policy,
    ] {
        let c = compile_for(src, surface);
        let found: Vec<&str> = c
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::NoUserMessages)
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "rule `known-payee` accepts values the user wrote, which never arrive through"
            ),
            "{}",
            found[0]
        );
        assert!(c.ir.is_some(), "a warning: the gateway serves it");
    }
}
