//! A [`Model`] over [genai](https://crates.io/crates/genai): orch's agent loop drives any
//! provider genai speaks to (OpenAI and OpenAI-compatible servers, Anthropic, Gemini,
//! Ollama, Groq, DeepSeek, xAI, ...), with the same per-round offered tools, forced
//! choice and enforcement as with [`OpenAiModel`](crate::OpenAiModel).

use crate::model::{
    ChatMessage, EventList, FinishReason, Model, ModelError, ModelErrorKind, ModelEvent,
    ModelRequest, ToolCall, ToolChoice,
};
use genai::chat::{
    ChatMessage as GMessage, ChatOptions, ChatRequest, ContentPart, MessageContent, StopReason,
    Tool as GTool, ToolCall as GToolCall, ToolChoice as GToolChoice, ToolResponse,
};

/// A genai client and a model name, as a [`Model`].
///
/// ```no_run
/// use orch_agent::GenaiModel;
/// // Provider chosen from the model name, key from the provider's usual variable
/// // (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...): genai's defaults.
/// let client = genai::Client::new().expect("a genai client");
/// let model = GenaiModel::new(client, "claude-sonnet-4-5");
/// ```
///
/// To reach a particular server (a local OpenAI-compatible one, a proxy), give genai a
/// `ServiceTargetResolver`; the `genai_agent` example does it from `OPENAI_BASE_URL`.
/// Each round is one non-streaming `exec_chat` call. A chat-completions reply whose
/// tool-call arguments are not JSON (genai refuses the whole reply) is read from its raw
/// body, so the loop can refuse that call and tell the model why.
#[derive(Clone, Debug)]
pub struct GenaiModel {
    client: genai::Client,
    model: String,
    options: ChatOptions,
}

impl GenaiModel {
    /// `model` (genai's model name: it picks the provider unless the client's resolver
    /// says otherwise) through `client`.
    pub fn new(client: genai::Client, model: impl Into<String>) -> Self {
        GenaiModel {
            client,
            model: model.into(),
            options: ChatOptions::default(),
        }
    }

    /// `model` on the server at `base_url` (for instance `http://127.0.0.1:8080/v1`)
    /// speaking the protocol of `kind`: `AdapterKind::OpenAI` for OpenAI's chat
    /// completions and every OpenAI-compatible server (vLLM, llama.cpp's server,
    /// Ollama's `/v1`), `AdapterKind::Anthropic` for Anthropic's messages, and so on.
    /// `api_key` is sent as the provider sends keys (none when `None`).
    pub fn at(
        kind: genai::adapter::AdapterKind,
        base_url: &str,
        api_key: Option<String>,
        model: impl Into<String>,
    ) -> Result<Self, ModelError> {
        use genai::resolver::{AuthData, Endpoint, ServiceTargetResolver};
        let mut base = base_url.to_owned();
        if !base.ends_with('/') {
            base.push('/');
        }
        let resolver = ServiceTargetResolver::from_resolver_fn(
            move |target: genai::ServiceTarget| -> Result<genai::ServiceTarget, genai::resolver::Error> {
                Ok(genai::ServiceTarget {
                    endpoint: Endpoint::from_owned(base.clone()),
                    auth: AuthData::from_single(api_key.clone().unwrap_or_default()),
                    model: genai::ModelIden::new(kind, target.model.model_name),
                })
            },
        );
        let client = genai::Client::builder()
            .with_service_target_resolver(resolver)
            .build()
            .map_err(|e| {
                ModelError::new(
                    ModelErrorKind::Config,
                    format!("cannot build the genai client: {e}"),
                )
            })?;
        Ok(GenaiModel::new(client, model))
    }

    /// Chat options sent with every round (temperature, max tokens, ...). The tool
    /// choice is the orchestration's and is set per round.
    pub fn options(mut self, options: ChatOptions) -> Self {
        self.options = options;
        self
    }

    /// The genai request for one round.
    fn request(request: &ModelRequest) -> ChatRequest {
        let mut chat = ChatRequest::default();
        for message in &request.messages {
            let m = match message {
                ChatMessage::System { content } => GMessage::system(content.as_str()),
                ChatMessage::User { content } => GMessage::user(content.as_str()),
                ChatMessage::Assistant {
                    content,
                    tool_calls,
                } => {
                    let mut parts: Vec<ContentPart> = Vec::new();
                    if !content.is_empty() {
                        parts.push(ContentPart::Text(content.clone()));
                    }
                    for call in tool_calls {
                        parts.push(ContentPart::ToolCall(GToolCall {
                            call_id: call.id.clone(),
                            fn_name: call.name.clone(),
                            // Arguments that are not JSON are kept as the text they were.
                            fn_arguments: serde_json::from_str(&call.arguments).unwrap_or_else(
                                |_| serde_json::Value::String(call.arguments.clone()),
                            ),
                            thought_signatures: None,
                        }));
                    }
                    GMessage::assistant(MessageContent::from_parts(parts))
                }
                ChatMessage::Tool {
                    tool_call_id,
                    content,
                } => GMessage::from(ToolResponse::new(tool_call_id.as_str(), content.as_str())),
            };
            chat = chat.append_message(m);
        }
        if !request.tools.is_empty() {
            let tools: Vec<GTool> = request
                .tools
                .iter()
                .map(|t| {
                    GTool::new(t.name.as_str())
                        .with_description(t.description.as_str())
                        .with_schema(t.parameters.clone())
                })
                .collect();
            chat = chat.with_tools(tools);
        }
        chat
    }

    /// The events of a genai response.
    fn events(response: genai::chat::ChatResponse) -> Vec<ModelEvent> {
        let mut events = Vec::new();
        let usage = response.usage.clone();
        let stop = response.stop_reason.clone();
        let mut called = false;
        for part in response.content.into_parts() {
            match part {
                ContentPart::Text(text) if !text.is_empty() => {
                    events.push(ModelEvent::TextDelta(text))
                }
                ContentPart::ToolCall(call) => {
                    called = true;
                    let arguments = match call.fn_arguments {
                        serde_json::Value::String(raw) => raw,
                        other => other.to_string(),
                    };
                    events.push(ModelEvent::ToolCall(ToolCall {
                        id: call.call_id,
                        name: call.fn_name,
                        arguments,
                    }));
                }
                _ => {}
            }
        }
        let count = |n: Option<i32>| n.map_or(0, |n| u64::try_from(n).unwrap_or(0));
        events.push(ModelEvent::Usage {
            prompt: count(usage.prompt_tokens),
            completion: count(usage.completion_tokens),
        });
        let finish = match stop {
            Some(StopReason::ToolCall(_)) => FinishReason::ToolCalls,
            Some(StopReason::MaxTokens(_)) => FinishReason::Length,
            Some(StopReason::Completed(_)) if called => FinishReason::ToolCalls,
            Some(StopReason::Completed(_)) => FinishReason::Stop,
            Some(StopReason::ContentFilter(r))
            | Some(StopReason::StopSequence(r))
            | Some(StopReason::Other(r)) => FinishReason::Other(r),
            None if called => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        events.push(ModelEvent::Finish(finish));
        events
    }
}

impl Model for GenaiModel {
    type Stream = EventList;

    async fn complete(&self, request: ModelRequest) -> Result<EventList, ModelError> {
        let chat = Self::request(&request);
        let choice = match &request.tool_choice {
            ToolChoice::Auto => GToolChoice::Auto,
            ToolChoice::None => GToolChoice::None,
            ToolChoice::Tool(name) => GToolChoice::tool(name.as_str()),
        };
        // Offering no tools and naming a choice confuses some providers: only set it
        // when tools are offered.
        let mut options = self.options.clone();
        if !request.tools.is_empty() {
            options = options.with_tool_choice(choice);
        }
        // The raw body lets a reply genai cannot parse be read anyway (below).
        options = options.with_capture_raw_body(true);
        match self
            .client
            .exec_chat(&self.model, chat, Some(&options))
            .await
        {
            Ok(response) => Ok(EventList::new(Self::events(response))),
            Err(genai::Error::ChatResponseGeneration {
                response_body,
                cause,
                ..
            }) => {
                // genai rejects a whole chat-completions reply when a tool call's
                // arguments are not JSON. The loop must see that call, to refuse it and
                // tell the model why, so the reply is read from its raw body.
                raw_openai_events(&response_body)
                    .ok_or_else(|| {
                        ModelError::new(
                            ModelErrorKind::Malformed,
                            format!("the model's reply could not be read: {cause}"),
                        )
                    })
                    .map(EventList::new)
            }
            Err(e) => Err(ModelError::new(ModelErrorKind::Provider, e.to_string())),
        }
    }
}

/// The events of an OpenAI chat-completions reply body, read directly: text, tool
/// calls with their arguments as the text the model produced, usage, finish reason.
/// `None` when the body does not have that shape.
fn raw_openai_events(body: &serde_json::Value) -> Option<Vec<ModelEvent>> {
    let choice = body.get("choices")?.get(0)?;
    let message = choice.get("message")?;
    let mut events = Vec::new();
    if let Some(text) = message.get("content").and_then(|c| c.as_str()) {
        if !text.is_empty() {
            events.push(ModelEvent::TextDelta(text.to_owned()));
        }
    }
    let calls = message.get("tool_calls").and_then(|c| c.as_array());
    for call in calls.into_iter().flatten() {
        let function = call.get("function")?;
        events.push(ModelEvent::ToolCall(ToolCall {
            id: call
                .get("id")
                .and_then(|i| i.as_str())
                .unwrap_or_default()
                .to_owned(),
            name: function.get("name")?.as_str()?.to_owned(),
            arguments: match function.get("arguments") {
                Some(serde_json::Value::String(raw)) => raw.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        }));
    }
    let usage = body.get("usage");
    let tokens = |key: &str| {
        usage
            .and_then(|u| u.get(key))
            .and_then(|n| n.as_u64())
            .unwrap_or(0)
    };
    events.push(ModelEvent::Usage {
        prompt: tokens("prompt_tokens"),
        completion: tokens("completion_tokens"),
    });
    let finish = match choice.get("finish_reason").and_then(|f| f.as_str()) {
        Some("tool_calls") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("stop") | None if calls.is_some_and(|c| !c.is_empty()) => FinishReason::ToolCalls,
        Some("stop") | None => FinishReason::Stop,
        Some(other) => FinishReason::Other(other.to_owned()),
    };
    events.push(ModelEvent::Finish(finish));
    Some(events)
}
