//! The OpenAI-compatible adapter: request building, recorded responses (whole and
//! streamed), and whole research turns through the agent loop against a local HTTP
//! server that speaks the chat-completions protocol (no network exists here).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use orch_agent::{
    parse_response, request_body, Agent, ChatMessage, FinishReason, ModelEvent, ModelRequest,
    OpenAiModel, StopReason, StreamParser, ToolCall, ToolChoice, ToolSpec,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::{Machine, Session};

mod common;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn request_body_has_tools_and_tool_choice() {
    let req = ModelRequest {
        messages: vec![
            ChatMessage::System {
                content: "sys".into(),
            },
            ChatMessage::User {
                content: "hi".into(),
            },
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "search".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "c1".into(),
                content: "result".into(),
            },
        ],
        tools: vec![ToolSpec {
            name: "think".into(),
            description: "thinks".into(),
            parameters: json!({"type": "object"}),
        }],
        tool_choice: ToolChoice::Tool("think".into()),
    };
    let body = request_body("m", &req, false);
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream"], false);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "think"}})
    );
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "think", "description": "thinks", "parameters": {"type": "object"}}})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "result"})
    );
    let no_tools = ModelRequest {
        tools: vec![],
        tool_choice: ToolChoice::None,
        ..req
    };
    let body = request_body("m", &no_tools, true);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn recorded_whole_responses() {
    let events = parse_response(&fixture("response_tool_call.json")).unwrap();
    assert_eq!(
        events,
        [
            ModelEvent::ToolCall(ToolCall {
                id: "call_abc123".into(),
                name: "search".into(),
                arguments: r#"{"query":"AI impact on jobs"}"#.into()
            }),
            ModelEvent::Usage {
                prompt: 412,
                completion: 19
            },
            ModelEvent::Finish(FinishReason::ToolCalls),
        ]
    );
    let events = parse_response(&fixture("response_text.json")).unwrap();
    assert_eq!(
        events[0],
        ModelEvent::TextDelta("AI shifts tasks more than it removes jobs.".into())
    );
    assert!(parse_response("{\"choices\": []}").is_err());
    assert!(parse_response("<html>502</html>").is_err());
}

fn parse_stream(text: &str, piece: usize) -> Vec<ModelEvent> {
    let mut p = StreamParser::new();
    let mut events = Vec::new();
    let bytes = text.as_bytes();
    for chunk in bytes.chunks(piece) {
        events.extend(p.push(chunk).unwrap());
    }
    events.extend(p.finish().unwrap());
    events
}

#[test]
fn recorded_streams_in_any_chunking() {
    let text = fixture("stream_tool_call.sse");
    let whole = parse_stream(&text, text.len());
    assert_eq!(
        whole,
        [
            ModelEvent::ToolCall(ToolCall {
                id: "call_s1".into(),
                name: "think".into(),
                arguments: r#"{"input":"structure the findings"}"#.into()
            }),
            ModelEvent::Usage {
                prompt: 530,
                completion: 21
            },
            ModelEvent::Finish(FinishReason::ToolCalls),
        ]
    );
    for piece in [1, 7, 64, 300] {
        assert_eq!(parse_stream(&text, piece), whole, "chunks of {piece} bytes");
    }
    let text = fixture("stream_text.sse");
    let events = parse_stream(&text, 5);
    let joined: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(joined, "Jobs change.");
    assert!(events.contains(&ModelEvent::Usage {
        prompt: 700,
        completion: 3
    }));
    let mut p = StreamParser::new();
    assert!(p.push(b"data: {not json}\n").is_err());
}

/// `data:` lines of chat-completion chunks, each ending in a newline.
fn sse(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

#[test]
fn characters_split_across_reads_arrive_whole_in_text_and_arguments() {
    let text = sse(&[
        json!({"choices": [{"delta": {"content": "Ünïcödé — οδός 🚀"}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1",
            "function": {"name": "search", "arguments": "{\"q\": \"Zürich 東京 🚀\"}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]) + "data: [DONE]\n";
    // Every split point, including inside every multi-byte character.
    for piece in 1..=7 {
        let events = parse_stream(&text, piece);
        assert_eq!(
            events,
            [
                ModelEvent::TextDelta("Ünïcödé — οδός 🚀".into()),
                ModelEvent::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "search".into(),
                    arguments: r#"{"q": "Zürich 東京 🚀"}"#.into()
                }),
                ModelEvent::Finish(FinishReason::ToolCalls),
            ],
            "chunks of {piece} bytes"
        );
    }
    let mut p = StreamParser::new();
    let err = p
        .push(b"data: {\"choices\": [{\"delta\": {\"content\": \"\xff\"}}]}\n")
        .unwrap_err();
    assert!(err.message.contains("not valid UTF-8"), "{err}");
    assert_eq!(err.kind, orch_agent::ModelErrorKind::Malformed);
}

#[test]
fn tool_calls_without_index_are_kept_apart_by_id() {
    let text = sse(&[
        json!({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "search", "arguments": "{\"q\":"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": " \"x\"}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "think", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let calls: Vec<ToolCall> = parse_stream(&text, 9)
        .into_iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ToolCall {
                id: "a".into(),
                name: "search".into(),
                arguments: r#"{"q": "x"}"#.into()
            },
            ToolCall {
                id: "b".into(),
                name: "think".into(),
                arguments: "{}".into()
            },
        ]
    );
}

#[test]
fn a_stream_cut_short_is_an_error_not_a_shorter_answer() {
    let cut = sse(&[json!({"choices": [{"delta": {"content": "Half a sen"}}]})]);
    let mut p = StreamParser::new();
    p.push(cut.as_bytes()).unwrap();
    let err = p.finish().unwrap_err();
    assert!(err.message.contains("incomplete"), "{err}");
    // Cut in the middle of a line.
    let mut p = StreamParser::new();
    p.push(b"data: {\"choices\": [{\"delta\": {\"cont").unwrap();
    let err = p.finish().unwrap_err();
    assert!(err.message.contains("middle of a line"), "{err}");
    // A finish_reason ends a stream even without [DONE]; so does [DONE] without a
    // trailing newline.
    let ok = sse(&[json!({"choices": [{"delta": {"content": "Done."}, "finish_reason": "stop"}]})]);
    let mut p = StreamParser::new();
    p.push(ok.as_bytes()).unwrap();
    assert!(p.finish().is_ok());
    let mut p = StreamParser::new();
    p.push(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\"}}]}\n\ndata: [DONE]")
        .unwrap();
    assert!(p.finish().is_ok());
}

#[test]
fn a_line_longer_than_the_bound_is_an_error_before_it_is_buffered_whole() {
    let mut p = StreamParser::with_max_line(1024);
    let mut err = None;
    for _ in 0..100 {
        if let Err(e) = p.push(&[b'a'; 100]) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the line was refused");
    assert!(err.message.contains("longer than 1024 bytes"), "{err}");
}

/// A local chat-completions server: answers each request with the next planned reply
/// (a tool call or text), whole or streamed as the request asks, and keeps the requests.
#[derive(Clone, Default)]
struct FakeServer {
    plan: Arc<Mutex<VecDeque<Value>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

fn plan_call(name: &str, args: &str) -> Value {
    json!({"call": [name, args]})
}

fn plan_text(text: &str) -> Value {
    json!({"text": text})
}

async fn completions(State(s): State<FakeServer>, Json(body): Json<Value>) -> Response {
    s.requests.lock().unwrap().push(body.clone());
    let Some(next) = s.plan.lock().unwrap().pop_front() else {
        return (StatusCode::TOO_MANY_REQUESTS, "no more planned replies").into_response();
    };
    let n = s.requests.lock().unwrap().len();
    let usage =
        json!({"prompt_tokens": 100 + n, "completion_tokens": 10 + n, "total_tokens": 110 + 2 * n});
    let stream = body["stream"] == true;
    if !stream {
        let message = match (&next["call"], &next["text"]) {
            (Value::Array(c), _) => {
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{n}"), "type": "function", "function": {"name": c[0], "arguments": c[1]}}]})
            }
            (_, t) => json!({"role": "assistant", "content": t}),
        };
        let finish = if next["call"].is_array() {
            "tool_calls"
        } else {
            "stop"
        };
        return Json(json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})).into_response();
    }
    let mut sse = String::new();
    let mut data = |v: Value| sse.push_str(&format!("data: {v}\n\n"));
    match (&next["call"], &next["text"]) {
        (Value::Array(c), _) => {
            let args = c[1].as_str().unwrap_or("");
            let (a, b) = args.split_at(args.len() / 2);
            data(
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function", "function": {"name": c[0], "arguments": a}}]}}]}),
            );
            data(
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": b}}]}}]}),
            );
            data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        }
        (_, t) => {
            for word in t.as_str().unwrap_or("").split_inclusive(' ') {
                data(json!({"choices": [{"index": 0, "delta": {"content": word}}]}));
            }
            data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
        }
    }
    data(json!({"choices": [], "usage": usage}));
    sse.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], sse).into_response()
}

async fn start(server: FakeServer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(server);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v1")
}

async fn research_turn(stream: bool) {
    let server = FakeServer::default();
    server.plan.lock().unwrap().extend([
        plan_call("reflect", "{}"), // out of order: refused
        plan_call("search", r#"{"query":"AI jobs"}"#),
        plan_call("think", r#"{"input":"findings"}"#),
        plan_call("reflect", "{}"),
        plan_text("AI shifts tasks more than it removes jobs."),
    ]);
    let base = start(server.clone()).await;
    let (tools, executed) = common::tools(&[]);
    let model = OpenAiModel::new(&base, "test-model")
        .api_key(Some("sk-test".into()))
        .streaming(stream);
    let mut agent = Agent::<Machine, _>::new(model, tools);
    let mut session = Session::new();
    let turn = agent
        .run_turn(
            &mut session,
            &mut Vec::new(),
            "Research the impact of AI on jobs",
        )
        .await
        .unwrap();
    assert_eq!(*executed.lock().unwrap(), ["search", "think", "reflect"]);
    assert_eq!(session.sequence_index(), 3);
    assert_eq!(turn.stop, StopReason::Answered);
    assert_eq!(
        turn.final_text,
        "AI shifts tasks more than it removes jobs."
    );
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "search"}})
    );
    assert_eq!(requests[0]["tools"].as_array().unwrap().len(), 1);
    assert_eq!(
        requests[2]["tool_choice"],
        json!({"type": "function", "function": {"name": "think"}})
    );
    assert_eq!(requests[4]["tool_choice"], "auto");
    assert_eq!(
        requests[1]["messages"].as_array().unwrap().last().unwrap()["role"],
        "tool"
    );
    assert!(
        requests[1]["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("expects `search`")
    );
    assert_eq!(requests[0]["stream"], stream);
    // Usage as the server reported it: prompt 100 + n, completion 10 + n for n = 1..=5.
    assert_eq!(
        (session.usage().prompt, session.usage().completion),
        (515, 65)
    );
}

#[tokio::test]
async fn whole_turn_against_a_local_server() {
    research_turn(false).await;
}

#[tokio::test]
async fn whole_turn_against_a_local_server_streaming() {
    research_turn(true).await;
}

#[tokio::test]
async fn server_errors_are_model_errors() {
    let server = FakeServer::default(); // no plan: answers 429
    let base = start(server).await;
    let mut agent = Agent::<Machine, _>::new(OpenAiModel::new(&base, "m"), common::tools(&[]).0);
    let err = agent
        .run_turn(&mut Session::new(), &mut Vec::new(), "hi")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("429"), "{err}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut agent = Agent::<Machine, _>::new(
        OpenAiModel::new(&format!("http://127.0.0.1:{port}/v1"), "m"),
        common::tools(&[]).0,
    );
    let err = agent
        .run_turn(&mut Session::new(), &mut Vec::new(), "hi")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot reach"), "{err}");
}
