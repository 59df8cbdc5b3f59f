//! The client's side of stdio, checked before the MCP SDK sees it: every line must be a
//! JSON-RPC message. A line that is not JSON is answered with a JSON-RPC parse error
//! (-32700), one that is JSON but not a JSON-RPC message with an invalid-request error
//! (-32600, echoing its `id` when it has one), a line over [`MAX_LINE`] with -32600; the
//! gateway goes on with the next line. Replies and the SDK's own output share one
//! writer, a line at a time, so they never interleave.

use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// The longest line read from the client (as the MCP SDK's own limit).
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// The methods of the MCP revisions the gateway speaks: a request for one of them whose
/// params do not fit is an invalid-params error (-32602), not an unknown method.
const KNOWN_METHODS: [&str; 15] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
];

/// Methods the 2026-07-28 revision removed: a request that names that revision (or a
/// later one) and one of these is answered "Method not found" (over HTTP with 404), as
/// the revision requires of a server that does not implement a method.
const REMOVED_IN_2026: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// A request on a revision without sessions (named by its `_meta`, or by the
/// `MCP-Protocol-Version` header `header_version` over HTTP) for a method that revision
/// does not have — one it removed, or one no revision defines: the JSON-RPC error
/// (-32601) to answer it with.
pub(crate) fn unknown_on_modern(bytes: &[u8], header_version: Option<&str>) -> Option<ErrorReply> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    let method = value.get("method")?.as_str()?;
    let id = match value.get("id")? {
        id @ (Value::String(_) | Value::Number(_)) => id.clone(),
        _ => return None,
    };
    let meta_version = value
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str);
    let modern = |v: &str| {
        serde_json::from_value::<rmcp::model::ProtocolVersion>(Value::String(v.to_owned()))
            .is_ok_and(|v| !v.has_initialize())
    };
    if !meta_version.or(header_version).is_some_and(modern) {
        return None;
    }
    let removed = REMOVED_IN_2026.contains(&method);
    if !removed && KNOWN_METHODS.contains(&method) {
        return None;
    }
    let why = match removed {
        true => "the MCP revision this request names (2026-07-28 or later) removed it",
        false => "no MCP revision has it",
    };
    Some(ErrorReply {
        code: -32601,
        message: format!("Method not found: `{method}` ({why})"),
        id,
    })
}

/// Why a message was refused: a JSON-RPC error's code, message and the request's id
/// (`null` when it has none or it cannot be read).
#[derive(Debug)]
pub(crate) struct ErrorReply {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) id: Value,
}

/// A JSON-RPC error response.
pub(crate) fn jsonrpc_error_body(code: i64, message: String, id: Value) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
    .to_string()
}

/// Why a line was refused, as a JSON-RPC error response line.
fn refusal(code: i64, message: String, id: Value) -> Vec<u8> {
    let mut line = jsonrpc_error_body(code, message, id).into_bytes();
    line.push(b'\n');
    line
}

/// Reads one message from the client (a stdio line, an HTTP body): a JSON-RPC message
/// an MCP client may send, or why not — not JSON (-32700), not such a message
/// (-32600, with its `id` when it has one), a known method with params that do not fit
/// (-32602).
pub(crate) fn classify(bytes: &[u8]) -> Result<ClientJsonRpcMessage, ErrorReply> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ErrorReply {
        code: -32700,
        message: format!("Parse error: not JSON ({e})"),
        id: Value::Null,
    })?;
    let id = match &value {
        Value::Object(o) => match o.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        },
        _ => Value::Null,
    };
    let method = value
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let message =
        serde_json::from_value::<ClientJsonRpcMessage>(value).map_err(|e| ErrorReply {
            code: -32600,
            message: format!(
                "Invalid Request: not a JSON-RPC message an MCP client may send ({e})"
            ),
            id: id.clone(),
        })?;
    // The SDK reads numbers as 64-bit integers or doubles: a call whose arguments hold a
    // number it would change is refused rather than passed on as another call.
    if method.as_deref() == Some("tools/call") {
        if let Some(number) = std::str::from_utf8(bytes).ok().and_then(inexact_arguments) {
            return Err(ErrorReply {
                code: -32602,
                message: match orch_agent::protocol::forwarded_number(&number) {
                    Some(forwarded) => format!(
                        "Invalid params: the argument {number} cannot be passed on exactly: it would reach the tool as {forwarded} (orch mcp reads numbers as 64-bit integers or doubles, and never forwards a call changed); send it as a string, or write the number as the tool should receive it"
                    ),
                    None => format!(
                        "Invalid params: the argument {number} cannot be passed on exactly (orch mcp reads numbers as 64-bit integers or doubles, and never forwards a call changed); send it as a string"
                    ),
                },
                id,
            });
        }
    }
    // The SDK reads a request it cannot type as a custom one: for a method it knows,
    // that means the params are wrong.
    if let ClientJsonRpcMessage::Request(r) = &message {
        if let (ClientRequest::CustomRequest(_), Some(method)) = (&r.request, &method) {
            if KNOWN_METHODS.contains(&method.as_str()) {
                return Err(ErrorReply {
                    code: -32602,
                    message: format!(
                        "Invalid params: the params of `{method}` do not have the shape the MCP specification gives them"
                    ),
                    id,
                });
            }
        }
    }
    Ok(message)
}

/// The first number of a `tools/call` message's arguments that the SDK would change
/// ([`orch_agent::protocol::inexact_number`]), read from the message as sent.
fn inexact_arguments(message: &str) -> Option<String> {
    let entries = orch_agent::protocol::object_entries(message).ok()?;
    let params = entries.iter().find(|(k, _)| k == "params")?.1.get();
    let params = orch_agent::protocol::object_entries(params).ok()?;
    let arguments = params.iter().find(|(k, _)| k == "arguments")?.1.get();
    orch_agent::protocol::inexact_number(arguments)
}

/// Checks one line from the client: `Ok` with what it is, to pass it on; `Err` with the
/// reply.
fn check(line: &[u8]) -> Result<Checked, Vec<u8>> {
    match classify(line) {
        Ok(ClientJsonRpcMessage::Request(r)) => Ok(Checked::Request(id_key(&r.id))),
        Ok(ClientJsonRpcMessage::Notification(n)) => match &n.notification {
            ClientNotification::CancelledNotification(c) => {
                Ok(Checked::Cancels(c.params.request_id.as_ref().map(id_key)))
            }
            _ => Ok(Checked::Other),
        },
        Ok(_) => Ok(Checked::Other),
        Err(refused) => Err(refusal(refused.code, refused.message, refused.id)),
    }
}

/// What a line that passed is.
#[derive(Debug)]
enum Checked {
    /// A request with this id.
    Request(String),
    /// The cancellation of the request with this id (the SDK will not answer it).
    Cancels(Option<String>),
    /// Anything else.
    Other,
}

/// A request id as a key (`1` and `"1"` differ).
fn id_key(id: &rmcp::model::RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// The id of a response the SDK wrote (a line with an `id` and a `result` or `error`).
fn response_id(line: &[u8]) -> Option<String> {
    /// The fields that tell a response; a result is skipped over, not built.
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<Value>,
        method: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    if head.method.is_some() || (head.result.is_none() && head.error.is_none()) {
        return None;
    }
    serde_json::to_string(&head.id?).ok()
}

/// Connects the client's `input` and `output` to `sdk` (the SDK's end of an in-memory
/// pipe), checking every incoming line. Returns when the client hangs up and the SDK's
/// output has been written.
pub(crate) async fn pump<R, W>(input: R, output: W, sdk: DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sdk_read, mut sdk_write) = tokio::io::split(sdk);
    let (replies, replies_rx) = mpsc::channel::<Vec<u8>>(64);
    // The ids of the client's requests not answered yet: a second request with one of
    // them is refused (its answer could not be told from the first's).
    let pending: Arc<Mutex<HashSet<String>>> = Arc::default();
    let answered = Arc::clone(&pending);

    let writer = tokio::spawn(write_out(output, sdk_read, replies_rx, answered));

    let mut input = BufReader::new(input);
    let mut line: Vec<u8> = Vec::new();
    loop {
        line.clear();
        match read_line_bounded(&mut input, &mut line).await {
            Line::Eof => break,
            Line::TooLong => {
                let reply = refusal(
                    -32600,
                    format!("Invalid Request: a message longer than {MAX_LINE} bytes was dropped"),
                    Value::Null,
                );
                if replies.send(reply).await.is_err() {
                    break;
                }
            }
            Line::Ok => {
                let body = line.strip_suffix(b"\n").unwrap_or(&line);
                let body = body.strip_suffix(b"\r").unwrap_or(body);
                if body.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let checked = check(body).and_then(|checked| match checked {
                    Checked::Request(id) => {
                        let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
                        if pending.insert(id.clone()) {
                            Ok(())
                        } else {
                            Err(refusal(
                                -32600,
                                format!("Invalid Request: the id {id} is already used by a request that has not been answered yet"),
                                serde_json::from_str(&id).unwrap_or(Value::Null),
                            ))
                        }
                    }
                    Checked::Cancels(id) => {
                        if let Some(id) = id {
                            pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                        }
                        Ok(())
                    }
                    Checked::Other => Ok(()),
                });
                match checked {
                    Ok(()) => {
                        if sdk_write.write_all(body).await.is_err()
                            || sdk_write.write_all(b"\n").await.is_err()
                        {
                            break;
                        }
                    }
                    Err(reply) => {
                        if replies.send(reply).await.is_err() {
                            break;
                        }
                    }
                }
            }
        }
    }
    // The client hung up: the SDK sees end of input and stops.
    let _ = sdk_write.shutdown().await;
    drop(sdk_write);
    drop(replies);
    let _ = writer.await;
}

/// The client's output: the SDK's lines (each response's id no longer pending) and the
/// gateway's own replies to lines it refused, until both have ended.
async fn write_out<W>(
    mut output: W,
    sdk_read: tokio::io::ReadHalf<DuplexStream>,
    mut replies_rx: mpsc::Receiver<Vec<u8>>,
    answered: Arc<Mutex<HashSet<String>>>,
) where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut from_sdk = BufReader::new(sdk_read);
    let mut line = Vec::new();
    let mut sdk_open = true;
    loop {
        tokio::select! {
            read = from_sdk.read_until(b'\n', &mut line), if sdk_open => {
                match read {
                    Ok(0) | Err(_) => sdk_open = false,
                    Ok(_) => {
                        if let Some(id) = response_id(&line) {
                            answered.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                        }
                        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                            return;
                        }
                        line.clear();
                    }
                }
            }
            reply = replies_rx.recv() => match reply {
                Some(reply) => {
                    if output.write_all(&reply).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                }
                None if !sdk_open => return,
                None => {
                    // No more replies; copy the rest of the SDK's output.
                    while let Ok(n) = from_sdk.read_until(b'\n', &mut line).await {
                        if n == 0 || output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                            return;
                        }
                        line.clear();
                    }
                    return;
                }
            },
            else => return,
        }
    }
}

enum Line {
    Ok,
    TooLong,
    Eof,
}

/// Reads one line into `buf` without ever holding more than [`MAX_LINE`] bytes of it.
/// A longer line is consumed to its end and reported as [`Line::TooLong`]; I/O errors
/// count as end of input.
async fn read_line_bounded<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> Line {
    let mut too_long = false;
    loop {
        let available = match input.fill_buf().await {
            Ok(b) => b,
            Err(_) => return Line::Eof,
        };
        if available.is_empty() {
            return if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Ok
            };
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let n = chunk.len();
        if !too_long {
            if buf.len() + n > MAX_LINE + 1 {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        input.consume(n);
        if done {
            return if too_long { Line::TooLong } else { Line::Ok };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Value {
        let bytes = check(line.as_bytes()).expect_err("refused");
        serde_json::from_slice(&bytes).expect("a JSON reply")
    }

    #[test]
    fn messages_pass_and_everything_else_is_answered() {
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(check(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_ok());
        let r = reply("{not json");
        assert_eq!(r["error"]["code"], -32700);
        assert_eq!(r["id"], Value::Null);
        let r = reply(r#"{"jsonrpc":"2.0","id":7,"params":{}}"#);
        assert_eq!(r["error"]["code"], -32600);
        assert_eq!(r["id"], 7);
        let r = reply("[1,2,3]");
        assert_eq!(r["error"]["code"], -32600);
        let r = reply("\"just a string\"");
        assert_eq!(r["error"]["code"], -32600);
        // A known method whose params do not fit: invalid params, with the id.
        let r = reply(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":7}}"#);
        assert_eq!(r["error"]["code"], -32602);
        assert_eq!(r["id"], "a");
        let r =
            reply(r#"{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"arguments":{}}}"#);
        assert_eq!(r["error"]["code"], -32602);
        // Responses are told from requests and notifications by their fields.
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id":7,"result":{"big":[1,2,3]}}"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}"#)
                .as_deref(),
            Some("\"a\"")
        );
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#),
            None
        );
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#),
            None
        );
        assert_eq!(response_id(b"not json"), None);
        // Numbers the SDK would change are refused; those it keeps pass.
        let r = reply(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"pay","arguments":{"order":12345678901234567890123}}}"#,
        );
        assert_eq!(r["error"]["code"], -32602);
        assert!(r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("12345678901234567890123")));
        assert!(check(
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","arguments":{"order":7,"amount":19.5,"fee":0.0,"n":-3}}}"#
        )
        .is_ok());
        // Numbers the SDK would write back otherwise, though to the same value, are
        // refused too: the call approved and digested is the call as written.
        for (written, forwarded) in [
            ("-0", "-0.0"),
            ("1E2", "100.0"),
            ("19.50", "19.5"),
            ("1e-2", "0.01"),
        ] {
            let r = reply(&format!(
                r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"pay","arguments":{{"amount":{written}}}}}}}"#
            ));
            assert_eq!(r["error"]["code"], -32602, "{written}");
            let message = r["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(written)
                    && message.contains(&format!("reach the tool as {forwarded}")),
                "{written}: {message}"
            );
        }
        // An unknown method passes (the SDK answers it with -32601).
        assert!(check(br#"{"jsonrpc":"2.0","id":3,"method":"vendor/thing","params":{}}"#).is_ok());
    }
}
