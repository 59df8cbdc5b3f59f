//! The cost of budgets (semantics §17) per call: `check_call` of a payment judged by 1,
//! 10, 100 and 1,000 budget rules — half counts over the run, half sums over a one-hour
//! window keeping 64 charges — after 10, 1,000 and 100,000 earlier payments (one a
//! second, so every window is full and merging), against the same call with no budget.
//! A decision reads each budget's total and walks at most its queue: the figures should
//! not grow with the history. Run: `cargo bench --bench budgets`; the figures are in
//! docs/performance.md.

use criterion::{criterion_group, criterion_main, Criterion};
use orch::approval::{Call, CallDigest};
use orch::{DynMachine, DynSession};
use serde_json::{json, Value};
use std::hint::black_box;

const PAY: &str = r#"{"recipient": "DE89370400440532013000", "amount": 25.5, "currency": "EUR"}"#;
const T0: u64 = 1_800_000_000_000;

/// A template with `n` budgets on `send_money`, each read by a rule of its own.
fn machine(n: usize) -> DynMachine {
    let budgets: Vec<Value> = (0..n)
        .map(|i| match i % 2 {
            0 => json!({"name": format!("count-{i}"), "tool": "send_money"}),
            _ => json!({"name": format!("sum-{i}"), "tool": "send_money", "sum": "/amount",
                        "within": "1h", "events": 64}),
        })
        .collect();
    let rules: Vec<Value> = (0..n)
        .map(|i| {
            let budget = if i % 2 == 0 {
                format!("count-{i}")
            } else {
                format!("sum-{i}")
            };
            json!({"name": format!("limit-{i}"), "tool": "send_money",
                   "require": {"budget": budget, "range": {"max": 1_000_000_000}}})
        })
        .collect();
    let template = json!({"agentId": "pay", "tools": ["send_money", "get_balance"],
        "orchestration": {"budgets": budgets, "rules": rules,
                          "steps": [{"name": "Pay", "isDefault": true}]}});
    orch_codegen::compile_json(&template.to_string(), None)
        .to_machine()
        .expect("the bench's template compiles")
}

fn call(at: u64) -> Call<'static> {
    Call::new(CallDigest::of_text("send_money", PAY), PAY).at(at)
}

fn per_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("budgets");
    for rules in [0usize, 1, 10, 100, 1000] {
        let m = machine(rules);
        for history in [10u64, 1_000, 100_000] {
            if rules == 0 && history != 10 {
                continue;
            }
            let mut session = DynSession::new(&m);
            for k in 0..history {
                session
                    .admit_call("send_money", &call(T0 + k * 1000))
                    .expect("within every budget");
            }
            let next = call(T0 + history * 1000);
            assert!(session.check_call("send_money", &next).is_ok());
            let label = if rules == 0 {
                "no_budget".to_owned()
            } else {
                format!("{rules}_rules_{history}_calls")
            };
            g.bench_function(label, |b| {
                b.iter(|| black_box(&session).check_call(black_box("send_money"), black_box(&next)))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, per_call);
criterion_main!(benches);
