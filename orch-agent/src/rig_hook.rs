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
//!   retried with the reminder of what the sequence requires;
//! - **a gated call** (`approve`, semantics §13) waits for a human: with an
//!   [`OrchHook::approver`], the call waits in `on_dispatch` while the approver decides
//!   (it runs once if approved; the model is told if not); without one, the run stops
//!   there ([`OrchHook::pending`] says which call waits, serializable with the session),
//!   and once [`OrchHook::answer`] applied the human's answer the next run lets that exact
//!   call through (once) or refuses it as rejected.
//!
//! Built against rig-agent / rig-core **0.44.0** (the newest release that builds with
//! Rust 1.95; 0.45 and later require Rust 1.97.1).

use crate::model::{ToolCall, ToolChoice};
use crate::policy::{ApprovalRequest, Decision, Orchestrated, Policy, Refusal, RefusalKind};
use orch_runtime::{Call, CallDigest};
use rig_agent::agent::{
    AgentHook, CompletionCallAction, CompletionCallEvent, DispatchAction, DispatchEvent,
    HookContext, InvalidToolCallAction, InvalidToolCallContext, InvalidToolCallReason,
    ModelTurnAction, ModelTurnFinished, OutcomeAction, OutcomeEvent, RetryRequest,
};
use rig_agent::run::patch::RequestPatch;
use rig_core::message::{AssistantContent, ToolChoice as RigToolChoice, ToolName};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

/// What the hook did, for a host that shows or logs it (see [`OrchHook::on_event`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// A gated call waits for a human (semantics §13).
    AwaitingApproval {
        /// The call and what to show the human.
        request: ApprovalRequest,
    },
}

type Listener = Arc<dyn Fn(&HookEvent) + Send + Sync>;
type Approver =
    Arc<dyn Fn(ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send>> + Send + Sync>;

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
    approver: Option<Approver>,
    /// The call a run stopped on for a human, and the last answer applied (for the
    /// model's text when it was a rejection).
    approvals: Arc<Mutex<Approvals>>,
}

#[derive(Default)]
struct Approvals {
    pending: Option<ApprovalRequest>,
    answered: Option<(CallDigest, Decision)>,
}

impl<S> Clone for OrchHook<S> {
    fn clone(&self) -> Self {
        OrchHook {
            policy: self.policy.clone(),
            session: Arc::clone(&self.session),
            listener: self.listener.clone(),
            approver: self.approver.clone(),
            approvals: Arc::clone(&self.approvals),
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
            approver: None,
            approvals: Arc::default(),
        }
    }

    /// Asks `approver` about each gated call while the call waits: it runs (once) if the
    /// decision approves it, and the model is told if not. Without an approver a gated
    /// call stops the run (see [`OrchHook::pending`]).
    pub fn approver<F, Fut>(mut self, approver: F) -> Self
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Decision> + Send + 'static,
    {
        self.approver = Some(Arc::new(move |request| Box::pin(approver(request))));
        self
    }

    /// The gated call the last run stopped on (no approver): what to show the human.
    /// The session holds the question meanwhile; keep both (the request serializes) and
    /// apply the answer with [`OrchHook::answer`].
    pub fn pending(&self) -> Option<ApprovalRequest> {
        self.lock_approvals().pending.clone()
    }

    /// Applies a human's answer to `request` (from [`OrchHook::pending`], possibly saved
    /// and loaded since): `false`, changing nothing, when the session no longer holds
    /// that question. Then run the agent again: when the model repeats that exact call
    /// it runs once if approved, and is refused as rejected otherwise.
    pub fn answer(&self, request: &ApprovalRequest, decision: Decision) -> bool {
        let applied = self.with_session(|s| self.policy.answer(s, request, &decision));
        if applied {
            let mut approvals = self.lock_approvals();
            approvals.pending = None;
            approvals.answered = Some((request.digest, decision));
        }
        applied
    }

    fn lock_approvals(&self) -> std::sync::MutexGuard<'_, Approvals> {
        self.approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A gated call of `tool`: ask, then either wait for the approver or stop the run.
    async fn gate(&self, call: ToolCall, digest: CallDigest) -> DispatchAction {
        let tool = call.name.clone();
        let reason = match self.with_session(|s| s.check_tool(&tool)) {
            Err(denial) => denial.message,
            Ok(()) => format!("`{tool}` needs a human's approval"),
        };
        let request = self.with_session(|s| self.policy.ask(s, call, reason));
        self.emit(HookEvent::AwaitingApproval {
            request: request.clone(),
        });
        let Some(approver) = self.approver.clone() else {
            let why = format!(
                "`{tool}` needs a human's approval of this call: the run stops here (OrchHook::pending says which call waits)"
            );
            self.lock_approvals().pending = Some(request);
            return DispatchAction::stop(why);
        };
        let decision = approver(request.clone()).await;
        if !self.answer(&request, decision) {
            let now = self.with_session(|s| self.policy.what_now(s, true));
            let why = format!("error: `{tool}` was not run: the session changed while a human decided about it. {now}");
            return DispatchAction::skip(self.refuse(&tool, why));
        }
        let checked = Call::new(digest, &request.call.arguments);
        // The request carries the call as the human saw it (its digest is `digest`).
        match self.with_session(|s| self.policy.admit_call(s, &tool, &checked)) {
            Ok(()) => DispatchAction::proceed(),
            Err(refusal) => self.refused(refusal, &digest),
        }
    }

    /// Skips a refused call with the reason (a rejection with the human's words).
    fn refused(&self, refusal: Refusal, digest: &CallDigest) -> DispatchAction {
        let tool = refusal.tool.clone();
        match refusal.kind {
            RefusalKind::Rejected => {
                let approvals = self.lock_approvals();
                let decision = approvals
                    .answered
                    .as_ref()
                    .filter(|(d, _)| d == digest)
                    .map(|(_, decision)| decision.clone());
                drop(approvals);
                let why = Policy::rejected(refusal, decision.as_ref());
                DispatchAction::skip(self.refuse(&tool, why))
            }
            _ => DispatchAction::skip(self.refuse(&tool, refusal.reason)),
        }
    }

    /// Calls `listener` with each decision the hook takes.
    pub fn on_event(mut self, listener: impl Fn(&HookEvent) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Applies a user message to the session (the hook sees tool calls only; the host
    /// passes the user's messages), through the policy, so an audited policy records it.
    pub fn user_message(&self, text: &str) {
        self.with_session(|s| self.policy.message(s, text));
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
        let arguments = event.tool_args().unwrap_or_default();
        let checked = Call::of_text(tool, arguments);
        let digest = checked.digest;
        match self.with_session(|s| self.policy.admit_call(s, tool, &checked)) {
            Err(refusal) if refusal.kind == RefusalKind::NeedsApproval => {
                let call = ToolCall {
                    id: event.call_id.map(|id| id.to_string()).unwrap_or_default(),
                    name: tool.to_owned(),
                    arguments: arguments.to_owned(),
                };
                self.gate(call, digest).await
            }
            // Admitted (consuming an approval), or refused with the reason.
            Ok(()) => DispatchAction::proceed(),
            Err(refusal) => self.refused(refusal, &digest),
        }
    }

    async fn on_outcome(&self, _ctx: &HookContext, event: OutcomeEvent<'_>) -> OutcomeAction {
        // Only a tool that completed successfully is recorded (the run protocol's rule,
        // docs/protocol.md: an error, like MCP's `isError`, is not a run, and the model
        // may call it again). rig hands a call this hook (or a layer) refused to this
        // hook too, as a *skipped* result; a tool rig does not know, or whose arguments
        // it could not decode, is an error: none of them ran.
        let ran = event.tool_result().filter(|r| r.is_success());
        if let (Some(tool), Some(result)) = (event.tool_name(), ran) {
            // What it returned, for rules on arguments that read its values: one JSON
            // block as JSON, else the text.
            let output = result.output();
            let text = match output.as_json() {
                Some(value) => value.to_string(),
                None => output
                    .as_text()
                    .map_or_else(|| output.render(), str::to_owned),
            };
            let outcome = self.with_session(|s| self.policy.record_result(s, tool, &text));
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
            _ => {
                let call = Call::of_text(tool, event.args.as_deref().unwrap_or_default());
                match self.with_session(|s| self.policy.refusal_of(s, tool, &call)) {
                    Some(refusal) => refusal.reason,
                    None => {
                        let now = self.with_session(|s| self.policy.what_now(s, true));
                        format!(
                            "error: `{tool}` was not run: it is not available in this call. {now}"
                        )
                    }
                }
            }
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
