//! A `range` bound from a result (semantics §16): an argument compared with the number
//! the newest result of a tool held — "the amount at most the balance `get_balance`
//! returned" — exactly, in the typed and the dynamic session alike, carried by
//! snapshots in both encodings.

use orch::approval::{Call, CallDigest};
use orch::{DynMachine, DynSession, Refusal, Snapshot};

orch::include_machine!("balance");

const SRC: &str = include_str!("fixtures/machines/balance.json");

fn machine() -> DynMachine {
    let compiled = orch_codegen::compile_json(SRC, None);
    assert!(
        compiled.diagnostics.iter().all(|d| !d.is_error()),
        "{:#?}",
        compiled.diagnostics
    );
    compiled.to_machine().expect("compiles")
}

/// Admits a payment: "free", or the refusal in words.
fn pay(s: &mut DynSession<'_>, amount: &str) -> String {
    let args = format!(r#"{{"amount": {amount}}}"#);
    let call = Call::new(CallDigest::of_text("pay", &args), &args);
    match s.admit_call("pay", &call) {
        Ok(()) => "free".to_owned(),
        Err(Refusal::BrokenRule { broken, .. }) => s.explain_broken(&broken, &args),
        Err(other) => format!("{other:?}"),
    }
}

#[test]
fn a_payment_is_bounded_by_the_newest_balance_and_fee() {
    let m = machine();
    assert!(m.reads_results_of("get_balance") && m.reads_results_of("get_fee"));
    assert!(!m.reads_results_of("pay"));
    let mut s = m.session();
    // Nothing seen yet: no number to compare with, so the rule does not hold.
    assert_eq!(
        pay(&mut s, "10"),
        "`/amount` is 10: it must be a number at least the number the newest result of `get_fee` held at `/fee` (none has held a number there yet)"
    );
    s.record_result("get_fee", r#"{"fee": 0.5}"#);
    s.record_result("get_balance", r#"{"balance": 1200.50, "currency": "EUR"}"#);
    assert_eq!(pay(&mut s, "1000"), "free");
    assert_eq!(pay(&mut s, "1200.50"), "free");
    assert_eq!(pay(&mut s, "1200.500000000000001"), "`/amount` is 1200.500000000000001: it must be a number at most the number the newest result of `get_balance` held at `/balance` (1200.5)");
    assert!(pay(&mut s, "0.4").contains("at least the number the newest result of `get_fee`"));
    // The newest result wins.
    s.record_result("get_balance", r#"{"balance": 100}"#);
    assert!(pay(&mut s, "1000").contains("(100)"));
    assert_eq!(pay(&mut s, "99.99"), "free");
    // A result without a number there leaves none: the rule fails closed.
    s.record_result("get_balance", r#"{"balance": "unknown"}"#);
    assert!(pay(&mut s, "1").contains("none has held a number there yet"));
    s.record_result("get_balance", "not json");
    assert!(pay(&mut s, "1").contains("none has held a number there yet"));
    // An amount that is not a number is not within any bound.
    s.record_result("get_balance", r#"{"balance": -20}"#);
    assert!(pay(&mut s, "1").contains("(-20)"));
    assert!(pay(&mut s, r#""5""#).starts_with("`/amount` is \"5\""));
}

#[test]
fn snapshots_carry_the_numbers_by_tool_and_path_in_both_encodings() {
    let m = machine();
    let mut s = m.session();
    s.record_result("get_fee", r#"{"fee": 0.25}"#);
    s.record_result("get_balance", r#"{"balance": 1234.56789}"#);
    let snap = s.snapshot();
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["numbers"][0]["tool"], "get_fee");
    assert_eq!(json["numbers"][1]["value"], "1234.56789");
    let decoded = Snapshot::from_bytes(&snap.to_bytes()).unwrap();
    assert_eq!(decoded, snap);
    let back: Snapshot = serde_json::from_value(json).unwrap();
    assert_eq!(back, snap);
    let (mut restored, report) = DynSession::restore(&m, &decoded).unwrap();
    assert!(report.is_exact(), "{report:?}");
    assert_eq!(pay(&mut restored, "1234.56789"), "free");
    assert!(pay(&mut restored, "1234.5679").contains("(1234.56789)"));
    // A malformed number is an error, not a zero.
    let mut bad = snap.clone();
    bad.numbers[1].value = "12,5".to_owned();
    assert!(DynSession::restore(&m, &bad).is_err());
    // A template that no longer reads a number reports it.
    let v2 = SRC.replace(r#""min": {"result": "get_fee", "path": "/fee"},"#, "");
    let m2 = orch_codegen::compile_json(&v2, None).to_machine().unwrap();
    let (_, report) = DynSession::restore(&m2, &snap).unwrap();
    assert_eq!(report.missing_numbers, ["get_fee /fee"]);
}

#[test]
fn the_typed_session_judges_the_same() {
    use balance::{Session, Tool};
    let mut s = Session::new();
    s.record_result(Tool::GetFee, r#"{"fee": 1}"#);
    s.record_result(Tool::GetBalance, r#"{"balance": 50}"#);
    let ok = r#"{"amount": 50}"#;
    let over = r#"{"amount": 50.01}"#;
    assert!(s
        .admit_call(Tool::Pay, &Call::new(CallDigest::of_text("pay", ok), ok))
        .is_ok());
    assert!(s
        .admit_call(
            Tool::Pay,
            &Call::new(CallDigest::of_text("pay", over), over)
        )
        .is_err());
    let m = machine();
    let mut d = m.session();
    d.record_result("get_fee", r#"{"fee": 1}"#);
    d.record_result("get_balance", r#"{"balance": 50}"#);
    assert_eq!(d.snapshot().to_bytes(), s.snapshot().to_bytes());
}
