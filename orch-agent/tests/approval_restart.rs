//! A turn paused on a gated call (semantics §13) survives the host's restart through a
//! real `redis-server`: the session, the conversation and the pending approval are saved,
//! everything in memory is dropped, a new agent on a new connection loads them and
//! resumes with the human's verdict. The approved call runs exactly once.

use orch_agent::{
    Agent, ChatMessage, Decision, PendingApproval, Planned, ScriptedModel, StopReason, ToolRegistry,
};
use orch_store::{RedisStore, SessionStore};
use orch_test_support::redis::RedisServer;
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/refund-desk/template.json");
use refund_desk::Machine;

fn tools(log: &Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    for name in ["lookup_order", "issue_refund", "send_email"] {
        let l = log.clone();
        reg.register(
            name,
            name,
            serde_json::json!({"type": "object"}),
            move |_| {
                let l = l.clone();
                async move {
                    l.lock().unwrap().push(name.to_owned());
                    Ok("done".to_owned())
                }
            },
        );
    }
    reg
}

/// The host's saved turn: conversation and pending approval (the session is stored as
/// a session).
#[derive(serde::Serialize, serde::Deserialize)]
struct Paused {
    conversation: Vec<ChatMessage>,
    pending: PendingApproval,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn a_paused_turn_resumes_after_a_restart_through_redis() {
    let server = RedisServer::start();
    let log = Arc::new(Mutex::new(Vec::new()));

    // The first host: runs the turn to the pause, saves it, and goes away.
    {
        let store = RedisStore::connect(&server.url)
            .await
            .unwrap()
            .namespace("desk");
        let model = ScriptedModel::new([
            Planned::call("lookup_order", r#"{"order": "A-1"}"#),
            Planned::call("issue_refund", r#"{"order": "A-1", "amount": 10}"#),
        ]);
        let mut agent = Agent::<Machine, _>::new(model, tools(&log));
        let mut session = refund_desk::Session::new();
        let mut conversation = Vec::new();
        let turn = agent
            .run_turn(&mut session, &mut conversation, "refund A-1 please")
            .await
            .unwrap();
        assert_eq!(turn.stop, StopReason::NeedsApproval);
        let paused = Paused {
            conversation,
            pending: turn.pending.unwrap(),
        };
        store.put("customer-1", &session).await.unwrap();
        store
            .store("customer-1:paused", serde_json::to_vec(&paused).unwrap())
            .await
            .unwrap();
    }
    assert_eq!(*log.lock().unwrap(), ["lookup_order"]);

    // The second host: nothing in memory but the server's address.
    let store = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("desk");
    let loaded = store
        .get::<Machine>("customer-1")
        .await
        .unwrap()
        .expect("stored");
    assert!(loaded.report.is_exact());
    let mut session = loaded.session;
    let saved = store
        .load("customer-1:paused")
        .await
        .unwrap()
        .expect("stored");
    let Paused {
        mut conversation,
        pending,
    } = serde_json::from_slice(&saved.bytes).unwrap();
    let model = ScriptedModel::new([
        Planned::call("send_email", r#"{"body": "refunded"}"#),
        Planned::text("Refunded."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools(&log));
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
    assert_eq!(
        *log.lock().unwrap(),
        ["lookup_order", "issue_refund", "send_email"]
    );
    store.put("customer-1", &session).await.unwrap();

    // Resuming the same pending approval again (a retried job, say) runs nothing.
    let mut session = store
        .get::<Machine>("customer-1")
        .await
        .unwrap()
        .unwrap()
        .session;
    let err = agent
        .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no longer waits"), "{err}");
    assert_eq!(log.lock().unwrap().len(), 3);
}
