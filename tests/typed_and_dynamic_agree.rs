//! The generated machine (typed `Session`) and the same template loaded at run time
//! (`DynSession` over `Ir::to_tables`) must produce identical traces for any events.

mod common;
use common::Rng;

use orch::dynamic::{DynMachine, DynOutcome};
use orch::{Machine, Outcome, StepEnum, ToolEnum};

orch::include_machine!("conformance");
orch::include_machine!("support-triage");
orch::include_machine!("cognitive-reasoner");
orch::include_machine!("wide");

fn dyn_machine(path: &str) -> DynMachine {
    let src = std::fs::read_to_string(path).unwrap();
    let compiled = orch_codegen::compile_json(&src, None);
    assert!(!compiled.has_errors());
    compiled.to_machine().unwrap()
}

fn outcome_str<T: ToolEnum>(o: &Outcome<T>) -> String {
    match o {
        Outcome::OutOfSequence { expected } => {
            format!("out_of_sequence {:?}", expected.names().collect::<Vec<_>>())
        }
        Outcome::Advanced { index } => format!("advanced {index}"),
        other => other.as_str().to_owned(),
    }
}

fn dyn_outcome_str(o: &DynOutcome) -> String {
    match o {
        DynOutcome::OutOfSequence { expected } => format!("out_of_sequence {expected:?}"),
        DynOutcome::Advanced { index } => format!("advanced {index}"),
        other => other.as_str().to_owned(),
    }
}

fn agree<M: Machine>(path: &str, messages: &[&str], seeds: std::ops::Range<u64>) {
    let machine = dyn_machine(path);
    assert_eq!(
        machine.tables().fingerprint,
        M::tables().fingerprint,
        "same tables"
    );
    let tools: Vec<&str> = M::Tool::ALL.iter().map(|t| t.name()).collect();
    for seed in seeds {
        let mut rng = Rng::new(seed);
        let mut typed = orch::Session::<M>::new();
        let mut dynamic = machine.session();
        for step in 0..200 {
            let ctx = format!("{path} seed {seed} event {step}");
            match rng.below(10) {
                0..=2 => {
                    let m = messages[rng.below(messages.len())];
                    typed.on_user_message(m);
                    dynamic.on_user_message(m);
                }
                3..=7 => {
                    let name = if rng.below(12) == 0 {
                        "foreign_tool"
                    } else {
                        tools[rng.below(tools.len())]
                    };
                    // (A foreign name's availability is the host's business: the typed
                    // session does not track it, so only machine tools are compared.)
                    if name != "foreign_tool" {
                        assert_eq!(
                            typed.check_name(name).is_ok(),
                            dynamic.check(name).is_ok(),
                            "{ctx}: check {name}"
                        );
                    }
                    let a = typed.record_name(name);
                    let b = dynamic.record(name);
                    assert_eq!(outcome_str(&a), dyn_outcome_str(&b), "{ctx}: record {name}");
                }
                8 => {
                    let subset: Vec<M::Tool> = M::Tool::ALL
                        .iter()
                        .copied()
                        .filter(|_| rng.below(4) != 0)
                        .collect();
                    let names: Vec<&str> = subset.iter().map(|t| t.name()).collect();
                    typed.set_available(subset);
                    dynamic.set_available(names);
                }
                _ => {
                    if rng.below(5) == 0 {
                        typed.reset();
                        dynamic.reset();
                    } else {
                        let (p, c) = (rng.below(1000) as u64, rng.below(1000) as u64);
                        typed.record_usage(p, c);
                        dynamic.record_usage(p, c);
                    }
                }
            }
            assert_eq!(
                typed.step().map(StepEnum::name),
                dynamic.step(),
                "{ctx}: step"
            );
            assert_eq!(
                typed.sequence_index(),
                dynamic.sequence_index(),
                "{ctx}: index"
            );
            assert_eq!(typed.usage(), dynamic.usage(), "{ctx}: usage");
            assert_eq!(
                typed.allowed().names().collect::<Vec<_>>(),
                dynamic.allowed(),
                "{ctx}: allowed"
            );
            assert_eq!(
                typed.blocked_on().map(|b| b.names().collect::<Vec<_>>()),
                dynamic.blocked_on(),
                "{ctx}: blocked_on"
            );
            let th: Vec<Option<&str>> = typed
                .history()
                .map(|h| match h {
                    orch::HistoryEntry::Tool(t) => Some(t.name()),
                    orch::HistoryEntry::Foreign => None,
                })
                .collect();
            assert_eq!(th, dynamic.history(), "{ctx}: history");
        }
    }
}

const MESSAGES: &[&str] = &[
    "Research the impact of AI on jobs",
    "critique this",
    "please EVALUATE",
    "something fresh",
    "fetch the page",
    "again",
    "hello",
    "I want a refund",
    "cancel my plan",
    "the service is down",
    "Compare solar and wind",
    "brainstorm and debate",
    "how can cities solve traffic?",
    "tail",
    "hundreds",
    "",
];

#[test]
fn conformance_machine() {
    agree::<conformance::Machine>("tests/fixtures/machines/conformance.json", MESSAGES, 0..150);
}

#[test]
fn support_triage_machine() {
    agree::<support_triage::Machine>(
        "examples/agents/support-triage/template.json",
        MESSAGES,
        0..150,
    );
}

#[test]
fn cognitive_reasoner_machine() {
    agree::<cognitive_reasoner::Machine>(
        "examples/agents/cognitive-reasoner/template.json",
        MESSAGES,
        0..150,
    );
}

#[test]
fn wide_machine() {
    agree::<wide::Machine>("tests/fixtures/machines/wide.json", MESSAGES, 0..60);
}
