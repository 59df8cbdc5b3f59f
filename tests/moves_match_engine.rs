//! A small machine records tools by its transition table (`orch_runtime::moves`): one
//! lookup instead of the incremental engine's steps. The table is an optimisation only,
//! so a session with it and a session without it must be indistinguishable: this test
//! runs random templates × random event streams (messages, declared and foreign tools,
//! availability changes, usage, resets, snapshot round trips) on both and compares,
//! after every event, the record's outcome, the whole snapshot and the behaviour key.
//! It also covers a session whose state the table does not hold (a snapshot edited by
//! hand) and the typed sessions generated for the fixtures.

mod common;

use common::{Event, MESSAGES};
use orch::compiled::OwnedMoves;
use orch::dynamic::{DynMachine, DynOutcome, DynSession};
use proptest::prelude::*;

orch::include_machine!("sequence-shaped");
orch::include_machine!("cognitive-reasoner");

const FOREIGN: [&str; 2] = ["tool_foreign", "other"];

/// The machine of `src`, and the same machine without its transition table.
fn machines(src: &str) -> (DynMachine, DynMachine) {
    let compiled = orch_codegen::compile_json(src, None);
    assert!(!compiled.has_errors(), "generated template is valid: {src}");
    let with = compiled.to_machine().expect("compiles");
    let mut tables = with.tables().clone();
    tables.moves = OwnedMoves::default();
    let without = DynMachine::new(tables).expect("compiles");
    (with, without)
}

/// Everything observable of a session: its snapshot (JSON) and behaviour key.
fn observed(s: &DynSession<'_>) -> (String, Vec<u64>) {
    let mut key = Vec::new();
    s.behaviour_key(&mut key);
    (s.snapshot().to_json(), key)
}

/// Runs `events` on both machines; `Err` names the first difference.
fn same(with: &DynMachine, without: &DynMachine, events: &[Event]) -> Result<(), TestCaseError> {
    let tools: Vec<String> = with.tools().to_vec();
    let mut a = with.session();
    let mut b = without.session();
    for (n, event) in events.iter().enumerate() {
        let ctx = format!("event {n}: {event:?}");
        match event {
            Event::Message(i) => {
                let msg = MESSAGES[i.index(MESSAGES.len())];
                a.on_user_message(msg);
                b.on_user_message(msg);
            }
            Event::Tool(i) => {
                let name = &tools[i.index(tools.len())];
                prop_assert_eq!(a.record(name), b.record(name), "{}", ctx);
            }
            Event::Foreign => {
                let name = FOREIGN[n % FOREIGN.len()];
                prop_assert_eq!(a.record(name), b.record(name), "{}", ctx);
            }
            Event::Available(mask) => {
                let host: Vec<&str> = Event::kept(mask, &tools).chain(FOREIGN).collect();
                a.set_available(host.iter().copied());
                b.set_available(host.iter().copied());
            }
            Event::Usage(p, c) => {
                a.record_usage(*p, *c);
                b.record_usage(*p, *c);
            }
            Event::Reset => {
                a.reset();
                b.reset();
            }
        }
        if n % 7 == 6 {
            let (restored, _) = DynSession::restore(with, &a.snapshot())
                .map_err(|e| TestCaseError::fail(format!("{ctx}: restore: {e}")))?;
            a = restored;
        }
        prop_assert_eq!(observed(&a), observed(&b), "after {}", ctx);
        prop_assert_eq!(a.allowed(), b.allowed(), "allowed after {}", ctx);
    }
    Ok(())
}

#[test]
fn tables_record_as_the_engine_does_on_random_templates() {
    common::check(
        300,
        (common::template(), common::events(150)),
        |(src, events)| {
            let (with, without) = machines(&src);
            same(&with, &without, &events)
        },
    );
}

/// Most random templates are small enough for a table: the test above is not vacuous.
#[test]
fn most_random_templates_get_a_table() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = common::template();
    let mut tabled = 0;
    for _ in 0..100 {
        let src = strategy.new_tree(&mut runner).unwrap().current();
        let (with, _) = machines(&src);
        if !with.tables().moves.view().is_empty() {
            tabled += 1;
        }
    }
    assert!(tabled >= 50, "{tabled} of 100 random templates got a table");
}

#[test]
fn tables_record_as_the_engine_does_on_the_fixtures() {
    for path in [
        "tests/fixtures/machines/conformance.json",
        "tests/fixtures/machines/sequence-shaped.json",
        "tests/fixtures/machines/sequence-modes.json",
        "examples/agents/cognitive-reasoner/template.json",
        "examples/agents/support-triage/template.json",
    ] {
        let (with, without) = machines(&std::fs::read_to_string(path).unwrap());
        common::check(60, common::events(200), |events| {
            same(&with, &without, &events)
        });
    }
}

/// A state no event sequence reaches — a snapshot whose step is not the one activation
/// would choose — is not in the table: the session records by the engine, and comes
/// back to the table after the next message.
#[test]
fn a_state_outside_the_table_records_by_the_engine() {
    let src = std::fs::read_to_string("tests/fixtures/machines/sequence-shaped.json").unwrap();
    let (with, without) = machines(&src);
    assert!(!with.tables().moves.view().is_empty());
    let mut s = with.session();
    s.record("search");
    let mut snapshot = s.snapshot();
    let other = with
        .steps()
        .iter()
        .find(|step| Some(step.as_str()) != s.step())
        .cloned();
    snapshot.step = other;
    snapshot.sequence_index = 1;
    let (mut a, _) = DynSession::restore(&with, &snapshot).unwrap();
    let (mut b, _) = DynSession::restore(&without, &snapshot).unwrap();
    for (n, tool) in ["think", "search", "reflect", "think", "compare", "debate"]
        .iter()
        .enumerate()
    {
        if n == 3 {
            a.on_user_message("next");
            b.on_user_message("next");
        }
        assert_eq!(a.record(tool), b.record(tool), "record {tool}");
        assert_eq!(observed(&a), observed(&b), "after {tool}");
    }
}

/// The generated (typed) sessions of two fixtures, which hold their tables as statics,
/// against run-time sessions without a table: the whole outcome (the new index, the
/// expected tools), the host's tools, restores, the snapshot and `allowed()`.
#[test]
fn typed_sessions_record_as_the_engine_does() {
    use orch::{Outcome, ToolEnum};
    fn names<T: ToolEnum>(set: orch::ToolSet<T>) -> Vec<String> {
        set.iter().map(|t| t.name().to_string()).collect()
    }
    fn typed<T: ToolEnum>(o: Outcome<T>) -> DynOutcome {
        match o {
            Outcome::Advanced { index } => DynOutcome::Advanced { index },
            Outcome::Completed => DynOutcome::Completed,
            Outcome::Free => DynOutcome::Free,
            Outcome::NotAllowed => DynOutcome::NotAllowed,
            Outcome::OutOfSequence { expected } => DynOutcome::OutOfSequence {
                expected: names(expected),
            },
        }
    }
    fn run<M: orch::Machine>(path: &str, events: &[Event]) -> Result<(), TestCaseError> {
        let (_, without) = machines(&std::fs::read_to_string(path).unwrap());
        let tools: Vec<String> = without.tools().to_vec();
        let mut a = orch::Session::<M>::new();
        let mut b = without.session();
        for (n, event) in events.iter().enumerate() {
            let ctx = format!("event {n}: {event:?}");
            match event {
                Event::Message(i) => {
                    let msg = MESSAGES[i.index(MESSAGES.len())];
                    a.on_user_message(msg);
                    b.on_user_message(msg);
                }
                Event::Tool(i) => {
                    let name = &tools[i.index(tools.len())];
                    let tool = M::Tool::from_name(name).expect("declared");
                    prop_assert_eq!(typed(a.record(tool)), b.record(name), "{}", ctx);
                }
                Event::Foreign => {
                    let name = FOREIGN[n % FOREIGN.len()];
                    prop_assert_eq!(typed(a.record_name(name)), b.record(name), "{}", ctx);
                }
                Event::Available(mask) => {
                    let kept: Vec<&str> = Event::kept(mask, &tools).collect();
                    a.set_available(kept.iter().filter_map(|t| M::Tool::from_name(t)));
                    b.set_available(kept.iter().copied());
                }
                Event::Reset => {
                    a.reset();
                    b.reset();
                }
                Event::Usage(..) => {}
            }
            if n % 7 == 6 {
                let (restored, _) = orch::Session::<M>::restore(&a.snapshot())
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: restore: {e}")))?;
                a = restored;
            }
            prop_assert_eq!(
                a.snapshot().to_json(),
                b.snapshot().to_json(),
                "after {}",
                ctx
            );
            prop_assert_eq!(names(a.allowed()), b.allowed(), "allowed after {}", ctx);
        }
        Ok(())
    }
    common::check(100, common::events(150), |events| {
        run::<sequence_shaped::Machine>("tests/fixtures/machines/sequence-shaped.json", &events)?;
        run::<cognitive_reasoner::Machine>(
            "examples/agents/cognitive-reasoner/template.json",
            &events,
        )
    });
}
