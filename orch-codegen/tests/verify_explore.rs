//! The explorer of the verifier: every witness it prints replays through the run-time
//! engine to the claimed state, recording only tools that were allowed at that point
//! (unless permissive); and a bounded brute-force search over the concrete engine never
//! reaches a step the explorer called unreachable.

use orch_codegen::verify::explore::{explore, Event, Exploration, Options};
use orch_runtime::dynamic::{DynMachine, DynOutcome, DynSession};

fn machine(src: &str) -> DynMachine {
    let compiled = orch_codegen::compile_json(src, None);
    assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
    compiled.to_machine().unwrap()
}

/// Replays `witness`; returns the session and the last record's outcome.
fn replay<'m>(
    m: &'m DynMachine,
    witness: &[Event],
    permissive: bool,
) -> (DynSession<'m>, Option<DynOutcome>) {
    let mut s = m.session();
    let mut last = None;
    for e in witness {
        match e {
            Event::Available(list) => s.set_available(list.iter().map(String::as_str)),
            Event::Message(text) => s.on_user_message(text),
            // (These templates have no budgets: a call's time changes nothing.)
            Event::Tool(name) | Event::Later(name, _) => {
                assert!(
                    permissive || s.check(name).is_ok(),
                    "{name} is allowed at that point"
                );
                last = Some(s.record(name));
            }
            Event::ApprovedTool(name) => {
                assert!(
                    s.check(name).is_err_and(|d| d.needs_approval()),
                    "{name} is gated at that point"
                );
                last = Some(s.record(name));
            }
            Event::Reset => s.reset(),
        }
    }
    (s, last)
}

fn check_witnesses(m: &DynMachine, found: &Exploration, permissive: bool) {
    for step in &found.steps {
        if let Some(w) = &step.reachable {
            let (s, _) = replay(m, w, permissive);
            assert_eq!(
                s.step(),
                Some(step.name.as_str()),
                "witness of {} {:?}",
                step.name,
                w
            );
        }
        if let Some(w) = &step.completes {
            let (before, _) = replay(m, &w[..w.len() - 1], permissive);
            assert_eq!(before.step(), Some(step.name.as_str()));
            let (_, outcome) = replay(m, w, permissive);
            assert_eq!(
                outcome,
                Some(DynOutcome::Completed),
                "{} completes: {:?}",
                step.name,
                w
            );
        }
    }
    if let Some(w) = &found.blocked {
        assert!(replay(m, w, permissive).0.blocked_on().is_some());
    }
    if let Some(w) = &found.no_tools {
        assert!(replay(m, w, permissive).0.allowed().is_empty());
    }
}

#[test]
fn witnesses_replay_on_the_project_templates() {
    for path in [
        "../examples/agents/cognitive-reasoner/template.json",
        "../examples/agents/support-triage/template.json",
        "../tests/fixtures/machines/conformance.json",
        "../tests/fixtures/machines/sequence-shaped.json",
        "../tests/fixtures/machines/sequence-modes.json",
        "../tests/fixtures/machines/no-default.json",
    ] {
        let m = machine(&std::fs::read_to_string(path).unwrap());
        for permissive in [false, true] {
            let found = explore(
                &m,
                &Options {
                    permissive,
                    ..Options::default()
                },
            )
            .unwrap();
            assert!(found.complete, "{path}: {} states", found.states);
            check_witnesses(&m, &found, permissive);
            // Every step of these templates can become active.
            for s in &found.steps {
                assert!(s.reachable.is_some(), "{path}: {} unreachable", s.name);
            }
        }
    }
}

#[test]
fn finds_dead_steps_and_sequences_that_never_complete() {
    let src = r#"{"agentId": "dead", "tools": ["search", "audit", "answer"],
      "orchestration": {"steps": [
        {"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search", "answer"]}},
        {"name": "Audit Desk", "conditions": [{"type": "message_regex", "value": "^a"}, {"type": "message_regex", "value": "^b"}],
         "availableTools": {"allowed": ["audit"]}},
        {"name": "Review", "conditions": [{"type": "tool_used", "value": "audit"}]},
        {"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}],
         "sequence": ["search", "answer"], "availableTools": {"allowed": ["search", "answer"]}}
      ]}}"#;
    let m = machine(src);
    let found = explore(&m, &Options::default()).unwrap();
    assert!(found.complete);
    check_witnesses(&m, &found, false);
    let by = |n: &str| found.steps.iter().find(|s| s.name == n).unwrap();
    assert!(
        by("Audit Desk").reachable.is_none(),
        "`^a` and `^b` never hold together"
    );
    assert!(
        by("Review").reachable.is_none(),
        "`audit` is allowed only in a dead step"
    );
    assert!(by("Research").completes.is_some());
    // Once `Research` is active nothing but `reset` leaves it (the default never comes
    // back, the other steps are dead); `Chat` is left by a message.
    assert!(by("Research").traps);
    assert!(!by("Chat").traps);
    // A host that does not enforce can run `audit` anywhere.
    let permissive = explore(
        &m,
        &Options {
            permissive: true,
            ..Options::default()
        },
    )
    .unwrap();
    check_witnesses(&m, &permissive, true);
    assert!(permissive
        .steps
        .iter()
        .find(|s| s.name == "Review")
        .unwrap()
        .reachable
        .is_some());
    // Without `answer` available, Research's sequence never completes and blocks.
    let narrow = Options {
        available: Some(vec!["search".into(), "audit".into()]),
        ..Options::default()
    };
    let found = explore(&m, &narrow).unwrap();
    check_witnesses(&m, &found, false);
    assert!(by_name(&found, "Research").completes.is_none());
    assert!(found.blocked.is_some());
}

fn by_name<'a>(found: &'a Exploration, n: &str) -> &'a orch_codegen::verify::explore::StepFinding {
    found.steps.iter().find(|s| s.name == n).unwrap()
}

#[test]
fn reasons_name_the_earlier_step_that_wins() {
    let src = r#"{"agentId": "shadow", "tools": ["search", "think"],
      "orchestration": {"steps": [
        {"name": "Chat", "isDefault": true},
        {"name": "Broad", "conditions": [{"type": "message_regex", "value": "(?i)plan"}]},
        {"name": "Narrow", "conditions": [{"type": "message_contains", "value": "planning"}]},
        {"name": "Bare"}
      ]}}"#;
    let m = machine(src);
    let found = explore(&m, &Options::default()).unwrap();
    let by = |n: &str| found.steps.iter().find(|s| s.name == n).unwrap();
    assert_eq!(
        by("Narrow").reason.as_deref(),
        Some("its conditions hold together, but an earlier step wins then (for example `Broad`)")
    );
    assert_eq!(
        by("Bare").reason.as_deref(),
        Some("it has no conditions and is not the default step")
    );
    assert!(by("Broad").reason.is_none());
}

#[test]
fn foreign_tools_are_decided_exactly() {
    // `Start` admits foreign names matching `z*` unless they end in `foreign` or in
    // U+0001: the two names the explorer used to try (`zforeign`, `z\u{1}`) are both
    // denied, yet `z` itself is admitted. Recording any foreign tool pushes `probe` out of
    // the one-entry window, which is the only way into `Later`.
    let src = r#"{"name": "foreign-reach", "tools": ["probe"],
      "orchestration": {"steps": [
        {"name": "Start", "isDefault": true,
         "availableTools": {"allowed": ["probe", "z*"], "denied": ["*foreign", "*\u0001"]}},
        {"name": "Later",
         "conditions": [{"type": "tool_used", "value": "probe"},
                        {"type": "not_recently_used", "value": "probe", "window": 1}],
         "availableTools": {"allowed": ["probe"]}}]}}"#;
    let m = machine(src);
    let found = explore(&m, &Options::default()).unwrap();
    assert!(found.complete);
    let later = by_name(&found, "Later");
    let witness = later.reachable.as_ref().expect("`Later` is reachable");
    assert_eq!(
        witness,
        &[Event::Tool("probe".into()), Event::Tool("z".into())],
        "a shortest witness, through an admitted foreign name"
    );
    check_witnesses(&m, &found, false);
    // And the lint that rests on the explorer stays silent.
    let compiled = orch_codegen::compile_json(src, None);
    assert!(
        !compiled
            .diagnostics
            .iter()
            .any(|d| d.code.as_str() == "W007"),
        "{:?}",
        compiled.diagnostics
    );
}

/// Thirty-two message regexes of the costly kind: twenty Unicode word characters, a
/// letter, a digit and one of ten script classes.
fn costly_template() -> String {
    let scripts = [
        "Greek",
        "Cyrillic",
        "Arabic",
        "Hebrew",
        "Han",
        "Hiragana",
        "Katakana",
        "Thai",
        "Devanagari",
        "Hangul",
    ];
    let mut steps = vec![
        r#"{"name": "Idle", "isDefault": true, "availableTools": {"allowed": ["a"]}}"#.to_owned(),
    ];
    for i in 0..32 {
        // JSON-escaped: `\\w{20}` is `\w{20}` in the pattern.
        let regex = format!(
            "\\\\w{{20}}{}{}\\\\p{{{}}}",
            char::from(b'a' + (i % 26) as u8),
            i % 10,
            scripts[i % 10]
        );
        steps.push(format!(
            r#"{{"name": "S{i}", "conditions": [{{"type": "message_regex", "value": "{regex}"}}],
               "availableTools": {{"allowed": ["a"]}}}}"#
        ));
    }
    format!(
        r#"{{"name": "costly", "tools": ["a"], "orchestration": {{"steps": [{}]}}}}"#,
        steps.join(",")
    )
}

#[test]
fn work_not_states_bounds_the_exploration() {
    use orch_codegen::verify::explore::DEFAULT_WORK;
    let src = costly_template();
    let m = machine(&src);
    // However many states it may visit, the exploration stops at its work budget, and
    // says it is incomplete (so nothing is called unreachable).
    for max_states in [1_000, usize::MAX] {
        let options = Options {
            max_states,
            ..Options::default()
        };
        let found = explore(&m, &options).unwrap();
        assert!(!found.complete, "max_states {max_states}");
        assert!(found.work <= DEFAULT_WORK + 1_000_000, "{}", found.work);
        assert!(found.steps.iter().all(|s| s.reason.is_none()));
    }
    // A smaller budget is honoured too; counted, not timed: the same answer every time.
    let small = Options {
        max_work: 100_000,
        ..Options::default()
    };
    let a = explore(&m, &small).unwrap();
    let b = explore(&m, &small).unwrap();
    assert!(!a.complete && a.work <= 200_000, "{}", a.work);
    assert_eq!((a.work, a.states), (b.work, b.states));
    // And the lints stay silent.
    let compiled = orch_codegen::compile_json(&src, None);
    assert!(!compiled
        .diagnostics
        .iter()
        .any(|d| matches!(d.code.as_str(), "W007" | "W008")));
}
