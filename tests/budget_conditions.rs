//! Budgets in step conditions (semantics §17): a step whose condition reads a budget's
//! total becomes active once the recorded calls spend it — a spent budget moves the
//! workflow to a review step — judged at the session's clock, in the typed and the
//! dynamic session alike, and rebuilt from a snapshot.

use orch::approval::{Call, CallDigest};
use orch::{DynMachine, DynSession, Refusal};

mod budgets {
    orch::include_machine!("budgets");
    pub fn include() {}
}

const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

/// Refunds are free until three ran (or 500 were refunded within a day); then the
/// `Review` step allows only `escalate` and `lookup`.
const SRC: &str = r#"{
  "agentId": "refund-desk",
  "tools": ["refund", "lookup", "escalate"],
  "orchestration": {
    "budgets": [
      {"name": "refunds", "tool": "refund"},
      {"name": "refunded-today", "tool": "refund", "sum": "/amount", "within": "24h"}
    ],
    "steps": [
      {"name": "Work", "isDefault": true},
      {"name": "Review",
       "conditions": [{"type": "budget", "value": "refunds", "range": {"min": 3}}],
       "availableTools": {"allowed": ["escalate", "lookup"]}},
      {"name": "BigDay",
       "conditions": [{"type": "budget", "value": "refunded-today", "range": {"min": 500}}],
       "availableTools": {"allowed": ["escalate", "lookup"]}}
    ]
  }
}"#;

fn machine(src: &str) -> DynMachine {
    let compiled = orch_codegen::compile_json(src, None);
    assert!(
        compiled.diagnostics.iter().all(|d| !d.is_error()),
        "{:#?}",
        compiled.diagnostics
    );
    compiled.to_machine().expect("compiles")
}

/// Admits and records a call at `at`: the step after it, or why it was refused.
fn run(s: &mut DynSession<'_>, tool: &str, args: &'static str, at: u64) -> String {
    let c = Call::new(CallDigest::of_text(tool, args), args).at(at);
    match s.admit_call(tool, &c) {
        Ok(()) => {
            s.record(tool);
            s.step().unwrap_or("-").to_owned()
        }
        Err(Refusal::NotInStep { .. }) => "not in step".to_owned(),
        Err(other) => format!("{other:?}"),
    }
}

#[test]
fn the_third_refund_moves_the_run_to_review_where_refunds_are_not_allowed() {
    let m = machine(SRC);
    let mut s = m.session();
    assert_eq!(s.step(), Some("Work"));
    assert_eq!(run(&mut s, "refund", r#"{"amount": 10}"#, T0), "Work");
    assert_eq!(run(&mut s, "refund", r#"{"amount": 10}"#, T0 + 1), "Work");
    // What was asked but not admitted is not charged: a lookup changes nothing.
    assert_eq!(run(&mut s, "lookup", "{}", T0 + 2), "Work");
    assert_eq!(run(&mut s, "refund", r#"{"amount": 10}"#, T0 + 3), "Review");
    assert_eq!(
        run(&mut s, "refund", r#"{"amount": 10}"#, T0 + 4),
        "not in step"
    );
    assert_eq!(run(&mut s, "escalate", "{}", T0 + 5), "Review");
}

#[test]
fn a_windowed_total_is_read_at_the_clock_of_the_latest_call() {
    let m = machine(SRC);
    let mut s = m.session();
    assert_eq!(run(&mut s, "refund", r#"{"amount": 300}"#, T0), "Work");
    // A day later the first refund left the window: 300 + 250 is not 500 within 24 h.
    assert_eq!(
        run(&mut s, "refund", r#"{"amount": 250}"#, T0 + 25 * HOUR),
        "Work"
    );
    // Within the day: 250 + 260 = 510.
    assert_eq!(
        run(&mut s, "refund", r#"{"amount": 260}"#, T0 + 26 * HOUR),
        "Review"
    );
    // The count reached 3 first (Review comes before BigDay in template order).
    assert_eq!(s.budget_totals().len(), 2);
}

#[test]
fn a_snapshot_restores_the_step_and_what_its_condition_reads() {
    let m = machine(SRC);
    let mut s = m.session();
    for k in 0..2 {
        run(&mut s, "refund", r#"{"amount": 1}"#, T0 + k);
    }
    for bytes in [
        s.snapshot_bytes(),
        serde_json::to_vec(&s.snapshot()).expect("json"),
    ] {
        let snap = if bytes.first() == Some(&b'{') {
            serde_json::from_slice::<orch::Snapshot>(&bytes).expect("json snapshot")
        } else {
            orch::Snapshot::from_bytes(&bytes).expect("binary snapshot")
        };
        let mut restored = DynSession::restore(&m, &snap).expect("restores").0;
        assert_eq!(restored.step(), Some("Work"));
        assert_eq!(
            run(&mut restored, "refund", r#"{"amount": 1}"#, T0 + 9),
            "Review"
        );
    }
}

#[test]
fn a_step_budget_emptied_by_entering_the_step_does_not_bounce_back() {
    // `per: step`: entering Review empties the budget its condition read; the step
    // stays (no other step's conditions hold), as any step whose conditions stop holding.
    let src = SRC.replace(
        r#"{"name": "refunds", "tool": "refund"}"#,
        r#"{"name": "refunds", "tool": "refund", "per": "step"}"#,
    );
    let m = machine(&src);
    let mut s = m.session();
    for k in 0..3 {
        run(&mut s, "refund", r#"{"amount": 1}"#, T0 + k);
    }
    assert_eq!(s.step(), Some("Review"));
    assert!(!s.budget_totals().iter().any(|(name, _)| *name == "refunds"));
    assert_eq!(run(&mut s, "lookup", "{}", T0 + 9), "Review");
}

#[test]
fn a_message_budget_condition_holds_until_the_next_user_message() {
    let src = r#"{
      "agentId": "turns", "tools": ["search", "answer"],
      "orchestration": {
        "budgets": [{"name": "searches", "tool": "search", "per": "message"}],
        "steps": [
          {"name": "Research", "isDefault": true},
          {"name": "Answer",
           "conditions": [{"type": "budget", "value": "searches", "range": {"min": 2}}],
           "availableTools": {"allowed": ["answer"]}},
          {"name": "Fresh",
           "conditions": [{"type": "budget", "value": "searches", "range": {"max": 0}},
                          {"type": "message_contains", "value": "again"}]}
        ]
      }
    }"#;
    let m = machine(src);
    let mut s = m.session();
    s.on_user_message("find it");
    assert_eq!(run(&mut s, "search", "{}", T0), "Research");
    assert_eq!(run(&mut s, "search", "{}", T0 + 1), "Answer");
    // A new message empties the turn's budget before activation reads it.
    s.on_user_message("again please");
    assert_eq!(s.step(), Some("Fresh"));
}

#[test]
fn the_typed_session_moves_the_same() {
    budgets::include();
    let mut s = budgets::budgets::Session::new();
    for k in 0..3 {
        let c = Call::new(CallDigest::of_text("refund", "{}"), "{}").at(T0 + k);
        assert!(s.admit_call_name("refund", &c).is_ok());
        s.record_name("refund");
    }
    assert_eq!(s.step(), Some(budgets::budgets::Step::Review));
    assert!(s.check_name("refund").is_err());
}

#[test]
fn mistakes_in_a_budget_condition_are_errors_at_their_place() {
    let codes = |condition: &str| -> Vec<&'static str> {
        let src = SRC.replace(
            r#"{"type": "budget", "value": "refunds", "range": {"min": 3}}"#,
            condition,
        );
        orch_codegen::compile_json(&src, None)
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.code.as_str())
            .collect()
    };
    assert_eq!(
        codes(r#"{"type": "budget", "value": "refund", "range": {"min": 3}}"#),
        ["E027"]
    );
    assert_eq!(codes(r#"{"type": "budget", "value": "refunds"}"#), ["E025"]);
    assert_eq!(
        codes(r#"{"type": "budget", "range": {"min": 3}}"#),
        ["E010"]
    );
    assert_eq!(
        codes(r#"{"type": "budget", "value": "refunds", "range": {"min": 3, "max": 2}}"#),
        ["E026"]
    );
    assert_eq!(
        codes(r#"{"type": "budget", "value": "refunds", "range": {"min": 0.0000000001}}"#),
        ["E026"]
    );
}

/// A budget that counts refusals (`"counts": "refused"`): every call the session
/// refused to admit — a broken rule, a tool the step does not allow — is charged, a call
/// it asks about is not, and the third refusal halts the run at once.
const REFUSALS: &str = r#"{
  "agentId": "careful", "tools": ["search", "pay", "wipe", "report"],
  "orchestration": {
    "budgets": [{"name": "refusals", "tool": "*", "counts": "refused"}],
    "rules": [{"name": "small", "tool": "pay", "require": {"path": "/amount", "range": {"max": 100}}}],
    "approve": [{"name": "medium", "tool": "pay", "when": {"path": "/amount", "range": {"min": 50}}}],
    "steps": [
      {"name": "Work", "isDefault": true, "availableTools": {"allowed": ["search", "pay"]}},
      {"name": "Halted",
       "conditions": [{"type": "budget", "value": "refusals", "range": {"min": 3}}],
       "availableTools": {"allowed": ["report"]}}
    ]
  }
}"#;

#[test]
fn refusals_are_counted_and_the_third_halts_the_run() {
    let m = machine(REFUSALS);
    let mut s = m.session();
    let admit = |s: &mut DynSession<'_>, tool: &str, args: &'static str| {
        let c = Call::new(CallDigest::of_text(tool, args), args).at(T0);
        match s.admit_call(tool, &c) {
            Ok(()) => "run",
            Err(Refusal::NeedsApproval { .. }) => "ask",
            Err(_) => "refused",
        }
    };
    assert_eq!(admit(&mut s, "pay", r#"{"amount": 500}"#), "refused");
    assert_eq!(admit(&mut s, "pay", r#"{"amount": 60}"#), "ask");
    assert_eq!(admit(&mut s, "search", "{}"), "run");
    s.record("search");
    assert_eq!(admit(&mut s, "wipe", "{}"), "refused");
    assert_eq!(s.budget_totals(), [("refusals", "2".to_owned())]);
    assert_eq!(s.step(), Some("Work"));
    assert_eq!(admit(&mut s, "wipe", "{}"), "refused");
    // The refusal itself moved the run: no further event was needed.
    assert_eq!(s.step(), Some("Halted"));
    assert!(s.refusal_changes_memory());
    // A snapshot carries the count.
    let restored = DynSession::restore(&m, &s.snapshot()).expect("restores").0;
    assert_eq!(restored.budget_totals(), [("refusals", "3".to_owned())]);
    assert_eq!(restored.step(), Some("Halted"));
    // Checking a call is a question, not a refusal: nothing is charged.
    let c = Call::new(CallDigest::of_text("wipe", "{}"), "{}");
    assert!(s.check_call("wipe", &c).is_err());
    assert_eq!(s.budget_totals(), [("refusals", "3".to_owned())]);
}

#[test]
fn counts_other_than_admitted_or_refused_is_an_error() {
    let src = REFUSALS.replace(r#""counts": "refused""#, r#""counts": "denied""#);
    let codes: Vec<&str> = orch_codegen::compile_json(&src, None)
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code.as_str())
        .collect();
    assert_eq!(codes, ["E025"]);
}
