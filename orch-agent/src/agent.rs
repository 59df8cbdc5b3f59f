//! The orchestrated agent loop.

use crate::model::{
    ChatMessage, FinishReason, Model, ModelError, ModelEvent, ModelRequest, ModelStream, ToolCall,
    ToolChoice,
};
use crate::policy::{ApprovalRequest, Decision, Policy, RefusalKind, RoundPlan};
use crate::protocol;
use crate::run_host::{approval_request, Begin, Finished, OnGate, RunHost};
use crate::telemetry;
use crate::tools::ToolRegistry;
use orch_runtime::{Call, Machine, QuestionId, Session, StepEnum, Usage};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What happened to one tool call the model made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallReport {
    /// The call.
    pub call: ToolCall,
    /// Whether it was executed (false: refused, unknown, or bad arguments).
    pub executed: bool,
    /// Why it was not executed, when the orchestration or the host refused it (`None`
    /// when it ran, or when its arguments were not JSON).
    pub refusal: Option<RefusalKind>,
    /// The rule on arguments that refused it (`broken_rule`, semantics §16), by name.
    pub rule: Option<String>,
    /// The orchestration outcome when the tool ran and was recorded (`advanced`,
    /// `completed`, `free`, ...); `None` when it was not executed or returned an error
    /// (an error is not a run: nothing is recorded).
    pub outcome: Option<&'static str>,
    /// What the model was sent back: the tool's output, or the error.
    pub result: String,
}

/// One round of a turn: one model call and the tool calls it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundReport {
    /// 1-based, within the turn.
    pub number: usize,
    /// The tools offered.
    pub offered: Vec<String>,
    /// The tool choice sent.
    pub tool_choice: ToolChoice,
    /// The text the model produced.
    pub text: String,
    /// Its tool calls and what became of them.
    pub calls: Vec<ToolCallReport>,
    /// Tokens of this round.
    pub usage: Usage,
    /// The active template step after this round (name).
    pub active_step_after: Option<&'static str>,
    /// The sequence index after this round.
    pub sequence_index_after: usize,
}

/// Why a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model answered without (further) tool calls.
    Answered,
    /// The round limit (`options.maxSteps`) was reached.
    MaxRounds,
    /// The model called a gated tool (semantics §13): the turn is paused until a human
    /// approves or rejects the call ([`TurnReport::pending`], [`Agent::resume_turn`]).
    NeedsApproval,
}

/// A turn paused on a call that needs a human's approval: what to show the human, and
/// everything [`Agent::resume_turn`] needs to go on — serializable, so it can be kept in
/// any store (with the session and the conversation) and resumed after a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingApproval {
    /// The call waiting, and what to show the human.
    pub request: ApprovalRequest,
    /// The round (1-based, within the turn) whose calls are being run.
    pub round: usize,
    /// What that round offered.
    pub offered: Vec<String>,
    /// The tool choice of that round.
    pub tool_choice: ToolChoice,
    /// The round's calls after this one, not yet run.
    pub remaining: Vec<ToolCall>,
}

/// One user turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnReport {
    /// Every round.
    pub rounds: Vec<RoundReport>,
    /// The text of the last round.
    pub final_text: String,
    /// Tokens of the whole turn.
    pub usage: Usage,
    /// Why it ended.
    pub stop: StopReason,
    /// When `stop` is [`StopReason::NeedsApproval`]: the call waiting for a human.
    pub pending: Option<PendingApproval>,
}

/// A turn failed (the model could not be reached, or its stream broke), or a paused turn
/// cannot be resumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentError {
    /// The model failed.
    Model(ModelError),
    /// The pending approval does not belong to this session as it is now: the session no
    /// longer holds the question (an event was applied since, or it was answered
    /// already), or the pending state was altered. Nothing was run; ask the human again.
    StaleApproval(String),
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Model(e) => e.fmt(f),
            AgentError::StaleApproval(why) => {
                write!(f, "the pending approval cannot be resumed: {why}")
            }
        }
    }
}

impl std::error::Error for AgentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the model's error is this error's message.
            AgentError::Model(e) => e.source(),
            AgentError::StaleApproval(_) => None,
        }
    }
}

type RoundCallback<M> = Box<dyn FnMut(&RoundReport, &Session<M>) + Send>;
type TurnCallback<M> = Box<dyn FnMut(&TurnReport, &Session<M>) + Send>;

/// The cap on rounds (model calls) per turn when the template has no `options.maxSteps`.
pub const DEFAULT_MAX_ROUNDS: usize = 10;

/// Drives a model under a compiled orchestration machine `M`.
///
/// Per round it recomputes the allowed tools from the session (so a sequence
/// advances between the steps of one turn), offers only those, and forces the tool
/// choice when the sequence position allows exactly one tool. Every tool call is checked
/// before it runs; a disallowed call is not executed and the model is told what is
/// allowed now and what the sequence expects. Executed tools are recorded, usage is
/// accounted, and the system prompt describes the state after the latest transition.
pub struct Agent<M: Machine, Mo: Model> {
    model: Mo,
    tools: ToolRegistry,
    policy: Policy,
    /// The life of the run's calls: each call begins, is answered and finishes here
    /// ([`crate::run_host`]).
    host: RunHost,
    instructions: String,
    max_rounds: usize,
    on_round: Option<RoundCallback<M>>,
    on_turn: Option<TurnCallback<M>>,
}

impl<M: Machine, Mo: Model> Agent<M, Mo> {
    /// An agent over `model` with `tools`. A turn has at most the template's
    /// `options.maxSteps` rounds, or [`DEFAULT_MAX_ROUNDS`] when the template sets
    /// none ([`Agent::max_rounds`] overrides it).
    pub fn new(model: Mo, tools: ToolRegistry) -> Self {
        Agent {
            model,
            policy: Policy::new(tools.names()),
            host: RunHost::new(),
            tools,
            instructions: String::new(),
            max_rounds: M::max_rounds()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(DEFAULT_MAX_ROUNDS)
                .max(1),
            on_round: None,
            on_turn: None,
        }
    }

    /// Goes on from `host`: the run host of the run this agent drives (its calls by id,
    /// [`RunHost::decode`] of what [`Agent::run_host`] encoded), so that a call the
    /// model delivers again after a restart is answered as before it. An agent drives
    /// one run: its run host remembers that run's calls by id.
    #[must_use]
    pub fn with_run_host(mut self, host: RunHost) -> Self {
        self.host = host;
        self
    }

    /// The run host of the run this agent drives: keep its bytes
    /// ([`RunHost::encode`]) beside the session's snapshot.
    pub fn run_host(&self) -> &RunHost {
        &self.host
    }

    /// Writes a decision record of every event the loop applies to the session (the
    /// host's tools, the user's messages, each call presented, each tool that ran, each
    /// question put to a human and its answer) to `auditor` ([`crate::audit`]).
    #[must_use]
    pub fn audited(mut self, auditor: std::sync::Arc<crate::audit::Auditor>) -> Self {
        self.policy = self.policy.audited(auditor);
        self
    }

    /// Enforces the template ([`Mode::Enforce`](crate::Mode), the default) or only
    /// judges and records each call ([`Mode::Observe`](crate::Mode)): the model is then
    /// offered every tool and forced to none, every call runs, and the decision log
    /// says what orch would have refused or asked (docs/rollout.md).
    #[must_use]
    pub fn in_mode(mut self, mode: crate::Mode) -> Self {
        self.policy = self.policy.in_mode(mode);
        self
    }

    /// The base system prompt (the orchestration fragment is appended to it).
    #[must_use]
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = text.into();
        self
    }

    /// The cap on rounds (model calls) per turn (at least 1).
    #[must_use]
    pub fn max_rounds(mut self, n: usize) -> Self {
        self.max_rounds = n.max(1);
        self
    }

    /// Called after every round with the session state after it.
    #[must_use]
    pub fn on_round_finish(
        mut self,
        f: impl FnMut(&RoundReport, &Session<M>) + Send + 'static,
    ) -> Self {
        self.on_round = Some(Box::new(f));
        self
    }

    /// Called after every turn with the session state after it.
    #[must_use]
    pub fn on_turn_finish(
        mut self,
        f: impl FnMut(&TurnReport, &Session<M>) + Send + 'static,
    ) -> Self {
        self.on_turn = Some(Box::new(f));
        self
    }

    /// The model.
    pub fn model(&self) -> &Mo {
        &self.model
    }

    /// The orchestration rules this agent applies (offered tools, forced choice,
    /// refusals, recording).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Runs one user turn: `message` is appended to `conversation`, and so is everything
    /// the model and the tools say. When the model calls a gated tool the turn pauses:
    /// the report's `stop` is [`StopReason::NeedsApproval`] and `pending` says which call
    /// waits; go on with [`Agent::resume_turn`].
    pub async fn run_turn(
        &mut self,
        session: &mut Session<M>,
        conversation: &mut Vec<ChatMessage>,
        message: &str,
    ) -> Result<TurnReport, AgentError> {
        // The host's tools are the available set A of the session (semantics §8).
        self.policy.prepare(session);
        self.policy.message(session, message);
        conversation.push(ChatMessage::User {
            content: message.to_owned(),
        });
        let span = telemetry::workflow(M::tables().name);
        let turn = span.run(self.drive(session, conversation, 1, None)).await;
        span.step_after(session.step().map(StepEnum::name));
        turn
    }

    /// Resumes a turn paused on `pending` with a human's `decision`: approved, the call
    /// runs (once); rejected, it does not and the model is told. Then the round's other
    /// calls run and the turn goes on where it stopped. `session` and `conversation` are
    /// those of the pause (restored from a store after a restart, for instance): a
    /// session whose state changed since is refused with [`AgentError::StaleApproval`],
    /// running nothing. The report covers the resumed part of the turn.
    pub async fn resume_turn(
        &mut self,
        session: &mut Session<M>,
        conversation: &mut Vec<ChatMessage>,
        pending: PendingApproval,
        decision: Decision,
    ) -> Result<TurnReport, AgentError> {
        self.policy.prepare(session);
        let answered = self.host.answer_request(
            &self.policy,
            session,
            &pending.request,
            &decision,
            protocol::now_ms(),
        );
        if let Some(refusal) = answered.refusal() {
            return Err(AgentError::StaleApproval(format!(
                "the session no longer waits for this approval ({}): it changed since it was asked for, it was answered already, it expired, or the pending call was altered. {}",
                answered.as_str(),
                refusal.reason
            )));
        }
        let rejection = (!decision.approves()).then_some(decision);
        let mut calls = Vec::with_capacity(pending.remaining.len() + 1);
        calls.push(pending.request.call);
        calls.extend(pending.remaining);
        let round = Round {
            number: pending.round,
            offered: pending.offered,
            tool_choice: pending.tool_choice,
            text: String::new(),
            usage: Usage::default(),
            reports: Vec::new(),
            calls,
            rejection,
        };
        let span = telemetry::workflow(M::tables().name);
        let turn = span
            .run(self.drive(session, conversation, pending.round, Some(round)))
            .await;
        span.step_after(session.step().map(StepEnum::name));
        turn
    }

    /// The rounds of a turn from round `first`; `resumed` is a round whose model call
    /// was made before a pause, and whose calls are run first.
    async fn drive(
        &mut self,
        session: &mut Session<M>,
        conversation: &mut Vec<ChatMessage>,
        first: usize,
        mut resumed: Option<Round>,
    ) -> Result<TurnReport, AgentError> {
        let mut turn = TurnReport {
            rounds: Vec::new(),
            final_text: String::new(),
            usage: Usage::default(),
            stop: StopReason::MaxRounds,
            pending: None,
        };
        for number in first..=self.max_rounds.max(first) {
            let mut round = match resumed.take() {
                Some(round) => round,
                None => self.call_model(session, conversation, number).await?,
            };
            turn.usage.prompt = turn.usage.prompt.saturating_add(round.usage.prompt);
            turn.usage.completion = turn.usage.completion.saturating_add(round.usage.completion);
            // Two calls under one id: a result or an approval could be taken for the
            // other one. Neither runs.
            let shared_ids = protocol::shared_ids(round.calls.iter().map(|c| c.id.as_str()));
            let mut calls = std::mem::take(&mut round.calls).into_iter();
            while let Some(call) = calls.next() {
                if shared_ids.contains(&call.id) {
                    let refusal = protocol::shared_id_refusal(&call.name, &call.id);
                    conversation.push(ChatMessage::Tool {
                        tool_call_id: call.id.clone(),
                        content: refusal.reason.clone(),
                    });
                    round.reports.push(ToolCallReport {
                        call,
                        executed: false,
                        refusal: Some(refusal.kind),
                        rule: refusal.rule,
                        outcome: None,
                        result: refusal.reason,
                    });
                    continue;
                }
                // Checked against the state after the previous call of this same step.
                let rejection = round.rejection.take();
                let report = match self.execute_traced(session, call, rejection).await {
                    Executed::Done(report) => report,
                    Executed::Paused(call, reason, question) => {
                        // The session holds the question until the answer or the next
                        // event: the host saves it with the pending state.
                        turn.pending = Some(PendingApproval {
                            request: approval_request(&*session, call, reason, question),
                            round: round.number,
                            offered: round.offered.clone(),
                            tool_choice: round.tool_choice.clone(),
                            remaining: calls.collect(),
                        });
                        turn.stop = StopReason::NeedsApproval;
                        let step = round.report(session);
                        turn.final_text = step.text.clone();
                        turn.rounds.push(step);
                        return Ok(turn);
                    }
                };
                conversation.push(ChatMessage::Tool {
                    tool_call_id: report.call.id.clone(),
                    content: report.result.clone(),
                });
                round.reports.push(report);
            }
            let no_calls = round.reports.is_empty();
            let forced = match &round.tool_choice {
                ToolChoice::Tool(t) => Some(t.clone()),
                _ => None,
            };
            let step = round.report(session);
            if let Some(f) = self.on_round.as_mut() {
                f(&step, session);
            }
            turn.final_text = step.text.clone();
            turn.rounds.push(step);
            if no_calls {
                match forced {
                    // The one allowed tool was required and the model answered instead:
                    // tell it, and give it another step.
                    Some(t) => conversation.push(ChatMessage::System {
                        content: Policy::forced_reminder(&t),
                    }),
                    None => {
                        turn.stop = StopReason::Answered;
                        break;
                    }
                }
            }
        }
        if let Some(f) = self.on_turn.as_mut() {
            f(&turn, session);
        }
        Ok(turn)
    }

    /// One model call: what it said and the calls it made (appended to the conversation).
    async fn call_model(
        &mut self,
        session: &mut Session<M>,
        conversation: &mut Vec<ChatMessage>,
        number: usize,
    ) -> Result<Round, AgentError> {
        let RoundPlan {
            offered,
            tool_choice,
        } = self.policy.plan(session);
        let mut messages = Vec::with_capacity(conversation.len() + 1);
        messages.push(ChatMessage::System {
            content: self.system_prompt(session),
        });
        messages.extend(conversation.iter().cloned());
        let request = ModelRequest {
            messages,
            tools: self.tools.specs(offered.iter().map(String::as_str)),
            tool_choice: tool_choice.clone(),
        };
        let mut stream = self
            .model
            .complete(request)
            .await
            .map_err(AgentError::Model)?;
        let mut text = String::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut usage = Usage::default();
        while let Some(event) = stream.next().await {
            match event.map_err(AgentError::Model)? {
                ModelEvent::TextDelta(t) => text.push_str(&t),
                ModelEvent::ToolCall(c) => calls.push(c),
                ModelEvent::Usage { prompt, completion } => {
                    session.record_usage(prompt, completion);
                    usage.prompt = usage.prompt.saturating_add(prompt);
                    usage.completion = usage.completion.saturating_add(completion);
                }
                ModelEvent::Finish(
                    FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Length,
                )
                | ModelEvent::Finish(FinishReason::Other(_)) => {}
            }
        }
        conversation.push(ChatMessage::Assistant {
            content: text.clone(),
            tool_calls: calls.clone(),
        });
        Ok(Round {
            number,
            offered,
            tool_choice,
            text,
            usage,
            reports: Vec::with_capacity(calls.len()),
            calls,
            rejection: None,
        })
    }

    /// [`Agent::execute`] in an `execute_tool` span (feature `otel`): the decision, the
    /// rule that took it, a refusal's reason and a step transition.
    async fn execute_traced(
        &mut self,
        session: &mut Session<M>,
        call: ToolCall,
        rejection: Option<Decision>,
    ) -> Executed {
        let step = session.step().map(StepEnum::name);
        let index = session.sequence_index();
        let span = telemetry::tool(&call.name, &call.id, step, index, self.policy.mode());
        #[cfg(feature = "otel")]
        let admitting = crate::audit::rule_admitting(&*session);
        let executed = span.run(self.execute(session, call, rejection)).await;
        #[cfg(feature = "otel")]
        match &executed {
            Executed::Done(r) if r.executed => {
                span.decided("admitted", Some(&admitting), None);
                let after = session.step().map(StepEnum::name);
                span.transition(step, after, session.sequence_index());
            }
            Executed::Done(r) => {
                let rule = r
                    .refusal
                    .map(|kind| crate::audit::rule_of(&*session, &r.call.name, kind));
                let decision = r.refusal.map_or("invalid_arguments", RefusalKind::as_str);
                span.decided(decision, rule.as_ref(), Some(&r.result));
            }
            Executed::Paused(call, reason, _) => {
                let rule = crate::audit::rule_of(&*session, &call.name, RefusalKind::NeedsApproval);
                span.decided("needs_approval", Some(&rule), Some(reason));
            }
        }
        executed
    }

    /// Checks, executes and records one tool call through the run host; pauses on a
    /// gated call without a verdict. `rejection` is set for the call a human just
    /// rejected (with the human's reason, if any).
    async fn execute(
        &mut self,
        session: &mut Session<M>,
        call: ToolCall,
        rejection: Option<Decision>,
    ) -> Executed {
        let refuse_by = |call: ToolCall, kind: Option<RefusalKind>, rule, why: String| {
            Executed::Done(ToolCallReport {
                call,
                executed: false,
                refusal: kind,
                rule,
                outcome: None,
                result: why,
            })
        };
        let refuse = |call, kind, why| refuse_by(call, kind, None, why);
        let Some(tool) = self.tools.get(&call.name) else {
            // Unknown to the host: the policy's refusal says so.
            let why = match self.policy.admit(session, &call.name) {
                Err(refusal) => refusal.reason,
                Ok(()) => format!(
                    "error: there is no tool `{}`. {}",
                    call.name,
                    self.policy.what_now(session, true)
                ),
            };
            return refuse(call, Some(RefusalKind::UnknownTool), why);
        };
        // Arguments that are not JSON are refused before anything is judged or asked.
        let arguments = match parse_arguments(&call) {
            Ok(v) => v,
            Err(why) => return refuse(call, None, why),
        };
        // One clock reading judges the call and words the question about it.
        let now = protocol::now_ms();
        let begun = self.host.begin(
            &self.policy,
            session,
            &call.id,
            &call.name,
            &call.arguments,
            OnGate::Ask,
            now,
        );
        match begun {
            Begin::Run => {}
            Begin::Ask { question, refusal } => {
                // What to show a human: the session's own words, not the model's.
                let checked = Call::of_text(&call.name, &call.arguments).at(now);
                let why = match session.check_call_name(&call.name, &checked) {
                    Err(denied) => denied.to_string(),
                    Ok(()) => refusal.reason,
                };
                return Executed::Paused(call, why, question);
            }
            Begin::Refused(refusal) if refusal.kind == RefusalKind::Rejected => {
                let why = Policy::rejected(refusal, rejection.as_ref());
                return refuse(call, Some(RefusalKind::Rejected), why);
            }
            Begin::Refused(refusal) | Begin::Again(refusal) => {
                return refuse_by(call, Some(refusal.kind), refusal.rule, refusal.reason);
            }
        }
        let (result, outcome) = match tool.call(arguments).await {
            // Only a call that completed successfully counts as run, and is recorded (the
            // run protocol's rule, docs/protocol.md); the result goes with it: rules on
            // arguments may read its values.
            Ok(out) => {
                let finished = self.host.finish(
                    &self.policy,
                    session,
                    &call.id,
                    &call.name,
                    true,
                    Some(&out),
                );
                let outcome = match finished {
                    Finished::Recorded(outcome) => Some(outcome),
                    Finished::NotRun(_) | Finished::NotAdmitted => None,
                };
                (out, outcome)
            }
            // An error is not a run (as MCP's `isError`): the model may call it again.
            Err(e) => {
                self.host
                    .finish(&self.policy, session, &call.id, &call.name, false, None);
                (format!("error: {e}"), None)
            }
        };
        Executed::Done(ToolCallReport {
            call,
            executed: true,
            refusal: None,
            rule: None,
            outcome,
            result,
        })
    }

    /// The system prompt: the instructions, then the orchestration state after the
    /// latest transition.
    pub fn system_prompt(&self, session: &Session<M>) -> String {
        let mut out = self.instructions.clone();
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&orchestration_prompt(
            session,
            &self.policy.offered(session),
        ));
        out
    }
}

/// The orchestration part of the system prompt, rendered from the session's current
/// state: the active step and its description, the sequence, the position in it and the
/// next expected tool, and the tools allowed now (`offered`).
pub fn orchestration_prompt<M: Machine>(session: &Session<M>, offered: &[String]) -> String {
    let mut out = String::from("## Orchestration\n");
    match session.step() {
        None => out.push_str("No step is active.\n"),
        Some(step) => {
            out.push_str(&format!("Active step: {}", step.name()));
            if let Some(d) = step.description() {
                out.push_str(&format!(" — {d}"));
            }
            out.push('\n');
            let groups: Vec<String> = session
                .sequence()
                .map(|g| g.names().collect::<Vec<_>>().join(" | "))
                .collect();
            if !groups.is_empty() {
                out.push_str(&format!("Sequence: {}\n", groups.join(" → ")));
                let index = session.sequence_index();
                match groups.get(index) {
                    Some(next) => out.push_str(&format!(
                        "Position: {} of {}; next tool: {next}\n",
                        index + 1,
                        groups.len()
                    )),
                    None => out.push_str("Position: the sequence is complete; synthesize the results of every tool.\n"),
                }
            }
        }
    }
    if let Some(blocked) = session.blocked_on() {
        let names: Vec<&str> = blocked.names().collect();
        out.push_str(&format!(
            "The sequence is waiting for `{}`, which is not available; answer without tools.\n",
            names.join("` or `")
        ));
    } else if offered.is_empty() {
        out.push_str("No tools are allowed now.\n");
    } else {
        out.push_str(&format!("Tools allowed now: {}\n", offered.join(", ")));
    }
    out
}

/// A round being run: its model call's answer and what became of its calls so far.
struct Round {
    number: usize,
    offered: Vec<String>,
    tool_choice: ToolChoice,
    text: String,
    usage: Usage,
    reports: Vec<ToolCallReport>,
    /// Calls not yet run.
    calls: Vec<ToolCall>,
    /// Set when resuming a rejected call: the human's decision.
    rejection: Option<Decision>,
}

impl Round {
    fn report<M: Machine>(&mut self, session: &Session<M>) -> RoundReport {
        RoundReport {
            number: self.number,
            offered: self.offered.clone(),
            tool_choice: self.tool_choice.clone(),
            text: self.text.clone(),
            calls: std::mem::take(&mut self.reports),
            usage: self.usage,
            active_step_after: session.step().map(StepEnum::name),
            sequence_index_after: session.sequence_index(),
        }
    }
}

/// What became of one call.
enum Executed {
    /// Run or refused.
    Done(ToolCallReport),
    /// Gated and without a verdict: the turn pauses on it (with orch's reason and the
    /// question the session holds about it).
    Paused(ToolCall, String, QuestionId),
}

/// A call's arguments as JSON (empty text is `{}`), or the refusal the model is sent.
fn parse_arguments(call: &ToolCall) -> Result<serde_json::Value, String> {
    if call.arguments.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(&call.arguments).map_err(|e| {
        format!(
            "error: the arguments of `{}` are not valid JSON ({e}); the tool was not run",
            call.name
        )
    })
}
