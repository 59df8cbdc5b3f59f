//! The cognitive reasoner's research turn as a rig agent under orchestration
//! (`OrchHook`): rig's agent, rig's OpenAI provider (chat completions), rig tools — and
//! per model call only the allowed tools, the forced choice, refusals before a tool
//! runs.
//!
//! ```sh
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=qwen2.5 \
//!   cargo run -p orch-agent --features rig --example rig_agent -- Research the impact of AI on jobs
//! ```
//!
//! `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `OPENAI_API_KEY` (optional for
//! local servers), `OPENAI_MODEL` (default `gpt-4o-mini`).

#[path = "common/cognitive.rs"]
mod cognitive;

use orch_agent::{HookEvent, OrchHook, Policy};
use rig_agent::AgentBuilder;
use rig_core::message::ToolName;
use rig_core::providers::openai::{OpenAIConfig, Route};
use rig_core::tool::{DynamicTool, ToolExecutionError, ToolOutput};
use serde_json::Value;
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::Session;

/// The cognitive tools as rig tools.
fn rig_tools(notes: &cognitive::Notes) -> Vec<DynamicTool> {
    cognitive::TOOLS
        .iter()
        .filter_map(|(name, description)| {
            let name: &'static str = name;
            let notes = notes.clone();
            let tool_name = ToolName::new(name).ok()?;
            Some(DynamicTool::new(
                tool_name,
                *description,
                cognitive::parameters(name),
                move |args: Value| {
                    let notes = notes.clone();
                    Box::pin(async move {
                        cognitive::run(name, &args, &notes)
                            .map(ToolOutput::text)
                            .map_err(ToolExecutionError::refused)
                    })
                },
            ))
        })
        .collect()
}

fn print(event: &HookEvent) {
    match event {
        HookEvent::ModelCall {
            turn,
            offered,
            tool_choice,
        } => println!("model call {turn}: offered {offered:?}, tool choice {tool_choice}"),
        HookEvent::Refused { tool, reason } => println!("  {tool} -> refused\n    {reason}"),
        HookEvent::Recorded { tool, outcome } => println!("  {tool} -> {outcome}"),
        HookEvent::Reminded { tool } => {
            println!("  text while `{tool}` is forced -> asked again")
        }
        HookEvent::AwaitingApproval { request } => println!(
            "  {} -> waits for a human ({})",
            request.call.name, request.reason
        ),
        other => println!("  {other:?}"),
    }
}

fn main() {
    let message = cognitive::message_or_exit("rig_agent");
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".to_owned());
    let model_name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let key = std::env::var("OPENAI_API_KEY").unwrap_or_else(|_| "none".to_owned());
    let model = OpenAIConfig::new(key)
        .with_base_url(base.as_str())
        .with_route(Route::Chat)
        .client()
        .completion(model_name.as_str());

    let session = Arc::new(Mutex::new(Session::new()));
    session
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .on_user_message(&message);
    let hook = OrchHook::new(
        Policy::new(cognitive::TOOLS.map(|(name, _)| name)),
        session.clone(),
    )
    .on_event(print);
    let notes = Arc::new(Mutex::new(Vec::new()));
    let instructions = cognitive_reasoner::DESCRIPTION.join("\n");
    let agent = AgentBuilder::new(model)
        .preamble(format!("You are the Cognitive Reasoner.\n{instructions}"))
        .dynamic_tools(rig_tools(&notes))
        .add_hook(hook)
        .build();
    let max_turns = cognitive_reasoner::MAX_ROUNDS.unwrap_or(10) as usize;
    println!("user: {message}\nmodel: {model_name} at {base} (rig)\n");
    let runtime = cognitive::runtime_or_exit();
    match runtime.block_on(async { agent.prompt(message.as_str()).max_turns(max_turns).await }) {
        Ok(response) => {
            let s = *session.lock().unwrap_or_else(|p| p.into_inner());
            println!(
                "\nanswer (step {} at {}):\n{}",
                s.step().map_or("-", |st| st.name()),
                s.sequence_index(),
                response.output()
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
