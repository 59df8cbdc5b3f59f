//! The cost of provenance rules (semantics §16) per call: `check_call` of a payment whose
//! recipient must come `from` the user or a trusted tool, against the same call with no
//! rule, on small (200 B) and large (16 KiB) arguments, with 1,000 values remembered
//! (the ring full, the recipient the oldest); and what remembering costs: a user message
//! of 1,000 words, a trusted result of 1,000 values. Run: `cargo bench --bench
//! provenance`; the figures are in docs/performance.md.

use criterion::{criterion_group, criterion_main, Criterion};
use orch::approval::{Call, CallDigest};
use orch::{DynMachine, DynSession};
use serde_json::{json, Value};
use std::hint::black_box;

const IBAN: &str = "DE89370400440532013000";

/// A payment's arguments padded to about `bytes` bytes with a memo.
fn args(bytes: usize) -> String {
    let base =
        json!({"recipient": IBAN, "amount": 25.5, "currency": "EUR", "memo": ""}).to_string();
    let pad = bytes.saturating_sub(base.len());
    json!({"recipient": IBAN, "amount": 25.5, "currency": "EUR", "memo": "x".repeat(pad)})
        .to_string()
}

fn machine(rules: Vec<Value>) -> DynMachine {
    let template = json!({"agentId": "pay", "tools": ["send_money", "get_contacts", "read_file"],
        "orchestration": {
            "trust": {"trusted": ["get_contacts"], "untrusted": ["read_file"]},
            "rememberedValues": 1000,
            "rules": rules, "steps": [{"name": "Pay", "isDefault": true}]}});
    orch_codegen::compile_json(&template.to_string(), None)
        .to_machine()
        .expect("the bench's template compiles")
}

/// A contacts result of `n` IBANs, the one paid first (so it is the oldest remembered).
fn contacts(n: usize) -> String {
    let mut list = vec![json!({"iban": IBAN})];
    list.extend((1..n).map(|i| json!({"iban": format!("FR76300060000112345678{i:05}")})));
    Value::Array(list).to_string()
}

fn per_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("provenance");
    let from = vec![json!({"name": "known-recipient", "tool": "send_money",
        "require": {"path": "/recipient", "from": ["user", "trusted"]}})];
    for (name, size) in [("200B", 200), ("16KiB", 16 * 1024)] {
        let a = args(size);
        let call = Call::new(CallDigest::of_text("send_money", &a), &a);
        for (rules, label) in [
            (Vec::new(), "no_rule"),
            (from.clone(), "from_rule_1000_values"),
        ] {
            let m = machine(rules);
            let mut session = DynSession::new(&m);
            session.record_result("get_contacts", &contacts(1000));
            assert!(session.check_call("send_money", &call).is_ok(), "{label}");
            g.bench_function(format!("{label}_{name}"), |b| {
                b.iter(|| black_box(&session).check_call(black_box("send_money"), black_box(&call)))
            });
        }
    }
    let m = machine(from);
    let words: String = (0..1000).map(|i| format!("word{i} ")).collect();
    g.bench_function("remember_user_message_1000_words", |b| {
        let mut session = DynSession::new(&m);
        b.iter(|| session.on_user_message(black_box(&words)))
    });
    let result = contacts(1000);
    g.bench_function("remember_trusted_result_1000_values", |b| {
        let mut session = DynSession::new(&m);
        b.iter(|| session.record_result(black_box("get_contacts"), black_box(&result)))
    });
    g.finish();
}

criterion_group!(benches, per_call);
criterion_main!(benches);
