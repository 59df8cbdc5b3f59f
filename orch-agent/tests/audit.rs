//! Decision records (`orch_agent::audit`): the agent loop writes one record per event,
//! with the rule that decided; a chained log verifies, and any edit, removal or reordering
//! breaks it where it happened; the events alone re-derive every decision (`replay`), and
//! a changed template or a tampered decision is named at its line.

use orch_agent::audit::{replay, verify_chain, Auditor, DecisionRecord, JsonLines, Rule};
use orch_agent::{Agent, Decision, Planned, ScriptedModel, ToolRegistry};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/refund-desk/template.json");
use refund_desk::{Machine, Session};

const TEMPLATE: &str = include_str!("../../examples/agents/refund-desk/template.json");

fn tools() -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    for name in ["lookup_order", "issue_refund", "send_email"] {
        reg.register(
            name,
            name,
            serde_json::json!({"type": "object"}),
            move |_| async move { Ok(format!("{name} done")) },
        );
    }
    reg
}

/// A turn with a misbehaving call, a pause on the gated refund and an approval: the log
/// it writes (JSON lines).
async fn logged_turn(chained: bool) -> String {
    let dir = orch_test_support::scratch::Scratch::new("audit");
    let path = dir.join("decisions.jsonl");
    let mut auditor = Auditor::new(JsonLines::append(&path).unwrap(), "customer-1");
    if chained {
        auditor = auditor.chained();
    }
    let model = ScriptedModel::new([
        Planned::call("issue_refund", r#"{"order": "A-1", "amount": 10}"#),
        Planned::call("lookup_order", r#"{"order": "A-1"}"#),
        Planned::call("issue_refund", r#"{"order": "A-1", "amount": 10}"#),
        Planned::call("send_email", "{}"),
        Planned::text("Refunded."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools()).audited(Arc::new(auditor));
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "refund A-1 please")
        .await
        .unwrap();
    let pending = turn.pending.expect("paused");
    agent
        .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
        .await
        .unwrap();
    std::fs::read_to_string(&path).unwrap()
}

fn records(log: &str) -> Vec<DecisionRecord> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn every_event_is_a_record_with_the_rule_that_decided() {
    let log = logged_turn(false).await;
    let records = records(&log);
    let summary: Vec<(String, &str)> = records
        .iter()
        .map(|r| {
            let kind = serde_json::to_value(&r.event).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned();
            (kind, r.decision.as_str())
        })
        .collect();
    let expected: Vec<(String, &str)> = [
        ("tools", "tools"),
        ("message", "message"),
        ("call", "refused"),
        ("call", "admitted"),
        ("record", "recorded"),
        ("call", "needs_approval"),
        ("ask", "asked"),
        ("answer", "approved"),
        ("call", "admitted"),
        ("record", "recorded"),
        ("call", "admitted"),
        ("record", "recorded"),
    ]
    .iter()
    .map(|(k, d)| ((*k).to_owned(), *d))
    .collect();
    assert_eq!(summary, expected, "{log}");
    let r = &records[2];
    assert_eq!(r.run, "customer-1");
    assert_eq!(r.seq, 3);
    assert_eq!(r.fingerprint.len(), 16);
    assert_eq!(
        r.rule,
        Some(Rule::Sequence {
            step: "Refund".into(),
            position: 0,
            expected: vec!["lookup_order".into()],
        })
    );
    assert_eq!(r.outcome.as_deref(), Some("out_of_sequence"));
    assert!(r
        .message
        .as_deref()
        .unwrap()
        .contains("expects `lookup_order`"));
    assert_eq!(r.before.step.as_deref(), Some("Refund"));
    // The message moved the session from the default step.
    assert_eq!(records[1].before.step.as_deref(), Some("Help"));
    assert_eq!(records[1].after.step.as_deref(), Some("Refund"));
    // The gate decided the refund, before and after the human.
    assert_eq!(
        records[5].rule,
        Some(Rule::Gate {
            step: Some("Refund".into())
        })
    );
    assert_eq!(
        records[8].rule,
        Some(Rule::Gate {
            step: Some("Refund".into())
        })
    );
    assert_eq!(records[9].outcome.as_deref(), Some("advanced"));
    assert_eq!((records[9].before.index, records[9].after.index), (1, 2));
    assert!(records[0].time.ends_with('Z') && records[0].time.len() == 24);
    assert!(records.iter().all(|r| r.hash.is_none()));
}

#[tokio::test]
async fn a_chained_log_verifies_and_any_edit_breaks_it_where_it_happened() {
    let log = logged_turn(true).await;
    assert_eq!(verify_chain(&log), Ok(12));
    let lines: Vec<&str> = log.lines().collect();
    // An edited decision.
    let edited = log.replacen("\"needs_approval\"", "\"admitted\"", 1);
    assert_eq!(verify_chain(&edited).unwrap_err().line, 6);
    // A record removed, or two swapped.
    let removed: String = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert_eq!(verify_chain(&removed).unwrap_err().line, 5);
    let mut swapped = lines.clone();
    swapped.swap(7, 8);
    let swapped = swapped.join("\n");
    assert_eq!(verify_chain(&swapped).unwrap_err().line, 8);
    // Not a record at all.
    assert_eq!(verify_chain("{}\n").unwrap_err().line, 1);
    // An unchained log says so.
    let plain = logged_turn(false).await;
    assert!(verify_chain(&plain)
        .unwrap_err()
        .why
        .contains("not chained"));
}

fn machine(src: &str) -> orch_runtime::DynMachine {
    orch_codegen::compile_json(src, None)
        .to_machine()
        .expect("compiles")
}

#[tokio::test]
async fn the_events_alone_re_derive_every_decision() {
    let log = logged_turn(true).await;
    let report = replay(&machine(TEMPLATE), &log).unwrap();
    assert_eq!((report.records, report.runs), (12, 1));

    // Another template: named at the first record.
    let changed = TEMPLATE.replace("\"value\": \"refund\"", "\"value\": \"money back\"");
    assert_ne!(changed, TEMPLATE);
    let d = replay(&machine(&changed), &log).unwrap_err();
    assert_eq!((d.line, d.field.as_str()), (1, "fingerprint"));

    // A tampered decision, hashes recomputed so the chain still holds: the replay names it.
    let mut recs = records(&log);
    recs[5].decision = "admitted".into();
    let mut prev = None;
    let tampered: String = recs
        .iter_mut()
        .map(|r| {
            r.prev = prev.take();
            r.hash = None;
            let h = r.digest();
            r.hash = Some(h.clone());
            prev = Some(h);
            format!("{}\n", r.to_json())
        })
        .collect();
    assert_eq!(verify_chain(&tampered), Ok(12));
    let d = replay(&machine(TEMPLATE), &tampered).unwrap_err();
    assert_eq!((d.line, d.seq, d.field.as_str()), (6, Some(6), "decision"));
    assert_eq!(d.logged, "admitted");
    assert_eq!(d.derived, "needs_approval");
}

#[test]
fn a_deny_pattern_is_named_as_the_rule() {
    let src = r#"{"agentId": "files", "tools": ["read", "delete_file", "delete_dir"],
      "orchestration": {"steps": [{"name": "Work", "isDefault": true,
        "availableTools": {"denied": ["delete_*"]}}]}}"#;
    let m = machine(src);
    let mut session = m.session();
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&records);
    let auditor = Auditor::new(
        move |r: &DecisionRecord| sink.lock().unwrap().push(r.clone()),
        "r",
    );
    let policy =
        orch_agent::Policy::new(["read", "delete_file", "delete_dir"]).audited(Arc::new(auditor));
    policy.prepare(&mut session);
    let call = orch_runtime::Call::of_text("delete_dir", "{}");
    assert!(policy
        .admit_call(&mut session, "delete_dir", &call)
        .is_err());
    let records = records.lock().unwrap();
    assert_eq!(
        records[1].rule,
        Some(Rule::Step {
            step: "Work".into(),
            pattern: Some("delete_*".into())
        })
    );
    assert_eq!(records[1].outcome.as_deref(), Some("not_allowed"));
}

/// A run switched from observing to enforcing mid-way: each record is re-derived in the
/// mode it was decided in (an edited mode is the chain's to catch: where both modes
/// decide alike, the events cannot tell them apart).
#[test]
fn a_run_that_switches_mode_replays_each_record_in_its_own_mode() {
    use orch_agent::{Mode, Policy};
    use orch_runtime::Call;
    let machine = machine(TEMPLATE);
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = Arc::clone(&lines);
    let auditor = Arc::new(Auditor::new(
        move |r: &DecisionRecord| sink.lock().unwrap().push(r.to_json()),
        "customer-2",
    ));
    let mut session = machine.session();
    let observing = Policy::new(machine.tools().iter().cloned())
        .in_mode(Mode::Observe)
        .audited(Arc::clone(&auditor));
    observing.prepare(&mut session);
    observing.message(&mut session, "a refund please");
    // Out of sequence: observed, run, recorded.
    let call = Call::of_text("issue_refund", r#"{"order": "B-1"}"#);
    assert!(observing
        .admit_call(&mut session, "issue_refund", &call)
        .is_ok());
    observing.record(&mut session, "issue_refund");
    // Switched to enforcing: the same call is refused now.
    let enforcing = Policy::new(machine.tools().iter().cloned()).audited(auditor);
    assert!(enforcing
        .admit_call(
            &mut session,
            "send_email",
            &Call::of_text("send_email", "{}")
        )
        .is_err());
    let log = lines.lock().unwrap().join("\n");
    let recs = records(&log);
    assert_eq!(recs[2].decision, "refused");
    assert_eq!(recs[2].mode, Mode::Observe);
    assert_eq!(recs.last().unwrap().mode, Mode::Enforce);
    let report = replay(&machine, &log).unwrap();
    assert_eq!(report.records, recs.len());
}
