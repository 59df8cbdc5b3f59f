//! Snapshots (SPEC §9): snapshot → restore → continue is indistinguishable from never
//! snapshotting (random events on compiled machines, and on random templates loaded at
//! run time); restoring into a changed template maps by name and reports the rest;
//! malformed, truncated or hostile data is an error, never a panic.

mod common;
use common::Rng;

use orch::dynamic::{DynMachine, DynSession};
use orch::{RestoreError, Snapshot};

orch::include_machine!("conformance");
orch::include_machine!("support-triage");

/// Through one of the two encodings and back.
fn round_trip(s: &Snapshot, rng: &mut Rng) -> Snapshot {
    if rng.below(2) == 0 {
        Snapshot::from_bytes(&s.to_bytes()).expect("binary round trip")
    } else {
        Snapshot::from_json(&s.to_json()).expect("json round trip")
    }
}

const MESSAGES: &[&str] = &[
    "research",
    "critique it",
    "EVALUATE",
    "fresh",
    "fetch",
    "again",
    "refund",
    "cancel",
    "down",
    "hi",
    "",
];

fn typed<M: orch::Machine>(seeds: u64) {
    use orch::ToolEnum;
    for seed in 1..=seeds {
        let mut rng = Rng::new(seed);
        let mut plain = orch::Session::<M>::new();
        let mut restored = orch::Session::<M>::new();
        for event in 0..200 {
            match rng.below(8) {
                0 | 1 => {
                    let m = MESSAGES[rng.below(MESSAGES.len())];
                    plain.on_user_message(m);
                    restored.on_user_message(m);
                }
                2 => {
                    let keep: Vec<M::Tool> = M::Tool::ALL
                        .iter()
                        .copied()
                        .filter(|_| rng.below(3) > 0)
                        .collect();
                    plain.set_available(keep.iter().copied());
                    restored.set_available(keep);
                }
                3 => {
                    plain.record_usage(7, 3);
                    restored.record_usage(7, 3);
                }
                _ => {
                    let name = if rng.below(10) == 0 {
                        "foreign"
                    } else {
                        M::Tool::ALL[rng.below(M::Tool::ALL.len())].name()
                    };
                    assert_eq!(
                        plain.record_name(name),
                        restored.record_name(name),
                        "seed {seed} event {event}"
                    );
                }
            }
            if rng.below(4) == 0 {
                let snap = round_trip(&restored.snapshot(), &mut rng);
                let (s, report) = orch::Session::<M>::restore(&snap).expect("restores");
                assert!(report.is_exact(), "{report:?}");
                restored = s;
            }
            assert_eq!(plain, restored, "seed {seed} event {event}");
        }
    }
}

#[test]
fn typed_sessions_survive_snapshots() {
    typed::<conformance::Machine>(60);
    typed::<support_triage::Machine>(60);
}

/// A random valid template: tools, steps with random conditions, sequences (with
/// groups), allow/deny lists (with patterns) and resets.
fn random_template(rng: &mut Rng) -> String {
    let n_tools = 2 + rng.below(9);
    let tools: Vec<String> = (0..n_tools).map(|i| format!("tool_{i}")).collect();
    let pick = |rng: &mut Rng| tools[rng.below(tools.len())].clone();
    let mut steps = vec![serde_json::json!({"name": "Default", "isDefault": true})];
    for s in 0..1 + rng.below(6) {
        let mut step = serde_json::json!({"name": format!("Step{s}")});
        let mut seq: Vec<serde_json::Value> = Vec::new();
        if rng.below(2) == 0 {
            for _ in 0..1 + rng.below(3) {
                if rng.below(4) == 0 {
                    seq.push(serde_json::json!([pick(rng), pick(rng)]));
                } else {
                    seq.push(pick(rng).into());
                }
            }
            step["sequence"] = seq.clone().into();
        }
        let mut conds = Vec::new();
        for _ in 0..1 + rng.below(2) {
            conds.push(match rng.below(5) {
                0 => serde_json::json!({"type": "tool_used", "value": pick(rng)}),
                1 if !seq.is_empty() => serde_json::json!({"type": "sequence_match"}),
                2 => serde_json::json!({"type": "message_contains", "value": MESSAGES[rng.below(6)]}),
                3 => serde_json::json!({"type": "message_regex", "value": format!("(?i)^{}", MESSAGES[rng.below(6)])}),
                _ => serde_json::json!({"type": "not_recently_used", "value": pick(rng), "window": 1 + rng.below(4)}),
            });
        }
        step["conditions"] = conds.into();
        if rng.below(3) == 0 && seq.is_empty() {
            step["availableTools"] =
                serde_json::json!({"allowed": ["tool_*"], "denied": [pick(rng)]});
        }
        if rng.below(3) == 0 {
            let trigger = ["user_message", "message_contains", "message_regex"][rng.below(3)];
            step["resetSequenceOn"] = serde_json::json!([trigger]);
        }
        steps.push(step);
    }
    serde_json::json!({"agentId": "random", "tools": tools, "orchestration": {"steps": steps}})
        .to_string()
}

#[test]
fn random_templates_survive_snapshots() {
    let mut compiled = 0;
    for seed in 1..=150u64 {
        let mut rng = Rng::new(seed);
        let src = random_template(&mut rng);
        let c = orch_codegen::compile_json(&src, None);
        let Some(machine) = c.to_machine() else {
            continue;
        };
        compiled += 1;
        let tools: Vec<String> = machine.tables().tools.clone();
        let mut plain: DynSession<'_> = machine.session();
        let mut restored = machine.session();
        for event in 0..120 {
            match rng.below(6) {
                0 | 1 => {
                    let m = MESSAGES[rng.below(MESSAGES.len())];
                    plain.on_user_message(m);
                    restored.on_user_message(m);
                }
                2 if rng.below(4) == 0 => {
                    plain.reset();
                    restored.reset();
                }
                _ => {
                    let t = &tools[rng.below(tools.len())];
                    assert_eq!(
                        plain.record(t),
                        restored.record(t),
                        "seed {seed} event {event}\n{src}"
                    );
                }
            }
            if rng.below(3) == 0 {
                let snap = round_trip(&restored.snapshot(), &mut rng);
                let (s, report) = DynSession::restore(&machine, &snap).expect("restores");
                assert!(report.is_exact(), "{report:?}");
                restored = s;
            }
            assert_eq!(
                plain.snapshot(),
                restored.snapshot(),
                "seed {seed} event {event}\n{src}"
            );
            assert_eq!(plain.allowed(), restored.allowed());
        }
    }
    assert!(compiled > 100, "only {compiled} random templates compiled");
}

fn dyn_machine(src: &str) -> DynMachine {
    orch_codegen::compile_json(src, None)
        .to_machine()
        .expect("compiles")
}

#[test]
fn restoring_into_a_changed_template_maps_by_name_and_reports() {
    let original = std::fs::read_to_string("tests/fixtures/machines/conformance.json").unwrap();
    let mut s = conformance::Session::new();
    s.on_user_message("fetch it");
    s.record(conformance::Tool::WebFetch);
    s.record(conformance::Tool::Danger);
    let snap = s.snapshot();
    assert_eq!(snap.step.as_deref(), Some("Fetch"));

    // Same template at run time: exact.
    let same = dyn_machine(&original);
    let (_, report) = DynSession::restore(&same, &snap).unwrap();
    assert!(report.is_exact(), "{report:?}");

    // The template changed: `Fetch` and `danger` are gone, a condition changed.
    let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
    v["tools"] = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| *t != "danger")
        .cloned()
        .collect();
    let steps: Vec<serde_json::Value> = v["orchestration"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] != "Fetch")
        .cloned()
        .collect();
    v["orchestration"]["steps"] = steps.into();
    for step in v["orchestration"]["steps"].as_array_mut().unwrap() {
        if step["name"] == "Fresh" {
            step["availableTools"]["denied"] = serde_json::json!(["web_*"]);
        }
    }
    let changed = dyn_machine(&v.to_string());
    let (session, report) = DynSession::restore(&changed, &snap).unwrap();
    assert!(report.fingerprint_changed);
    assert_eq!(report.missing_step.as_deref(), Some("Fetch"));
    assert_eq!(
        session.step(),
        Some("Idle"),
        "falls back to the default step"
    );
    assert_eq!(session.sequence_index(), 0);
    assert_eq!(report.missing_tools, ["danger"]);
    assert_eq!(
        session.history(),
        [Some("web_fetch"), None],
        "a removed tool stays in the history as a foreign entry"
    );
    assert_eq!(report.missing_conditions, ["contains:fetch"]);
    assert!(report.lost_anything());

    // Another machine entirely is an error.
    let other = dyn_machine(r#"{"agentId": "other", "orchestration": {"steps": []}}"#);
    assert!(matches!(
        DynSession::restore(&other, &snap),
        Err(RestoreError::OtherMachine { .. })
    ));
}

#[test]
fn malformed_and_hostile_data_is_an_error_never_a_panic() {
    let mut s = support_triage::Session::new();
    s.on_user_message("I was charged twice");
    s.record(support_triage::Tool::CrmLookup);
    s.record_name("weather");
    s.record_usage(1000, 200);
    let bytes = s.snapshot().to_bytes();

    // Every truncation, and every single-byte corruption.
    for n in 0..bytes.len() {
        assert!(Snapshot::from_bytes(&bytes[..n]).is_err(), "prefix {n}");
    }
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= flip;
            if let Ok(snap) = Snapshot::from_bytes(&b) {
                // A corruption that still decodes must restore or fail cleanly.
                let _ = support_triage::Session::restore(&snap);
            }
        }
    }
    // A count far larger than the input.
    let mut hostile = b"orch\x01".to_vec();
    hostile.extend_from_slice(&[0; 8]);
    hostile.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // machine name of 4 GB
    let err = Snapshot::from_bytes(&hostile).unwrap_err();
    assert!(err.to_string().contains("only 0 bytes remain"), "{err}");
    assert!(matches!(
        Snapshot::from_bytes(b"nope"),
        Err(RestoreError::Malformed(_))
    ));
    assert!(matches!(
        Snapshot::from_bytes(b"orch\x09"),
        Err(RestoreError::UnsupportedVersion(9))
    ));
    assert!(matches!(
        Snapshot::from_bytes(&vec![0u8; 2 << 20]),
        Err(RestoreError::TooLarge(_))
    ));
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(Snapshot::from_bytes(&trailing).is_err());

    // JSON: wrong types, unknown fields, unknown version, huge input.
    let json = s.snapshot().to_json();
    for bad in [
        json.replace("\"version\":1", "\"version\":2"),
        json.replace("\"sequenceIndex\":1", "\"sequenceIndex\":\"x\""),
        json.replace("\"machine\"", "\"extra\":1,\"machine\""),
        json[..json.len() / 2].to_owned(),
        "[]".to_owned(),
        format!(
            "{{\"version\":1,\"history\":[{}]}}",
            ["\"x\""; 10].join(",")
        ),
    ] {
        assert!(Snapshot::from_json(&bad).is_err(), "{bad}");
    }
    let huge = format!("[{}]", vec!["1"; 600_000].join(","));
    assert!(matches!(
        Snapshot::from_json(&huge),
        Err(RestoreError::TooLarge(_))
    ));
    // A long history is cut to the machine's capacity, oldest first, and reported.
    let mut snap = s.snapshot();
    snap.history = vec![Some("kb_search".to_owned()); 50];
    let (restored, report) = support_triage::Session::restore(&snap).unwrap();
    assert_eq!(report.history_truncated, 30);
    assert_eq!(restored.history().count(), 20);
}

#[test]
fn agentdock_view() {
    let mut s = support_triage::Session::new();
    s.on_user_message("cancel my plan");
    for t in ["crm_lookup", "ticket_create", "crm_lookup"] {
        s.record_name(t);
    }
    s.record_usage(100, 20);
    let v = serde_json::to_value(s.agentdock_view("abc")).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "sessionId": "abc",
            "recentlyUsedTools": ["crm_lookup", "ticket_create"],
            "activeStep": "Cancellation",
            "sequenceIndex": 2,
            "cumulativeTokenUsage": {"promptTokens": 100, "completionTokens": 20, "totalTokens": 120}
        })
    );
}

#[test]
fn encoded_sizes() {
    let mut s = support_triage::Session::new();
    s.on_user_message("I was charged twice");
    for t in [
        "crm_lookup",
        "refund_check",
        "refund_issue",
        "send_email",
        "kb_search",
    ] {
        s.record_name(t);
    }
    s.record_usage(5120, 812);
    let snap = s.snapshot();
    let (bin, json) = (snap.to_bytes().len(), snap.to_json().len());
    println!("support-triage snapshot: binary {bin} bytes, JSON {json} bytes");
    assert!(bin < json / 2, "binary {bin} vs json {json}");
    assert!(bin < 200, "{bin}");
}
