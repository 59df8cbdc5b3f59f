//! Runtime approvals (semantics §13): a verdict is bound to one exact call and to the
//! session's state, consumed by the one call it approves, cleared by every event, carried
//! by snapshots (both encodings), and old snapshots without one still restore. Typed and
//! run-time sessions agree.

use orch::approval::{Call, CallDigest, QuestionId, Verdict};
use orch::{Refusal, Snapshot};

orch::include_machine!("approvals");
use approvals::{Session, Step, Tool};

fn checkout() -> Session {
    let mut s = Session::new();
    s.record(Tool::AddToCart);
    s.record(Tool::Confirm);
    assert_eq!(s.step(), Some(Step::Checkout));
    s
}

fn pay(amount: u32) -> CallDigest {
    CallDigest::of_text(
        "pay",
        &format!(r#"{{"amount": {amount}, "currency": "EUR"}}"#),
    )
}

#[test]
fn an_approval_admits_exactly_the_call_it_names_once() {
    let mut s = checkout();
    let call = pay(10);
    // Gated: check says so, with the step.
    let denied = s.check_call(Tool::Pay, &judged(&call)).unwrap_err();
    assert_eq!(
        denied,
        Refusal::NeedsApproval {
            step: Some(Step::Checkout)
        }
    );
    assert!(s.admit_call(Tool::Pay, &judged(&call)).is_err());

    s.approve(call);
    // The same arguments, written differently, are the same call.
    let same = CallDigest::of_text("pay", r#"{"currency":"EUR","amount":10}"#);
    assert_eq!(same, call);
    assert!(s.check_call(Tool::Pay, &judged(&same)).is_ok());
    // Other arguments, or another tool, are not approved by it.
    assert!(s
        .check_call(Tool::Pay, &judged(&pay(11)))
        .unwrap_err()
        .needs_approval());
    // (`refund` is out of sequence here: the sequence waits for `pay`.)
    let refund = CallDigest::of_text("refund", r#"{"amount": 10, "currency": "EUR"}"#);
    assert!(!s
        .check_call(Tool::Refund, &judged(&refund))
        .unwrap_err()
        .needs_approval());
    // The plain check never passes a gated tool.
    assert!(s.check(Tool::Pay).unwrap_err().needs_approval());

    // Admission consumes it: a second identical call needs a new approval.
    assert!(s.admit_call(Tool::Pay, &judged(&call)).is_ok());
    assert_eq!(s.approval(), None);
    assert!(s
        .admit_call(Tool::Pay, &judged(&call))
        .unwrap_err()
        .needs_approval());
}

#[test]
fn a_rejection_is_held_and_answers_without_asking_again() {
    let mut s = checkout();
    let call = pay(99);
    s.reject(call);
    let denied = s.check_call(Tool::Pay, &judged(&call)).unwrap_err();
    assert_eq!(
        denied,
        Refusal::Rejected {
            step: Some(Step::Checkout)
        }
    );
    assert_eq!(
        denied.to_string(),
        "a human rejected this call in step `Checkout`"
    );
    assert!(!denied.needs_approval());
    assert_eq!(denied.step(), Some(Step::Checkout));
    // Another call still asks.
    assert!(s
        .check_call(Tool::Pay, &judged(&pay(5)))
        .unwrap_err()
        .needs_approval());
    // An approval replaces the rejection.
    s.approve(call);
    assert!(s.check_call(Tool::Pay, &judged(&call)).is_ok());
}

#[test]
fn every_event_clears_a_verdict() {
    let call = pay(10);
    type Event = fn(&mut Session);
    let events: [(&str, Event); 4] = [
        ("record", |s| {
            s.record(Tool::Browse);
        }),
        ("a user message", |s| s.on_user_message("hello")),
        ("reset", |s| s.reset()),
        ("a foreign tool", |s| {
            s.record_name("weather");
        }),
    ];
    for (what, event) in events {
        let mut s = checkout();
        s.approve(call);
        event(&mut s);
        assert_eq!(s.approval(), None, "{what} keeps the approval");
    }
    // Usage and the host's tools are not events of the conversation: the verdict stays.
    let mut s = checkout();
    s.approve(call);
    s.record_usage(10, 10);
    s.set_available(orch::ToolSet::<Tool>::all().iter());
    assert_eq!(s.approval().map(|a| a.verdict), Some(Verdict::Approved));
}

#[test]
fn tools_gated_by_the_orchestration_and_foreign_tools_work_alike() {
    let mut s = checkout();
    s.record(Tool::Pay);
    // The sequence is complete: `refund` is allowed, gated by the orchestration.
    let refund = CallDigest::of_text("refund", "{}");
    assert!(s
        .check_call(Tool::Refund, &judged(&refund))
        .unwrap_err()
        .needs_approval());
    s.approve(refund);
    assert!(s.admit_call_name("refund", &judged(&refund)).is_ok());
    // Not gated: the call passes whatever the session holds.
    let mut s = Session::new();
    assert!(s
        .admit_call(Tool::Browse, &judged(&CallDigest::of_text("browse", "{}")))
        .is_ok());
}

#[test]
fn typed_and_run_time_sessions_agree() {
    let src = std::fs::read_to_string("tests/fixtures/machines/approvals.json").unwrap();
    let machine = orch_codegen::compile_json(&src, None)
        .to_machine()
        .expect("compiles");
    let mut d = machine.session();
    let mut s = Session::new();
    for t in ["add_to_cart", "confirm"] {
        d.record(t);
        s.record_name(t);
    }
    let call = pay(3);
    let typed = s
        .check_call(Tool::Pay, &judged(&call))
        .unwrap_err()
        .to_string();
    assert_eq!(
        d.check_call("pay", &judged(&call)).unwrap_err().to_string(),
        typed
    );
    d.reject(call);
    s.reject(call);
    // A held verdict is written by the direct encoder as by the snapshot's.
    assert_eq!(d.snapshot_bytes(), d.snapshot().to_bytes());
    d.ask(call, orch::QuestionId::new(0x5eed));
    assert_eq!(d.snapshot_bytes(), d.snapshot().to_bytes());
    d.reject(call);
    assert_eq!(
        d.check_call("pay", &judged(&call)).unwrap_err().to_string(),
        s.check_call(Tool::Pay, &judged(&call))
            .unwrap_err()
            .to_string()
    );
    d.approve(call);
    s.approve(call);
    assert!(d.admit_call("pay", &judged(&call)).is_ok());
    assert!(s.admit_call(Tool::Pay, &judged(&call)).is_ok());
    assert_eq!(d.approval(), None);
    assert_eq!(d.snapshot(), s.snapshot());
}

#[test]
fn snapshots_carry_the_verdict_in_both_encodings() {
    for verdict in [Verdict::Approved, Verdict::Rejected, Verdict::Pending] {
        let mut s = checkout();
        let call = pay(7);
        match verdict {
            Verdict::Approved => s.approve(call),
            Verdict::Rejected => s.reject(call),
            Verdict::Pending => s.ask(call, QuestionId::new(0x5eed)),
        }
        let snap = s.snapshot();
        assert_eq!(
            snap.approval.map(|a| (a.call, a.verdict)),
            Some((call, verdict))
        );
        let json = snap.to_json();
        assert!(
            json.contains(&format!(r#""approval":{{"call":"{call}""#)),
            "{json}"
        );
        for back in [
            Snapshot::from_json(&json).unwrap(),
            Snapshot::from_bytes(&snap.to_bytes()).unwrap(),
        ] {
            let (restored, report) = Session::restore(&back).unwrap();
            assert!(report.is_exact(), "{report:?}");
            assert_eq!(restored, s);
            assert_eq!(
                restored.check_call(Tool::Pay, &judged(&call)).is_ok(),
                verdict == Verdict::Approved
            );
        }
    }
}

#[test]
fn snapshots_without_a_verdict_read_as_before() {
    let s = checkout();
    let snap = s.snapshot();
    // Nothing is written when nothing is held: the encodings are those of before.
    assert!(!snap.to_json().contains("\"approval\""));
    let bytes = snap.to_bytes();
    let (restored, report) = Session::restore(&Snapshot::from_bytes(&bytes).unwrap()).unwrap();
    assert!(report.is_exact());
    assert_eq!(restored.approval(), None);
    // A JSON snapshot written before approvals existed (no field) restores with none.
    let old = r#"{"version":1,"machine":"approvals","fingerprint":0,"step":"Checkout","sequenceIndex":1,"history":["add_to_cart","confirm"],"used":["add_to_cart","confirm"],"matched":[],"usage":{"prompt":0,"completion":0},"available":null}"#;
    let (restored, _) = Session::restore(&Snapshot::from_json(old).unwrap()).unwrap();
    assert_eq!(restored.step(), Some(Step::Checkout));
    assert_eq!(restored.approval(), None);
}

#[test]
fn a_malformed_verdict_is_an_error() {
    let mut s = checkout();
    s.approve(pay(1));
    let json = s.snapshot().to_json();
    let call = pay(1).to_string();
    for bad in [
        json.replace(&call, "abc"),
        json.replace(&call, &"z".repeat(64)),
        json.replace("\"approved\"", "\"maybe\""),
        json.replace("\"verdict\"", "\"extra\":1,\"verdict\""),
    ] {
        assert!(Snapshot::from_json(&bad).is_err(), "{bad}");
    }
    // Binary: a wrong section tag, a bad verdict byte, a truncated digest (each with a
    // correct checksum, so the decoder itself must notice).
    let bytes = s.snapshot().to_bytes();
    let body = &bytes[..bytes.len() - 4];
    let section = body.len() - 34;
    let with_crc = |mut b: Vec<u8>| {
        let crc = crc32(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    };
    let mut tag = body.to_vec();
    tag[section] = 0xEE;
    let mut verdict = body.to_vec();
    *verdict.last_mut().unwrap() = 9;
    let truncated = body[..body.len() - 5].to_vec();
    for (bad, says) in [
        (tag, "unknown section"),
        (verdict, "invalid verdict"),
        (truncated, "call digest"),
    ] {
        let err = Snapshot::from_bytes(&with_crc(bad)).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[test]
fn a_verdict_from_another_build_of_the_template_is_dropped_and_reported() {
    let mut s = checkout();
    s.approve(pay(1));
    let mut snap = s.snapshot();
    snap.fingerprint ^= 1;
    let (restored, report) = Session::restore(&snap).unwrap();
    assert!(report.approval_dropped);
    assert!(report.lost_anything());
    assert_eq!(restored.approval(), None);
    assert_eq!(restored.step(), Some(Step::Checkout));
}

/// CRC-32 (IEEE), as the binary encoding ends with.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn an_answer_applies_only_to_the_question_still_held() {
    let call = pay(20);
    let q = QuestionId::new(0x0123_4567_89ab_cdef);
    let mut s = checkout();
    s.ask(call, q);
    assert_eq!(s.approval().map(|a| a.verdict), Some(Verdict::Pending));
    assert_eq!(s.approval().map(|a| a.question), Some(q));
    // Asked is not approved.
    assert!(s
        .check_call(Tool::Pay, &judged(&call))
        .unwrap_err()
        .needs_approval());
    // An answer about another call changes nothing.
    assert!(!s.answer(pay(21), q, true));
    // Nor does an answer to another question about this call.
    assert!(!s.answer(call, QuestionId::new(7), true));
    assert!(!s.answer(call, QuestionId::NONE, true));
    // The question survives a snapshot, in both encodings, with its identity.
    let snap = s.snapshot();
    assert!(snap.to_json().contains(r#""verdict":"pending""#));
    assert!(snap.to_json().contains(r#""question":"0123456789abcdef""#));
    for back in [
        Snapshot::from_json(&snap.to_json()).unwrap(),
        Snapshot::from_bytes(&snap.to_bytes()).unwrap(),
    ] {
        assert_eq!(Session::restore(&back).unwrap().0, s);
    }
    assert!(s.answer(call, q, true));
    assert!(s.check_call(Tool::Pay, &judged(&call)).is_ok());
    // Answered already: a second answer (a replay) is not applied.
    assert!(!s.answer(call, q, false));
    assert_eq!(s.approval().map(|a| a.verdict), Some(Verdict::Approved));
    // Admitted: the approval is consumed, and a replayed answer does nothing.
    assert!(s.admit_call(Tool::Pay, &judged(&call)).is_ok());
    assert!(!s.answer(call, q, true));
    assert!(s.check_call(Tool::Pay, &judged(&call)).is_err());
    // A new question about the very same call is not answered by the old answer.
    let q2 = QuestionId::new(0xfeed);
    s.ask(call, q2);
    assert!(!s.answer(call, q, true));
    assert!(s
        .check_call(Tool::Pay, &judged(&call))
        .unwrap_err()
        .needs_approval());
    assert!(s.answer(call, q2, true));

    // Any event between the question and the answer voids the question.
    let mut s = checkout();
    s.ask(call, q);
    s.on_user_message("hello?");
    assert!(!s.answer(call, q, true));
    assert!(s.check_call(Tool::Pay, &judged(&call)).is_err());
    // A rejection answered is held as one.
    let mut s = checkout();
    s.ask(call, q);
    assert!(s.answer(call, q, false));
    assert!(matches!(
        s.check_call(Tool::Pay, &judged(&call)),
        Err(Refusal::Rejected { .. })
    ));
}

/// The call as the engine judges it. These templates have no rules on arguments, so
/// the arguments are never read: the digest alone identifies the call.
fn judged(call: &CallDigest) -> Call<'static> {
    Call::new(*call, "")
}
