//! The refund desk on Restate: a refund agent's run is durable, and refunds of 100 or
//! more wait for a human — for as long as it takes, across restarts.
//!
//! Starts a `restate-server` of its own (the one `cargo xtask test` installs into
//! `restate/`, or `ORCH_RESTATE_SERVER`), serves the desk, registers it, and plays two
//! customers: Alice's small refund runs at once; Bob's large one waits until the "human"
//! approves it, then runs once (a second approval does nothing).
//!
//! ```sh
//! cargo run -p orch-restate --example durable_refund_desk
//! ```

#[path = "../tests/harness/mod.rs"]
mod harness;

use orch_restate::{Runs, ToolCall, ToolError};
use serde_json::{json, Value};

/// The refund desk: look the order up, refund it (a human approves refunds of 100 or
/// more), tell the customer.
const DESK: &str = include_str!("../tests/desk.json");

/// The desk's tools (a real desk would call its order system and its payment provider,
/// passing the idempotency key on).
async fn tools(call: ToolCall) -> Result<Value, ToolError> {
    let text = match call.tool.as_str() {
        "lookup_order" => format!("order found: {}", call.arguments),
        "issue_refund" => format!(
            "refunded {} (idempotency key {})",
            call.arguments, call.idempotency_key
        ),
        "send_email" => "email sent".to_owned(),
        other => return Err(ToolError::new(format!("no tool {other}"))),
    };
    Ok(json!({"content": [{"type": "text", "text": text}]}))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Removed when the example ends (after the server: declared before it).
    let dir = orch_test_support::scratch::Scratch::new("refund-desk");
    println!("starting restate-server (data in {})", dir.display());
    let server = harness::Server::start(&dir);

    let machine = orch_codegen::compile_json(DESK, None)
        .to_machine()
        .ok_or("the desk template does not compile")?;
    let port = harness::free_port();
    let runs = Runs::new().template(machine, tools);
    tokio::spawn(runs.serve(format!("127.0.0.1:{port}").parse()?));
    harness::wait_for_port(port, "the desk");
    let http = reqwest::Client::new();
    harness::register(
        &http,
        &server.admin_url(),
        &format!("http://127.0.0.1:{port}"),
    )
    .await;
    println!("the desk is registered: OrchRun, OrchApprovals\n");

    let ingress = server.ingress_url();
    let post = |path: String, body: Option<Value>| {
        let http = http.clone();
        async move {
            let request = http.post(path);
            let request = match body {
                Some(body) => request.json(&body),
                None => request,
            };
            let answer = request.send().await?;
            answer.json::<Value>().await
        }
    };
    let call = |run: &str, tool: &str, arguments: Value| {
        post(
            format!("{ingress}/OrchRun/{run}/call"),
            Some(json!({"tool": tool, "arguments": arguments})),
        )
    };

    println!("Alice: a refund of 40");
    for (tool, arguments) in [
        ("issue_refund", json!({"order": "A-1", "amount": 40})),
        ("lookup_order", json!({"order": "A-1"})),
        ("issue_refund", json!({"order": "A-1", "amount": 40})),
        ("send_email", json!({"to": "alice@example.com"})),
    ] {
        let reply = call("alice", tool, arguments).await?;
        println!("  {tool}: {}", summary(&reply));
    }

    println!("\nBob: a refund of 400 (needs a human)");
    let reply = call("bob", "lookup_order", json!({"order": "B-2"})).await?;
    println!("  lookup_order: {}", summary(&reply));
    let sent = post(
        format!("{ingress}/OrchRun/bob/call/send"),
        Some(json!({"tool": "issue_refund", "arguments": {"order": "B-2", "amount": 400}})),
    )
    .await?;
    let invocation = sent["invocationId"].as_str().unwrap_or_default().to_owned();
    let pending = loop {
        let pending = post(format!("{ingress}/OrchApprovals/bob/pending"), None).await?;
        if pending.as_array().is_some_and(|p| !p.is_empty()) {
            break pending;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let question = &pending[0];
    println!(
        "  issue_refund waits for a human: {} {} (step {}, answerable until {} ms)",
        question["tool"], question["arguments"], question["step"], question["expires_ms"]
    );
    let ticket = question["ticket"].clone();
    let first = post(
        format!("{ingress}/OrchApprovals/bob/resolve"),
        Some(json!({"ticket": ticket, "approved": true, "reason": "the customer is right"})),
    )
    .await?;
    println!("  the human approves: {first}");
    let output = http
        .get(format!("{ingress}/restate/invocation/{invocation}/attach"))
        .send()
        .await?
        .json::<Value>()
        .await?;
    println!("  issue_refund: {}", summary(&output));
    let second = post(
        format!("{ingress}/OrchApprovals/bob/resolve"),
        Some(json!({"ticket": ticket, "approved": true})),
    )
    .await?;
    println!("  a second approval: {second} (nothing happens)");
    let reply = call("bob", "send_email", json!({"to": "bob@example.com"})).await?;
    println!("  send_email: {}", summary(&reply));

    for run in ["alice", "bob"] {
        let status = post(format!("{ingress}/OrchRun/{run}/status"), None).await?;
        println!("\n{run}'s run: history {}", status["history"]);
    }
    drop(server);
    Ok(())
}

/// One line for a call's reply.
fn summary(reply: &Value) -> String {
    match reply["outcome"].as_str() {
        Some("ran") => format!("ran — {}", reply["result"]["content"][0]["text"]),
        Some("refused") => format!(
            "refused ({}) — {}",
            reply["refusal"]["kind"], reply["refusal"]["reason"]
        ),
        _ => reply.to_string(),
    }
}
