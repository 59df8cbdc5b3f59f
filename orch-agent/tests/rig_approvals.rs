//! Approvals (semantics §13) inside a rig agent (`OrchHook`), against a local server
//! speaking OpenAI's chat completions: with an approver the gated call waits for it and
//! runs once if approved, never if rejected (the model is told why); without one the run
//! stops on the call, the pending request and the session survive a restart (JSON), and
//! the answer applied to the restored session lets exactly that call through once.

mod common;

use common::fake::{call, text, Fake};
use orch_agent::{ApprovalRequest, Decision, HookEvent, OrchHook, Policy};
use orch_runtime::Snapshot;
use rig_agent::{Agent, AgentBuilder};
use rig_core::message::ToolName;
use rig_core::providers::openai::{OpenAIConfig, Route};
use rig_core::tool::{DynamicTool, ToolOutput};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/refund-desk/template.json");
use refund_desk::Session;

const TOOLS: [&str; 3] = ["lookup_order", "issue_refund", "send_email"];
const REFUND: &str = r#"{"order": "A-1", "amount": 10}"#;

type Log = Arc<Mutex<Vec<String>>>;

fn rig_tools(log: &Log) -> Vec<DynamicTool> {
    TOOLS
        .iter()
        .map(|name| {
            let log = Arc::clone(log);
            let name = *name;
            DynamicTool::new(
                ToolName::new(name).expect("a name"),
                format!("the {name} tool"),
                json!({"type": "object"}),
                move |args: Value| {
                    let log = Arc::clone(&log);
                    Box::pin(async move {
                        log.lock().expect("lock").push(format!("{name} {args}"));
                        Ok(ToolOutput::text(format!("{name} done")))
                    })
                },
            )
        })
        .collect()
}

async fn build(fake: &Fake, hook: OrchHook<Session>, log: &Log) -> Agent {
    let base = fake.start().await;
    let model = OpenAIConfig::new("sk-test")
        .with_base_url(base)
        .with_route(Route::Chat)
        .client()
        .completion("fake-model");
    AgentBuilder::new(model)
        .dynamic_tools(rig_tools(log))
        .add_hook(hook)
        .build()
}

fn refunds(log: &Log) -> usize {
    log.lock()
        .expect("lock")
        .iter()
        .filter(|l| l.starts_with("issue_refund"))
        .count()
}

#[tokio::test]
async fn an_approver_decides_while_the_call_waits() {
    for (decision, runs) in [
        (Decision::Approve, 1),
        (
            Decision::Reject {
                reason: Some("too much".into()),
            },
            0,
        ),
    ] {
        let mut replies = vec![
            call("lookup_order", r#"{"order": "A-1"}"#),
            call("issue_refund", REFUND),
        ];
        if decision.approves() {
            // The sequence goes on to `send_email`, which is then forced.
            replies.push(call("send_email", "{}"));
        }
        replies.push(text("Done."));
        let fake = Fake::new(replies);
        let log = Log::default();
        let session = Arc::new(Mutex::new(Session::new()));
        session.lock().unwrap().on_user_message("refund A-1");
        let asked: Arc<Mutex<Vec<ApprovalRequest>>> = Arc::default();
        let seen = Arc::clone(&asked);
        let given = decision.clone();
        let hook = OrchHook::new(Policy::new(TOOLS), Arc::clone(&session)).approver(move |r| {
            seen.lock().unwrap().push(r);
            let given = given.clone();
            async move { given }
        });
        let agent = build(&fake, hook, &log).await;
        let answer = agent.prompt("refund A-1").max_turns(6).await;
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(refunds(&log), runs, "{decision:?}");
        // A refused call is not recorded: the sequence waits for the refund still.
        let expected_index = if runs == 1 { 3 } else { 1 };
        assert_eq!(session.lock().unwrap().sequence_index(), expected_index);
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].call.name, "issue_refund");
        // rig hands the hook the arguments re-serialized: the same call.
        let args: Value = serde_json::from_str(&asked[0].call.arguments).unwrap();
        assert_eq!(args, serde_json::from_str::<Value>(REFUND).unwrap());
        assert_eq!(asked[0].step.as_deref(), Some("Refund"));
        let requests = fake.requests();
        let results = common::fake::tool_results_openai(&requests[2]);
        let last = results.last().cloned().unwrap_or_default();
        match decision {
            Decision::Approve => assert_eq!(last, "issue_refund done"),
            Decision::Reject { .. } => assert!(
                last.contains("a human rejected this call in step `Refund`")
                    && last.ends_with("The human said: too much"),
                "{last}"
            ),
        }
    }
}

#[tokio::test]
async fn without_an_approver_the_run_stops_and_resumes_after_a_restart() {
    // The first process: the run stops on the gated call.
    let fake = Fake::new([
        call("lookup_order", r#"{"order": "A-1"}"#),
        call("issue_refund", REFUND),
    ]);
    let log = Log::default();
    let session = Arc::new(Mutex::new(Session::new()));
    session.lock().unwrap().on_user_message("refund A-1");
    let events: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
    let seen = Arc::clone(&events);
    let hook = OrchHook::new(Policy::new(TOOLS), Arc::clone(&session))
        .on_event(move |e| seen.lock().unwrap().push(e.clone()));
    let probe = hook.clone();
    let agent = build(&fake, hook, &log).await;
    let stopped = agent.prompt("refund A-1").max_turns(6).await;
    let err = stopped.expect_err("the run stops for a human").to_string();
    assert!(err.contains("needs a human's approval"), "{err}");
    assert_eq!(refunds(&log), 0, "nothing ran before the answer");
    let request = probe.pending().expect("a pending request");
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, HookEvent::AwaitingApproval { request: r } if *r == request)));
    let saved_request = serde_json::to_string(&request).unwrap();
    let saved_session = session.lock().unwrap().snapshot().to_json();
    drop((agent, probe, session));

    // The second process: restore, answer, run again; the model repeats the call.
    let (restored, _) =
        Session::restore(&Snapshot::from_json(&saved_session).unwrap()).expect("restores");
    let session = Arc::new(Mutex::new(restored));
    let request: ApprovalRequest = serde_json::from_str(&saved_request).unwrap();
    let hook = OrchHook::new(Policy::new(TOOLS), Arc::clone(&session));
    assert!(hook.answer(&request, Decision::Approve));
    assert!(!hook.answer(&request, Decision::Approve), "answered once");
    let fake = Fake::new([
        call("issue_refund", REFUND),
        call("issue_refund", REFUND),
        call("send_email", r#"{"body": "refunded"}"#),
        text("Refunded."),
    ]);
    let agent = build(&fake, hook, &log).await;
    let answer = agent.prompt("go on").max_turns(6).await;
    assert!(answer.is_ok(), "{answer:?}");
    // The approved call ran once; the repeat was not run (the sequence moved on).
    assert_eq!(refunds(&log), 1);
    assert_eq!(session.lock().unwrap().sequence_index(), 3);
}

#[tokio::test]
async fn an_audited_policy_records_the_hooks_decisions() {
    use orch_agent::audit::{Auditor, DecisionRecord};
    let records: Arc<Mutex<Vec<DecisionRecord>>> = Arc::default();
    let sink = Arc::clone(&records);
    let auditor = Auditor::new(
        move |r: &DecisionRecord| sink.lock().unwrap().push(r.clone()),
        "rig-run",
    );
    let fake = Fake::new([
        call("issue_refund", REFUND),
        call("lookup_order", r#"{"order": "A-1"}"#),
        call("issue_refund", REFUND),
        text("Refunded."),
    ]);
    let log = Log::default();
    let session = Arc::new(Mutex::new(Session::new()));
    let policy = Policy::new(TOOLS).audited(Arc::new(auditor));
    let hook = OrchHook::new(policy, Arc::clone(&session))
        .approver(|_| async { Decision::Reject { reason: None } });
    hook.user_message("refund A-1");
    let agent = build(&fake, hook, &log).await;
    let _ = agent.prompt("refund A-1").max_turns(6).await;
    let decisions: Vec<String> = records
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.decision.clone())
        .collect();
    // The message, then: the early refund refused, the lookup admitted and recorded,
    // the refund asked about and rejected.
    assert_eq!(
        decisions,
        [
            "tools",
            "message",
            "refused",
            "admitted",
            "recorded",
            "needs_approval",
            "asked",
            "denied_by_human",
            "rejected"
        ],
        "{:#?}",
        records.lock().unwrap()
    );
}

/// The same call delivered again (the same id, tool and arguments, in a later run of the
/// same hook: a replayed response) is not run again; the model is told it ran already.
#[tokio::test]
async fn a_call_delivered_again_is_not_run_again() {
    let log = Log::default();
    let session = Arc::new(Mutex::new(Session::new()));
    let hook = OrchHook::new(Policy::new(TOOLS), Arc::clone(&session));
    let lookups = |log: &Log| {
        log.lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("lookup_order"))
            .count()
    };
    let mut told = Vec::new();
    for _ in 0..2 {
        // Each fake server numbers its calls from the start: the same id again.
        let fake = Fake::new([call("lookup_order", r#"{"order": "A-1"}"#), text("Found.")]);
        let agent = build(&fake, hook.clone(), &log).await;
        let answer = agent.prompt("where is A-1").max_turns(4).await;
        assert!(answer.is_ok(), "{answer:?}");
        told.extend(common::fake::tool_results_openai(&fake.requests()[1]));
    }
    assert_eq!(lookups(&log), 1, "{told:?}");
    assert!(
        told.last().is_some_and(|t| t.contains("ran already")),
        "{told:?}"
    );
}
