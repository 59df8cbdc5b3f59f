//! The recipes of docs/budgets.md ("What other policy languages say, in orch"): each
//! temporal policy AgentCore/Dogwood documents and each `ToolCallLimitMiddleware` case of
//! LangChain, written as an orch template, with what orch decides on a stream of calls
//! at the host's times. A recipe the guide shows is a recipe this file runs.

use orch::approval::{Call, CallDigest};
use orch::{DynMachine, Refusal};

const T0: u64 = 1_800_000_000_000;

fn machine(orchestration: &str) -> DynMachine {
    let src = format!(
        r#"{{"agentId": "recipe", "tools": ["refund", "send_money", "reset_password", "read", "write", "search", "login", "get_balance"],
            "orchestration": {{"steps": [{{"name": "Assist", "isDefault": true}}], {orchestration}}}}}"#
    );
    let compiled = orch_codegen::compile_json(&src, None);
    assert!(
        compiled.diagnostics.iter().all(|d| !d.is_error()),
        "{orchestration}: {:#?}",
        compiled.diagnostics
    );
    compiled.to_machine().expect("compiles")
}

/// Plays `(minutes after T0, tool, arguments)` calls, admitting each: "run", "ask",
/// "refused" (a broken rule); an event `("msg", text)` is a user message, and
/// `("result:TOOL", text)` a result of TOOL.
fn play(m: &DynMachine, calls: &[(u64, &str, &'static str)]) -> Vec<&'static str> {
    let mut s = m.session();
    calls
        .iter()
        .map(|&(minutes, tool, args)| {
            if tool == "msg" {
                s.on_user_message(args);
                return "message";
            }
            if let Some(tool) = tool.strip_prefix("result:") {
                s.record_result(tool, args);
                return "result";
            }
            let c = Call::new(CallDigest::of_text(tool, args), args).at(T0 + minutes * 60_000);
            match s.admit_call(tool, &c) {
                Ok(()) => "run",
                Err(Refusal::NeedsApproval { .. }) => "ask",
                Err(Refusal::BrokenRule { .. }) => "refused",
                Err(other) => panic!("{other:?}"),
            }
        })
        .collect()
}

#[test]
fn at_most_three_refunds_per_conversation() {
    let m = machine(
        r#""budgets": [{"name": "refunds", "tool": "refund"}],
           "rules": [{"name": "three-refunds", "tool": "refund", "require": {"budget": "refunds", "range": {"max": 3}}}]"#,
    );
    let calls = [
        (0, "refund", "{}"),
        (1, "refund", "{}"),
        (2, "refund", "{}"),
        (9_000, "refund", "{}"),
    ];
    assert_eq!(play(&m, &calls), ["run", "run", "run", "refused"]);
}

#[test]
fn no_more_than_10000_a_day_and_split_payments_do_not_get_around_it() {
    let m = machine(
        r#""budgets": [{"name": "daily", "tool": "send_money", "sum": "/amount", "within": "24h"}],
           "rules": [{"name": "per-payment", "tool": "send_money", "require": {"path": "/amount", "range": {"max": 10000}}},
                     {"name": "daily-limit", "tool": "send_money", "require": {"budget": "daily", "range": {"max": 10000}}}]"#,
    );
    // The hijacked agent splits 30,000 into three payments within the per-call range.
    let pay = r#"{"to": "GB33", "amount": 10000}"#;
    let calls = [
        (0, "send_money", pay),
        (1, "send_money", pay),
        (2, "send_money", pay),
    ];
    assert_eq!(play(&m, &calls), ["run", "refused", "refused"]);
    // A day (and a minute) later, the window has passed the first.
    let calls = [(0, "send_money", pay), (24 * 60 + 1, "send_money", pay)];
    assert_eq!(play(&m, &calls), ["run", "run"]);
}

#[test]
fn one_password_reset_per_hour() {
    let m = machine(
        r#""budgets": [{"name": "resets", "tool": "reset_password", "within": "1h"}],
           "rules": [{"name": "hourly", "tool": "reset_password", "require": {"budget": "resets", "range": {"max": 1}}}]"#,
    );
    let calls = [
        (0, "reset_password", "{}"),
        (59, "reset_password", "{}"),
        (61, "reset_password", "{}"),
    ];
    assert_eq!(play(&m, &calls), ["run", "refused", "run"]);
}

#[test]
fn a_running_total_over_a_threshold_needs_a_human() {
    // AgentCore: "keep a running total under a threshold"; Dogwood's `sum … > 200`.
    let m = machine(
        r#""budgets": [{"name": "moved", "tool": "send_money", "sum": "/amount", "within": "1h"}],
           "approve": [{"name": "over-200", "tool": "send_money", "when": {"budget": "moved", "range": {"min": 200.01}}}]"#,
    );
    let calls = [
        (0, "send_money", r#"{"amount": 150}"#),
        (1, "send_money", r#"{"amount": 50}"#),
        (2, "send_money", r#"{"amount": 0.01}"#),
    ];
    assert_eq!(play(&m, &calls), ["run", "run", "ask"]);
}

#[test]
fn more_than_two_logins_an_hour_needs_a_human() {
    // Dogwood's `count … where Login … > 2` within 1h, as a gate on the next one.
    let m = machine(
        r#""budgets": [{"name": "logins", "tool": "login", "within": "1h"}],
           "approve": [{"name": "login-burst", "tool": "login", "when": {"budget": "logins", "range": {"min": 3}}}]"#,
    );
    let calls = [
        (0, "login", "{}"),
        (10, "login", "{}"),
        (20, "login", "{}"),
        (90, "login", "{}"),
    ];
    assert_eq!(play(&m, &calls), ["run", "run", "ask", "run"]);
}

#[test]
fn write_after_read_of_the_same_document() {
    // Dogwood's `formerly … Read{document: context.document}` (without its window).
    let m = machine(
        r#""rules": [{"name": "read-first", "tool": "write",
                      "require": {"path": "/document", "from": [{"arguments": "read", "path": "/document"}]}}]"#,
    );
    let calls = [
        (0, "write", r#"{"document": "plan.md"}"#),
        (1, "read", r#"{"document": "plan.md"}"#),
        (2, "write", r#"{"document": "plan.md"}"#),
        (3, "write", r#"{"document": "other.md"}"#),
    ];
    assert_eq!(play(&m, &calls), ["refused", "run", "run", "refused"]);
}

#[test]
fn langchain_thread_and_run_limits() {
    // `ToolCallLimitMiddleware(tool_name="search", thread_limit=3, run_limit=2)`: a
    // thread is orch's run, a LangChain run is one user message.
    let m = machine(
        r#""budgets": [{"name": "thread", "tool": "search"}, {"name": "turn", "tool": "search", "per": "message"}],
           "rules": [{"name": "thread-limit", "tool": "search", "require": {"budget": "thread", "range": {"max": 3}}},
                     {"name": "run-limit", "tool": "search", "require": {"budget": "turn", "range": {"max": 2}}}]"#,
    );
    let calls = [
        (0, "msg", "find flights"),
        (0, "search", "{}"),
        (0, "search", "{}"),
        (0, "search", "{}"),
        (1, "msg", "and hotels"),
        (1, "search", "{}"),
        (1, "search", "{}"),
    ];
    assert_eq!(
        play(&m, &calls),
        ["message", "run", "run", "refused", "message", "run", "refused"]
    );
}

#[test]
fn langchain_limit_on_every_tool() {
    // `ToolCallLimitMiddleware(run_limit=3)` (no tool name): every call counts.
    let m = machine(
        r#""budgets": [{"name": "calls", "tool": "*", "per": "message"}],
           "rules": [{"name": "limit-read", "tool": "read", "require": {"budget": "calls", "range": {"max": 3}}},
                     {"name": "limit-search", "tool": "search", "require": {"budget": "calls", "range": {"max": 3}}}]"#,
    );
    let calls = [
        (0, "read", "{}"),
        (0, "search", "{}"),
        (0, "read", "{}"),
        (0, "search", "{}"),
    ];
    assert_eq!(play(&m, &calls), ["run", "run", "run", "refused"]);
}

#[test]
fn amount_at_most_the_balance_the_account_returned() {
    let m = machine(
        r#""rules": [{"name": "within-balance", "tool": "send_money",
                     "require": {"path": "/amount", "range": {"max": {"result": "get_balance", "path": "/balance"}}}}]"#,
    );
    let calls = [
        (0, "send_money", r#"{"amount": 1}"#),
        (1, "result:get_balance", r#"{"balance": 1200.50}"#),
        (2, "send_money", r#"{"amount": 1200.50}"#),
        (3, "send_money", r#"{"amount": 1200.51}"#),
    ];
    assert_eq!(play(&m, &calls), ["refused", "result", "run", "refused"]);
}

#[test]
fn a_spent_budget_moves_the_run_to_review() {
    let src = r#"{"agentId": "desk", "tools": ["refund", "escalate"],
      "orchestration": {
        "budgets": [{"name": "refunds", "tool": "refund"}],
        "steps": [{"name": "Work", "isDefault": true},
                  {"name": "Review", "conditions": [{"type": "budget", "value": "refunds", "range": {"min": 3}}],
                   "availableTools": {"allowed": ["escalate"]}}]}}"#;
    let m = orch_codegen::compile_json(src, None)
        .to_machine()
        .expect("compiles");
    let mut s = m.session();
    let mut steps = Vec::new();
    for k in 0..3 {
        let c = Call::new(CallDigest::of_text("refund", "{}"), "{}").at(T0 + k);
        s.admit_call("refund", &c).expect("admitted");
        s.record("refund");
        steps.push(s.step().unwrap_or("-"));
    }
    assert_eq!(steps, ["Work", "Work", "Review"]);
    assert!(s.check("refund").is_err());
}

#[test]
fn after_three_refused_calls_stop() {
    let src = r#"{"agentId": "careful", "tools": ["search", "wipe", "report"],
      "orchestration": {
        "budgets": [{"name": "refusals", "tool": "*", "counts": "refused"}],
        "approve": ["search"],
        "steps": [{"name": "Work", "isDefault": true, "availableTools": {"allowed": ["search"]}},
                  {"name": "Halted", "conditions": [{"type": "budget", "value": "refusals", "range": {"min": 3}}],
                   "availableTools": {"allowed": ["report"]}}]}}"#;
    let m = orch_codegen::compile_json(src, None)
        .to_machine()
        .expect("compiles");
    let mut s = m.session();
    let mut steps = Vec::new();
    for tool in ["wipe", "search", "wipe", "wipe"] {
        let c = Call::new(CallDigest::of_text(tool, "{}"), "{}").at(T0);
        let _ = s.admit_call(tool, &c);
        steps.push(s.step().unwrap_or("-"));
    }
    // `search` is asked about, not refused: the third refusal is the fourth call.
    assert_eq!(steps, ["Work", "Work", "Work", "Halted"]);
}
