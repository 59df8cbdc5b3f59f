//! A scripted model server on loopback that speaks OpenAI's chat completions
//! (`POST /v1/chat/completions`, whole or streamed) and Anthropic's messages
//! (`POST /v1/messages`): each request is answered with the next planned reply, and
//! every request body is kept for the test to inspect (offered tools, tool choice,
//! the tool results the model was sent).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One planned model reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Tool calls (name, arguments as JSON text), in one reply.
    Calls(Vec<(String, String)>),
    /// A text answer.
    Text(String),
}

/// A call of `name` with `args`.
pub fn call(name: &str, args: &str) -> Reply {
    Reply::Calls(vec![(name.to_owned(), args.to_owned())])
}

/// Several calls in one reply.
pub fn calls(list: &[(&str, &str)]) -> Reply {
    Reply::Calls(
        list.iter()
            .map(|(n, a)| ((*n).to_owned(), (*a).to_owned()))
            .collect(),
    )
}

/// A text reply.
pub fn text(t: &str) -> Reply {
    Reply::Text(t.to_owned())
}

/// The server's script and what it was sent.
#[derive(Clone, Default)]
pub struct Fake {
    plan: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Fake {
    /// A server that will answer with `replies`, in order.
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        let fake = Fake::default();
        fake.plan.lock().expect("lock").extend(replies);
        fake
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }

    /// Starts serving on a free loopback port; returns the base URL (`http://…/v1`).
    pub async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(self.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}/v1")
    }

    fn next(&self, body: &Value) -> Option<(Reply, usize)> {
        let mut requests = self.requests.lock().expect("lock");
        requests.push(body.clone());
        let n = requests.len();
        self.plan.lock().expect("lock").pop_front().map(|r| (r, n))
    }
}

async fn openai(State(fake): State<Fake>, Json(body): Json<Value>) -> Response {
    let Some((reply, n)) = fake.next(&body) else {
        return (StatusCode::TOO_MANY_REQUESTS, "no more planned replies").into_response();
    };
    let usage =
        json!({"prompt_tokens": 100 + n, "completion_tokens": 10 + n, "total_tokens": 110 + 2 * n});
    let stream = body["stream"] == true;
    if !stream {
        let (message, finish) = match &reply {
            Reply::Calls(calls) => {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| json!({"id": format!("call_{n}_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                (
                    json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
                    "tool_calls",
                )
            }
            Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
        };
        return Json(json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 0, "model": "fake", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})).into_response();
    }
    let mut sse = String::new();
    let mut data = |v: Value| sse.push_str(&format!("data: {v}\n\n"));
    let chunk = |delta: Value, finish: Value| json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 0, "model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    match &reply {
        Reply::Calls(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                let (a, b) = args.split_at(args.len() / 2);
                data(chunk(
                    json!({"tool_calls": [{"index": i, "id": format!("call_{n}_{i}"), "type": "function", "function": {"name": name, "arguments": a}}]}),
                    Value::Null,
                ));
                data(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}),
                    Value::Null,
                ));
            }
            data(chunk(json!({}), json!("tool_calls")));
        }
        Reply::Text(t) => {
            for word in t.split_inclusive(' ') {
                data(chunk(json!({"content": word}), Value::Null));
            }
            data(chunk(json!({}), json!("stop")));
        }
    }
    data(
        json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 0, "model": "fake", "choices": [], "usage": usage}),
    );
    sse.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], sse).into_response()
}

async fn anthropic(State(fake): State<Fake>, Json(body): Json<Value>) -> Response {
    let Some((reply, n)) = fake.next(&body) else {
        return (StatusCode::TOO_MANY_REQUESTS, "no more planned replies").into_response();
    };
    let (content, stop) = match &reply {
        Reply::Calls(calls) => (
            calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    let input: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
                    json!({"type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": input})
                })
                .collect::<Vec<_>>(),
            "tool_use",
        ),
        Reply::Text(t) => (vec![json!({"type": "text", "text": t})], "end_turn"),
    };
    Json(json!({
        "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": "fake",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 100 + n, "output_tokens": 10 + n}
    }))
    .into_response()
}

/// The names of the tools offered in an OpenAI request body.
pub fn offered_openai(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The tool results an OpenAI request body sends back, in order.
pub fn tool_results_openai(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The misbehaving research turn of the cognitive reasoner: a call out of order, text
/// while `search` is forced, a call the sequence does not expect, an unknown tool, the
/// sequence, a tool the step does not allow, the answer.
pub fn misbehaving() -> Fake {
    Fake::new([
        call("think", r#"{"input": "too early"}"#),
        text("I think the answer is obvious."),
        call("debate", "{}"),
        call("teleport", "{}"),
        call("search", r#"{"input": "AI jobs"}"#),
        call("think", r#"{"input": "analysis"}"#),
        call("reflect", r#"{"input": "summary"}"#),
        // The sequence is complete; `debate` is not a tool of this step.
        call("debate", r#"{"input": "jobs"}"#),
        text("AI changes jobs: see the analysis."),
    ])
}

/// The tool each request of [`misbehaving`] must force (`None`: the model chooses).
pub const MISBEHAVING_FORCED: [Option<&str>; 9] = [
    Some("search"),
    Some("search"),
    Some("search"),
    Some("search"),
    Some("search"),
    Some("think"),
    Some("reflect"),
    None,
    None,
];
