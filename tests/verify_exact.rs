//! `orch verify`'s explorer is exact: on random small templates, a depth-bounded
//! breadth-first search over the concrete engine (fixed messages, every allowed tool,
//! foreign tools, reset) never reaches a step the explorer called unreachable, nor
//! completes a sequence it said never completes; and every witness the explorer gives
//! replays through the engine to the claimed state (so everything it calls reachable is).

mod common;

use common::MESSAGES;
use orch::dynamic::{DynMachine, DynOutcome, DynSession};
use orch_codegen::verify::explore::{explore, Event, Options};
use proptest::prelude::*;
use std::collections::HashSet;

fn machine(src: &str) -> DynMachine {
    let compiled = orch_codegen::compile_json(src, None);
    assert!(!compiled.has_errors());
    compiled.to_machine().unwrap()
}

/// Explores `m` with the default options and the given host model.
fn explore_with(m: &DynMachine, permissive: bool) -> orch_codegen::verify::explore::Exploration {
    let options = Options {
        permissive,
        ..Options::default()
    };
    explore(m, &options).expect("the patterns are text")
}

#[test]
fn brute_force_never_beats_the_explorer() {
    common::check(
        60,
        (common::template(), any::<bool>()),
        |(src, permissive)| {
            let m = machine(&src);
            let found = explore_with(&m, permissive);
            prop_assert!(found.complete);
            // Witnesses replay.
            for step in &found.steps {
                if let Some(w) = &step.reachable {
                    let mut s = m.session();
                    for e in w {
                        match e {
                            Event::Message(t) => s.on_user_message(t),
                            // (No budgets here: a call's time changes nothing.)
                            Event::Tool(t) | Event::Later(t, _) => {
                                prop_assert!(permissive || s.check(t).is_ok());
                                s.record(t);
                            }
                            Event::ApprovedTool(t) => {
                                prop_assert!(s.check(t).is_err_and(|d| d.needs_approval()));
                                s.record(t);
                            }
                            Event::Reset => s.reset(),
                            Event::Available(l) => s.set_available(l.iter().map(String::as_str)),
                        }
                    }
                    prop_assert_eq!(s.step(), Some(step.name.as_str()));
                }
            }
            // Brute force, 5 events deep.
            let tools: Vec<String> = m
                .tools()
                .iter()
                .cloned()
                .chain(["tool_foreign".to_owned()])
                .collect();
            let mut frontier: Vec<DynSession<'_>> = vec![m.session()];
            let mut seen_steps: HashSet<String> = HashSet::new();
            let mut completed: HashSet<String> = HashSet::new();
            let mut keys: HashSet<Vec<u64>> = HashSet::new();
            let mut key = Vec::new();
            for _ in 0..5 {
                let mut next = Vec::new();
                for s in &frontier {
                    if let Some(st) = s.step() {
                        seen_steps.insert(st.to_owned());
                    }
                    for t in &tools {
                        if !permissive && s.check(t).is_err() {
                            continue;
                        }
                        let mut n = s.clone();
                        let active = n.step().map(str::to_owned);
                        if n.record(t) == DynOutcome::Completed {
                            completed.extend(active);
                        }
                        n.behaviour_key(&mut key);
                        if keys.insert(key.clone()) {
                            next.push(n);
                        }
                    }
                    for msg in MESSAGES {
                        let mut n = s.clone();
                        n.on_user_message(msg);
                        n.behaviour_key(&mut key);
                        if keys.insert(key.clone()) {
                            next.push(n);
                        }
                    }
                }
                frontier = next;
            }
            for s in &frontier {
                if let Some(st) = s.step() {
                    seen_steps.insert(st.to_owned());
                }
            }
            for step in &found.steps {
                if seen_steps.contains(&step.name) {
                    prop_assert!(
                        step.reachable.is_some(),
                        "{} reached by brute force",
                        step.name
                    );
                }
                if completed.contains(&step.name) {
                    prop_assert!(
                        step.completes.is_some(),
                        "{} completed by brute force",
                        step.name
                    );
                }
            }
            Ok(())
        },
    );
}

orch::include_machine!("conformance");
orch::include_machine!("cognitive-reasoner");
orch::include_machine!("support-triage");
orch::include_machine!("sequence-shaped");

/// Replays every witness of `path` through the generated (typed) machine `M`.
fn typed_replay<M: orch::Machine>(path: &str) {
    use orch::{StepEnum, ToolEnum};
    let m = machine(&std::fs::read_to_string(path).unwrap());
    for permissive in [false, true] {
        let found = explore_with(&m, permissive);
        assert!(found.complete, "{path}");
        let replay = |w: &[Event]| {
            let mut s = orch::Session::<M>::new();
            let mut last = None;
            for e in w {
                match e {
                    Event::Message(t) => s.on_user_message(t),
                    // (These fixtures have no budgets: a call's time changes nothing.)
                    Event::Tool(t) | Event::Later(t, _) => {
                        assert!(permissive || s.check_name(t).is_ok(), "{path}: {t} allowed");
                        last = Some(s.record_name(t));
                    }
                    Event::ApprovedTool(t) => {
                        let gated = s.check_name(t).is_err_and(|d| d.needs_approval());
                        assert!(gated, "{path}: {t} gated");
                        last = Some(s.record_name(t));
                    }
                    Event::Reset => s.reset(),
                    Event::Available(l) => s.set_available(
                        l.iter().filter_map(|n| <M::Tool as ToolEnum>::from_name(n)),
                    ),
                }
            }
            (s, last)
        };
        for step in &found.steps {
            if let Some(w) = &step.reachable {
                let (s, _) = replay(w);
                assert_eq!(
                    s.step().map(|x| x.name()),
                    Some(step.name.as_str()),
                    "{path}: {w:?}"
                );
            }
            if let Some(w) = &step.completes {
                let (_, last) = replay(w);
                assert_eq!(last.map(|o| o.as_str()), Some("completed"), "{path}: {w:?}");
            }
        }
    }
}

#[test]
fn witnesses_replay_through_the_typed_api() {
    typed_replay::<conformance::Machine>("tests/fixtures/machines/conformance.json");
    typed_replay::<cognitive_reasoner::Machine>("examples/agents/cognitive-reasoner/template.json");
    typed_replay::<support_triage::Machine>("examples/agents/support-triage/template.json");
    typed_replay::<sequence_shaped::Machine>("tests/fixtures/machines/sequence-shaped.json");
}
