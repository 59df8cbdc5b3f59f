//! Snapshots (semantics §9): snapshot → restore → continue is indistinguishable from never
//! snapshotting (random events on compiled machines, and on random templates loaded at
//! run time); restoring into a changed template maps by name and reports the rest;
//! malformed, truncated or hostile data is an error, never a panic.

mod common;
use common::Event;
use proptest::prelude::*;

use orch::dynamic::{DynMachine, DynSession};
use orch::{RestoreError, Snapshot};

orch::include_machine!("conformance");
orch::include_machine!("support-triage");

/// Through one of the two encodings and back.
fn round_trip(s: &Snapshot, binary: bool) -> Snapshot {
    if binary {
        Snapshot::from_bytes(&s.to_bytes()).expect("binary round trip")
    } else {
        Snapshot::from_json(&s.to_json()).expect("json round trip")
    }
}

use common::MESSAGES;

/// Events, each followed (or not) by a snapshot through one encoding (`Some(binary)`).
fn events_with_snapshots(max: usize) -> impl Strategy<Value = Vec<(Event, Option<bool>)>> {
    prop::collection::vec(
        (common::event(), prop::option::weighted(0.3, any::<bool>())),
        0..=max,
    )
}

fn typed<M: orch::Machine>(cases: u32) {
    use orch::ToolEnum;
    common::check(cases, events_with_snapshots(200), |events| {
        let mut plain = orch::Session::<M>::new();
        let mut restored = orch::Session::<M>::new();
        for (n, (event, snapshot)) in events.iter().enumerate() {
            match event {
                Event::Message(i) => {
                    let m = MESSAGES[i.index(MESSAGES.len())];
                    plain.on_user_message(m);
                    restored.on_user_message(m);
                }
                Event::Available(mask) => {
                    let keep: Vec<M::Tool> = M::Tool::ALL
                        .iter()
                        .copied()
                        .filter(|t| Event::keeps(mask, t.index()))
                        .collect();
                    plain.set_available(keep.iter().copied());
                    restored.set_available(keep);
                }
                Event::Usage(p, c) => {
                    plain.record_usage(*p, *c);
                    restored.record_usage(*p, *c);
                }
                Event::Reset => {
                    plain.reset();
                    restored.reset();
                }
                Event::Tool(_) | Event::Foreign => {
                    let name = match event {
                        Event::Tool(i) => M::Tool::ALL[i.index(M::Tool::ALL.len())].name(),
                        _ => "foreign",
                    };
                    prop_assert_eq!(
                        plain.record_name(name),
                        restored.record_name(name),
                        "event {}",
                        n
                    );
                }
            }
            if let Some(binary) = snapshot {
                let snap = round_trip(&restored.snapshot(), *binary);
                let (s, report) = orch::Session::<M>::restore(&snap).expect("restores");
                prop_assert!(report.is_exact(), "{:?}", report);
                restored = s;
            }
            prop_assert_eq!(plain, restored, "event {}", n);
        }
        Ok(())
    });
}

#[test]
fn typed_sessions_survive_snapshots() {
    typed::<conformance::Machine>(60);
    typed::<support_triage::Machine>(60);
}

#[test]
fn random_templates_survive_snapshots() {
    let strategy = (common::template(), events_with_snapshots(120));
    common::check(150, strategy, |(src, events)| {
        let c = orch_codegen::compile_json(&src, None);
        prop_assert!(!c.has_errors(), "{:#?}", c.diagnostics);
        let machine = c.to_machine().expect("compiles");
        let tools: Vec<String> = machine.tools().to_vec();
        let mut plain: DynSession<'_> = machine.session();
        let mut restored = machine.session();
        for (n, (event, snapshot)) in events.iter().enumerate() {
            match event {
                Event::Message(i) => {
                    let m = MESSAGES[i.index(MESSAGES.len())];
                    plain.on_user_message(m);
                    restored.on_user_message(m);
                }
                Event::Reset => {
                    plain.reset();
                    restored.reset();
                }
                Event::Usage(p, c) => {
                    plain.record_usage(*p, *c);
                    restored.record_usage(*p, *c);
                }
                Event::Available(mask) => {
                    let keep: Vec<&str> = Event::kept(mask, &tools)
                        .chain(Some("foreign").filter(|_| Event::keeps(mask, tools.len())))
                        .collect();
                    plain.set_available(keep.iter().copied());
                    restored.set_available(keep);
                }
                Event::Tool(_) | Event::Foreign => {
                    let t = match event {
                        Event::Tool(i) => tools[i.index(tools.len())].as_str(),
                        _ => "foreign",
                    };
                    prop_assert_eq!(plain.record(t), restored.record(t), "event {}", n);
                }
            }
            if let Some(binary) = snapshot {
                let snap = round_trip(&restored.snapshot(), *binary);
                let (s, report) = DynSession::restore(&machine, &snap).expect("restores");
                prop_assert!(report.is_exact(), "{:?}", report);
                restored = s;
            }
            prop_assert_eq!(plain.snapshot(), restored.snapshot(), "event {}", n);
            prop_assert_eq!(plain.allowed(), restored.allowed(), "event {}", n);
        }
        Ok(())
    });
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

/// Appends `n` as the encoding's varint (7 bits a byte, low first).
fn varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
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
    // The checksum makes every corruption an error: every bit of every byte, and
    // every byte value at every position.
    for i in 0..bytes.len() {
        for flip in (0..8).map(|bit| 1u8 << bit).chain([0xffu8, 0x5a]) {
            let mut b = bytes.clone();
            b[i] ^= flip;
            assert!(
                Snapshot::from_bytes(&b).is_err(),
                "byte {i} ^ {flip:#x} decoded"
            );
        }
    }
    let mut b = bytes.clone();
    let last = b.len() - 5;
    b[last] ^= 1;
    let err = Snapshot::from_bytes(&b).unwrap_err();
    assert!(err.to_string().contains("checksum does not match"), "{err}");
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

    // One long name referenced by every history entry: decoding stops at the bound
    // instead of copying the name per entry (500 KB × 540k entries).
    let mut hostile = b"orch\x01".to_vec();
    hostile.extend_from_slice(&0u64.to_le_bytes());
    hostile.extend_from_slice(&[1, b'm', 0, 0, 0, 0, 1]); // machine "m", no step, index/usage 0, one name
    let name_len: u32 = 500_000;
    varint(&mut hostile, u64::from(name_len));
    hostile.extend(std::iter::repeat_n(b'x', name_len as usize));
    let entries = (1 << 20) - hostile.len() - 16;
    varint(&mut hostile, entries as u64);
    hostile.extend(std::iter::repeat_n(1u8, entries));
    assert!(hostile.len() <= 1 << 20);
    let err = Snapshot::from_bytes(&hostile).unwrap_err();
    assert!(err.to_string().contains("decodes to more than"), "{err}");

    // A snapshot of the checksum-less revision 1 of the encoding still decodes.
    let v2 = s.snapshot().to_bytes();
    let mut v1 = v2[..v2.len() - 4].to_vec();
    v1[4] = 1;
    assert_eq!(Snapshot::from_bytes(&v1).unwrap(), s.snapshot());

    // JSON `version` of the wrong type says so.
    let json = s.snapshot().to_json();
    for (bad, says) in [
        ("\"version\":-1", "found -1"),
        ("\"version\":\"1\"", "found \"1\""),
        ("\"version\":1.0", "found 1.0"),
    ] {
        let err = Snapshot::from_json(&json.replace("\"version\":1", bad)).unwrap_err();
        assert!(err.to_string().contains(says), "{bad}: {err}");
    }

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
    // 100k unknown names restore in linear time (each reported once).
    let mut snap = s.snapshot();
    snap.used = (0..100_000).map(|i| format!("gone_{i}")).collect();
    snap.matched = (0..100_000).map(|i| format!("contains:gone {i}")).collect();
    let (_, report) = support_triage::Session::restore(&snap).unwrap();
    assert_eq!(report.missing_tools.len(), 100_000);
    assert_eq!(report.missing_conditions.len(), 100_000);

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

/// Snapshots hold names, not engine internals: one written before conditions became
/// incremental state restores with that state rebuilt from its history and used set.
#[test]
fn condition_state_is_rebuilt_from_a_snapshot() {
    // The sequence-driven shape: `search, think, reflect` enters `Investigate`.
    let m = dyn_machine(
        &std::fs::read_to_string("tests/fixtures/machines/sequence-shaped.json").unwrap(),
    );
    let json = r#"{"version":1,"machine":"sequence-shaped","fingerprint":0,"step":"Open Chat","sequenceIndex":0,"history":["debate","search","think"],"used":["debate","search","think"],"matched":[],"usage":{"prompt":0,"completion":0}}"#;
    let (mut s, report) = DynSession::restore(&m, &Snapshot::from_json(json).unwrap()).unwrap();
    assert!(report.fingerprint_changed && report.missing_tools.is_empty());
    assert_eq!(s.step(), Some("Open Chat"));
    s.record("reflect");
    assert_eq!(
        s.step(),
        Some("Investigate"),
        "the two entries before the snapshot count"
    );

    // `not_recently_used search, window 2`: `search` one entry ago still blocks `Fresh`.
    let m =
        dyn_machine(&std::fs::read_to_string("tests/fixtures/machines/conformance.json").unwrap());
    let json = r#"{"version":1,"machine":"conformance","fingerprint":0,"step":"Idle","sequenceIndex":0,"history":["search","think"],"used":["search","think"],"matched":[],"usage":{"prompt":0,"completion":0}}"#;
    let (mut s, _) = DynSession::restore(&m, &Snapshot::from_json(json).unwrap()).unwrap();
    s.on_user_message("something fresh");
    assert_eq!(s.step(), Some("Idle"));
    s.record("think");
    s.on_user_message("something fresh");
    assert_eq!(s.step(), Some("Fresh"));
}

/// A restore finds tools by scanning a template of a few and through a map built once
/// for one of many: either way every tool lands where it was, and an unknown one is
/// reported.
#[test]
fn tools_are_found_by_name_in_small_and_wide_templates() {
    for count in [3, 16, 17, 40] {
        let names: Vec<String> = (0..count).map(|i| format!("tool_{i}")).collect();
        let src = serde_json::json!({
            "name": "wide",
            "tools": names,
            "orchestration": {"steps": [{"name": "Any", "isDefault": true}]}
        })
        .to_string();
        let machine = dyn_machine(&src);
        let mut session: DynSession<'_> = machine.session();
        for name in names.iter().rev().step_by(2) {
            session.record(name);
        }
        let snap = session.snapshot();
        let (restored, report) = DynSession::restore(&machine, &snap).expect("restores");
        assert!(report.is_exact(), "{count} tools: {report:?}");
        assert_eq!(restored.snapshot(), snap, "{count} tools");
        let mut gone = snap.clone();
        gone.used.push("tool_gone".to_owned());
        let (_, report) = DynSession::restore(&machine, &gone).expect("restores");
        assert_eq!(report.missing_tools, ["tool_gone"], "{count} tools");
    }
}
