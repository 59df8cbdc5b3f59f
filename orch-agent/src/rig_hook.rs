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
//!   call through (once) or refuses it as rejected;
//! - **every call's life is the run host's** ([`crate::run_host`]): it begins on dispatch
//!   and finishes on its outcome, under the model's call id; the same call delivered again
//!   (the same id, tool and arguments) is not run again, and the question about a gated
//!   call is bound to its id.
//!
//! Built against rig-agent / rig-core **0.44.0** (the newest release that builds with
//! Rust 1.95; 0.45 and later require Rust 1.97.1).

use crate::model::{ToolCall, ToolChoice};
use crate::policy::{ApprovalRequest, Decision, Orchestrated, Policy, RefusalKind};
use crate::run_host::{approval_request, Answered, Begin, Finished, OnGate, RunHost};
use orch_runtime::{Call, CallDigest, QuestionId};
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
    /// The run host and what the hook keeps beside it (the call a run stopped on for a
    /// human, the answer applied to it, the calls running).
    approvals: Arc<Mutex<Approvals>>,
}

#[derive(Default)]
struct Approvals {
    /// The life of the session's calls ([`crate::run_host`]).
    host: RunHost,
    pending: Option<ApprovalRequest>,
    /// The last answer applied: the id of the call it was about, that call's digest and
    /// the decision. The model's next delivery of that exact call (under a new id, in a
    /// new run) is that call.
    answered: Option<(String, CallDigest, Decision)>,
    /// The calls admitted and not yet finished: rig's dispatch id → the call's id.
    running: std::collections::HashMap<u64, String>,
    /// For a tool call rig gives no id: a number for an id of its own.
    unnamed: u64,
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
    /// that question (it changed since, the question was answered already, it expired,
    /// or the request was altered). Then run the agent again: when the model repeats
    /// that exact call it runs once if approved, and is refused as rejected otherwise.
    pub fn answer(&self, request: &ApprovalRequest, decision: Decision) -> bool {
        let mut approvals = self.lock_approvals();
        let answered = self.with_session(|s| {
            approvals.host.answer_request(
                &self.policy,
                s,
                request,
                &decision,
                crate::protocol::now_ms(),
            )
        });
        let applied = matches!(answered, Answered::Applied { .. });
        if applied {
            approvals.pending = None;
            approvals.answered = Some((request.call.id.clone(), request.digest, decision));
        }
        applied
    }

    fn lock_approvals(&self) -> std::sync::MutexGuard<'_, Approvals> {
        self.approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A gated call the session now holds `question` about: wait for the approver, or
    /// stop the run.
    async fn gate(&self, call: ToolCall, question: QuestionId, dispatch: u64) -> DispatchAction {
        let tool = call.name.clone();
        let reason = match self.with_session(|s| s.check_tool(&tool)) {
            Err(refusal) => refusal.reason,
            Ok(()) => format!("`{tool}` needs a human's approval"),
        };
        let request = self.with_session(|s| approval_request(&*s, call, reason, question));
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
        // The request carries the call as the human saw it.
        self.begin(&request.call, dispatch).await
    }

    /// Begins the call `call` (rig's dispatch `dispatch`) in the run host: run it, skip
    /// it with the reason, or put it to a human.
    async fn begin(&self, call: &ToolCall, dispatch: u64) -> DispatchAction {
        let (begun, decision) = {
            let mut approvals = self.lock_approvals();
            let begun = self.with_session(|s| {
                approvals.host.begin(
                    &self.policy,
                    s,
                    &call.id,
                    &call.name,
                    &call.arguments,
                    OnGate::Ask,
                    crate::protocol::now_ms(),
                )
            });
            // The answer applied to this call is used up once the call ran or was
            // refused on it.
            let decision = match (&begun, &approvals.answered) {
                (Begin::Run | Begin::Refused(_), Some((id, _, _))) if *id == call.id => {
                    approvals.answered.take().map(|(_, _, d)| d)
                }
                _ => None,
            };
            if begun == Begin::Run {
                approvals.running.insert(dispatch, call.id.clone());
            }
            (begun, decision)
        };
        match begun {
            Begin::Run => DispatchAction::proceed(),
            Begin::Ask { question, .. } => {
                Box::pin(self.gate(call.clone(), question, dispatch)).await
            }
            Begin::Refused(refusal) if refusal.kind == RefusalKind::Rejected => {
                let tool = refusal.tool.clone();
                let why = Policy::rejected(refusal, decision.as_ref());
                DispatchAction::skip(self.refuse(&tool, why))
            }
            Begin::Refused(refusal) | Begin::Again(refusal) => {
                let tool = refusal.tool.clone();
                DispatchAction::skip(self.refuse(&tool, refusal.reason))
            }
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
        let digest = CallDigest::of_text(tool, arguments);
        let id = {
            let mut approvals = self.lock_approvals();
            match (&approvals.answered, event.call_id) {
                // The model's delivery of the call a human just answered (in a new run,
                // under a new id): that call.
                (Some((answered, d, _)), _) if *d == digest => answered.clone(),
                (_, Some(id)) => id.to_string(),
                (_, None) => {
                    approvals.unnamed += 1;
                    format!("rig-call-{}", approvals.unnamed)
                }
            }
        };
        let call = ToolCall {
            id,
            name: tool.to_owned(),
            arguments: arguments.to_owned(),
        };
        self.begin(&call, event.id.as_u64()).await
    }

    async fn on_outcome(&self, _ctx: &HookContext, event: OutcomeEvent<'_>) -> OutcomeAction {
        // Only a tool that completed successfully is recorded (the run protocol's rule,
        // docs/protocol.md: an error, like MCP's `isError`, is not a run, and the model
        // may call it again). rig hands a call this hook (or a layer) refused to this
        // hook too, as a *skipped* result; a tool rig does not know, or whose arguments
        // it could not decode, is an error: none of them ran.
        let Some(tool) = event.tool_name() else {
            return OutcomeAction::proceed();
        };
        let mut approvals = self.lock_approvals();
        // Only a call this hook admitted finishes here.
        let Some(id) = approvals.running.remove(&event.id.as_u64()) else {
            return OutcomeAction::proceed();
        };
        let ran = event.tool_result().filter(|r| r.is_success());
        // What it returned, for rules on arguments that read its values: one JSON block
        // as JSON, else the text.
        let text = ran.map(|result| {
            let output = result.output();
            match output.as_json() {
                Some(value) => value.to_string(),
                None => output
                    .as_text()
                    .map_or_else(|| output.render(), str::to_owned),
            }
        });
        let finished = self.with_session(|s| {
            approvals
                .host
                .finish(&self.policy, s, &id, tool, ran.is_some(), text.as_deref())
        });
        drop(approvals);
        if let Finished::Recorded(outcome) = finished {
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
