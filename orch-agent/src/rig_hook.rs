//! Orchestration inside a [rig](https://crates.io/crates/rig-agent) agent: an
//! [`AgentHook`] that applies the [`Policy`] at rig's own boundaries, so a rig user keeps
//! rig's agent, providers and tools.
//!
//! - **before each model call** (`on_completion_call`): the request is patched to
//!   advertise only the tools the session allows now (`active_tools`) and to force the
//!   one the sequence expects (`tool_choice`);
//! - **before each tool runs** (`on_dispatch`): a call the orchestration does not allow
//!   is skipped; the model receives the reason as the tool's result;
//! - **a call rig cannot dispatch** (`on_invalid_tool_call`: an unknown tool, arguments
//!   that are not a JSON object): skipped with the reason, never run;
//! - **after a tool ran** (`on_outcome`): it is recorded, and the next model call sees
//!   the new state;
//! - **a text answer while a tool is forced** (`on_model_turn_finished`): the turn is
//!   retried with the reminder of what the sequence requires.
//!
//! Built against rig-agent / rig-core **0.44.0** (the newest release that builds with
//! Rust 1.95; 0.45 and later require Rust 1.97.1).

use crate::model::ToolChoice;
use crate::policy::{Orchestrated, Policy};
use rig_agent::agent::{
    AgentHook, CompletionCallAction, CompletionCallEvent, DispatchAction, DispatchEvent,
    HookContext, InvalidToolCallAction, InvalidToolCallContext, InvalidToolCallReason,
    ModelTurnAction, ModelTurnFinished, OutcomeAction, OutcomeEvent, RetryRequest,
};
use rig_agent::run::patch::RequestPatch;
use rig_core::message::{AssistantContent, ToolChoice as RigToolChoice, ToolName};
use std::sync::{Arc, Mutex, PoisonError};

/// What the hook did, for a host that shows or logs it (see [`OrchHook::on_event`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookEvent {
    /// A model call is about to be made with these tools and this choice.
    ModelCall {
        /// rig's one-based model-call index in the run.
        turn: usize,
        /// The tools advertised.
        offered: Vec<String>,
        /// The tool choice.
        tool_choice: ToolChoice,
    },
    /// A tool call was refused; the model receives `reason`.
    Refused {
        /// The tool the model asked for.
        tool: String,
        /// What the model is told.
        reason: String,
    },
    /// A tool ran and was recorded.
    Recorded {
        /// The tool.
        tool: String,
        /// The outcome (`advanced`, `completed`, `free`, ...).
        outcome: &'static str,
    },
    /// The model answered with text while a tool was forced: the turn is retried.
    Reminded {
        /// The forced tool.
        tool: String,
    },
}

type Listener = Arc<dyn Fn(&HookEvent) + Send + Sync>;

/// The orchestration of one session as a rig [`AgentHook`]. Give it to
/// `AgentBuilder::add_hook`; the session it drives is shared with the host (read it
/// between runs, snapshot it, store it):
///
/// ```ignore
/// let session = Arc::new(Mutex::new(cognitive_reasoner::Session::new()));
/// let hook = OrchHook::new(Policy::new(["search", "think", "reflect"]), session.clone());
/// let agent = AgentBuilder::new(model).dynamic_tools(tools).add_hook(hook).build();
/// session.lock().unwrap().on_user_message(&prompt);
/// let answer = agent.prompt(prompt.as_str()).max_turns(10).await?;
/// ```
///
/// The session receives the user's messages from the host (`on_user_message`), as with
/// orch's own loop; the hook sees tool calls only. Run the agent with rig's default tool
/// concurrency (one at a time) so that each call is admitted against the state after
/// the previous one.
pub struct OrchHook<S> {
    policy: Policy,
    session: Arc<Mutex<S>>,
    listener: Option<Listener>,
}

impl<S> Clone for OrchHook<S> {
    fn clone(&self) -> Self {
        OrchHook {
            policy: self.policy.clone(),
            session: Arc::clone(&self.session),
            listener: self.listener.clone(),
        }
    }
}

impl<S: Orchestrated + Send + 'static> OrchHook<S> {
    /// The hook for `session`, under `policy` (the host's tools). Prepares the session
    /// for the host's tools.
    pub fn new(policy: Policy, session: Arc<Mutex<S>>) -> Self {
        policy.prepare(&mut *session.lock().unwrap_or_else(PoisonError::into_inner));
        OrchHook {
            policy,
            session,
            listener: None,
        }
    }

    /// Calls `listener` with each decision the hook takes.
    pub fn on_event(mut self, listener: impl Fn(&HookEvent) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// The session.
    pub fn session(&self) -> &Arc<Mutex<S>> {
        &self.session
    }

    fn with_session<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.session.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn emit(&self, event: HookEvent) {
        if let Some(listener) = &self.listener {
            listener(&event);
        }
    }

    fn refuse(&self, tool: &str, reason: String) -> String {
        self.emit(HookEvent::Refused {
            tool: tool.to_owned(),
            reason: reason.clone(),
        });
        reason
    }
}

fn rig_choice(choice: &ToolChoice) -> RigToolChoice {
    match choice {
        ToolChoice::Auto => RigToolChoice::Auto,
        ToolChoice::None => RigToolChoice::None,
        ToolChoice::Tool(name) => match ToolName::new(name.as_str()) {
            Ok(name) => RigToolChoice::Specific {
                function_names: vec![name],
            },
            // Tool names are never empty; if one were, let the model choose.
            Err(_) => RigToolChoice::Auto,
        },
    }
}

impl<S: Orchestrated + Send + 'static> AgentHook for OrchHook<S> {
    fn name(&self) -> Option<String> {
        Some("orch".to_owned())
    }

    async fn on_completion_call(
        &self,
        _ctx: &HookContext,
        event: CompletionCallEvent<'_>,
    ) -> CompletionCallAction {
        let plan = self.with_session(|s| self.policy.plan(s));
        let mut patch = RequestPatch::new();
        patch.active_tools = Some(plan.offered.clone());
        patch.tool_choice = Some(rig_choice(&plan.tool_choice));
        self.emit(HookEvent::ModelCall {
            turn: event.turn,
            offered: plan.offered,
            tool_choice: plan.tool_choice,
        });
        CompletionCallAction::patch(patch)
    }

    async fn on_dispatch(&self, _ctx: &HookContext, event: DispatchEvent<'_>) -> DispatchAction {
        let Some(tool) = event.tool_name() else {
            return DispatchAction::proceed();
        };
        match self.with_session(|s| self.policy.admit(s, tool)) {
            Ok(()) => DispatchAction::proceed(),
            Err(refusal) => DispatchAction::skip(self.refuse(tool, refusal.reason)),
        }
    }

    async fn on_outcome(&self, _ctx: &HookContext, event: OutcomeEvent<'_>) -> OutcomeAction {
        // Only a tool whose body ran has a tool result; a skipped call resolves failed.
        if let (Some(tool), Some(_)) = (event.tool_name(), event.tool_result()) {
            let outcome = self.with_session(|s| self.policy.record(s, tool));
            self.emit(HookEvent::Recorded {
                tool: tool.to_owned(),
                outcome,
            });
        }
        OutcomeAction::proceed()
    }

    async fn on_invalid_tool_call(
        &self,
        _ctx: &HookContext,
        event: &InvalidToolCallContext,
    ) -> Option<InvalidToolCallAction> {
        let tool = event.tool_name.as_str();
        let reason = match &event.reason {
            InvalidToolCallReason::MalformedArguments { error } => {
                let now = self.with_session(|s| self.policy.what_now(s, true));
                format!("error: `{tool}` was not run: its arguments are not a JSON object ({error}). {now}")
            }
            // Unknown to rig, or outside the forced choice: the policy says why.
            _ => match self.with_session(|s| self.policy.admit(s, tool)) {
                Err(refusal) => refusal.reason,
                Ok(()) => {
                    let now = self.with_session(|s| self.policy.what_now(s, true));
                    format!("error: `{tool}` was not run: it is not available in this call. {now}")
                }
            },
        };
        Some(InvalidToolCallAction::Skip {
            reason: self.refuse(tool, reason),
        })
    }

    async fn on_model_turn_finished(
        &self,
        _ctx: &HookContext,
        event: ModelTurnFinished<'_>,
    ) -> ModelTurnAction {
        let called = event
            .content
            .iter()
            .any(|c| matches!(c, AssistantContent::ToolCall(_)));
        if called {
            return ModelTurnAction::Continue;
        }
        match self.with_session(|s| self.policy.plan(s)).tool_choice {
            ToolChoice::Tool(tool) => {
                self.emit(HookEvent::Reminded { tool: tool.clone() });
                ModelTurnAction::Retry(RetryRequest::Feedback(Policy::forced_reminder(&tool)))
            }
            _ => ModelTurnAction::Continue,
        }
    }
}
