//! LSP's base protocol over stdio: `Content-Length` framed messages read as bytes and
//! written whole.

use lsp_server::Message;
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::sync::Mutex;

/// The largest message body the server reads (a longer one ends the connection: the
/// framing cannot be trusted past it).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// A header line longer than this ends the connection.
pub(super) const MAX_HEADER_LINE: usize = 8 << 10;

/// A message as JSON-RPC 2.0 on the wire.
pub(super) fn framed(message: &Message) -> Value {
    let mut v = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut v {
        o.insert("jsonrpc".to_owned(), json!("2.0"));
    }
    v
}

pub(super) fn write_frame(out: &Mutex<std::io::Stdout>, body: &[u8]) -> std::io::Result<()> {
    let out = out
        .lock()
        .map_err(|_| std::io::Error::other("stdout lock poisoned"))?;
    let mut out = out.lock();
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.write_all(body)?;
    out.flush()
}

/// Reads framed JSON-RPC messages (`Content-Length` headers, then the body) and passes
/// them on, until `exit` or the end of the input. A body that is not JSON, or JSON that is
/// not a JSON-RPC message, is answered with a JSON-RPC error (`-32700` parse error,
/// `-32600` invalid request, `id: null`) and the server goes on; broken framing (a
/// header without CRLF, no or a bad `Content-Length`, a body over
/// [`MAX_MESSAGE_BYTES`], input ending inside a message) ends the connection with an
/// error that says which.
pub(super) fn read_messages(
    input: &mut impl BufRead,
    incoming: &crossbeam_channel::Sender<Message>,
    out: &Mutex<std::io::Stdout>,
) -> std::io::Result<()> {
    loop {
        let body = match read_frame(input)? {
            Some(body) => body,
            None => return Ok(()),
        };
        let problem = match serde_json::from_slice::<Value>(&body) {
            Err(e) => Some((-32700, format!("parse error: {e}"))),
            Ok(v) => match serde_json::from_value::<Message>(v) {
                Ok(message) => {
                    let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
                    if incoming.send(message).is_err() || exit {
                        return Ok(());
                    }
                    None
                }
                Err(e) => Some((-32600, format!("invalid request: {e}"))),
            },
        };
        if let Some((code, message)) = problem {
            let reply =
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
            write_frame(out, reply.to_string().as_bytes())?;
        }
    }
}

/// One message body; `None` at the end of the input between messages.
pub(super) fn read_frame(input: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut length = None;
    let mut first = true;
    loop {
        let mut line = Vec::new();
        let n = input
            .take(MAX_HEADER_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return if first {
                Ok(None)
            } else {
                Err(bad("the input ended inside a message header".into()))
            };
        }
        first = false;
        let Some(line) = line.strip_suffix(b"\r\n") else {
            return Err(bad(format!(
                "a header line does not end with CRLF (or is over {MAX_HEADER_LINE} bytes)"
            )));
        };
        if line.is_empty() {
            break;
        }
        let text = String::from_utf8_lossy(line);
        let Some((name, value)) = text.split_once(':') else {
            return Err(bad(format!("malformed header {text:?}")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| bad(format!("bad Content-Length {:?}", value.trim())))?;
            if n > MAX_MESSAGE_BYTES {
                return Err(bad(format!(
                    "a message of {n} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes"
                )));
            }
            length = Some(n);
        }
    }
    let n = length.ok_or_else(|| bad("a message without Content-Length".into()))?;
    let mut body = vec![0; n];
    input.read_exact(&mut body).map_err(|_| {
        bad(format!(
            "the input ended inside a message body of {n} bytes"
        ))
    })?;
    Ok(Some(body))
}
