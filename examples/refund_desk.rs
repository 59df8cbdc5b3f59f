//! An agent whose refunds need a human's approval of each exact call (semantics §13).
//! Compiled by build.rs from `examples/agents/refund-desk/template.json`; the model is
//! scripted, so this runs offline.
//!
//! The first customer's refund pauses the turn: the agent returns a pending approval
//! (what to show the human), the host saves it with the session and the conversation —
//! here as JSON text, in a real host in any store — and "restarts". The restored agent
//! resumes with the human's approval; the refund runs once, and the sequence goes on.
//! The second customer's refund is rejected: it never runs, and the model is told why.
//!
//! Run: `cargo run -p orch-examples --example refund_desk`

use orch::agent::{
    Agent, ChatMessage, Decision, PendingApproval, Planned, ScriptedModel, StopReason, ToolRegistry,
};
use orch::Snapshot;
use std::sync::{Arc, Mutex};

orch::include_machine!("refund-desk");
use refund_desk::{Machine, Session};

/// The host's tools; `issue_refund` records every refund it makes in `ledger`.
fn tools(ledger: &Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    let object = serde_json::json!({"type": "object"});
    reg.register(
        "lookup_order",
        "Look an order up",
        object.clone(),
        |args| async move {
            Ok(format!(
                "order {}: paid 42.50 EUR, delivered damaged",
                args["order"]
            ))
        },
    );
    let l = ledger.clone();
    reg.register(
        "issue_refund",
        "Refund an order",
        object.clone(),
        move |args| {
            let l = l.clone();
            async move {
                l.lock().unwrap().push(args.to_string());
                Ok(format!(
                    "refunded {} on order {}",
                    args["amount"], args["order"]
                ))
            }
        },
    );
    reg.register("send_email", "Email the customer", object, |_| async move {
        Ok("sent".to_owned())
    });
    reg
}

/// What the host keeps while a human decides: all of it is plain JSON.
struct Saved {
    session: String,
    conversation: String,
    pending: String,
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime");
    rt.block_on(run());
}

async fn run() {
    let ledger = Arc::new(Mutex::new(Vec::new()));

    println!("== customer 1: a refund a human approves, across a restart");
    let model = ScriptedModel::new([
        Planned::call("lookup_order", r#"{"order": "A-1001"}"#),
        Planned::call("issue_refund", r#"{"order": "A-1001", "amount": 42.5}"#),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools(&ledger));
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(
            &mut session,
            &mut conversation,
            "Please refund order A-1001",
        )
        .await
        .expect("the turn runs");
    assert_eq!(turn.stop, StopReason::NeedsApproval);
    let pending = turn.pending.expect("a pending approval");
    println!(
        "paused: `{}` {} — {}",
        pending.request.call.name, pending.request.call.arguments, pending.request.reason
    );
    assert!(
        ledger.lock().unwrap().is_empty(),
        "nothing ran before the approval"
    );

    // Save everything and drop the agent, as a host restarting would.
    let saved = Saved {
        session: session.snapshot().to_json(),
        conversation: serde_json::to_string(&conversation).expect("serializes"),
        pending: serde_json::to_string(&pending).expect("serializes"),
    };
    println!(
        "saved: {} bytes of session, {} of pending approval",
        saved.session.len(),
        saved.pending.len()
    );
    drop((agent, session, conversation, pending));

    // ... a human approves ... the host comes back.
    let model = ScriptedModel::new([
        Planned::call("send_email", r#"{"to": "customer", "body": "Refunded."}"#),
        Planned::text("Your order A-1001 was refunded: 42.50 EUR."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools(&ledger));
    let snapshot = Snapshot::from_json(&saved.session).expect("a valid snapshot");
    let (mut session, _) = Session::restore(&snapshot).expect("restores");
    let mut conversation: Vec<ChatMessage> =
        serde_json::from_str(&saved.conversation).expect("a conversation");
    let pending: PendingApproval =
        serde_json::from_str(&saved.pending).expect("a pending approval");
    let turn = agent
        .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
        .await
        .expect("resumes");
    for round in &turn.rounds {
        for call in &round.calls {
            println!("  {} -> {}", call.call.name, call.result);
        }
    }
    println!("answer: {}", turn.final_text);
    assert_eq!(
        ledger.lock().unwrap().len(),
        1,
        "the approved refund ran once"
    );

    println!("\n== customer 2: a refund a human rejects");
    let model = ScriptedModel::new([
        Planned::call("lookup_order", r#"{"order": "B-7"}"#),
        Planned::call("issue_refund", r#"{"order": "B-7", "amount": 5000}"#),
        Planned::text("A person on our team will look at your refund."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools(&ledger));
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "I want a refund for B-7")
        .await
        .expect("the turn runs");
    let pending = turn.pending.expect("a pending approval");
    println!(
        "paused: `{}` {}",
        pending.request.call.name, pending.request.call.arguments
    );
    let decision = Decision::Reject {
        reason: Some("5000 EUR is more than the order cost".into()),
    };
    let turn = agent
        .resume_turn(&mut session, &mut conversation, pending, decision)
        .await
        .expect("resumes");
    let told = &turn.rounds[0].calls[0].result;
    println!("the model is told: {told}");
    println!("answer: {}", turn.final_text);
    assert_eq!(
        ledger.lock().unwrap().len(),
        1,
        "the rejected refund never ran"
    );
}
