//! An OpenAI-compatible chat-completions adapter (feature `openai`): builds the request
//! (`messages`, `tools`, `tool_choice`) and parses tool calls and usage from whole
//! responses and from streamed (server-sent event) chunks.

use crate::model::{
    ChatMessage, EventList, FinishReason, Model, ModelError, ModelErrorKind, ModelEvent,
    ModelRequest, ModelStream, ToolCall, ToolChoice,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::Duration;
use ModelErrorKind::{Config, Malformed, Status, Timeout, TooLarge, Transport};

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
    let r: Response = serde_json::from_str(body)
        .map_err(|e| ModelError::new(Malformed, format!("unexpected response: {e}")))?;
    let choice = r
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::new(Malformed, "the response has no choices"))?;
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
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// A tool call whose pieces are still arriving.
#[derive(Default)]
struct PartialCall {
    index: Option<usize>,
    id: String,
    name: String,
    arguments: String,
}

/// The default bound on one line of a streamed response (one server-sent event).
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Incremental parser of a streamed response (`text/event-stream` of chat-completion
/// chunks): text deltas as they come, tool calls once complete (their pieces arrive
/// spread over chunks), usage from the final chunk.
///
/// The network delivers bytes, not text: a character may be split across two reads, so
/// bytes are buffered until a line is complete and only whole lines are decoded (as
/// UTF-8, strictly: invalid text is an error, never a replacement character). A line
/// longer than the bound is an error before it is buffered whole, and a stream that
/// ends before the server said it was done (`finish_reason` or `[DONE]`) is an error,
/// not a shorter answer.
pub struct StreamParser {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already searched for a newline.
    scanned: usize,
    max_line: usize,
    calls: Vec<PartialCall>,
    finish: Option<FinishReason>,
    usage: Option<UsageJson>,
    done: bool,
}

impl Default for StreamParser {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamParser {
    /// A parser at the start of a stream, with lines bounded by
    /// [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new() -> Self {
        Self::with_max_line(DEFAULT_MAX_LINE_BYTES)
    }

    /// A parser whose lines may be at most `max_line` bytes.
    pub fn with_max_line(max_line: usize) -> Self {
        StreamParser {
            buffer: Vec::new(),
            scanned: 0,
            max_line,
            calls: Vec::new(),
            finish: None,
            usage: None,
            done: false,
        }
    }

    /// Feeds bytes as they arrive; returns the events now complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        // Whole lines are handled in place; what follows the last newline stays.
        let mut start = 0;
        let mut from = self.scanned;
        let buffer = std::mem::take(&mut self.buffer);
        let result = loop {
            let Some(nl) = buffer[from..].iter().position(|b| *b == b'\n') else {
                break Ok(());
            };
            let end = from + nl;
            if end - start > self.max_line {
                break Err(self.too_long());
            }
            if let Err(e) = self.line(&buffer[start..end], &mut events) {
                break Err(e);
            }
            start = end + 1;
            from = start;
        };
        self.buffer = buffer;
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        result?;
        if self.buffer.len() > self.max_line {
            return Err(self.too_long());
        }
        Ok(events)
    }

    fn too_long(&self) -> ModelError {
        ModelError::new(
            TooLarge,
            format!(
                "a line of the stream is longer than {} bytes",
                self.max_line
            ),
        )
    }

    /// One complete line of the event stream.
    fn line(&mut self, line: &[u8], events: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let line = std::str::from_utf8(line).map_err(|e| {
            ModelError::new(Malformed, format!("the stream is not valid UTF-8: {e}"))
        })?;
        let Some(data) = line.trim().strip_prefix("data:") else {
            return Ok(());
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| ModelError::new(Malformed, format!("unexpected stream chunk: {e}")))?;
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        for choice in chunk.choices {
            if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                events.push(ModelEvent::TextDelta(text));
            }
            for d in choice.delta.tool_calls {
                self.tool_call_delta(d);
            }
            if let Some(r) = choice.finish_reason {
                self.finish = Some(finish(Some(&r)));
            }
        }
        Ok(())
    }

    /// A piece of a tool call. Pieces belong together by `index`; a server that omits
    /// `index` starts each call with its `id`, and sends the rest without either.
    fn tool_call_delta(&mut self, d: ToolCallDelta) {
        let found = match (d.index, d.id.as_deref()) {
            (Some(i), _) => self.calls.iter().position(|c| c.index == Some(i)),
            (None, Some(id)) => self.calls.iter().position(|c| c.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let at = found.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                index: d.index,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[at];
        if let Some(id) = d.id {
            call.id = id;
        }
        if let Some(f) = d.function {
            if let Some(n) = f.name {
                call.name.push_str(&n);
            }
            if let Some(a) = f.arguments {
                call.arguments.push_str(&a);
            }
        }
    }

    /// Ends the stream: the complete tool calls, the usage and the finish reason. An
    /// error when the stream stopped before the server said it was done, or in the
    /// middle of a line.
    pub fn finish(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        // The last line may lack its newline; it must still be a whole line.
        let mut events = Vec::new();
        let rest = std::mem::take(&mut self.buffer);
        if !rest.is_empty() {
            self.line(&rest, &mut events).map_err(|_| {
                ModelError::new(
                    Malformed,
                    "the stream ended in the middle of a line: the answer is incomplete",
                )
            })?;
        }
        if !self.done && self.finish.is_none() {
            return Err(ModelError::new(
                Malformed,
                "the stream ended before the server finished the response (no `finish_reason`, no `[DONE]`): the answer is incomplete",
            ));
        }
        events.extend(std::mem::take(&mut self.calls).into_iter().map(|c| {
            ModelEvent::ToolCall(ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
        }));
        if let Some(u) = self.usage.take() {
            events.push(ModelEvent::Usage {
                prompt: u.prompt_tokens,
                completion: u.completion_tokens,
            });
        }
        events.push(ModelEvent::Finish(
            self.finish.take().unwrap_or(FinishReason::Stop),
        ));
        Ok(events)
    }
}

/// Time limits of an [`OpenAiModel`]'s requests. A server that never answers, stalls
/// in the middle of a response, or streams forever ends the request with an error
/// instead of hanging the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the connection (TCP and TLS).
    pub connect: Duration,
    /// Waiting for the next bytes: the headers, or the next piece of the body. It
    /// restarts with every read, so a long stream that keeps sending is not cut.
    pub idle: Duration,
    /// The whole request, from connecting until the last byte of the body.
    pub total: Duration,
}

impl Default for Timeouts {
    /// 10 s to connect, 120 s without a byte, 10 minutes in all.
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            total: Duration::from_secs(600),
        }
    }
}

/// The default bound on a response body (a whole response, or all of a stream).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// How much of an error body is read to show its beginning.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// A model behind any OpenAI-compatible chat-completions endpoint.
///
/// ```no_run
/// let model = orch_agent::OpenAiModel::new("http://127.0.0.1:8080/v1", "local-model")
///     .api_key(std::env::var("OPENAI_API_KEY").ok())
///     .streaming(false);
/// ```
#[derive(Clone)]
pub struct OpenAiModel {
    /// The HTTP client, or why it could not be built.
    client: Result<reqwest::Client, String>,
    base_url: String,
    model: String,
    api_key: Option<String>,
    stream: bool,
    timeouts: Timeouts,
    max_response_bytes: usize,
    max_line_bytes: usize,
}

impl OpenAiModel {
    /// Requests go to `{base_url}/chat/completions` for `model`, with the default
    /// [`Timeouts`] and size bounds ([`DEFAULT_MAX_RESPONSE_BYTES`],
    /// [`DEFAULT_MAX_LINE_BYTES`]).
    pub fn new(base_url: &str, model: &str) -> Self {
        let timeouts = Timeouts::default();
        OpenAiModel {
            client: client(timeouts),
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            stream: false,
            timeouts,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }

    /// The time limits of every request.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self.client = client(timeouts);
        self
    }

    /// The time limits in force.
    pub fn current_timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The most bytes a response may have: a whole response, or all of a stream
    /// (larger is an error, read no further).
    #[must_use]
    pub fn max_response_bytes(mut self, n: usize) -> Self {
        self.max_response_bytes = n;
        self
    }

    /// The most bytes one line of a streamed response may have.
    #[must_use]
    pub fn max_line_bytes(mut self, n: usize) -> Self {
        self.max_line_bytes = n;
        self
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

/// An HTTP client with these time limits.
fn client(t: Timeouts) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(t.connect)
        .read_timeout(t.idle)
        .timeout(t.total)
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

/// The kind of a failed request.
fn kind_of(e: &reqwest::Error) -> ModelErrorKind {
    if e.is_timeout() {
        Timeout
    } else if e.is_builder() {
        Config
    } else {
        Transport
    }
}

/// What went wrong with a request, in words.
fn describe(e: &reqwest::Error, base_url: &str) -> String {
    if e.is_timeout() {
        format!("{base_url} did not answer in time ({e})")
    } else if e.is_connect() {
        format!("cannot reach {base_url}: {e}")
    } else {
        format!("talking to {base_url}: {e}")
    }
}

/// Reads at most `limit` bytes of a body; `Err(true)` when it is longer.
async fn read_bounded(
    response: &mut reqwest::Response,
    limit: usize,
    base_url: &str,
) -> Result<Vec<u8>, (bool, String)> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err((true, String::new()));
    }
    let mut body = Vec::new();
    while let Some(bytes) = response
        .chunk()
        .await
        .map_err(|e| (false, describe(&e, base_url)))?
    {
        if body.len() + bytes.len() > limit {
            let room = limit - body.len();
            body.extend_from_slice(&bytes[..room]);
            return Err((true, String::from_utf8_lossy(&body).into_owned()));
        }
        body.extend_from_slice(&bytes);
    }
    Ok(body)
}

/// The events of one [`OpenAiModel`] call.
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
    /// Bytes read so far, and the bound on them.
    read: usize,
    max: usize,
    base_url: String,
}

impl ModelStream for OpenAiStream {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        match self {
            OpenAiStream::Whole(list) => list.next().await,
            OpenAiStream::Live(live) => loop {
                if let Some(e) = live.queue.pop_front() {
                    return Some(Ok(e));
                }
                if live.ended {
                    return None;
                }
                match live.read_more().await {
                    Ok(events) => live.queue.extend(events),
                    Err(e) => {
                        live.ended = true;
                        return Some(Err(e));
                    }
                }
            },
        }
    }
}

impl LiveStream {
    /// Reads the next piece of the stream: the events it completes (all the rest, at
    /// the end).
    async fn read_more(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        let chunk = self.response.chunk().await.map_err(|e| {
            ModelError::new(
                kind_of(&e),
                format!("reading the stream: {}", describe(&e, &self.base_url)),
            )
        })?;
        match chunk {
            Some(bytes) => {
                self.read += bytes.len();
                if self.read > self.max {
                    return Err(ModelError::new(
                        TooLarge,
                        format!("the streamed response is larger than {} bytes", self.max),
                    ));
                }
                self.parser.push(&bytes)
            }
            None => {
                self.ended = true;
                self.parser.finish()
            }
        }
    }
}

impl Model for OpenAiModel {
    type Stream = OpenAiStream;

    async fn complete(&self, request: ModelRequest) -> Result<OpenAiStream, ModelError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ModelError::new(Config, e.clone()))?;
        let body = request_body(&self.model, &request, self.stream);
        let mut req = client
            .post(format!("{}/chat/completions", self.base_url))
            .json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let mut response = req
            .send()
            .await
            .map_err(|e| ModelError::new(kind_of(&e), describe(&e, &self.base_url)))?;
        let status = response.status();
        if !status.is_success() {
            let text = match read_bounded(&mut response, ERROR_BODY_BYTES, &self.base_url).await {
                Ok(body) => String::from_utf8_lossy(&body).into_owned(),
                Err((_, partial)) => partial,
            };
            let excerpt: String = text.chars().take(500).collect();
            return Err(ModelError::new(
                Status(status.as_u16()),
                format!("{} answered {status}: {excerpt}", self.base_url),
            ));
        }
        if self.stream {
            return Ok(OpenAiStream::Live(Box::new(LiveStream {
                response,
                parser: StreamParser::with_max_line(self.max_line_bytes),
                queue: VecDeque::new(),
                ended: false,
                read: 0,
                max: self.max_response_bytes,
                base_url: self.base_url.clone(),
            })));
        }
        let body = read_bounded(&mut response, self.max_response_bytes, &self.base_url)
            .await
            .map_err(|(too_large, why)| {
                let kind = if too_large { TooLarge } else { Transport };
                ModelError::new(
                    kind,
                    if too_large {
                        format!(
                            "the response of {} is larger than {} bytes",
                            self.base_url, self.max_response_bytes
                        )
                    } else {
                        format!("reading the response: {why}")
                    },
                )
            })?;
        let text = std::str::from_utf8(&body).map_err(|e| {
            ModelError::new(Malformed, format!("the response is not valid UTF-8: {e}"))
        })?;
        Ok(OpenAiStream::Whole(EventList::new(parse_response(text)?)))
    }
}
