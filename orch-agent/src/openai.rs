//! An OpenAI-compatible chat-completions adapter (feature `openai`): builds the request
//! (`messages`, `tools`, `tool_choice`) and parses tool calls and usage from whole
//! responses and from streamed (server-sent event) chunks.

use crate::model::{
    ChatMessage, EventList, FinishReason, Model, ModelError, ModelEvent, ModelRequest, ModelStream,
    ToolCall, ToolChoice,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};

/// The request body for `POST {base}/chat/completions`.
pub fn request_body(model: &str, request: &ModelRequest, stream: bool) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { content } => json!({"role": "system", "content": content}),
            ChatMessage::User { content } => json!({"role": "user", "content": content}),
            ChatMessage::Assistant { content, tool_calls } => {
                let mut v = json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { content.clone().into() }});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                v
            }
            ChatMessage::Tool { tool_call_id, content } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        })
        .collect();
    let mut body = json!({"model": model, "messages": messages, "stream": stream});
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    body
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<UsageJson>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize, Clone, Copy)]
struct UsageJson {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

fn finish(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("stop") | None => FinishReason::Stop,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some(other) => FinishReason::Other(other.to_owned()),
    }
}

/// The events of a whole (non-streamed) response body.
pub fn parse_response(body: &str) -> Result<Vec<ModelEvent>, ModelError> {
    let r: Response =
        serde_json::from_str(body).map_err(|e| ModelError(format!("unexpected response: {e}")))?;
    let choice = r
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError("the response has no choices".into()))?;
    let mut events = Vec::new();
    if let Some(text) = choice.message.content.filter(|t| !t.is_empty()) {
        events.push(ModelEvent::TextDelta(text));
    }
    for c in choice.message.tool_calls {
        events.push(ModelEvent::ToolCall(ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
        }));
    }
    if let Some(u) = r.usage {
        events.push(ModelEvent::Usage {
            prompt: u.prompt_tokens,
            completion: u.completion_tokens,
        });
    }
    events.push(ModelEvent::Finish(finish(choice.finish_reason.as_deref())));
    Ok(events)
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<UsageJson>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: usize,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// Incremental parser of a streamed response (`text/event-stream` of chat-completion
/// chunks): text deltas as they come, tool calls once complete (their pieces arrive
/// spread over chunks), usage from the final chunk.
#[derive(Default)]
pub struct StreamParser {
    buffer: String,
    calls: BTreeMap<usize, (String, String, String)>,
    finish: Option<FinishReason>,
    usage: Option<UsageJson>,
    done: bool,
}

impl StreamParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes as they arrive; returns the events now complete.
    pub fn push(&mut self, chunk: &str) -> Result<Vec<ModelEvent>, ModelError> {
        self.buffer.push_str(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.find('\n') {
            let line: String = self.buffer.drain(..=end).collect();
            let line = line.trim();
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                self.done = true;
                continue;
            }
            let chunk: Chunk = serde_json::from_str(data)
                .map_err(|e| ModelError(format!("unexpected stream chunk: {e}")))?;
            if let Some(u) = chunk.usage {
                self.usage = Some(u);
            }
            for choice in chunk.choices {
                if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                    events.push(ModelEvent::TextDelta(text));
                }
                for d in choice.delta.tool_calls {
                    let entry = self.calls.entry(d.index).or_default();
                    if let Some(id) = d.id {
                        entry.0 = id;
                    }
                    if let Some(f) = d.function {
                        if let Some(n) = f.name {
                            entry.1.push_str(&n);
                        }
                        if let Some(a) = f.arguments {
                            entry.2.push_str(&a);
                        }
                    }
                }
                if let Some(r) = choice.finish_reason {
                    self.finish = Some(finish(Some(&r)));
                }
            }
        }
        Ok(events)
    }

    /// Ends the stream: the complete tool calls, the usage and the finish reason.
    pub fn finish(&mut self) -> Vec<ModelEvent> {
        let mut events: Vec<ModelEvent> = std::mem::take(&mut self.calls)
            .into_values()
            .map(|(id, name, arguments)| {
                ModelEvent::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                })
            })
            .collect();
        if let Some(u) = self.usage.take() {
            events.push(ModelEvent::Usage {
                prompt: u.prompt_tokens,
                completion: u.completion_tokens,
            });
        }
        events.push(ModelEvent::Finish(
            self.finish.take().unwrap_or(FinishReason::Stop),
        ));
        events
    }
}

/// A model behind any OpenAI-compatible chat-completions endpoint.
///
/// ```no_run
/// let model = orch_agent::OpenAiModel::new("http://127.0.0.1:8080/v1", "local-model")
///     .api_key(std::env::var("OPENAI_API_KEY").ok())
///     .streaming(false);
/// ```
#[derive(Clone)]
pub struct OpenAiModel {
    client: reqwest::Client,
    base_url: String,
    model: String,
    api_key: Option<String>,
    stream: bool,
}

impl OpenAiModel {
    /// Requests go to `{base_url}/chat/completions` for `model`.
    pub fn new(base_url: &str, model: &str) -> Self {
        OpenAiModel {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            stream: false,
        }
    }

    /// The bearer token, if the server wants one.
    #[must_use]
    pub fn api_key(mut self, key: Option<String>) -> Self {
        self.api_key = key.filter(|k| !k.is_empty());
        self
    }

    /// Stream responses (server-sent events) instead of waiting for whole ones.
    #[must_use]
    pub fn streaming(mut self, yes: bool) -> Self {
        self.stream = yes;
        self
    }
}

/// The events of one [`OpenAiModel`] step.
pub enum OpenAiStream {
    /// A whole response, parsed.
    Whole(EventList),
    /// A streamed response, parsed as it arrives.
    Live(Box<LiveStream>),
}

/// The state of a streamed response.
pub struct LiveStream {
    response: reqwest::Response,
    parser: StreamParser,
    queue: VecDeque<ModelEvent>,
    ended: bool,
}

impl ModelStream for OpenAiStream {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        match self {
            OpenAiStream::Whole(list) => list.next().await,
            OpenAiStream::Live(live) => loop {
                let LiveStream {
                    response,
                    parser,
                    queue,
                    ended,
                } = live.as_mut();
                if let Some(e) = queue.pop_front() {
                    return Some(Ok(e));
                }
                if *ended {
                    return None;
                }
                match response.chunk().await {
                    Ok(Some(bytes)) => match parser.push(&String::from_utf8_lossy(&bytes)) {
                        Ok(events) => queue.extend(events),
                        Err(e) => {
                            *ended = true;
                            return Some(Err(e));
                        }
                    },
                    Ok(None) => {
                        *ended = true;
                        queue.extend(parser.finish());
                    }
                    Err(e) => {
                        *ended = true;
                        return Some(Err(ModelError(format!("reading the stream: {e}"))));
                    }
                }
            },
        }
    }
}

impl Model for OpenAiModel {
    type Stream = OpenAiStream;

    async fn complete(&self, request: ModelRequest) -> Result<OpenAiStream, ModelError> {
        let body = request_body(&self.model, &request, self.stream);
        let mut req = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let response = req
            .send()
            .await
            .map_err(|e| ModelError(format!("cannot reach {}: {e}", self.base_url)))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let excerpt: String = text.chars().take(500).collect();
            return Err(ModelError(format!(
                "{} answered {status}: {excerpt}",
                self.base_url
            )));
        }
        if self.stream {
            Ok(OpenAiStream::Live(Box::new(LiveStream {
                response,
                parser: StreamParser::new(),
                queue: VecDeque::new(),
                ended: false,
            })))
        } else {
            let text = response
                .text()
                .await
                .map_err(|e| ModelError(format!("reading the response: {e}")))?;
            Ok(OpenAiStream::Whole(EventList::new(parse_response(&text)?)))
        }
    }
}
