//! Approvals in the agent loop (semantics §13), with a scripted model that calls a gated
//! tool: the turn pauses before it runs, with a serializable pending state; resumed with
//! an approval it runs exactly once, with a rejection never, and the model is told; a
//! session that changed since, or a pending state altered, resumes nothing.

use orch_agent::{
    Agent, AgentError, ChatMessage, Decision, PendingApproval, Planned, RefusalKind, ScriptedModel,
    StopReason, ToolChoice, ToolRegistry,
};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/refund-desk/template.json");
use refund_desk::{Machine, Session, Step};

type Log = Arc<Mutex<Vec<String>>>;

fn tools() -> (ToolRegistry, Log) {
    let log: Log = Arc::default();
    let mut reg = ToolRegistry::new();
    for name in ["lookup_order", "issue_refund", "send_email"] {
        let l = log.clone();
        reg.register(
            name,
            name,
            serde_json::json!({"type": "object"}),
            move |args| {
                let l = l.clone();
                async move {
                    l.lock().unwrap().push(format!("{name} {args}"));
                    Ok(format!("{name} done"))
                }
            },
        );
    }
    (reg, log)
}

/// How many refunds ran.
fn refunds(log: &Log) -> usize {
    let log = log.lock().unwrap();
    log.iter().filter(|l| l.starts_with("issue_refund")).count()
}

const REFUND: &str = r#"{"order": "A-1", "amount": 10}"#;

/// Runs "refund A-1" up to the pause on `issue_refund`, with `after` planned next.
async fn paused(
    after: Vec<Planned>,
) -> (
    Agent<Machine, ScriptedModel>,
    Session,
    Vec<ChatMessage>,
    PendingApproval,
    Log,
) {
    let (reg, log) = tools();
    let mut plan = vec![
        Planned::call("lookup_order", r#"{"order": "A-1"}"#),
        Planned::call("issue_refund", REFUND).and_call("send_email", r#"{"body": "done"}"#),
    ];
    plan.extend(after);
    let mut agent = Agent::<Machine, _>::new(ScriptedModel::new(plan), reg);
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "please refund A-1")
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::NeedsApproval);
    let pending = turn.pending.clone().expect("pending");
    assert_eq!(pending.request.call.name, "issue_refund");
    assert_eq!(pending.request.step.as_deref(), Some("Refund"));
    assert_eq!(
        pending.request.reason,
        "needs a human's approval of this call in step `Refund`"
    );
    assert_eq!(pending.round, 2);
    assert_eq!(pending.remaining.len(), 1, "send_email waits behind it");
    assert_eq!(
        *log.lock().unwrap(),
        [r#"lookup_order {"order":"A-1"}"#],
        "nothing ran past the gate"
    );
    (agent, session, conversation, pending, log)
}

#[tokio::test]
async fn an_approved_call_runs_once_and_the_turn_goes_on() {
    let (mut agent, mut session, mut conversation, pending, log) =
        paused(vec![Planned::text("Refunded.")]).await;
    // Serializable: the pending state survives JSON.
    let json = serde_json::to_string(&pending).unwrap();
    let pending: PendingApproval = serde_json::from_str(&json).unwrap();
    let turn = agent
        .resume_turn(
            &mut session,
            &mut conversation,
            pending.clone(),
            Decision::Approve,
        )
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::Answered);
    assert_eq!(turn.final_text, "Refunded.");
    assert_eq!(refunds(&log), 1);
    // The round's other call ran after it, in order; the sequence completed.
    let executed: Vec<&str> = turn.rounds[0]
        .calls
        .iter()
        .map(|c| c.call.name.as_str())
        .collect();
    assert_eq!(executed, ["issue_refund", "send_email"]);
    assert_eq!(session.sequence_index(), 3);
    assert_eq!(session.approval(), None, "the approval was consumed");
    // Every tool call of the conversation has its result, in order.
    let ids: Vec<&str> = conversation
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 3);
    // The same pending approval cannot be used twice: the session moved on.
    let again = agent
        .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
        .await
        .unwrap_err();
    assert!(matches!(again, AgentError::StaleApproval(_)), "{again}");
    assert_eq!(refunds(&log), 1);
}

#[tokio::test]
async fn a_rejected_call_never_runs_and_the_model_is_told() {
    let (mut agent, mut session, mut conversation, pending, log) = paused(vec![
        // The model tries the very same call again, then answers.
        Planned::call("issue_refund", r#"{"amount":10,"order":"A-1"}"#),
        Planned::text("A person will review your refund."),
    ])
    .await;
    let turn = agent
        .resume_turn(
            &mut session,
            &mut conversation,
            pending,
            Decision::Reject {
                reason: Some("over the limit".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::Answered);
    assert_eq!(refunds(&log), 0);
    let first = &turn.rounds[0].calls[0];
    assert_eq!(first.refusal, Some(RefusalKind::Rejected));
    assert!(
        first
            .result
            .contains("a human rejected this call in step `Refund`")
            && first.result.ends_with("The human said: over the limit"),
        "{}",
        first.result
    );
    // The rest of the round did not run either: the sequence still waits for the refund.
    assert!(!turn.rounds[0].calls[1].executed);
    // After a rejection nothing is forced, so the model may answer.
    assert_eq!(turn.rounds[1].tool_choice, ToolChoice::Auto);
    // Asking again for the same call (keys reordered) is refused without a new pause.
    assert_eq!(turn.rounds[1].calls[0].refusal, Some(RefusalKind::Rejected));
    assert_eq!(session.step(), Some(Step::Refund));
}

#[tokio::test]
async fn other_arguments_ask_again() {
    let (mut agent, mut session, mut conversation, pending, log) = paused(vec![Planned::call(
        "issue_refund",
        r#"{"order": "A-1", "amount": 9}"#,
    )])
    .await;
    let turn = agent
        .resume_turn(
            &mut session,
            &mut conversation,
            pending,
            Decision::Reject { reason: None },
        )
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::NeedsApproval);
    let next = turn.pending.unwrap();
    assert_eq!(
        next.request.call.arguments,
        r#"{"order": "A-1", "amount": 9}"#
    );
    assert_eq!(refunds(&log), 0);
}

#[tokio::test]
async fn a_changed_session_or_an_altered_pending_state_resumes_nothing() {
    let (mut agent, mut session, mut conversation, pending, log) = paused(vec![]).await;
    // The arguments were changed after the human saw them.
    let mut altered = pending.clone();
    altered.request.call.arguments = r#"{"order": "A-1", "amount": 10000}"#.into();
    let err = agent
        .resume_turn(&mut session, &mut conversation, altered, Decision::Approve)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("altered"), "{err}");
    // Another event happened meanwhile.
    session.on_user_message("actually, never mind");
    let err = agent
        .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no longer waits"), "{err}");
    assert_eq!(refunds(&log), 0);
}

#[tokio::test]
async fn bad_arguments_to_a_gated_tool_are_refused_without_asking() {
    let (reg, log) = tools();
    let model = ScriptedModel::new([
        Planned::call("lookup_order", "{}"),
        Planned::call("issue_refund", "{not json"),
        Planned::text("Sorry."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, reg);
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "refund please")
        .await
        .unwrap();
    assert_ne!(turn.stop, StopReason::NeedsApproval);
    assert!(turn.pending.is_none());
    let call = &turn.rounds[1].calls[0];
    assert!(!call.executed);
    assert!(call.result.contains("not valid JSON"), "{}", call.result);
    assert_eq!(refunds(&log), 0);
}

/// A pending approval answers its own question only: submitted again after the same call
/// was asked about anew, it is stale — the new question waits for its own answer.
#[tokio::test]
async fn a_pending_approval_never_answers_a_later_question_about_the_same_call() {
    let (mut agent, mut session, mut conversation, first, log) =
        paused(vec![Planned::call("issue_refund", REFUND)]).await;
    // The user speaks before the human answers: the question is void, and the model
    // makes the very same call again, which is asked about anew.
    let turn = agent
        .run_turn(&mut session, &mut conversation, "yes, refund A-1 please")
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::NeedsApproval);
    let second = turn.pending.expect("asked again");
    assert_eq!(second.request.digest, first.request.digest, "the same call");
    assert_ne!(second.request.question, first.request.question);
    // The first approval, submitted now (late, or twice), applies to nothing.
    let stale = agent
        .resume_turn(
            &mut session,
            &mut conversation,
            first.clone(),
            Decision::Approve,
        )
        .await
        .unwrap_err();
    assert!(matches!(stale, AgentError::StaleApproval(_)), "{stale}");
    assert_eq!(refunds(&log), 0);
    // The second question's own answer runs the call, once; submitted twice, once.
    agent
        .resume_turn(
            &mut session,
            &mut conversation,
            second.clone(),
            Decision::Approve,
        )
        .await
        .unwrap();
    let twice = agent
        .resume_turn(&mut session, &mut conversation, second, Decision::Approve)
        .await;
    assert!(matches!(twice, Err(AgentError::StaleApproval(_))));
    assert_eq!(refunds(&log), 1);
}

/// The run host's engine on a typed session: a gated refund asked about under its call
/// id, approved once (a second answer changes nothing), run once, recorded once; the same
/// call delivered again is not run again — also by a run host restored from its bytes.
#[test]
fn the_run_host_drives_a_typed_session() {
    use orch_agent::run_host::{Answered, Begin, Finished, OnGate, RunHost};
    use orch_agent::Policy;
    let policy = Policy::new(["lookup_order", "issue_refund", "send_email"]);
    let mut session = Session::new();
    policy.prepare(&mut session);
    policy.message(&mut session, "please refund A-1");
    let mut host = RunHost::new();
    let s = &mut session;
    let lookup = r#"{"order": "A-1"}"#;
    let begun = host.begin(&policy, s, "c1", "lookup_order", lookup, OnGate::Ask, 1_000);
    assert_eq!(begun, Begin::Run);
    let found = host.finish(&policy, s, "c1", "lookup_order", true, Some("\"found\""));
    assert_eq!(found, Finished::Recorded("advanced"));
    let asked = host.begin(&policy, s, "c2", "issue_refund", REFUND, OnGate::Ask, 1_000);
    assert!(matches!(asked, Begin::Ask { .. }), "{asked:?}");
    let yes = host.answer_call(&policy, s, "c2", "issue_refund", REFUND, true, None, 1_001);
    assert!(
        matches!(yes, Answered::Applied { approved: true }),
        "{yes:?}"
    );
    let twice = host.answer_call(&policy, s, "c2", "issue_refund", REFUND, true, None, 1_002);
    assert!(matches!(twice, Answered::Repeated(_)), "{twice:?}");
    let run = host.begin(&policy, s, "c2", "issue_refund", REFUND, OnGate::Ask, 1_003);
    assert_eq!(run, Begin::Run);
    let done = host.finish(&policy, s, "c2", "issue_refund", true, Some("\"refunded\""));
    assert_eq!(done, Finished::Recorded("advanced"));
    assert_eq!(s.step(), Some(Step::Refund));
    let mut bytes = Vec::new();
    host.encode(&mut bytes);
    let mut restored = RunHost::decode(&bytes).expect("the ledger's bytes");
    for host in [&mut host, &mut restored] {
        let again = host.begin(&policy, s, "c2", "issue_refund", REFUND, OnGate::Ask, 1_004);
        match again {
            Begin::Again(refusal) => assert_eq!(refusal.kind, RefusalKind::AlreadyRan),
            other => panic!("delivered again, it was {other:?}"),
        }
    }
}

/// The model delivers the approved refund again under the same id after it ran: it is not
/// run again and no human is asked again; the model is told it ran already.
#[tokio::test]
async fn a_call_delivered_again_after_it_ran_is_not_run_again() {
    let (reg, log) = tools();
    let plan = vec![
        Planned::call("lookup_order", r#"{"order": "A-1"}"#),
        Planned::call("issue_refund", REFUND).with_id("refund-1"),
        Planned::call("issue_refund", REFUND).with_id("refund-1"),
        Planned::text("done"),
    ];
    let mut agent = Agent::<Machine, _>::new(ScriptedModel::new(plan), reg);
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "please refund A-1")
        .await
        .unwrap();
    let pending = turn.pending.expect("the refund waits for a human");
    let turn = agent
        .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
        .await
        .unwrap();
    assert_eq!(refunds(&log), 1, "{turn:?}");
    assert!(turn.pending.is_none(), "no human is asked again: {turn:?}");
    let again = &turn.rounds[1].calls[0];
    assert_eq!(again.refusal, Some(RefusalKind::AlreadyRan), "{again:?}");
    assert!(again.result.contains("ran already"), "{}", again.result);
}
