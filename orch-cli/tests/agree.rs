//! `orch simulate` (a template loaded at run time) and the compiled machine (the same
//! template through the macro) produce the same trace for the same events.

use proptest::{prop_assert, prop_assert_eq};
use std::process::Command;

orch_macros::orchestration!(file = "../examples/agents/support-triage/template.json");
orch_macros::orchestration!(file = "../tests/fixtures/machines/conformance.json");

use orch_test_support::events::{self as common, Event};

/// The trace line of semantics §10 for a compiled session.
fn line<M: orch_runtime::Machine>(
    s: &orch_runtime::Session<M>,
    outcome: Option<&orch_runtime::Outcome<M::Tool>>,
) -> serde_json::Value {
    use orch_runtime::{StepEnum, ToolEnum};
    let mut allowed: Vec<&str> = s.allowed().names().collect();
    allowed.sort_unstable();
    let mut v = serde_json::json!({
        "step": s.step().map(StepEnum::name),
        "sequenceIndex": s.sequence_index(),
        "allowed": allowed,
    });
    if let Some(o) = outcome {
        v["outcome"] = o.as_str().into();
        if let orch_runtime::Outcome::OutOfSequence { expected } = o {
            v["expected"] = expected.names().collect::<Vec<_>>().into();
        }
    }
    if let Some(b) = s.blocked_on() {
        let mut b: Vec<&str> = b.iter().map(ToolEnum::name).collect();
        b.sort_unstable();
        v["blockedOn"] = b.into();
    }
    v
}

fn agree<M: orch_runtime::Machine>(template: &str, messages: &[&str], cases: u32) {
    use orch_runtime::ToolEnum;
    let tools: Vec<&str> = M::Tool::ALL.iter().map(|t| t.name()).collect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("agree");
    std::fs::create_dir_all(&dir).unwrap();
    let tag = template.replace('/', "_");
    let path = dir.join(format!("events-{tag}.jsonl"));
    common::check(cases, common::events(60), |events| {
        let mut s = orch_runtime::Session::<M>::new();
        let mut lines = String::new();
        let mut expected = vec![line(&s, None)];
        for event in &events {
            let (json, outcome) = match event {
                Event::Message(i) => {
                    let m = messages[i.index(messages.len())];
                    s.on_user_message(m);
                    (serde_json::json!({"message": m}), None)
                }
                Event::Tool(_) | Event::Foreign => {
                    let name = match event {
                        Event::Tool(i) => tools[i.index(tools.len())],
                        _ => "weather",
                    };
                    (serde_json::json!({"tool": name}), Some(s.record_name(name)))
                }
                Event::Available(mask) => {
                    let subset: Vec<M::Tool> = M::Tool::ALL
                        .iter()
                        .copied()
                        .filter(|t| Event::keeps(mask, t.index()))
                        .collect();
                    let names: Vec<&str> = subset.iter().map(|t| t.name()).collect();
                    s.set_available(subset);
                    (serde_json::json!({"available": names}), None)
                }
                Event::Usage(p, c) => {
                    s.record_usage(*p, *c);
                    (
                        serde_json::json!({"usage": {"prompt": p, "completion": c}}),
                        None,
                    )
                }
                Event::Reset => {
                    s.reset();
                    (serde_json::json!({"reset": true}), None)
                }
            };
            lines.push_str(&json.to_string());
            lines.push('\n');
            expected.push(line(&s, outcome.as_ref()));
        }
        std::fs::write(&path, &lines).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_orch"))
            .args(["simulate", template, path.to_str().unwrap()])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .unwrap();
        prop_assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        prop_assert_eq!(got.len(), expected.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            prop_assert_eq!(g, e, "{} line {}; events:\n{}", template, i, lines);
        }
        Ok(())
    });
}

const MESSAGES: &[&str] = &[
    "I was charged twice",
    "refund please",
    "cancel my plan",
    "the site is down",
    "thanks!",
    "research",
    "critique it",
    "fresh",
    "fetch",
    "again",
    "nothing",
];

#[test]
fn support_triage() {
    agree::<support_triage::Machine>("examples/agents/support-triage/template.json", MESSAGES, 25);
}

#[test]
fn conformance() {
    agree::<conformance::Machine>("tests/fixtures/machines/conformance.json", MESSAGES, 25);
}
