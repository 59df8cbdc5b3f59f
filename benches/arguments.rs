//! The cost of rules on arguments (semantics §16) per call: `check_call` on a payment's
//! arguments (174 bytes of JSON) with no rules, with 20 rules on other tools (the path
//! that reads nothing), with 1 rule (a regex on the recipient) and with 20 rules on the
//! tool (every kind of test, `all`/`any`/`not`, an `each` over an array, a URL's host),
//! the same 20 rules on 16 KiB of arguments, and 1 rule on arguments of 63,000 values
//! (near the reader's bound: the most work one call can ask for). Run: `cargo bench --bench arguments`;
//! the figures are in docs/performance.md.

use criterion::{criterion_group, criterion_main, Criterion};
use orch::approval::{Call, CallDigest};
use orch::{DynMachine, DynSession};
use serde_json::{json, Value};
use std::hint::black_box;

/// A payment's arguments, as a model writes them.
const ARGS: &str = r#"{"recipient": "DE89370400440532013000", "amount": 25.50, "currency": "EUR", "memo": "Rent for November", "tags": ["home", "monthly"], "callback": "https://bank.example/done"}"#;

/// One rule: the recipient is an IBAN.
fn one_rule() -> Vec<Value> {
    vec![
        json!({"name": "iban", "tool": "send_money", "require": {"path": "/recipient", "regex": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$"}}),
    ]
}

/// Twenty rules, each test kind at least once, all holding for [`ARGS`].
fn twenty_rules(tool: &str) -> Vec<Value> {
    let tests = [
        json!({"path": "/recipient", "regex": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$"}),
        json!({"path": "/amount", "range": {"min": 0.01, "max": 100000}}),
        json!({"path": "/currency", "oneOf": ["EUR", "USD", "GBP"]}),
        json!({"path": "/memo", "length": {"max": 140}}),
        json!({"path": "/memo", "glob": "*November*"}),
        json!({"path": "/tags", "each": {"oneOf": ["home", "monthly", "work"]}}),
        json!({"path": "/tags", "length": {"min": 1, "max": 8}}),
        json!({"path": "/callback", "hostIn": ["bank.example", "*.bank.example"]}),
        json!({"path": "/recipient", "exists": true}),
        json!({"not": {"path": "/iban", "exists": true}}),
        json!({"any": [{"path": "/amount", "range": {"max": 1000}}, {"path": "/urgent", "equals": true}]}),
        json!({"all": [{"path": "/currency", "equals": "EUR"}, {"path": "/recipient", "glob": "DE*"}]}),
        json!({"path": "/recipient", "length": {"min": 15, "max": 34}}),
        json!({"path": "/amount", "range": {"min": 0}}),
        json!({"not": {"path": "/memo", "regex": "(?i)ignore previous"}}),
        json!({"path": "/tags/0", "equals": "home"}),
        json!({"path": "", "length": {"max": 10}}),
        json!({"not": {"path": "/callback", "glob": "*@*"}}),
        json!({"path": "/currency", "length": {"min": 3, "max": 3}}),
        json!({"any": [{"path": "/memo", "exists": false}, {"path": "/memo", "length": {"min": 1}}]}),
    ];
    tests
        .into_iter()
        .enumerate()
        .map(|(i, t)| json!({"name": format!("rule-{i}"), "tool": tool, "require": t}))
        .collect()
}

fn machine(rules: Vec<Value>) -> DynMachine {
    let template = json!({"agentId": "payments", "tools": ["send_money", "get_contacts"],
        "orchestration": {"rules": rules, "steps": [{"name": "Pay", "isDefault": true}]}});
    orch_codegen::compile_json(&template.to_string(), None)
        .to_machine()
        .expect("the bench's template compiles")
}

/// [`ARGS`] with a note of `bytes` bytes.
fn large_args(bytes: usize) -> String {
    ARGS.replace(
        "\"memo\"",
        &format!("\"note\": \"{}\", \"memo\"", "x".repeat(bytes)),
    )
}

/// [`ARGS`] with an array of `objects` small objects (three values each: the object
/// and two members): near the reader's bound of 65,536 values, the most work one call
/// can ask for.
fn many_values(objects: usize) -> String {
    let items = vec![r#"{"a": 1, "b": 2}"#; objects].join(", ");
    ARGS.replace("\"memo\"", &format!("\"items\": [{items}], \"memo\""))
}

fn per_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("check_call");
    let large = large_args(16 * 1024);
    let many = many_values(21_000);
    let cases: [(&str, Vec<Value>, &str); 6] = [
        ("no_rules", Vec::new(), ARGS),
        (
            "20_rules_on_another_tool",
            twenty_rules("get_contacts"),
            ARGS,
        ),
        ("1_rule", one_rule(), ARGS),
        ("20_rules", twenty_rules("send_money"), ARGS),
        (
            "20_rules_16KiB_arguments",
            twenty_rules("send_money"),
            &large,
        ),
        ("1_rule_63000_values", one_rule(), &many),
    ];
    for (name, rules, args) in cases {
        let m = machine(rules);
        let session = DynSession::new(&m);
        let call = Call::new(CallDigest::of_text("send_money", args), args);
        assert!(session.check_call("send_money", &call).is_ok(), "{name}");
        g.bench_function(name, |b| {
            b.iter(|| black_box(&session).check_call(black_box("send_money"), black_box(&call)))
        });
    }
    g.finish();
}

criterion_group!(benches, per_call);
criterion_main!(benches);
