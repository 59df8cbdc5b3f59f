//! A fuzz-style property run: mutated templates (flipped, deleted and inserted bytes in
//! valid random templates), arbitrary messages and events, mutated and arbitrary
//! snapshots, and arbitrary macro input — through the compiler, the emitter, sessions
//! and the snapshot decoders. Every case counts the panics it caught; the total must
//! be zero (and a case that panics is shrunk to its smallest form).

mod common;
use common::Event;

use orch::dynamic::DynSession;
use orch::Snapshot;
use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One change to a text's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Delete(prop::sample::Index),
    Insert(prop::sample::Index, &'static str),
}

const INSERTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "-1",
    "1e400",
    "18446744073709551616",
    "\u{feff}",
    "\\u0000",
    "\u{202e}",
    "*",
    "\"type\"",
    "\"tool_used\"",
    "\"sequence_match\"",
    "\n",
    "ß",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Delete),
        (any::<prop::sample::Index>(), prop::sample::select(INSERTS))
            .prop_map(|(i, s)| Mutation::Insert(i, s)),
    ]
}

fn mutate(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        if bytes.is_empty() {
            return;
        }
        match m {
            Mutation::Flip(i, b) => {
                let i = i.index(bytes.len());
                bytes[i] ^= b | 1;
            }
            Mutation::Delete(i) => {
                bytes.remove(i.index(bytes.len()));
            }
            Mutation::Insert(i, s) => {
                let at = i.index(bytes.len());
                bytes.splice(at..at, s.bytes());
            }
        }
    }
}

/// Runs `f`, counting a panic instead of unwinding.
fn guarded(panics: &AtomicUsize, f: impl FnOnce()) -> Result<(), TestCaseError> {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        panics.fetch_add(1, Ordering::SeqCst);
        return Err(TestCaseError::fail("panicked"));
    }
    Ok(())
}

/// Drives a session with events and arbitrary messages, snapshotting on the way.
fn drive(machine: &orch::dynamic::DynMachine, events: &[(Event, String)]) {
    let tools: Vec<String> = machine.tools().to_vec();
    let mut s = machine.session();
    for (event, text) in events {
        match event {
            Event::Message(_) => s.on_user_message(text),
            Event::Tool(i) if !tools.is_empty() => {
                let t = &tools[i.index(tools.len())];
                let _ = s.check(t);
                s.record(t);
            }
            Event::Tool(_) | Event::Foreign => {
                let _ = s.check(text);
                s.record(text);
            }
            Event::Available(mask) => {
                let keep: Vec<&str> = Event::kept(mask, &tools).chain([text.as_str()]).collect();
                s.set_available(keep);
            }
            Event::Usage(p, c) => s.record_usage(*p, *c),
            Event::Reset => s.reset(),
        }
        let _ = s.allowed();
        let _ = s.blocked_on();
        let snap = s.snapshot();
        let back = Snapshot::from_bytes(&snap.to_bytes()).expect("own snapshot decodes");
        let (restored, _) = DynSession::restore(machine, &back).expect("own snapshot restores");
        assert_eq!(restored.snapshot(), snap);
        let json = Snapshot::from_json(&snap.to_json()).expect("own JSON decodes");
        assert_eq!(json, snap);
    }
}

#[test]
fn mutated_templates_and_arbitrary_events_never_panic() {
    let panics = AtomicUsize::new(0);
    let strategy = (
        common::template(),
        prop::collection::vec(mutation(), 0..6),
        prop::collection::vec((common::event(), ".{0,40}"), 0..40),
    );
    common::check(400, strategy, |(src, mutations, events)| {
        let mut bytes = src.into_bytes();
        mutate(&mut bytes, &mutations);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        guarded(&panics, || {
            let compiled = orch_codegen::compile_json(&text, None);
            let source = orch_codegen::diagnostic::SourceText::new(&text);
            for d in &compiled.diagnostics {
                let _ = orch_codegen::diagnostic::render(d, "t.json", &source, false);
                let _ = orch_codegen::diagnostic::one_line(d, "t.json", &source);
            }
            let _ = orch_codegen::emit::pretty(
                &compiled,
                orch_codegen::emit::Origin::File("t.json"),
                &orch_codegen::emit::runtime_path("::orch").expect("a path"),
            );
            if let Some(machine) = compiled.to_machine() {
                drive(&machine, &events);
            }
        })
    });
    assert_eq!(panics.load(Ordering::SeqCst), 0);
}

#[test]
fn mutated_and_arbitrary_snapshots_never_panic() {
    let panics = AtomicUsize::new(0);
    let machine = orch_codegen::compile_json(
        &std::fs::read_to_string("examples/agents/support-triage/template.json").unwrap(),
        None,
    )
    .to_machine()
    .unwrap();
    let mut s = machine.session();
    s.on_user_message("I was charged twice");
    for t in ["crm_lookup", "refund_check", "weather"] {
        s.record(t);
    }
    let (bytes, json) = (s.snapshot().to_bytes(), s.snapshot().to_json());
    let strategy = (
        prop::collection::vec(mutation(), 1..6),
        prop::collection::vec(any::<u8>(), 0..300),
    );
    common::check(1000, strategy, |(mutations, random)| {
        guarded(&panics, || {
            for mut input in [bytes.clone(), json.clone().into_bytes()] {
                mutate(&mut input, &mutations);
                if let Ok(snap) = Snapshot::from_bytes(&input) {
                    let _ = DynSession::restore(&machine, &snap);
                }
                if let Ok(snap) = Snapshot::from_json(&String::from_utf8_lossy(&input)) {
                    let _ = DynSession::restore(&machine, &snap);
                }
            }
            let mut random_snapshot = b"orch".to_vec();
            random_snapshot.extend_from_slice(&random);
            for input in [random.as_slice(), random_snapshot.as_slice()] {
                if let Ok(snap) = Snapshot::from_bytes(input) {
                    let _ = DynSession::restore(&machine, &snap);
                }
            }
        })
    });
    assert_eq!(panics.load(Ordering::SeqCst), 0);
}

#[test]
fn arbitrary_macro_input_never_panics() {
    let panics = AtomicUsize::new(0);
    let base = "machine m { tools: [a, b]; default step Idle; step Go { when tool_used(a); when not_recently_used(b, window = 2); sequence: [a, (a | b)]; allow: [\"*\"]; deny: [b]; reset_sequence_on: [user_message]; } }";
    common::check(300, prop::collection::vec(mutation(), 0..5), |mutations| {
        let mut bytes = base.as_bytes().to_vec();
        mutate(&mut bytes, &mutations);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let Ok(tokens) = text.parse::<proc_macro2::TokenStream>() else {
            return Ok(());
        };
        guarded(&panics, || {
            let _ = orch_codegen::__private::orchestration(tokens);
        })
    });
    assert_eq!(panics.load(Ordering::SeqCst), 0);
}
