//! The orchestrated agent loop.

use crate::model::{
    ChatMessage, FinishReason, Model, ModelError, ModelEvent, ModelRequest, ModelStream, ToolCall,
    ToolChoice,
};
use crate::policy::{Policy, RoundPlan};
use crate::tools::ToolRegistry;
use orch_runtime::{Machine, Session, StepEnum, Usage};
use std::fmt;

/// What happened to one tool call the model made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallReport {
    /// The call.
    pub call: ToolCall,
    /// Whether it was executed (false: refused, unknown, or bad arguments).
    pub executed: bool,
    /// The orchestration outcome when executed (`advanced`, `completed`, `free`, ...).
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
}

/// A turn failed (the model could not be reached, or its stream broke).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentError {
    /// The model failed.
    Model(ModelError),
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Model(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AgentError {}

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
    /// the model and the tools say.
    pub async fn run_turn(
        &mut self,
        session: &mut Session<M>,
        conversation: &mut Vec<ChatMessage>,
        message: &str,
    ) -> Result<TurnReport, AgentError> {
        // The host's tools are the available set A of the session (semantics §8).
        self.policy.prepare(session);
        session.on_user_message(message);
        conversation.push(ChatMessage::User {
            content: message.to_owned(),
        });
        let mut turn = TurnReport {
            rounds: Vec::new(),
            final_text: String::new(),
            usage: Usage::default(),
            stop: StopReason::MaxRounds,
        };
        for number in 1..=self.max_rounds {
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
            turn.usage.prompt = turn.usage.prompt.saturating_add(usage.prompt);
            turn.usage.completion = turn.usage.completion.saturating_add(usage.completion);
            conversation.push(ChatMessage::Assistant {
                content: text.clone(),
                tool_calls: calls.clone(),
            });

            let mut reports = Vec::with_capacity(calls.len());
            for call in calls {
                // Checked against the state after the previous call of this same step.
                let report = self.execute(session, call).await;
                conversation.push(ChatMessage::Tool {
                    tool_call_id: report.call.id.clone(),
                    content: report.result.clone(),
                });
                reports.push(report);
            }
            let no_calls = reports.is_empty();
            let forced = match &tool_choice {
                ToolChoice::Tool(t) => Some(t.clone()),
                _ => None,
            };
            let step = RoundReport {
                number,
                offered,
                tool_choice,
                text: text.clone(),
                calls: reports,
                usage,
                active_step_after: session.step().map(StepEnum::name),
                sequence_index_after: session.sequence_index(),
            };
            if let Some(f) = self.on_round.as_mut() {
                f(&step, session);
            }
            turn.rounds.push(step);
            turn.final_text = text;
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

    /// Checks, executes and records one tool call.
    async fn execute(&self, session: &mut Session<M>, call: ToolCall) -> ToolCallReport {
        let refuse = |call: ToolCall, why: String| ToolCallReport {
            call,
            executed: false,
            outcome: None,
            result: why,
        };
        if let Err(refusal) = self.policy.admit(session, &call.name) {
            return refuse(call, refusal.reason);
        }
        let Some(tool) = self.tools.get(&call.name) else {
            let why = format!(
                "error: there is no tool `{}`. {}",
                call.name,
                self.policy.what_now(session, true)
            );
            return refuse(call, why);
        };
        let arguments = if call.arguments.trim().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            match serde_json::from_str(&call.arguments) {
                Ok(v) => v,
                Err(e) => {
                    let why = format!("error: the arguments of `{}` are not valid JSON ({e}); the tool was not run", call.name);
                    return refuse(call, why);
                }
            }
        };
        let result = match tool.call(arguments).await {
            Ok(out) => out,
            Err(e) => format!("error: {e}"),
        };
        // It ran (even if it reported an error): record it.
        let outcome = self.policy.record(session, &call.name);
        ToolCallReport {
            call,
            executed: true,
            outcome: Some(outcome),
            result,
        }
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
