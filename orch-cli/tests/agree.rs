//! `orch simulate` (a template loaded at run time) and the compiled machine (the same
//! template through the macro) produce the same trace for the same events.

use std::process::Command;

orch_macros::orchestration!(file = "../examples/agents/support-triage/template.json");
orch_macros::orchestration!(file = "../tests/fixtures/machines/conformance.json");

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The trace line of SPEC §10 for a compiled session.
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

fn agree<M: orch_runtime::Machine>(template: &str, messages: &[&str], seeds: u64) {
    use orch_runtime::ToolEnum;
    let tools: Vec<&str> = M::Tool::ALL.iter().map(|t| t.name()).collect();
    for seed in 1..=seeds {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut s = orch_runtime::Session::<M>::new();
        let mut events = String::new();
        let mut expected = vec![line(&s, None)];
        for _ in 0..60 {
            let (event, outcome) = match rng.below(9) {
                0..=2 => {
                    let m = messages[rng.below(messages.len())];
                    s.on_user_message(m);
                    (serde_json::json!({"message": m}), None)
                }
                3..=6 => {
                    let name = if rng.below(10) == 0 {
                        "weather"
                    } else {
                        tools[rng.below(tools.len())]
                    };
                    (serde_json::json!({"tool": name}), Some(s.record_name(name)))
                }
                7 => {
                    let subset: Vec<M::Tool> = M::Tool::ALL
                        .iter()
                        .copied()
                        .filter(|_| rng.below(3) != 0)
                        .collect();
                    let names: Vec<&str> = subset.iter().map(|t| t.name()).collect();
                    s.set_available(subset);
                    (serde_json::json!({"available": names}), None)
                }
                _ => {
                    s.reset();
                    (serde_json::json!({"reset": true}), None)
                }
            };
            events.push_str(&event.to_string());
            events.push('\n');
            expected.push(line(&s, outcome.as_ref()));
        }
        let dir = std::env::temp_dir().join(format!("orch-agree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tag = template.replace('/', "_");
        let path = dir.join(format!("events-{tag}-{seed}.jsonl"));
        std::fs::write(&path, &events).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_orch"))
            .args(["simulate", template, path.to_str().unwrap()])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), expected.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "{template} seed {seed}, line {i}; events:\n{events}");
        }
    }
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
