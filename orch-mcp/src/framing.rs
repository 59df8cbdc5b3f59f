//! The client's side of stdio, checked before the MCP SDK sees it: every line must be a
//! JSON-RPC message. A line that is not JSON is answered with a JSON-RPC parse error
//! (-32700), one that is JSON but not a JSON-RPC message with an invalid-request error
//! (-32600, echoing its `id` when it has one), a line over [`MAX_LINE`] with -32600; the
//! gateway goes on with the next line. Replies and the SDK's own output share one
//! writer, a line at a time, so they never interleave.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// The longest line read from the client (as the MCP SDK's own limit).
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// Why a line was refused, as a JSON-RPC error response.
fn refusal(code: i64, message: String, id: Value) -> Vec<u8> {
    let mut line = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
    .to_string()
    .into_bytes();
    line.push(b'\n');
    line
}

/// Checks one line from the client: `Ok` to pass it on, `Err` with the reply.
fn check(line: &[u8]) -> Result<(), Vec<u8>> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        refusal(
            -32700,
            format!("Parse error: the line is not JSON ({e})"),
            Value::Null,
        )
    })?;
    let id = match &value {
        Value::Object(o) => match o.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        },
        _ => Value::Null,
    };
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(_) => Ok(()),
        Err(e) => Err(refusal(
            -32600,
            format!("Invalid Request: not a JSON-RPC message an MCP client may send ({e})"),
            id,
        )),
    }
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
    let (replies, mut replies_rx) = mpsc::channel::<Vec<u8>>(64);

    let writer = tokio::spawn(async move {
        let mut output = output;
        let mut from_sdk = BufReader::new(sdk_read);
        let mut line = Vec::new();
        let mut sdk_open = true;
        loop {
            tokio::select! {
                read = from_sdk.read_until(b'\n', &mut line), if sdk_open => {
                    match read {
                        Ok(0) | Err(_) => sdk_open = false,
                        Ok(_) => {
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
    });

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
                match check(body) {
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
    }
}
