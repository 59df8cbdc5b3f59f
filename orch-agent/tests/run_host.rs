//! The run host of in-process hosts (`orch_agent::run_host`): the life of a call —
//! begin, answer, finish — and every way a framework delivers it again: a replayed
//! approval, an answer given twice, after expiry, for another call under the same id, a
//! host restored from a snapshot between question and answer, the same call delivered
//! after it ran. The promise: an approval runs at most one call, exactly the one shown; a
//! refused call never runs; recorded ⇔ ran.

use orch_agent::hosted::HostedSession;
use orch_agent::run_host::{Answered, Begin, Finished, OnGate};
use orch_agent::RefusalKind;
use orch_runtime::dynamic::DynMachine;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

const SHOP: &str = r#"{
  "agentId": "gated-shop",
  "tools": ["pay", "receipt", "browse"],
  "orchestration": {
    "defaultStep": "Shop",
    "steps": [
      {"name": "Shop", "availableTools": {"allowed": ["pay", "browse"], "approve": ["pay"]}},
      {"name": "Paid", "conditions": [{"type": "tool_used", "value": "pay"}],
       "availableTools": {"allowed": ["receipt", "browse", "pay"], "approve": ["pay"]}}
    ]
  }
}"#;

fn machine() -> Arc<DynMachine> {
    Arc::new(
        orch_codegen::compile_json(SHOP, None)
            .to_machine()
            .expect("the shop compiles"),
    )
}

const NOW: u64 = 1_700_000_000_000;
const PAY_7: &str = r#"{"order": 7}"#;

fn asked(begin: Begin) -> orch_runtime::QuestionId {
    match begin {
        Begin::Ask { question, refusal } => {
            assert_eq!(refusal.kind, RefusalKind::NeedsApproval);
            question
        }
        other => panic!("expected a question, got {other:?}"),
    }
}

#[test]
fn an_approved_call_runs_once_and_its_replays_never_run() {
    let mut host = HostedSession::new(machine(), None);
    asked(host.begin("call_1", "pay", PAY_7, OnGate::Ask, NOW));
    assert_eq!(
        host.answer_call("call_1", "pay", PAY_7, true, NOW + 1),
        Answered::Applied { approved: true }
    );
    assert_eq!(
        host.begin("call_1", "pay", PAY_7, OnGate::Ask, NOW + 2),
        Begin::Run
    );
    assert!(matches!(
        host.finish("call_1", "pay", true, None),
        Finished::Recorded(_)
    ));
    // The framework delivers the approval again (a retried request, a second tab).
    let again = host.answer_call("call_1", "pay", PAY_7, true, NOW + 3);
    assert_eq!(again.as_str(), "repeated", "{again:?}");
    assert_eq!(
        again.refusal().map(|r| r.kind),
        Some(RefusalKind::StaleAnswer)
    );
    // And the call itself again: refused as already run.
    match host.begin("call_1", "pay", PAY_7, OnGate::Ask, NOW + 4) {
        Begin::Again(r) => {
            assert_eq!(r.kind, RefusalKind::AlreadyRan);
            assert!(r.reason.contains("ran already"), "{}", r.reason);
        }
        other => panic!("{other:?}"),
    }
    // Finishing it again records nothing.
    assert_eq!(
        host.finish("call_1", "pay", true, None),
        Finished::NotAdmitted
    );
    assert_eq!(host.session().history().iter().flatten().count(), 1);
}

#[test]
fn a_host_restored_between_question_and_answer_answers_its_own_question_once() {
    let m = machine();
    let mut first = HostedSession::new(Arc::clone(&m), None);
    asked(first.begin("c1", "pay", PAY_7, OnGate::Ask, NOW));
    let waiting = first.snapshot();
    // The answer comes to a new host (a web app serves each request afresh).
    let mut second = HostedSession::restore(Arc::clone(&m), &waiting, None).unwrap();
    assert_eq!(
        second.answer_call("c1", "pay", PAY_7, true, NOW + 1),
        Answered::Applied { approved: true }
    );
    assert_eq!(
        second.begin("c1", "pay", PAY_7, OnGate::Ask, NOW + 2),
        Begin::Run
    );
    assert!(matches!(
        second.finish("c1", "pay", true, None),
        Finished::Recorded(_)
    ));
    let after = second.snapshot();
    // The same request replayed on the state saved after it: the snapshot carries what
    // the call came to, so the answer is known as given already.
    let mut third = HostedSession::restore(Arc::clone(&m), &after, None).unwrap();
    let replay = third.answer_call("c1", "pay", PAY_7, true, NOW + 3);
    assert_eq!(replay.as_str(), "repeated", "{replay:?}");
    // The same call asked about anew under a new id is a new question: the old answer
    // does not answer it.
    asked(third.begin("c2", "pay", PAY_7, OnGate::Ask, NOW + 4));
    assert_eq!(
        third
            .answer_call("c1", "pay", PAY_7, true, NOW + 5)
            .as_str(),
        "repeated"
    );
    // A snapshot of the session alone (no ledger, as another front end writes it): the
    // session's held question is then the guard, and the old answer still applies to
    // nothing.
    let bare = third.session().snapshot_bytes();
    let mut fourth = HostedSession::restore(Arc::clone(&m), &bare, None).unwrap();
    assert_eq!(
        fourth
            .answer_call("c1", "pay", PAY_7, true, NOW + 5)
            .as_str(),
        "unknown"
    );
    assert!(matches!(
        third.begin("c2", "pay", PAY_7, OnGate::Ask, NOW + 6),
        Begin::Again(r) if r.kind == RefusalKind::NeedsApproval
    ));
}

#[test]
fn an_answer_for_another_call_under_the_same_id_applies_to_nothing() {
    let mut host = HostedSession::new(machine(), None);
    asked(host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW));
    let other = host.answer_call("c1", "pay", r#"{"order": 8}"#, true, NOW + 1);
    assert_eq!(other.as_str(), "foreign");
    // A restored host says the same: the ledger came with the snapshot.
    let mut fresh = HostedSession::restore(machine(), &host.snapshot(), None).unwrap();
    assert_eq!(
        fresh
            .answer_call("c1", "pay", r#"{"order": 8}"#, true, NOW + 1)
            .as_str(),
        "foreign"
    );
    // Restored from the session's bytes alone (no ledger), the session's question is
    // the guard: the answer applies to nothing.
    let bare = host.session().snapshot_bytes();
    let mut bare = HostedSession::restore(machine(), &bare, None).unwrap();
    assert_eq!(
        bare.answer_call("c1", "pay", r#"{"order": 8}"#, true, NOW + 1)
            .as_str(),
        "unknown"
    );
    // The call shown is still waiting, and its own answer still applies.
    assert_eq!(
        host.answer_call("c1", "pay", PAY_7, true, NOW + 2),
        Answered::Applied { approved: true }
    );
}

#[test]
fn a_late_answer_closes_the_question_and_runs_nothing() {
    let mut host = HostedSession::new(machine(), None);
    host.set_question_ttl(Duration::from_secs(60));
    asked(host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW));
    assert_eq!(host.approval().map(|a| a.1), Some("pending"));
    let late = host.answer_call("c1", "pay", PAY_7, true, NOW + 60_000);
    assert_eq!(late.as_str(), "late", "{late:?}");
    assert!(late.refusal().unwrap().reason.contains("expired"));
    // Closed: the session holds no verdict, and the forced tool is free again.
    assert_eq!(host.approval(), None);
    // The call is judged afresh: asked again, under a new identity.
    asked(host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW + 60_001));
}

#[test]
fn a_rejection_holds_and_a_refusal_is_delivered_again_as_it_was() {
    let mut host = HostedSession::new(machine(), None);
    asked(host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW));
    assert_eq!(
        host.answer_call("c1", "pay", PAY_7, false, NOW + 1),
        Answered::Applied { approved: false }
    );
    let refused = match host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW + 2) {
        Begin::Refused(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(refused.kind, RefusalKind::Rejected);
    assert_eq!(
        host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW + 3),
        Begin::Again(refused)
    );
    // Not allowed now: refused, and delivered again, the same refusal.
    let receipt = host.begin("c9", "receipt", "{}", OnGate::Ask, NOW + 4);
    let Begin::Refused(r) = receipt else {
        panic!("{receipt:?}")
    };
    assert_eq!(r.kind, RefusalKind::NotAllowed);
    assert_eq!(
        host.begin("c9", "receipt", "{}", OnGate::Ask, NOW + 5),
        Begin::Again(r)
    );
    // One id, two calls: the second is refused.
    assert!(matches!(
        host.begin("c9", "browse", "{}", OnGate::Ask, NOW + 6),
        Begin::Refused(r) if r.kind == RefusalKind::NotAllowed
    ));
}

#[test]
fn a_host_whose_framework_asks_elsewhere_refuses_without_asking() {
    let mut host = HostedSession::new(machine(), None);
    let begun = host.begin("c1", "pay", PAY_7, OnGate::Refuse, NOW);
    assert!(
        matches!(&begun, Begin::Refused(r) if r.kind == RefusalKind::NeedsApproval),
        "{begun:?}"
    );
    assert_eq!(host.approval(), None, "nothing was asked");
    // Asked at the framework's moment, then answered: the call runs.
    asked(host.begin("c1", "pay", PAY_7, OnGate::Ask, NOW + 1));
    assert!(host
        .answer_call("c1", "pay", PAY_7, true, NOW + 2)
        .refusal()
        .is_none());
    assert_eq!(
        host.begin("c1", "pay", PAY_7, OnGate::Refuse, NOW + 3),
        Begin::Run
    );
}

#[test]
fn a_result_that_did_not_run_is_not_recorded_and_the_call_may_come_again() {
    let mut host = HostedSession::new(machine(), None);
    assert_eq!(
        host.begin("b1", "browse", "{}", OnGate::Ask, NOW),
        Begin::Run
    );
    let task = r#"{"content": [], "task": {"taskId": "t1"}}"#;
    assert!(matches!(
        host.finish("b1", "browse", true, Some(task)),
        Finished::NotRun(_)
    ));
    assert!(matches!(
        host.finish("b1", "browse", true, None),
        Finished::NotAdmitted
    ));
    assert_eq!(
        host.begin("b1", "browse", "{}", OnGate::Ask, NOW + 1),
        Begin::Run
    );
    assert!(matches!(
        host.finish("b1", "browse", false, None),
        Finished::NotRun(_)
    ));
    assert_eq!(host.session().history().iter().flatten().count(), 0);
    // A framework's own result (not in MCP's shape) is a tool that returned.
    assert_eq!(
        host.begin("b2", "browse", "{}", OnGate::Ask, NOW + 2),
        Begin::Run
    );
    assert!(matches!(
        host.finish("b2", "browse", true, Some(r#"{"pages": 3}"#)),
        Finished::Recorded(_)
    ));
}

/// A fault a framework or a network can inflict on a call's life.
#[derive(Clone, Debug)]
enum Step {
    /// The call `id` (0..3) of `pay` with order `order` (0..2) is delivered.
    Begin { id: u8, order: u8 },
    /// An answer about call `id` showing order `order`.
    Answer { id: u8, order: u8, approved: bool },
    /// The running call `id` ends; `ran`.
    Finish { id: u8, ran: bool },
    /// Time passes (ms).
    Wait(u32),
    /// The host is restored from its own snapshot (its ledger with it).
    Restore,
    /// The host is restored from the session's bytes alone (its ledger lost).
    RestoreBare,
    /// A user message (an event: the held verdict is cleared).
    Message,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..3, 0u8..2).prop_map(|(id, order)| Step::Begin { id, order }),
        (0u8..3, 0u8..2, any::<bool>()).prop_map(|(id, order, approved)| Step::Answer {
            id,
            order,
            approved
        }),
        (0u8..3, any::<bool>()).prop_map(|(id, ran)| Step::Finish { id, ran }),
        (0u32..40_000).prop_map(Step::Wait),
        Just(Step::Restore),
        Just(Step::RestoreBare),
        Just(Step::Message),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Whatever the order of deliveries, replays, restores and delays, checked against a
    /// model of the protocol kept apart from the host: an answer applies only to the one
    /// open question, of that call id and exactly those arguments, once, before it
    /// expires; `pay` (gated in every step) runs only on an approval of exactly that
    /// call, and each approval runs at most one call; a call is recorded exactly when it
    /// ran.
    #[test]
    fn an_approval_runs_at_most_one_call_with_exactly_its_arguments(steps in proptest::collection::vec(step(), 1..40)) {
        const TTL_MS: u64 = 60_000;
        let m = machine();
        let mut host = HostedSession::new(Arc::clone(&m), None);
        host.set_question_ttl(Duration::from_millis(TTL_MS));
        let mut now = NOW;
        // The question the run holds: (id, order, asked at, restored without the ledger
        // since).
        let mut open: Option<(u8, u8, u64, bool)> = None;
        // The approval the run holds: the order it approves.
        let mut approved: Option<u8> = None;
        let mut running: Vec<u8> = Vec::new();
        let mut ran = 0usize;
        for s in steps {
            now += 1;
            match s {
                Step::Begin { id, order } => {
                    let args = format!(r#"{{"order": {order}}}"#);
                    match host.begin(&format!("c{id}"), "pay", &args, OnGate::Ask, now) {
                        Begin::Run => {
                            prop_assert_eq!(approved, Some(order), "pay c{} order {} ran without an approval of it", id, order);
                            approved = None;
                            running.push(id);
                        }
                        Begin::Ask { .. } => {
                            open = Some((id, order, now, false));
                            approved = None;
                        }
                        Begin::Refused(_) | Begin::Again(_) => {}
                    }
                }
                Step::Answer { id, order, approved: yes } => {
                    let args = format!(r#"{{"order": {order}}}"#);
                    let answered = host.answer_call(&format!("c{id}"), "pay", &args, yes, now);
                    match answered {
                        Answered::Applied { approved: a } => {
                            let Some((oid, oorder, at, bare)) = open else {
                                return Err(TestCaseError::fail(format!("an answer applied with no question open: c{id} {order}")));
                            };
                            prop_assert_eq!((oid, oorder), (id, order), "an answer applied to another call's question");
                            prop_assert!(bare || now < at + TTL_MS, "an answer applied after its question expired");
                            prop_assert_eq!(a, yes);
                            open = None;
                            approved = yes.then_some(order);
                        }
                        Answered::Late(_) => {
                            // A late answer closes its question if the run still holds it.
                            if let Some((oid, oorder, at, _)) = open {
                                if (oid, oorder) == (id, order) {
                                    prop_assert!(now >= at + TTL_MS, "a question closed before its expiry");
                                    open = None;
                                }
                            }
                        }
                        Answered::Repeated(_) | Answered::Foreign(_) | Answered::Unknown(_) => {}
                    }
                }
                Step::Finish { id, ran: r } => {
                    let at = running.iter().position(|c| *c == id);
                    let finished = host.finish(&format!("c{id}"), "pay", r, None);
                    match (at, r) {
                        (Some(at), true) => {
                            prop_assert!(matches!(finished, Finished::Recorded(_)), "{:?}", finished);
                            running.remove(at);
                            ran += 1;
                            // Recording is an event: the held verdict is cleared.
                            open = None;
                            approved = None;
                        }
                        (Some(at), false) => {
                            prop_assert!(matches!(finished, Finished::NotRun(_)), "{:?}", finished);
                            running.remove(at);
                        }
                        (None, _) => prop_assert_eq!(finished, Finished::NotAdmitted),
                    }
                }
                Step::Wait(ms) => now += u64::from(ms),
                Step::Restore => {
                    host = HostedSession::restore(Arc::clone(&m), &host.snapshot(), None).unwrap();
                    host.set_question_ttl(Duration::from_millis(TTL_MS));
                    // The ledger comes with the snapshot: the running calls' ends and
                    // the questions' expiries are known to the new host.
                }
                Step::RestoreBare => {
                    let bare = host.session().snapshot_bytes();
                    host = HostedSession::restore(Arc::clone(&m), &bare, None).unwrap();
                    host.set_question_ttl(Duration::from_millis(TTL_MS));
                    // Without the ledger, a running call's end never reaches the new
                    // host, and no question's expiry is known there.
                    running.clear();
                    open = open.map(|(id, order, at, _)| (id, order, at, true));
                }
                Step::Message => {
                    host.on_user_message("hello");
                    open = None;
                    approved = None;
                }
            }
        }
        let recorded = host.session().history().iter().flatten().count();
        prop_assert_eq!(recorded, ran, "recorded ⇔ ran");
    }
}

/// `browse` delivered as `id`: it runs and is recorded.
fn browse_once(host: &mut HostedSession, id: &str) {
    assert_eq!(host.begin(id, "browse", "{}", OnGate::Ask, NOW), Begin::Run);
    assert!(matches!(
        host.finish(id, "browse", true, None),
        Finished::Recorded(_)
    ));
}

#[test]
fn the_ledger_forgets_the_oldest_calls_past_its_bound() {
    use orch_agent::run_host::LEDGER_CALLS;
    let mut host = HostedSession::new(machine(), None);
    for i in 0..LEDGER_CALLS + 10 {
        browse_once(&mut host, &format!("b{i}"));
        // Some calls fail: forgotten at once, and their ids may come again.
        let failed = format!("f{i}");
        assert_eq!(
            host.begin(&failed, "browse", "{}", OnGate::Ask, NOW),
            Begin::Run
        );
        assert!(matches!(
            host.finish(&failed, "browse", false, None),
            Finished::NotRun(_)
        ));
    }
    // The newest are remembered: delivered again, they do not run.
    let last = format!("b{}", LEDGER_CALLS + 9);
    assert!(
        matches!(host.begin(&last, "browse", "{}", OnGate::Ask, NOW), Begin::Again(r) if r.kind == RefusalKind::AlreadyRan)
    );
    // The oldest is forgotten (a browse may run again under its id: the bound is the
    // price of constant cost; the session's question guards approvals beyond it).
    assert_eq!(
        host.begin("b0", "browse", "{}", OnGate::Ask, NOW),
        Begin::Run
    );
}

/// A call that ran, delivered again after the host was restored from its snapshot (a web
/// app serving each request afresh, a process restarted), is not run again; a call
/// running when the snapshot was taken is recorded when its end reaches the new host;
/// a snapshot whose ledger is damaged is an error that says so.
#[test]
fn the_ledger_travels_with_the_snapshot() {
    let m = machine();
    let mut host = HostedSession::new(Arc::clone(&m), None);
    assert_eq!(
        host.begin("b1", "browse", "{}", OnGate::Ask, NOW),
        Begin::Run
    );
    assert!(matches!(
        host.finish("b1", "browse", true, None),
        Finished::Recorded(_)
    ));
    assert_eq!(
        host.begin("b2", "browse", "{}", OnGate::Ask, NOW),
        Begin::Run
    );
    let saved = host.snapshot();
    let mut after = HostedSession::restore(Arc::clone(&m), &saved, None).unwrap();
    match after.begin("b1", "browse", "{}", OnGate::Ask, NOW + 1) {
        Begin::Again(r) => assert_eq!(r.kind, RefusalKind::AlreadyRan),
        other => panic!("a call that ran ran again after a restore: {other:?}"),
    }
    assert!(matches!(
        after.finish("b2", "browse", true, None),
        Finished::Recorded(_)
    ));
    assert_eq!(after.session().history().iter().flatten().count(), 2);
    // The same bytes, with one byte of the ledger changed: the checksum says so first;
    // a snapshot whose ledger says nonsense under a valid checksum is refused as such.
    let mut parsed = orch_runtime::Snapshot::from_bytes(&saved).unwrap();
    assert!(!parsed.host.is_empty());
    parsed.host.truncate(parsed.host.len() - 1);
    let damaged = parsed.to_bytes();
    let err = HostedSession::restore(Arc::clone(&m), &damaged, None)
        .err()
        .expect("a damaged ledger is an error");
    assert!(
        err.to_string()
            .contains("the run host's calls in it cannot be read"),
        "{err}"
    );
}

/// What the ledger adds to a snapshot, exactly: nothing for a session that made no call
/// through `begin`; per call, its id and tool (length-prefixed), its 32-byte digest and
/// a stage byte — so a full ledger of `browse` calls with 9-character ids costs 50 bytes
/// a call.
#[test]
fn the_ledger_s_bytes_in_a_snapshot() {
    use orch_agent::run_host::LEDGER_CALLS;
    let mut host = HostedSession::new(machine(), None);
    let bare = host.snapshot().len();
    assert_eq!(bare, host.session().snapshot_bytes().len());
    for i in 0..LEDGER_CALLS {
        browse_once(&mut host, &format!("call_{i:04}"));
    }
    let with = host.snapshot().len();
    let session = host.session().snapshot_bytes().len();
    // The section: tag, length (3-byte varint), version byte, count (2-byte varint),
    // then per call 1 + 9 (id) + 1 + 6 (tool) + 32 (digest) + 1 (stage) = 50 bytes.
    assert_eq!(with - session, 1 + 3 + 1 + 2 + LEDGER_CALLS * 50);
}

/// A question closed without an answer (it expired while the host waited, the human
/// dismissed it) no longer holds the run; an answer that comes afterwards applies to
/// nothing, and the same call delivered again is asked about anew.
#[test]
fn a_question_closed_without_an_answer_holds_nothing_and_its_answer_applies_to_nothing() {
    use orch_agent::run_host::RunHost;
    let m = machine();
    let policy = orch_agent::Policy::new(m.tools().to_vec());
    let mut session = orch_runtime::dynamic::DynSession::new(&m);
    policy.prepare(&mut session);
    let mut host = RunHost::new();
    asked(host.begin(&policy, &mut session, "c1", "pay", PAY_7, OnGate::Ask, NOW));
    assert!(session.approval().is_some());
    // Another call's question is not this one's to close.
    assert!(!host.close_question(&mut session, "c1", "pay", r#"{"order": 8}"#));
    assert!(host.close_question(&mut session, "c1", "pay", PAY_7));
    assert_eq!(
        session.approval(),
        None,
        "nothing waits on a closed question"
    );
    assert!(
        !host.close_question(&mut session, "c1", "pay", PAY_7),
        "closed once"
    );
    let answered = host.answer_call(
        &policy,
        &mut session,
        "c1",
        "pay",
        PAY_7,
        true,
        None,
        NOW + 1,
    );
    assert_eq!(answered.as_str(), "unknown", "{answered:?}");
    assert_eq!(session.approval(), None);
    asked(host.begin(
        &policy,
        &mut session,
        "c1",
        "pay",
        PAY_7,
        OnGate::Ask,
        NOW + 2,
    ));
}
