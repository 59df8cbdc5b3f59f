//! Budgets through the policy every surface calls (semantics §17): the decision log
//! keeps each call's time and each budget's total where the call was judged, so a
//! replay judges every call again — and a log whose times were altered does not replay.

mod common;

use orch_agent::audit::{replay, Auditor};
use orch_agent::{Policy, RefusalKind};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::Call;
use std::sync::Arc;

const TEMPLATE: &str = r#"{
  "agentId": "bank",
  "tools": ["send_money", "get_balance"],
  "orchestration": {
    "budgets": [{"name": "daily-spend", "tool": "send_money", "sum": "/amount", "within": "24h"}],
    "rules": [{"name": "daily-limit", "tool": "send_money",
               "require": {"budget": "daily-spend", "range": {"max": 10000}}}],
    "steps": [{"name": "Assist", "isDefault": true}]
  }
}"#;

const DAY: u64 = 24 * 3_600_000;
const T0: u64 = 1_800_000_000_000;

#[test]
fn the_log_keeps_times_and_totals_and_replays_budgets() {
    let compiled = orch_codegen::compile_json(TEMPLATE, None);
    assert!(!compiled.has_errors(), "{:#?}", compiled.diagnostics);
    let machine: DynMachine = compiled.to_machine().unwrap();
    let (log, sink) = common::decision_log();
    let policy =
        Policy::new(["send_money", "get_balance"]).audited(Arc::new(Auditor::new(sink, "run-1")));
    let mut s = machine.session();
    policy.prepare(&mut s);
    let pay = r#"{"to": "GB33", "amount": 6000}"#;
    let at = |ms| Call::of_text("send_money", pay).at(ms);
    policy.admit_call(&mut s, "send_money", &at(T0)).unwrap();
    policy.record(&mut s, "send_money");
    let refused = policy
        .admit_call(&mut s, "send_money", &at(T0 + 1000))
        .unwrap_err();
    assert_eq!(refused.kind, RefusalKind::BrokenRule);
    assert!(
        refused
            .reason
            .contains("budget `daily-spend` would be 12000 with this call"),
        "{}",
        refused.reason
    );
    // A day and a second later, the first payment is out of the window.
    policy
        .admit_call(&mut s, "send_money", &at(T0 + DAY + 1))
        .unwrap();
    let text = log.lock().unwrap().clone();
    // Each call's time, and the total the refused call's budget test read.
    assert!(text.contains(&format!("\"at\":{}", T0 + 1000)), "{text}");
    assert!(
        text.contains("\"budgets\":{\"daily-spend\":\"6000\"}"),
        "{text}"
    );
    let replayed = replay(&machine, &text).expect("the log replays");
    assert!(replayed.records > 0);
    // Moving the last payment back into the window makes its logged admission untrue.
    let tampered = text.replace(
        &format!("\"at\":{}", T0 + DAY + 1),
        &format!("\"at\":{}", T0 + 2000),
    );
    assert!(replay(&machine, &tampered).is_err());
}
