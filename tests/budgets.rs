//! Budgets (semantics §17): counts of calls and exact sums of an argument, over the run,
//! the active step or a sliding window, judged at the time the host gives; what counts
//! is what was admitted; the state per budget is bounded whatever the history; snapshots
//! carry it by name in both encodings; the typed and the dynamic session judge the same.

use orch::approval::{Call, CallDigest};
use orch::{DynMachine, Refusal, Snapshot};
use proptest::prelude::*;

orch::include_machine!("budgets");
use budgets::{Session, Tool};

const SRC: &str = include_str!("fixtures/machines/budgets.json");
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
/// A time well after the epoch (the clock starts at 0).
const T0: u64 = 1_800_000_000_000;

fn call(tool: &str, args: &'static str, at: u64) -> Call<'static> {
    Call::new(CallDigest::of_text(tool, args), args).at(at)
}

fn dyn_machine(src: &str) -> DynMachine {
    orch_codegen::compile_json(src, None)
        .to_machine()
        .expect("the template compiles")
}

/// Admits a call on the typed session: "free", "ask" or "refuse: <why>".
fn admit(s: &mut Session, tool: Tool, c: &Call<'_>) -> String {
    match s.admit_call(tool, c) {
        Ok(()) => "free".to_owned(),
        Err(Refusal::NeedsApproval { .. }) => "ask".to_owned(),
        Err(Refusal::BrokenRule { broken, .. }) => {
            format!("refuse: {}", s.explain_broken(&broken, c.arguments))
        }
        Err(other) => format!("{other:?}"),
    }
}

/// The same on the dynamic session.
fn admit_dyn(s: &mut orch::DynSession<'_>, tool: &str, c: &Call<'_>) -> String {
    match s.admit_call(tool, c) {
        Ok(()) => "free".to_owned(),
        Err(Refusal::NeedsApproval { .. }) => "ask".to_owned(),
        Err(Refusal::BrokenRule { broken, .. }) => {
            format!("refuse: {}", s.explain_broken(&broken, c.arguments))
        }
        Err(other) => format!("{other:?}"),
    }
}

const PAY_4000: &str = r#"{"recipient": "DE89370400440532013000", "amount": 4000}"#;
const PAY_500: &str = r#"{"recipient": "DE89370400440532013000", "amount": 500.25}"#;

#[test]
fn a_sum_over_a_day_refuses_the_payment_that_would_pass_it_and_frees_up_after_a_day() {
    let mut s = Session::new();
    assert_eq!(
        admit(&mut s, Tool::SendMoney, &call("send_money", PAY_4000, T0)),
        "free"
    );
    // The second big payment within 7 days asks (a conditional approval on a count).
    let second = call("send_money", PAY_4000, T0 + HOUR);
    assert_eq!(admit(&mut s, Tool::SendMoney, &second), "ask");
    s.approve(second.digest);
    assert_eq!(admit(&mut s, Tool::SendMoney, &second), "free");
    // 8,000 spent: a third 4,000 would make 12,000.
    let third = call("send_money", PAY_4000, T0 + 2 * HOUR);
    assert_eq!(
        admit(&mut s, Tool::SendMoney, &third),
        "refuse: budget `daily-spend` would be 12000 with this call: it must be at most 10000"
    );
    // A refused call is not charged: 2,000.5 more still fit (small: no approval).
    assert_eq!(
        admit(
            &mut s,
            Tool::SendMoney,
            &call("send_money", PAY_500, T0 + 3 * HOUR)
        ),
        "free"
    );
    // Exactly a day after the first payment it still counts (the window is inclusive)…
    let big = call("send_money", PAY_4000, T0 + DAY);
    assert!(admit(&mut s, Tool::SendMoney, &big).starts_with("refuse"));
    // …and a millisecond later it no longer does: 4,000 + 500.25 + 4,000 = 8,500.25.
    let later = call("send_money", PAY_4000, T0 + DAY + 1);
    assert_eq!(admit(&mut s, Tool::SendMoney, &later), "ask");
}

#[test]
fn counts_over_the_run_and_over_an_hour() {
    let mut s = Session::new();
    let refund = |at| call("refund", r#"{"order": "A-1"}"#, at);
    for k in 0..3 {
        assert_eq!(admit(&mut s, Tool::Refund, &refund(T0 + k)), "free");
    }
    assert_eq!(
        admit(&mut s, Tool::Refund, &refund(T0 + 10 * DAY)),
        "refuse: budget `refunds` would be 4 with this call: it must be at most 3"
    );
    // The clock is at T0 + 2 now (the third refund); a reset an hour later is the first.
    let reset = |at| call("reset_password", r#"{"user": "ana"}"#, at);
    let t1 = T0 + HOUR;
    assert_eq!(admit(&mut s, Tool::ResetPassword, &reset(t1)), "free");
    assert!(admit(&mut s, Tool::ResetPassword, &reset(t1 + HOUR)).starts_with("refuse"));
    assert_eq!(
        admit(&mut s, Tool::ResetPassword, &reset(t1 + HOUR + 1)),
        "free"
    );
}

#[test]
fn a_step_budget_starts_again_when_the_step_changes() {
    let mut s = Session::new();
    let search = call("search", r#"{"q": "rates"}"#, T0);
    assert_eq!(admit(&mut s, Tool::Search, &search), "free");
    assert_eq!(admit(&mut s, Tool::Search, &search), "free");
    assert!(admit(&mut s, Tool::Search, &search).starts_with("refuse: budget `searches`"));
    s.on_user_message("let us research the rates");
    assert_eq!(s.step(), Some(budgets::Step::Research));
    assert_eq!(admit(&mut s, Tool::Search, &search), "free");
}

#[test]
fn an_amount_a_budget_cannot_add_exactly_is_refused() {
    let mut s = Session::new();
    for args in [
        r#"{"recipient": "DE89", "amount": "4000"}"#,
        r#"{"recipient": "DE89", "amount": -4000}"#,
        r#"{"recipient": "DE89", "amount": 0.0000000001}"#,
        r#"{"recipient": "DE89"}"#,
    ] {
        let why = admit(&mut s, Tool::SendMoney, &call("send_money", args, T0));
        assert!(
            why.starts_with("refuse: the value a budget adds up"),
            "{args}: {why}"
        );
    }
    // Nothing was charged.
    assert!(s.snapshot().budgets.is_empty());
}

#[test]
fn the_clock_never_goes_back_and_a_call_without_a_time_is_judged_at_the_clock() {
    let mut s = Session::new();
    let reset = |at| call("reset_password", r#"{"user": "ana"}"#, at);
    assert_eq!(
        admit(&mut s, Tool::ResetPassword, &reset(T0 + 2 * HOUR)),
        "free"
    );
    // A host whose clock went back cannot free the budget.
    assert!(admit(&mut s, Tool::ResetPassword, &reset(T0)).starts_with("refuse"));
    // Without a time, the session's clock: the window never passes.
    let untimed = Call::new(
        CallDigest::of_text("reset_password", r#"{"user": "ana"}"#),
        r#"{"user": "ana"}"#,
    );
    assert!(admit(&mut s, Tool::ResetPassword, &untimed).starts_with("refuse"));
    assert_eq!(s.snapshot().clock, T0 + 2 * HOUR);
}

#[test]
fn snapshots_carry_budgets_by_name_in_both_encodings() {
    let mut s = Session::new();
    admit(&mut s, Tool::SendMoney, &call("send_money", PAY_4000, T0));
    admit(&mut s, Tool::Refund, &call("refund", "{}", T0 + 5));
    let snap = s.snapshot();
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["clock"], T0 + 5);
    assert_eq!(json["budgets"][0]["name"], "daily-spend");
    assert_eq!(json["budgets"][0]["total"], "4000");
    assert_eq!(json["budgets"][0]["charges"][0][0], T0);
    let by_name: Vec<&str> = snap.budgets.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(by_name, ["daily-spend", "big-payments", "refunds"]);
    let decoded = Snapshot::from_bytes(&snap.to_bytes()).unwrap();
    assert_eq!(decoded, snap);
    let back: Snapshot = serde_json::from_value(json).unwrap();
    assert_eq!(back, snap);
    let restored = Session::restore(&decoded).unwrap().0;
    assert_eq!(restored.snapshot(), snap);
    // The restored session judges on: 4,000 + 4,000 asks (big), then 12,000 refuses.
    let mut restored = restored;
    let second = call("send_money", PAY_4000, T0 + 10);
    assert_eq!(admit(&mut restored, Tool::SendMoney, &second), "ask");
}

#[test]
fn a_changed_template_keeps_budgets_by_name_and_reports_the_ones_it_lost() {
    let mut s = Session::new();
    admit(&mut s, Tool::SendMoney, &call("send_money", PAY_4000, T0));
    admit(&mut s, Tool::Refund, &call("refund", "{}", T0));
    let snap = s.snapshot();
    // v2: the daily sum becomes a sum over the run; `refunds` is gone.
    let v2 = SRC
        .replace(r#""sum": "/amount", "within": "24h""#, r#""sum": "/amount""#)
        .replace(r#"{"name": "refunds", "tool": "refund"},"#, "")
        .replace(
            r#"{"type": "budget", "value": "refunds", "range": {"min": 3}}"#,
            r#"{"type": "tool_used", "value": "refund"}"#,
        )
        .replace(
            r#"{"name": "three-refunds", "tool": "refund", "require": {"budget": "refunds", "range": {"max": 3}}},"#,
            "",
        );
    let m = dyn_machine(&v2);
    let (mut d, report) = orch::DynSession::restore(&m, &snap).expect("restores");
    assert_eq!(report.missing_budgets, ["refunds"]);
    // 4,000 kept: 4,000 + 4,000 asks (second big payment), 3 × 4,000 refuses.
    let second = call("send_money", PAY_4000, T0 + 1);
    assert_eq!(admit_dyn(&mut d, "send_money", &second), "ask");
    d.approve(second.digest);
    assert_eq!(admit_dyn(&mut d, "send_money", &second), "free");
    let third = call("send_money", PAY_4000, T0 + 3 * DAY);
    assert!(admit_dyn(&mut d, "send_money", &third)
        .starts_with("refuse: budget `daily-spend` would be 12000"));
}

#[test]
fn a_malformed_budget_in_a_snapshot_is_an_error() {
    let mut s = Session::new();
    admit(&mut s, Tool::Refund, &call("refund", "{}", T0));
    let mut snap = s.snapshot();
    snap.budgets[0].total = "1e400".to_owned();
    let err = Session::restore(&snap).unwrap_err();
    assert!(err.to_string().contains("budget"), "{err}");
    let bytes = snap.to_bytes();
    let decoded = Snapshot::from_bytes(&bytes).unwrap();
    assert!(Session::restore(&decoded).is_err());
}

/// The typed and the dynamic session decide every call alike and end in the same state.
#[test]
fn typed_and_dynamic_sessions_judge_budgets_alike() {
    let m = dyn_machine(SRC);
    let mut typed = Session::new();
    let mut dynamic = m.session();
    let calls: [(Tool, &str, &'static str, u64); 8] = [
        (Tool::SendMoney, "send_money", PAY_4000, T0),
        (Tool::SendMoney, "send_money", PAY_500, T0 + 1),
        (Tool::SendMoney, "send_money", PAY_4000, T0 + 2),
        (Tool::Refund, "refund", "{}", T0 + 3),
        (Tool::Search, "search", "{}", T0 + 4),
        (Tool::Search, "search", "{}", T0 + 5),
        (Tool::Search, "search", "{}", T0 + 6),
        (Tool::ResetPassword, "reset_password", "{}", T0 + 7),
    ];
    for (tool, name, args, at) in calls {
        let c = call(name, args, at);
        assert_eq!(
            admit(&mut typed, tool, &c),
            admit_dyn(&mut dynamic, name, &c),
            "{name} {args}"
        );
    }
    assert_eq!(typed.snapshot(), dynamic.snapshot());
}

/// An exact reference: every charge kept, summed over the window.
fn reference(charges: &[(u64, u64)], now: u64, within: u64) -> u64 {
    charges
        .iter()
        .filter(|(at, _)| now - at <= within)
        .map(|(_, v)| v)
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the history, a windowed sum reads exactly what the window holds while
    /// its queue holds every live charge, and never less once it has merged charges.
    #[test]
    fn a_windowed_sum_is_exact_or_over_never_under(
        steps in prop::collection::vec((0u64..(2 * HOUR), 1u64..3000), 1..300)
    ) {
        let src = SRC.replace(
            r#""sum": "/amount", "within": "24h""#,
            r#""sum": "/amount", "within": "24h", "events": 16"#,
        ).replace(r#""range": {"max": 10000}"#, r#""range": {"max": 1000000000}"#);
        let m = dyn_machine(&src);
        let mut s = m.session();
        let mut now = T0;
        let mut charges: Vec<(u64, u64)> = Vec::new();
        let mut merged = false;
        for (gap, amount) in steps {
            now += gap;
            let args: &'static str = Box::leak(format!(r#"{{"amount": {amount}}}"#).into_boxed_str());
            let c = call("send_money", args, now);
            // Asked (a big payment): approve it, then admit.
            if s.admit_call("send_money", &c).is_err() {
                s.approve(c.digest);
                prop_assert!(s.admit_call("send_money", &c).is_ok());
            }
            charges.push((now, amount));
            let truth = reference(&charges, now, DAY);
            let live = charges.iter().filter(|(at, _)| now - at <= DAY).count();
            merged |= live > 16;
            let snap = s.snapshot();
            let held = snap.budgets.iter().find(|b| b.name == "daily-spend").unwrap();
            prop_assert!(held.charges.len() <= 16);
            let kept: u64 = held.charges.iter().filter(|(at, _)| now - at <= DAY)
                .map(|(_, v)| v.parse::<u64>().unwrap()).sum();
            if !merged {
                prop_assert_eq!(kept, truth);
            } else {
                prop_assert!(kept >= truth, "kept {} < truth {}", kept, truth);
            }
        }
    }
}

/// What budgets add to a binary snapshot (docs/performance.md): the section's tag, the
/// clock and the count of budgets; per budget its name, total and count of charges; per
/// charge kept its time and amount.
#[test]
fn snapshot_bytes_per_budget_and_per_charge() {
    let mut s = Session::new();
    let empty = s.snapshot().to_bytes().len();
    admit(&mut s, Tool::Refund, &call("refund", "{}", T0));
    let one_count = s.snapshot().to_bytes().len();
    // Tag 1 + clock 6 (a 2027 time in ms: 41 bits, 7 bits a byte) + budgets 1; the
    // budget: name 1 + 7 ("refunds"), total 1 + 1 ("1"), charges 1.
    assert_eq!(one_count - empty, 1 + 6 + 1 + (1 + 7) + (1 + 1) + 1);
    let pay = r#"{"amount": 12.5}"#;
    admit(&mut s, Tool::SendMoney, &call("send_money", pay, T0));
    let with_sum = s.snapshot().to_bytes().len();
    // The windowed sum: name 1 + 11, total 1 + 4 ("12.5"), charges 1, one charge: time
    // 6 + amount 1 + 4.
    assert_eq!(with_sum - one_count, (1 + 11) + (1 + 4) + 1 + 6 + (1 + 4));
    admit(&mut s, Tool::SendMoney, &call("send_money", pay, T0 + 1));
    let two_charges = s.snapshot().to_bytes().len();
    // A second charge of the same amount: its time and amount; the total, 25, is two
    // bytes shorter than 12.5.
    assert_eq!(two_charges + 2 - with_sum, 6 + (1 + 4));
}
