//! Results that name a task, made visible before the MCP SDK reads them.
//!
//! A `tools/call` result that carries a `task` has not completed (the run protocol's
//! rule, `protocol::classify`), whatever else it holds: a server may send `content` for
//! clients that do not know tasks next to the `task` that says the call is still
//! running. The SDK's tool result has no `task` field, so such a result would read as
//! complete and the call would be recorded as run. This module reads what the upstream
//! sends while it is still bytes, one whole message at a time, and marks such a result
//! `"resultType": "task"`, which the SDK keeps apart from a complete result: the gateway
//! then refuses to record it ([`crate::error::Error::UnfinishedResult`]).
//!
//! The upstream's messages are read here on each transport: a child process's standard
//! output ([`Marked`], line by line), an HTTP upstream's answer to a `tools/call`
//! ([`post_call`]: a JSON body, or an event stream's events) and its resumed streams
//! ([`marked_events`]).

use crate::pooled::Pooled;
use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpError, StreamableHttpPostResponse,
};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The largest JSON body of a `tools/call` answer read (the SDK's own bound).
const MAX_JSON_BODY: usize = 16 * 1024 * 1024;

/// The largest error body read to find a JSON-RPC error in it (the SDK's own bound).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// `message` with its result marked `"resultType": "task"` if it is a response whose
/// result names a task (`task` present and not null) while its `resultType` is absent or
/// `"complete"`; `None` if it needs no mark (or is not JSON: the SDK reports that).
pub(crate) fn marked(message: &[u8]) -> Option<Vec<u8>> {
    // Most messages cannot name a task: skip parsing them. A key written with escapes
    // (`"t\u0061sk"`) is still the key `task`, so any escape is parsed too.
    if memchr::memmem::find(message, b"task").is_none()
        && memchr::memmem::find(message, b"\\u").is_none()
    {
        return None;
    }
    let mut value: Value = serde_json::from_slice(message).ok()?;
    let result = value.get_mut("result")?.as_object_mut()?;
    if result.get("task").is_none_or(Value::is_null) {
        return None;
    }
    match result.get("resultType") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "complete" => {}
        Some(_) => return None,
    }
    result.insert("resultType".to_owned(), Value::from("task"));
    serde_json::to_vec(&value).ok()
}

/// Text form of [`marked`]: `text` itself when it needs no mark.
fn marked_text(text: String) -> String {
    match marked(text.as_bytes()).map(String::from_utf8) {
        Some(Ok(changed)) => changed,
        _ => text,
    }
}

/// A reader of newline-delimited JSON-RPC messages (a child process's standard output)
/// whose whole lines are passed through [`marked`]; a line is held until its newline
/// (or the end of the stream) arrives.
pub(crate) struct Marked<R> {
    inner: R,
    /// Read, not yet a whole line.
    partial: Vec<u8>,
    /// Whole lines, marked, being handed out from `at`.
    ready: Vec<u8>,
    at: usize,
    ended: bool,
}

impl<R> Marked<R> {
    /// Reads `inner`.
    pub(crate) fn new(inner: R) -> Self {
        Marked {
            inner,
            partial: Vec::new(),
            ready: Vec::new(),
            at: 0,
            ended: false,
        }
    }

    /// Moves the whole lines of `partial` (all of it once the stream ended) to `ready`,
    /// each marked where it needs to be.
    fn take_lines(&mut self) {
        let end = match self.ended {
            true => self.partial.len(),
            false => match memchr::memrchr(b'\n', &self.partial) {
                Some(last) => last + 1,
                None => return,
            },
        };
        let rest = self.partial.split_off(end);
        let whole = std::mem::replace(&mut self.partial, rest);
        self.ready.clear();
        self.at = 0;
        for line in whole.split_inclusive(|b| *b == b'\n') {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            match marked(body) {
                Some(changed) => {
                    self.ready.extend_from_slice(&changed);
                    if body.len() < line.len() {
                        self.ready.push(b'\n');
                    }
                }
                None => self.ready.extend_from_slice(line),
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Marked<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.at < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.at);
                buf.put_slice(&this.ready[this.at..this.at + n]);
                this.at += n;
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                // End of stream: what was left has been handed out.
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let filled = read.filled();
                    if filled.is_empty() {
                        this.ended = true;
                    } else {
                        this.partial.extend_from_slice(filled);
                    }
                    this.take_lines();
                }
            }
        }
    }
}

/// An event stream whose events' data are passed through [`marked`].
pub(crate) fn marked_events<S>(
    events: S,
) -> futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>
where
    S: Stream<Item = Result<sse_stream::Sse, SseError>> + Send + 'static,
{
    events
        .map_ok(|mut event| {
            event.data = event.data.map(marked_text);
            event
        })
        .boxed()
}

/// POSTs a `tools/call` request to an HTTP upstream as the SDK's own client does, reading
/// the answer through [`marked`] before it is parsed: a JSON body whole (at most 16 MiB),
/// an event stream event by event. A plain-`http://` upstream is reached on a kept-alive
/// connection of `pooled` when there is one ([`Pooled`]); a redirect, and every other
/// upstream, through the SDK's client `http`.
pub(crate) async fn post_call(
    http: &reqwest::Client,
    pooled: Option<&Pooled>,
    uri: Arc<str>,
    message: ClientJsonRpcMessage,
    session_id: Option<Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
    let had_session = session_id.is_some();
    let request = || call_request(&uri, &message, &session_id, &auth_header, &custom_headers);
    if let Some(pooled) = pooled.filter(|_| uri.starts_with("http://")) {
        let response = pooled
            .send(request()?.map(http_body_util::Full::new))
            .await
            .map_err(|e| StreamableHttpError::Io(std::io::Error::other(e)))?;
        // A redirect is followed by the SDK's client, by its policy (307 and 308 on the
        // same origin).
        if !matches!(response.status().as_u16(), 307 | 308) {
            return answer(response, had_session).await;
        }
    }
    let request = reqwest::Request::try_from(request()?.map(reqwest::Body::from))
        .map_err(StreamableHttpError::Client)?;
    let response = http
        .execute(request)
        .await
        .map_err(StreamableHttpError::Client)?;
    answer(http::Response::from(response), had_session).await
}

/// The request [`post_call`] sends, for either client: the headers the SDK's client
/// sends (both media types accepted, as the specification requires), the message as
/// JSON.
fn call_request(
    uri: &str,
    message: &ClientJsonRpcMessage,
    session_id: &Option<Arc<str>>,
    auth_header: &Option<String>,
    custom_headers: &HashMap<http::HeaderName, http::HeaderValue>,
) -> Result<http::Request<Bytes>, StreamableHttpError<reqwest::Error>> {
    let invalid = |what: String| {
        StreamableHttpError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, what))
    };
    let body = serde_json::to_vec(message)?;
    let mut request = http::Request::post(uri)
        .header(http::header::ACCEPT, "text/event-stream, application/json")
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(token) = auth_header {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| invalid("the bearer token is not a valid header value".to_owned()))?;
        value.set_sensitive(true);
        request = request.header(http::header::AUTHORIZATION, value);
    }
    for (name, value) in custom_headers {
        request = request.header(name, value);
    }
    if let Some(session) = session_id {
        request = request.header("mcp-session-id", session.as_ref());
    }
    request
        .body(Bytes::from(body))
        .map_err(|e| invalid(format!("the request to {uri}: {e}")))
}

/// Reads the upstream's answer to a `tools/call` POST (from either client).
async fn answer<B>(
    response: http::Response<B>,
    had_session: bool,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let status = response.status();
    let headers = response.headers();
    let kind = headers
        .get(http::header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let is = |mime: &str| kind.as_deref().is_some_and(|k| k.starts_with(mime));
    if matches!(
        status,
        http::StatusCode::ACCEPTED | http::StatusCode::NO_CONTENT
    ) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == http::StatusCode::NOT_FOUND && had_session {
        return Err(StreamableHttpError::SessionExpired);
    }
    if !status.is_success() {
        let retry_after = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let json = is("application/json");
        let body = bounded(response.into_body(), MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        // A JSON-RPC error in the body is the upstream's answer to the call.
        if let (true, Ok(message @ rmcp::model::JsonRpcMessage::Error(_))) =
            (json, serde_json::from_slice::<ServerJsonRpcMessage>(&body))
        {
            return Ok(StreamableHttpPostResponse::Json(message, session));
        }
        if status == http::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
        }
        return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("HTTP {status}: {}", String::from_utf8_lossy(&body)),
        )));
    }
    if is("text/event-stream") {
        let events = sse_stream::SseStream::new(response.into_body());
        return Ok(StreamableHttpPostResponse::Sse(
            marked_events(events),
            session,
        ));
    }
    if is("application/json") {
        let body = bounded(response.into_body(), MAX_JSON_BODY).await?;
        let body = marked(&body).unwrap_or(body);
        return serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            .map(|parsed| StreamableHttpPostResponse::Json(parsed, session))
            .map_err(|e| {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                    "the answer to `tools/call` is not a JSON-RPC message: {e}"
                )))
            });
    }
    Err(StreamableHttpError::UnexpectedContentType(kind))
}

/// `body`, at most `limit` bytes (more is an error).
async fn bounded<B>(body: B, limit: usize) -> Result<Vec<u8>, StreamableHttpError<reqwest::Error>>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt;
    if body.size_hint().lower() > limit as u64 {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
    }
    let mut body = body;
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| StreamableHttpError::Io(std::io::Error::other(e.into())))?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        if chunk.len() > limit - out.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn mark(text: &str) -> Option<Value> {
        marked(text.as_bytes()).map(|b| serde_json::from_slice(&b).expect("JSON"))
    }

    #[test]
    fn a_result_with_content_and_a_task_is_marked_a_task() {
        let both = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"started"}],"task":{"taskId":"t1","status":"working"}}}"#;
        let m = mark(both).expect("marked");
        assert_eq!(m["result"]["resultType"], "task");
        assert_eq!(m["result"]["task"]["taskId"], "t1");
        let complete = both.replace(r#""result":{"#, r#""result":{"resultType":"complete","#);
        assert_eq!(
            mark(&complete).expect("marked")["result"]["resultType"],
            "task"
        );
        // The key written with an escape is the same key.
        let escaped = both.replace(r#""task":"#, r#""t\u0061sk":"#);
        assert_eq!(
            mark(&escaped).expect("marked")["result"]["resultType"],
            "task"
        );
    }

    #[test]
    fn what_names_no_task_passes_as_it_came() {
        for text in [
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"task":null}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"task"}]}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","task":{}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#,
            "not json, but a task",
        ] {
            assert_eq!(marked(text.as_bytes()), None, "{text}");
        }
    }

    /// Lines split anywhere across reads come out whole and marked, the rest untouched,
    /// and a last line without a newline is handed out at the end.
    #[tokio::test]
    async fn a_child_s_output_is_marked_line_by_line_across_reads() {
        let task = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"task":{"taskId":"t"}}}"#;
        let plain = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#;
        let input = format!("{task}\n{plain}\n{task}");
        for split in [1, 7, 40, 70, 71, 72, 100, input.len()] {
            let (mut tx, rx) = tokio::io::duplex(16);
            let bytes = input.clone().into_bytes();
            let writer = tokio::spawn(async move {
                for piece in bytes.chunks(split) {
                    tx.write_all(piece).await.expect("write");
                }
            });
            let mut out = String::new();
            Marked::new(rx)
                .read_to_string(&mut out)
                .await
                .expect("read");
            writer.await.expect("writer");
            let lines: Vec<Value> = out
                .lines()
                .map(|l| serde_json::from_str(l).expect("a whole line"))
                .collect();
            assert_eq!(lines.len(), 3, "split {split}: {out}");
            assert_eq!(lines[0]["result"]["resultType"], "task");
            assert_eq!(out.lines().nth(1), Some(plain), "untouched, byte for byte");
            assert_eq!(lines[2]["result"]["resultType"], "task");
            assert!(out.ends_with('}'), "no newline added at the end: {out}");
            assert_eq!(out.matches('\n').count(), 2);
        }
    }
}
