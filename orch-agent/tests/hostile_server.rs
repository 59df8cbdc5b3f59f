//! `OpenAiModel` against hostile chat-completions servers on loopback, speaking raw
//! HTTP/1.1 over TCP: servers that never answer, stall in the middle of a stream,
//! stream forever, send huge bodies or huge lines, split characters across writes, or
//! hang up early. Every case ends in an error that says what happened (or, for split
//! characters, in the exact text) — never a hang, never corrupted input.

use orch_agent::{
    ChatMessage, FinishReason, Model, ModelError, ModelErrorKind, ModelEvent, ModelRequest,
    ModelStream, OpenAiModel, Timeouts, ToolCall, ToolChoice,
};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts a server on a free loopback port that runs `scenario` on every connection
/// (after reading the request); returns its base URL.
async fn serve<F, Fut>(scenario: F) -> String
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let scenario = Arc::new(scenario);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let scenario = scenario.clone();
            tokio::spawn(async move {
                read_request(&mut stream).await;
                scenario(stream).await;
            });
        }
    });
    format!("http://{addr}/v1")
}

/// Reads the request's head and its `Content-Length` body.
async fn read_request(stream: &mut TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = stream.read_exact(&mut body).await;
}

const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
const JSON_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";

fn short() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        idle: Duration::from_millis(300),
        total: Duration::from_secs(3),
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::User {
            content: "hi".into(),
        }],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
    }
}

/// Runs one model call to its end: every event, or the first error. A guard turns a
/// hang into a failure (the timeouts under test are far shorter).
async fn call(model: &OpenAiModel) -> Result<Vec<ModelEvent>, ModelError> {
    let run = async {
        let mut stream = model.complete(request()).await?;
        let mut events = Vec::new();
        while let Some(e) = stream.next().await {
            events.push(e?);
        }
        Ok(events)
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the call ended (it must not hang)")
}

fn chunk(delta: serde_json::Value) -> String {
    format!(
        "data: {}\n\n",
        serde_json::json!({"choices": [{"delta": delta}]})
    )
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let url = serve(|stream| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(stream);
    })
    .await;
    for streaming in [false, true] {
        times_out(&url, streaming).await;
    }
}

/// A call to `url` with short time limits ends in a time-out error.
async fn times_out(url: &str, streaming: bool) {
    let model = OpenAiModel::new(url, "m")
        .timeouts(short())
        .streaming(streaming);
    let err = call(&model).await.unwrap_err();
    assert!(err.message.contains("did not answer in time"), "{err}");
    assert_eq!(err.kind, ModelErrorKind::Timeout);
}

#[tokio::test]
async fn a_stream_that_stalls_times_out() {
    let url = serve(|mut stream| async move {
        let _ = stream.write_all(SSE_HEAD).await;
        let _ = stream
            .write_all(chunk(serde_json::json!({"content": "Half"})).as_bytes())
            .await;
        tokio::time::sleep(Duration::from_secs(60)).await;
    })
    .await;
    times_out(&url, true).await;
}

#[tokio::test]
async fn a_stream_that_never_ends_hits_the_total_limit() {
    let url = serve(|mut stream| async move {
        let _ = stream.write_all(SSE_HEAD).await;
        let piece = chunk(serde_json::json!({"content": "more "}));
        for _ in 0..100_000 {
            if stream.write_all(piece.as_bytes()).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    times_out(&url, true).await;
}

/// A server that tries to send `total` bytes of `piece`s after `head`, counting what it
/// could send before the client hung up.
async fn flood(head: &'static [u8], piece: Vec<u8>, total: usize) -> (String, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let url = serve(move |mut stream| {
        let (piece, counter) = (piece.clone(), counter.clone());
        async move {
            let _ = stream.write_all(head).await;
            while counter.load(Ordering::SeqCst) < total {
                if stream.write_all(&piece).await.is_err() {
                    return;
                }
                counter.fetch_add(piece.len(), Ordering::SeqCst);
            }
        }
    })
    .await;
    (url, sent)
}

const MB: usize = 1024 * 1024;

#[tokio::test]
async fn a_huge_response_is_refused_at_the_bound_not_read_whole() {
    let (url, sent) = flood(JSON_HEAD, vec![b' '; 64 * 1024], 500 * MB).await;
    let model = OpenAiModel::new(&url, "m").max_response_bytes(MB);
    let err = call(&model).await.unwrap_err();
    assert!(err.message.contains("larger than 1048576 bytes"), "{err}");
    assert_eq!(err.kind, ModelErrorKind::TooLarge);
    // The client stopped reading: the server could not push the 500 MB.
    assert!(sent.load(Ordering::SeqCst) < 100 * MB);

    let (url, sent) = flood(
        SSE_HEAD,
        chunk(serde_json::json!({"content": "x".repeat(1000)})).into_bytes(),
        500 * MB,
    )
    .await;
    let model = OpenAiModel::new(&url, "m")
        .streaming(true)
        .max_response_bytes(MB);
    let err = call(&model).await.unwrap_err();
    assert!(err.message.contains("larger than 1048576 bytes"), "{err}");
    assert_eq!(err.kind, ModelErrorKind::TooLarge);
    assert!(sent.load(Ordering::SeqCst) < 100 * MB);
}

#[tokio::test]
async fn a_huge_error_body_is_cut_to_an_excerpt() {
    let head = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n";
    let (url, sent) = flood(head, vec![b'E'; 64 * 1024], 500 * MB).await;
    let model = OpenAiModel::new(&url, "m");
    let err = call(&model).await.unwrap_err();
    assert!(err.message.contains("500 Internal Server Error"), "{err}");
    assert_eq!(err.kind, ModelErrorKind::Status(500));
    assert!(
        err.message.len() < 700,
        "an excerpt, not the body: {} bytes",
        err.message.len()
    );
    assert!(sent.load(Ordering::SeqCst) < 100 * MB);
}

#[tokio::test]
async fn one_huge_stream_line_is_refused_at_the_bound() {
    let (url, sent) = flood(SSE_HEAD, b"data: {\"aaaa".repeat(8 * 1024), 300 * MB).await;
    let model = OpenAiModel::new(&url, "m")
        .streaming(true)
        .max_line_bytes(64 * 1024);
    let err = call(&model).await.unwrap_err();
    assert!(err.message.contains("longer than 65536 bytes"), "{err}");
    assert_eq!(err.kind, ModelErrorKind::TooLarge);
    assert!(sent.load(Ordering::SeqCst) < 100 * MB);
}

#[tokio::test]
async fn characters_split_across_network_writes_arrive_whole() {
    let body = chunk(serde_json::json!({"content": "Zürich — οδός 🚀"}))
        + &chunk(serde_json::json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "search", "arguments": "{\"q\":\"東京 🚀\"}"}}]}))
        + "data: {\"choices\": [{\"delta\": {}, \"finish_reason\": \"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let url = serve(move |mut stream| {
        let body = body.clone();
        async move {
            let _ = stream.write_all(SSE_HEAD).await;
            // One byte per write, flushed, so that every character is split.
            for b in body.as_bytes() {
                if stream.write_all(&[*b]).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
        }
    })
    .await;
    let model = OpenAiModel::new(&url, "m").streaming(true);
    let events = call(&model).await.unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Zürich — οδός 🚀");
    assert!(events.contains(&ModelEvent::ToolCall(ToolCall {
        id: "c1".into(),
        name: "search".into(),
        arguments: r#"{"q":"東京 🚀"}"#.into(),
    })));
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish(FinishReason::ToolCalls))
    );
}

#[tokio::test]
async fn a_stream_cut_before_it_finished_is_an_error() {
    let url = serve(|mut stream| async move {
        let _ = stream.write_all(SSE_HEAD).await;
        let _ = stream
            .write_all(chunk(serde_json::json!({"content": "Half a sen"})).as_bytes())
            .await;
        // Hangs up without finish_reason or [DONE].
    })
    .await;
    let model = OpenAiModel::new(&url, "m").streaming(true);
    let err = call(&model).await.unwrap_err();
    assert!(err.message.contains("incomplete"), "{err}");
    assert_eq!(err.kind, ModelErrorKind::Malformed);
}

#[tokio::test]
async fn a_missing_server_is_an_error_that_names_it() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let err = call(&OpenAiModel::new(&url, "m").timeouts(short()))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("cannot reach")
            && err.message.contains(&url)
            && err.kind == ModelErrorKind::Transport,
        "{err}"
    );
}
