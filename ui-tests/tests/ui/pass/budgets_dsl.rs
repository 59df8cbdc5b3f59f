// Budgets in the DSL: a budget that moves the run to a step, a budget of refusals, and
// a bound from a result — each compiles, and judges calls.
orch::orchestration! {
    pub machine Desk {
        tools: [get_balance, refund, pay, report];
        budget refunds: refund;
        budget refusals: "*" counts refused;
        default step Work {
            allow: [get_balance, refund, pay];
            rule "within-balance": pay
                require "/amount" range(min = 0.01, max = result(get_balance, "/balance"));
        }
        step Review {
            when budget(refunds, min = 3);
            allow: [report];
        }
        step Halted {
            when budget(refusals, min = 2);
            allow: [report];
        }
    }
}

fn main() {
    use orch::approval::{Call, CallDigest};
    use desk::{Session, Step, Tool};
    let call = |tool: &str, args: &'static str| Call::new(CallDigest::of_text(tool, args), args);
    let mut s = Session::new();
    for _ in 0..3 {
        assert!(s.admit_call(Tool::Refund, &call("refund", "{}")).is_ok());
        s.record(Tool::Refund);
    }
    assert_eq!(s.step(), Some(Step::Review));

    let mut s = Session::new();
    s.record_result(Tool::GetBalance, r#"{"balance": 20}"#);
    assert!(s.admit_call(Tool::Pay, &call("pay", r#"{"amount": 20}"#)).is_ok());
    assert!(s.admit_call(Tool::Pay, &call("pay", r#"{"amount": 21}"#)).is_err());
    assert!(s.admit_call(Tool::Report, &call("report", "{}")).is_err());
    assert_eq!(s.step(), Some(Step::Halted));
}
