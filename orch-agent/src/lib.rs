//! Driving an LLM under **orch** orchestration.
//!
//! AgentDock's "LLM orchestration service" sits between the agent and the model: it
//! hands the model only the allowed tools, tracks which tools ran and how many tokens
//! were spent, and lets transitions happen within a turn. [`Agent`] does that over a
//! compiled machine:
//!
//! - per round (model call) it recomputes the allowed tools from the session, so a sequence
//!   advances between the steps of one user turn, and offers only those;
//! - it forces the tool choice when the sequence position allows exactly one tool;
//! - it checks every tool call before executing it: a disallowed or unknown call is not
//!   executed, and the model is told what is allowed now and what the sequence expects;
//! - it records every executed tool and every usage event, and stops at the step cap;
//! - the system prompt describes the state after the latest transition.
//!
//! Models plug in through [`Model`]: [`ScriptedModel`] for tests and examples, and
//! [`OpenAiModel`] (feature `openai`) for any OpenAI-compatible chat-completions server.
//!
//! ```
//! # orch_runtime::__doc_machine!();
//! use orch_agent::{Agent, Planned, ScriptedModel, ToolRegistry};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut tools = ToolRegistry::new();
//! for name in ["search", "think", "reflect"] {
//!     tools.register(name, name, serde_json::json!({"type": "object"}), move |_| async move { Ok(format!("{name} done")) });
//! }
//! let model = ScriptedModel::new([
//!     Planned::call("think", "{}"),      // out of order: refused, not executed
//!     Planned::call("search", "{}"),
//!     Planned::call("think", "{}"),
//!     Planned::call("reflect", "{}"),
//!     Planned::text("Here is what I found."),
//! ]);
//! let mut agent = Agent::<demo::Machine, _>::new(model, tools);
//! let mut session = demo::Session::new();
//! let mut conversation = Vec::new();
//! let turn = agent.run_turn(&mut session, &mut conversation, "research this").await.unwrap();
//! assert_eq!(turn.final_text, "Here is what I found.");
//! assert_eq!(session.sequence_index(), 3); // search → think → reflect, within one turn
//! assert!(!turn.rounds[0].calls[0].executed);
//! # });
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod agent;
pub mod audit;
pub mod elicitation;
#[cfg(feature = "genai")]
mod genai_model;
pub mod hosted;
mod model;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "otel")]
pub mod otel;
mod policy;
pub mod protocol;
#[cfg(feature = "rig")]
pub mod rig_hook;
pub mod run_host;
mod scripted;
mod telemetry;
mod tools;

pub use agent::{
    orchestration_prompt, Agent, AgentError, PendingApproval, RoundReport, StopReason,
    ToolCallReport, TurnReport, DEFAULT_MAX_ROUNDS,
};
#[cfg(feature = "genai")]
pub use genai_model::GenaiModel;
pub use model::{
    ChatMessage, EventList, FinishReason, Model, ModelError, ModelErrorKind, ModelEvent,
    ModelRequest, ModelStream, ToolCall, ToolChoice, ToolSpec,
};
#[cfg(feature = "openai")]
pub use openai::{
    parse_response, request_body, LiveStream, OpenAiModel, OpenAiStream, StreamParser, Timeouts,
    DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_RESPONSE_BYTES,
};
pub use policy::{
    ApprovalRequest, Decision, Gate, Gated, HumanAnswer, Mode, Orchestrated, Policy, Refusal,
    RefusalKind, RoundPlan, UnknownMode,
};
#[cfg(feature = "rig")]
pub use rig_hook::{HookEvent, OrchHook};
pub use scripted::{Planned, ScriptedModel};
pub use tools::{Tool, ToolRegistry, ToolResult};
