//! The provider-agnostic model interface: one round (a model call) takes the conversation, the
//! tools to offer and a tool-choice setting, and yields a stream of events.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (echoed back with the result).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the JSON text the model produced.
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Instructions.
    System {
        /// The text.
        content: String,
    },
    /// The user.
    User {
        /// The text.
        content: String,
    },
    /// The model: text and/or tool calls.
    Assistant {
        /// The text (may be empty).
        content: String,
        /// The tool calls it made.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a tool call.
    Tool {
        /// The call it answers.
        tool_call_id: String,
        /// The tool's output, or an error saying why it did not run.
        content: String,
    },
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name.
    pub name: String,
    /// What it does (for the model).
    pub description: String,
    /// Its parameters, as a JSON schema.
    pub parameters: serde_json::Value,
}

/// Which tool calls the model may or must make.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// The model must call this tool.
    Tool(String),
}

impl fmt::Display for ToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolChoice::Auto => f.write_str("auto"),
            ToolChoice::None => f.write_str("none"),
            ToolChoice::Tool(t) => write!(f, "forced: {t}"),
        }
    }
}

/// The input of one round (model call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRequest {
    /// The conversation, system message first.
    pub messages: Vec<ChatMessage>,
    /// The tools offered (only the allowed ones).
    pub tools: Vec<ToolSpec>,
    /// Whether and which tool must be called.
    pub tool_choice: ToolChoice,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants its tool calls executed.
    ToolCalls,
    /// It hit its output limit.
    Length,
    /// Something else, as the provider named it.
    Other(String),
}

/// What a model call yields, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelEvent {
    /// A piece of text.
    TextDelta(String),
    /// A complete tool call.
    ToolCall(ToolCall),
    /// Tokens used by this model call.
    Usage {
        /// Prompt tokens.
        prompt: u64,
        /// Completion tokens.
        completion: u64,
    },
    /// The model call is over.
    Finish(FinishReason),
}

/// A model call failed: what kind of failure (to act on), and what happened (to show).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// What kind of failure it is.
    pub kind: ModelErrorKind,
    /// What happened, in words.
    pub message: String,
}

/// The kinds of [`ModelError`], for a caller to decide what to do (retry a transport
/// failure or a timeout, fix a configuration, give up on a malformed answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The client could not be set up (a bad base URL, a TLS set-up failure, a bad
    /// option).
    Config,
    /// The server could not be reached, or the connection failed.
    Transport,
    /// The server did not answer (or stopped sending) within a time limit.
    Timeout,
    /// The server answered with an HTTP error status.
    Status(u16),
    /// The answer is larger than the client accepts.
    TooLarge,
    /// The answer is not what the protocol promises: not JSON, not UTF-8, without the
    /// fields it needs, or cut off before the server said it was finished.
    Malformed,
    /// Any other failure the provider or its client library reports.
    Provider,
}

impl ModelError {
    /// A model error of `kind`.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "model error: {}", self.message)
    }
}

impl std::error::Error for ModelError {}

/// The events of one model call, as they arrive.
pub trait ModelStream: Send {
    /// The next event; `None` when the model call is over.
    fn next(&mut self) -> impl Future<Output = Option<Result<ModelEvent, ModelError>>> + Send;
}

/// A language model behind any provider.
pub trait Model: Send + Sync {
    /// The event stream of one model call.
    type Stream: ModelStream;
    /// Runs one model call (one round of the agent loop).
    fn complete(
        &self,
        request: ModelRequest,
    ) -> impl Future<Output = Result<Self::Stream, ModelError>> + Send;
}

/// A stream over events that are all known already.
#[derive(Clone, Debug, Default)]
pub struct EventList(VecDeque<ModelEvent>);

impl EventList {
    /// A stream of `events`.
    pub fn new(events: impl IntoIterator<Item = ModelEvent>) -> Self {
        EventList(events.into_iter().collect())
    }
}

impl ModelStream for EventList {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        self.0.pop_front().map(Ok)
    }
}
