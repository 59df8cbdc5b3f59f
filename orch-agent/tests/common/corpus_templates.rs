//! The random templates the bindings' corpora are made of (`protocol_corpus.rs`,
//! `run_host_corpus.rs`): steps with allowed, denied and gated tools, sequences, a
//! message condition, gates and rules on arguments.

use orch_runtime::dynamic::DynMachine;
use orch_test_support::events::ArgumentRules;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::path::Path;

/// The tools every generated template declares.
pub const TOOLS: [&str; 4] = ["a", "b", "c", "d"];

/// A generated step: allowed, denied and gated tools, and a sequence if any.
type StepParts = (
    Vec<&'static str>,
    Vec<&'static str>,
    Vec<&'static str>,
    Option<Vec<&'static str>>,
);

/// A template: a default step, maybe a step after a tool and a step on a message.
pub fn template() -> impl Strategy<Value = Value> {
    let allowed = prop_oneof![
        Just(Vec::new()),
        proptest::sample::subsequence(TOOLS.to_vec(), 2..=4)
    ];
    let subset = |most: usize| proptest::sample::subsequence(TOOLS.to_vec(), 0..=most);
    let sequence = proptest::option::of(proptest::sample::subsequence(TOOLS.to_vec(), 2..=3));
    let step = (allowed, subset(1), subset(2), sequence);
    (
        step.clone(),
        proptest::option::of((0..4usize, step.clone())),
        proptest::option::of(step),
        subset(1),
        ArgumentRules::strategy(0.5),
    )
        .prop_map(|(first, second, third, gated, rules)| {
            let step_json = |name: &str, (allowed, denied, approve, sequence): StepParts| {
                let mut step = json!({"name": name, "availableTools": {"allowed": allowed, "denied": denied, "approve": approve}});
                if let Some(sequence) = sequence {
                    step["sequence"] = json!(sequence);
                    step["resetSequenceOn"] = json!(["message_contains"]);
                }
                step
            };
            let mut steps = vec![];
            if let Some(third) = third {
                let mut s2 = step_json("Refund", third);
                s2["conditions"] = json!([{"type": "message_contains", "value": "refund"}]);
                steps.push(s2);
            }
            if let Some((trigger, second)) = second {
                let mut s1 = step_json("After", second);
                s1["conditions"] = json!([{"type": "tool_used", "value": TOOLS[trigger]}]);
                steps.push(s1);
            }
            let mut s0 = step_json("Start", first);
            s0["isDefault"] = json!(true);
            steps.push(s0);
            let mut orchestration = json!({"steps": steps, "approve": gated});
            rules.apply(&mut orchestration, &TOOLS, "/v/*");
            json!({"agentId": "corpus", "tools": TOOLS, "orchestration": orchestration})
        })
}

/// The next generated template that compiles: its text (keys in canonical order, whether
/// or not serde_json keeps insertion order in this build — a feature another crate of
/// the workspace may turn on) and its machine.
pub fn compiling(runner: &mut TestRunner) -> (String, DynMachine) {
    loop {
        let template = template().new_tree(runner).expect("a template").current();
        let text = orch_runtime::approval::canonical_json(&template.to_string())
            .expect("a template is JSON");
        if let Some(machine) = orch_codegen::compile_json(&text, None).to_machine() {
            return (text, machine);
        }
    }
}

/// Keeps the corpus at `path` (under the crate) true to `fresh`: written afresh with
/// `ORCH_BLESS=1`, else compared, failing with `changed` when it differs.
pub fn keep_true(path: &str, fresh: &Value, changed: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = serde_json::to_string_pretty(fresh).expect("json") + "\n";
    if std::env::var_os("ORCH_BLESS").is_some() {
        std::fs::write(&path, &text).expect("write the corpus");
    }
    let stored = std::fs::read_to_string(&path).expect("the corpus (ORCH_BLESS=1 writes it)");
    let stored: Value = serde_json::from_str(&stored).expect("the corpus is JSON");
    assert!(stored == *fresh, "{changed}");
    text
}
