//! The cognitive reasoner's research turn through genai (`GenaiModel`): orch's loop, any
//! genai provider. By default it talks chat completions to an OpenAI-compatible server
//! (vLLM, llama.cpp's server, Ollama's `/v1`, OpenAI itself):
//!
//! ```sh
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=qwen2.5 \
//!   cargo run -p orch-agent --features genai --example genai_agent -- Research the impact of AI on jobs
//! ```
//!
//! `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `OPENAI_API_KEY` (optional for
//! local servers), `OPENAI_MODEL` (default `gpt-4o-mini`); `GENAI_ADAPTER=anthropic`
//! speaks Anthropic's messages API to that base URL instead (any genai adapter name
//! works: `gemini`, `ollama`, `groq`, ...). Each round prints the offered tools, the tool
//! choice, every call and every refusal.

#[path = "common/cognitive.rs"]
mod cognitive;

use genai::adapter::AdapterKind;
use orch_agent::{Agent, GenaiModel};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::Machine;

fn main() {
    let message = cognitive::message_or_exit("genai_agent");
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".to_owned());
    let model_name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let adapter = std::env::var("GENAI_ADAPTER").unwrap_or_else(|_| "openai".to_owned());
    let Some(kind) = AdapterKind::from_lower_str(&adapter.to_lowercase()) else {
        eprintln!("error: GENAI_ADAPTER={adapter} is not a genai adapter (openai, anthropic, gemini, ollama, ...)");
        std::process::exit(2);
    };
    let model = match GenaiModel::at(
        kind,
        &base,
        std::env::var("OPENAI_API_KEY").ok(),
        &model_name,
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let notes = Arc::new(Mutex::new(Vec::new()));
    let instructions = cognitive_reasoner::DESCRIPTION.join("\n");
    let mut agent = Agent::<Machine, _>::new(model, cognitive::registry(notes))
        .instructions(format!("You are the Cognitive Reasoner.\n{instructions}"))
        .on_round_finish(|report, _| cognitive::print_round(report));
    println!("user: {message}\nmodel: {model_name} at {base} ({adapter}, through genai)\n");
    cognitive::run_turn_and_print(&mut agent, &message);
}
