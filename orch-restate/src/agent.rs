//! `OrchAgent`: orch's agent loop as a Restate virtual object — each model call and each
//! tool call journaled, so a turn cut short by a crash resumes where it stopped.

use crate::run::{CallReply, CallRequest, Ended, OrchRunClient};
use crate::Runs;
use orch_agent::protocol;
use orch_agent::{
    ChatMessage, Model, ModelError, ModelErrorKind, ModelEvent, ModelRequest, ModelStream,
    ToolCall, ToolChoice, ToolSpec,
};
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// State: the conversation so far.
const MESSAGES: &str = "messages";

/// What one model call said, whole (what the journal keeps of it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelTurn {
    /// Its text.
    pub text: String,
    /// The tool calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Prompt and completion tokens.
    pub usage: (u64, u64),
}

type TurnFuture = Pin<Box<dyn Future<Output = Result<ModelTurn, ModelError>> + Send>>;

/// A [`Model`] behind a pointer, its stream read to the end.
trait TurnModel: Send + Sync {
    fn complete(&self, request: ModelRequest) -> TurnFuture;
}

struct Whole<M>(Arc<M>);

impl<M> TurnModel for Whole<M>
where
    M: Model + 'static,
    M::Stream: 'static,
{
    fn complete(&self, request: ModelRequest) -> TurnFuture {
        let model = Arc::clone(&self.0);
        Box::pin(async move {
            let mut stream = model.complete(request).await?;
            let mut turn = ModelTurn::default();
            while let Some(event) = stream.next().await {
                match event? {
                    ModelEvent::TextDelta(text) => turn.text.push_str(&text),
                    ModelEvent::ToolCall(call) => turn.tool_calls.push(call),
                    ModelEvent::Usage { prompt, completion } => {
                        turn.usage.0 += prompt;
                        turn.usage.1 += completion;
                    }
                    ModelEvent::Finish(_) => {}
                }
            }
            Ok(turn)
        })
    }
}

/// How a template's runs are driven by a model ([`Runs::agent`]).
pub(crate) struct Agent {
    model: Arc<dyn TurnModel>,
    system: String,
    tools: Vec<ToolSpec>,
    max_rounds: usize,
    model_attempts: u32,
}

impl Agent {
    pub(crate) fn new<M>(model: M, system: &str, tools: Vec<ToolSpec>) -> Self
    where
        M: Model + 'static,
        M::Stream: 'static,
    {
        Agent {
            model: Arc::new(Whole(Arc::new(model))),
            system: system.to_owned(),
            tools,
            max_rounds: 16,
            model_attempts: 3,
        }
    }
}

impl Runs {
    /// Drives runs of the template `template` with `model` (`OrchAgent`): `system` is the
    /// system message; `tools` describe the template's tools to the model (each turn
    /// offers those the run allows, and forces the one a sequence expects). At most 16
    /// model calls per turn. Call after [`Runs::template`] for that template.
    pub fn agent<M>(mut self, template: &str, model: M, system: &str, tools: Vec<ToolSpec>) -> Self
    where
        M: Model + 'static,
        M::Stream: 'static,
    {
        self.agents
            .insert(template.to_owned(), Agent::new(model, system, tools));
        self
    }

    fn agent_of(&self, key: &str) -> Result<&Agent, TerminalError> {
        let template = self.template_of(key).map_err(TerminalError::new)?;
        self.agents.get(template.machine.name()).ok_or_else(|| {
            TerminalError::new(format!(
                "the template `{}` has no agent: `Runs::agent` names the model that drives it",
                template.machine.name()
            ))
        })
    }
}

/// One tool call of a turn and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnCall {
    /// The tool.
    pub tool: String,
    /// What came of it.
    pub outcome: Ended,
}

/// What a turn came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnReply {
    /// The model's last text.
    pub text: String,
    /// The tool calls of the turn, in order.
    pub calls: Vec<TurnCall>,
    /// Model calls made.
    pub rounds: usize,
    /// The turn ended because the model stopped calling tools (`false`: it hit the
    /// limit of model calls per turn).
    pub finished: bool,
}

/// What the model is told of a call.
fn told(reply: &CallReply) -> String {
    match (reply.outcome, &reply.refusal) {
        (Ended::Refused, Some(refusal)) => refusal.reason.clone(),
        (Ended::Ran, _) => {
            protocol::result_values(reply.result.as_ref().unwrap_or(&serde_json::Value::Null))
                .unwrap_or_else(|| {
                    reply
                        .result
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                })
        }
        _ => format!(
            "error: the tool did not complete ({}).",
            reply.not_run.as_deref().unwrap_or("no result")
        ),
    }
}

/// The handlers, and the client the macro generates (`OrchAgentClient`: a method per
/// handler, documented on the handler).
mod handlers {
    #![allow(missing_docs)]
    use super::*;

    /// The agent loop of a run (the same key as its `OrchRun`).
    pub struct OrchAgent {
        pub(crate) runs: Arc<Runs>,
    }

    #[restate_sdk::object]
    impl OrchAgent {
        /// One turn: the user's message, then model calls and tool calls until the model
        /// answers without calling a tool. Each model call and each tool call is
        /// journaled: after a crash the turn goes on from where it stopped.
        #[handler]
        async fn turn(
            &self,
            ctx: ObjectContext<'_>,
            text: Json<String>,
        ) -> HandlerResult<Json<TurnReply>> {
            let Json(text) = text;
            let key = ctx.key().to_owned();
            let agent = self.runs.agent_of(&key)?;
            let mut messages: Vec<ChatMessage> = ctx
                .get::<Json<Vec<ChatMessage>>>(MESSAGES)
                .await?
                .map(|j| j.0)
                .unwrap_or_else(|| {
                    vec![ChatMessage::System {
                        content: agent.system.clone(),
                    }]
                });
            messages.push(ChatMessage::User {
                content: text.clone(),
            });
            ctx.object_client::<OrchRunClient>(key.clone())
                .message(Json(text))
                .call()
                .await?;
            let mut calls = Vec::new();
            let mut last_text = String::new();
            for round in 1..=agent.max_rounds {
                let Json(status) = ctx
                    .object_client::<OrchRunClient>(key.clone())
                    .status()
                    .call()
                    .await?;
                let tools: Vec<ToolSpec> = agent
                    .tools
                    .iter()
                    .filter(|t| status.allowed.contains(&t.name))
                    .cloned()
                    .collect();
                let tool_choice = match &status.forced {
                    Some(tool) => ToolChoice::Tool(tool.clone()),
                    None => ToolChoice::Auto,
                };
                let request = ModelRequest {
                    messages: messages.clone(),
                    tools,
                    tool_choice,
                };
                let model = Arc::clone(&agent.model);
                let Json(turn) = ctx
                    .run(|| async move {
                        model
                            .complete(request)
                            .await
                            .map(Json)
                            .map_err(|e| match e.kind {
                                // Retrying cannot mend these.
                                ModelErrorKind::Config | ModelErrorKind::TooLarge => {
                                    HandlerError::from(TerminalError::new(e.to_string()))
                                }
                                _ => HandlerError::from(e),
                            })
                    })
                    .name("model")
                    .retry_policy(RunRetryPolicy::default().max_attempts(agent.model_attempts))
                    .await?;
                messages.push(ChatMessage::Assistant {
                    content: turn.text.clone(),
                    tool_calls: turn.tool_calls.clone(),
                });
                last_text = turn.text;
                if turn.tool_calls.is_empty() {
                    ctx.set(MESSAGES, Json(messages));
                    return Ok(Json(TurnReply {
                        text: last_text,
                        calls,
                        rounds: round,
                        finished: true,
                    }));
                }
                let shared = protocol::shared_ids(turn.tool_calls.iter().map(|c| c.id.as_str()));
                for call in turn.tool_calls {
                    let shared = shared.contains(&call.id);
                    let (outcome, content) = tool_call(&ctx, &key, &call, shared).await?;
                    calls.push(TurnCall {
                        tool: call.name.clone(),
                        outcome,
                    });
                    messages.push(ChatMessage::Tool {
                        tool_call_id: call.id,
                        content,
                    });
                }
            }
            ctx.set(MESSAGES, Json(messages));
            Ok(Json(TurnReply {
                text: last_text,
                calls,
                rounds: agent.max_rounds,
                finished: false,
            }))
        }

        /// The conversation so far (system message first).
        #[handler]
        async fn conversation(
            &self,
            ctx: SharedObjectContext<'_>,
        ) -> HandlerResult<Json<Vec<ChatMessage>>> {
            Ok(Json(
                ctx.get::<Json<Vec<ChatMessage>>>(MESSAGES)
                    .await?
                    .map(|j| j.0)
                    .unwrap_or_default(),
            ))
        }
    }
}

pub use handlers::{OrchAgent, OrchAgentClient};

/// One tool call of the model's answer, through the run (`OrchRun/<key>/call`, durably):
/// what came of it and what the model is told. `shared`: another call of the same answer
/// has its id, so neither runs.
async fn tool_call(
    ctx: &ObjectContext<'_>,
    key: &str,
    call: &orch_agent::ToolCall,
    shared: bool,
) -> Result<(Ended, String), HandlerError> {
    if shared {
        let refusal = protocol::shared_id_refusal(&call.name, &call.id);
        return Ok((Ended::Refused, refusal.reason));
    }
    let arguments = match RawValue::from_string(call.arguments.clone()) {
        Ok(arguments) => arguments,
        Err(e) => {
            let told = format!(
                "error: `{}` was not run: its arguments are not JSON ({e}).",
                call.name
            );
            return Ok((Ended::Refused, told));
        }
    };
    let Json(reply) = ctx
        .object_client::<OrchRunClient>(key.to_owned())
        .call(Json(CallRequest {
            id: Some(call.id.clone()),
            tool: call.name.clone(),
            arguments: Some(arguments),
        }))
        .call()
        .await?;
    Ok((reply.outcome, told(&reply)))
}
