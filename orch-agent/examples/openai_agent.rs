//! The cognitive reasoner against any OpenAI-compatible chat-completions server (for
//! instance a local one), under orchestration: per round (model call) only the allowed tools are
//! offered, the choice is forced when the sequence allows one tool, every call is
//! checked before it runs, and usage is accounted.
//!
//! ```sh
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=qwen2.5 \
//!   cargo run -p orch-agent --features openai --example openai_agent -- Research the impact of AI on jobs
//! ```
//!
//! `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `OPENAI_API_KEY` (optional for
//! local servers), `OPENAI_MODEL` (default `gpt-4o-mini`), `OPENAI_STREAM=1` to stream,
//! `OPENAI_TIMEOUT_SECS` (the whole-request limit; default 600).
//! The tools do real local work on a small bundled corpus (examples/corpus/): keyword
//! search, outlining, reflection over what was gathered, comparison, critique,
//! brainstorming and finding both sides of a claim.

#[path = "common/cognitive.rs"]
mod cognitive;

use orch_agent::{Agent, OpenAiModel};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::Machine;

fn main() {
    let message = cognitive::message_or_exit("openai_agent");
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".to_owned());
    let model_name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let stream = std::env::var("OPENAI_STREAM").is_ok_and(|v| v == "1" || v == "true");
    let mut timeouts = orch_agent::Timeouts::default();
    if let Some(secs) = std::env::var("OPENAI_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        timeouts.total = std::time::Duration::from_secs(secs.max(1));
        timeouts.idle = timeouts.idle.min(timeouts.total);
    }
    let model = OpenAiModel::new(&base, &model_name)
        .timeouts(timeouts)
        .api_key(std::env::var("OPENAI_API_KEY").ok())
        .streaming(stream);
    let notes = Arc::new(Mutex::new(Vec::new()));
    let instructions = cognitive_reasoner::DESCRIPTION.join("\n");
    let mut agent = Agent::<Machine, _>::new(model, cognitive::registry(notes))
        .instructions(format!("You are the Cognitive Reasoner.\n{instructions}"))
        .on_round_finish(|report, session| {
            cognitive::print_round(report);
            println!(
                "  tokens so far {} + {}",
                session.usage().prompt,
                session.usage().completion
            );
        });
    println!("user: {message}\nmodel: {model_name} at {base}\n");
    cognitive::run_turn_and_print(&mut agent, &message);
}
