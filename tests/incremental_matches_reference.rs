//! The engine keeps conditions as incremental state (a bitset of holding conditions,
//! shift-and sequence matchers, `not_recently_used` counters, one-pass message matching
//! with a literal prefilter). This test compares it, event by event, with the reference
//! model in `common/reference.rs`, which evaluates semantics §4–§8 the straightforward way:
//! random templates × random event streams; after every event the step, the sequence
//! index, `allowed()`, `blocked_on()`, the outcome of a record and `check` of every tool
//! (and of foreign ones) must agree. Every few events the session is also replaced by
//! its own snapshot restored, so the derived state rebuilt from a snapshot is compared
//! too.

mod common;
#[path = "common/reference.rs"]
mod reference;

use common::{Event, MESSAGES};
use orch::dynamic::{DynMachine, DynOutcome, DynSession};
use orch::Refusal;
use proptest::prelude::*;
use reference::{RefDenied, Reference};

/// Foreign tool names: one the random templates' `tool_*` patterns admit, one they do not.
const FOREIGN: [&str; 2] = ["tool_foreign", "other"];

fn machine(src: &str) -> DynMachine {
    let compiled = orch_codegen::compile_json(src, None);
    assert!(!compiled.has_errors(), "generated template is valid: {src}");
    compiled.to_machine().expect("compiles")
}

fn outcome(o: &DynOutcome) -> String {
    match o {
        DynOutcome::OutOfSequence { expected } => format!("out_of_sequence {expected:?}"),
        DynOutcome::Advanced { index } => format!("advanced {index}"),
        other => other.as_str().to_owned(),
    }
}

fn denied(d: Refusal<&str, Vec<&str>>) -> RefDenied {
    match d {
        Refusal::NotInStep { step } => RefDenied::NotInStep(step.to_owned()),
        Refusal::SequenceExpects {
            step,
            index,
            expected,
        } => RefDenied::SequenceExpects {
            step: step.to_owned(),
            index,
            expected: expected.into_iter().map(String::from).collect(),
        },
        Refusal::Unavailable => RefDenied::Unavailable,
        Refusal::NeedsApproval { .. } | Refusal::Rejected { .. } | Refusal::BrokenRule { .. } => {
            panic!("the random templates here have no approval gates and no argument rules")
        }
    }
}

/// Runs `events` on the engine and the reference for the template `src`.
fn agree(src: &str, events: &[Event]) -> Result<(), TestCaseError> {
    let m = machine(src);
    agree_on(&m, &reference::compile_regexes(&m), events)
}

/// Runs `events` on the engine and the reference; `Err` names the first difference.
fn agree_on(
    m: &DynMachine,
    regexes: &[regex::Regex],
    events: &[Event],
) -> Result<(), TestCaseError> {
    let tools: Vec<String> = m.tools().to_vec();
    let mut engine: DynSession<'_> = m.session();
    let mut model = Reference::with_regexes(m, regexes.to_vec());
    let mut host: Vec<&str> = tools.iter().map(String::as_str).chain(FOREIGN).collect();
    engine.set_available(host.iter().copied());
    model.set_available(host.iter().copied());
    for (n, event) in events.iter().enumerate() {
        let ctx = format!("event {n}: {event:?}");
        match event {
            Event::Message(i) => {
                let msg = MESSAGES[i.index(MESSAGES.len())];
                engine.on_user_message(msg);
                model.on_user_message(msg);
            }
            Event::Tool(i) => {
                let name = &tools[i.index(tools.len())];
                prop_assert_eq!(outcome(&engine.record(name)), model.record(name), "{}", ctx);
            }
            Event::Foreign => {
                let name = FOREIGN[n % FOREIGN.len()];
                prop_assert_eq!(outcome(&engine.record(name)), model.record(name), "{}", ctx);
            }
            Event::Available(mask) => {
                host = Event::kept(mask, &tools).chain(FOREIGN).collect();
                engine.set_available(host.iter().copied());
                model.set_available(host.iter().copied());
            }
            Event::Usage(p, c) => engine.record_usage(*p, *c),
            Event::Reset => {
                engine.reset();
                model.reset();
            }
        }
        if n % 5 == 4 {
            // The derived state of a restored session is rebuilt from its history.
            let (restored, report) = DynSession::restore(m, &engine.snapshot())
                .map_err(|e| TestCaseError::fail(format!("{ctx}: restore: {e}")))?;
            prop_assert!(report.is_exact(), "{}: {:?}", ctx, report);
            engine = restored;
        }
        prop_assert_eq!(engine.step(), model.step(), "step after {}", ctx);
        prop_assert_eq!(
            engine.sequence_index(),
            model.sequence_index(),
            "index after {}",
            ctx
        );
        prop_assert_eq!(engine.allowed(), model.allowed(), "allowed after {}", ctx);
        prop_assert_eq!(
            engine
                .blocked_on()
                .map(|b| b.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            model.blocked_on(),
            "blocked_on after {}",
            ctx
        );
        for name in tools.iter().map(String::as_str).chain(FOREIGN) {
            prop_assert_eq!(
                engine.check(name).map_err(denied),
                model.check(name),
                "check {} after {}",
                name,
                ctx
            );
        }
    }
    Ok(())
}

#[test]
fn incremental_engine_matches_the_reference_on_random_templates() {
    common::check(
        400,
        (common::template(), common::events(150)),
        |(src, events)| agree(&src, &events),
    );
}

/// More than 64 steps, atoms and sequence positions: every bitset of the derived state
/// spans several words, and shift-and carries cross word boundaries.
#[test]
fn incremental_engine_matches_the_reference_on_wide_templates() {
    common::check(
        12,
        (common::template_with(20..70, 66..=90), common::events(150)),
        |(src, events)| agree(&src, &events),
    );
}

/// The fixtures in the repository, with their own messages.
#[test]
fn incremental_engine_matches_the_reference_on_the_fixtures() {
    for path in [
        "tests/fixtures/machines/conformance.json",
        "tests/fixtures/machines/sequence-shaped.json",
        "tests/fixtures/machines/sequence-modes.json",
        "tests/fixtures/machines/messages-40.json",
        "examples/agents/cognitive-reasoner/template.json",
        "examples/agents/support-triage/template.json",
    ] {
        let m = machine(&std::fs::read_to_string(path).unwrap());
        let regexes = reference::compile_regexes(&m);
        common::check(60, common::events(200), |events| {
            agree_on(&m, &regexes, &events)
        });
    }
}

/// Sequences packed into the shift-and bitset across word boundaries: 30 steps, step
/// `k` entered by the sequence `t{k}, t{k+1}, t{k+2}` (so step 21's positions are bits
/// 63, 64 and 65). Walking every tool in order completes each sequence in turn.
#[test]
fn sequences_that_straddle_words_match() {
    use serde_json::json;
    let tools: Vec<String> = (0..32).map(|i| format!("t{i}")).collect();
    let mut steps = vec![json!({"name": "Idle", "isDefault": true})];
    for k in 0..30 {
        steps.push(json!({
            "name": format!("S{k}"),
            "conditions": [{"type": "sequence_match"}],
            "sequence": [tools[k], tools[k + 1], tools[k + 2]],
        }));
    }
    let src = json!({"agentId": "straddle", "tools": tools, "orchestration": {"steps": steps}})
        .to_string();
    let m = machine(&src);
    let mut engine = m.session();
    let mut model = Reference::new(&m);
    for (i, tool) in tools.iter().enumerate() {
        let (a, b) = (engine.record(tool), model.record(tool));
        assert_eq!(outcome(&a), b);
        let expected = (i >= 2).then(|| format!("S{}", i - 2));
        assert_eq!(
            engine.step().map(str::to_owned),
            expected.clone().or(Some("Idle".into()))
        );
        assert_eq!(engine.step(), model.step());
    }
    // Each sequence on its own, from a fresh session.
    for k in 0..30 {
        engine.reset();
        for tool in &tools[k..k + 3] {
            engine.record(tool);
        }
        assert_eq!(
            engine.step(),
            Some(format!("S{k}").as_str()),
            "sequence of S{k}"
        );
    }
}
