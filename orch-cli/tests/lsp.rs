//! The language server, in-process (an in-memory connection) and as a real `orch lsp`
//! process over a stdio pipe with framed JSON-RPC: the same conversation both ways.

use lsp_server::{Connection, Message};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// A client end: sends and receives JSON-RPC messages as JSON values.
trait Transport {
    fn send(&mut self, msg: Value);
    fn recv(&mut self) -> Value;
}

struct InProcess {
    client: Connection,
}

impl Transport for InProcess {
    fn send(&mut self, msg: Value) {
        let msg: Message = serde_json::from_value(msg).expect("a JSON-RPC message");
        self.client.sender.send(msg).expect("the server is running");
    }
    fn recv(&mut self) -> Value {
        let msg = self
            .client
            .receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("a message from the server");
        serde_json::to_value(msg).unwrap()
    }
}

struct Pipe {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Transport for Pipe {
    fn send(&mut self, msg: Value) {
        let mut msg = msg;
        msg["jsonrpc"] = json!("2.0");
        let body = serde_json::to_vec(&msg).unwrap();
        write!(self.stdin, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
        self.stdin.write_all(&body).unwrap();
        self.stdin.flush().unwrap();
    }
    fn recv(&mut self) -> Value {
        let mut length = None;
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server closed its output"
            );
            assert!(
                line.ends_with("\r\n"),
                "header lines end with CRLF: {line:?}"
            );
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                length = Some(v.parse::<usize>().unwrap());
            }
        }
        let mut body = vec![0; length.expect("a Content-Length header")];
        self.stdout.read_exact(&mut body).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        v
    }
}

/// Receives until the response to request `id` (notifications before it are kept).
fn response(t: &mut dyn Transport, id: i64, seen: &mut Vec<Value>) -> Value {
    loop {
        let m = t.recv();
        if m["id"] == id && m.get("method").is_none() {
            return m;
        }
        seen.push(m);
    }
}

fn diagnostics(t: &mut dyn Transport, uri: &str) -> Vec<Value> {
    loop {
        let m = t.recv();
        if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri {
            return m["params"]["diagnostics"].as_array().unwrap().clone();
        }
    }
}

const URI: &str = "file:///work/agents/my%20agent/template.json";

/// A template with one error: `serch` is not a declared tool. The step's name has a
/// character outside the BMP, so UTF-16 and UTF-8 columns differ after it.
const BROKEN: &str = r#"{
  "agentId": "demo",
  "tools": ["search", "think"],
  "orchestration": {
    "defaultStep": "Chat",
    "steps": [
      {"name": "Chat"},
      {"name": "R𝄞search", "description": "Look things up", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["serch", "think"]}
    ]
  }
}"#;

fn position_of(text: &str, needle: &str, nth: usize, utf8: bool) -> Value {
    let at = text.match_indices(needle).nth(nth).expect("needle").0;
    position_at(text, at, utf8)
}

/// The position just after the first `needle`.
fn end_of(text: &str, needle: &str, utf8: bool) -> Value {
    position_at(
        text,
        text.find(needle).expect("needle") + needle.len(),
        utf8,
    )
}

fn position_at(text: &str, at: usize, utf8: bool) -> Value {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..at].matches('\n').count();
    let before = &text[line_start..at];
    let character = if utf8 {
        before.len()
    } else {
        before.encode_utf16().count()
    };
    json!({"line": line, "character": character})
}

#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn conversation(t: &mut dyn Transport, utf8: bool) {
    let encodings = if utf8 {
        json!(["utf-8", "utf-16"])
    } else {
        json!(["utf-16"])
    };
    t.send(json!({"id": 1, "method": "initialize", "params": {
        "processId": null, "rootUri": null,
        "capabilities": {"general": {"positionEncodings": encodings}}}}));
    let init = response(t, 1, &mut Vec::new());
    let caps = &init["result"]["capabilities"];
    assert_eq!(
        caps["positionEncoding"],
        if utf8 { "utf-8" } else { "utf-16" }
    );
    assert_eq!(caps["hoverProvider"], true);
    assert_eq!(caps["definitionProvider"], true);
    assert_eq!(init["result"]["serverInfo"]["name"], "orch");
    t.send(json!({"method": "initialized", "params": {}}));

    // Diagnostics on open: E015 exactly on `"serch"`.
    t.send(
        json!({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": URI, "languageId": "json", "version": 1, "text": BROKEN}}}),
    );
    let diags = diagnostics(t, URI);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d["code"], "E015");
    assert_eq!(d["severity"], 1);
    assert_eq!(d["source"], "orch");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool `serch`"),
        "{d}"
    );
    assert!(d["message"].as_str().unwrap().contains("help:"), "{d}");
    assert_eq!(
        d["range"]["start"],
        position_of(BROKEN, "\"serch\"", 0, utf8)
    );
    assert_eq!(d["range"]["end"], end_of(BROKEN, "\"serch\"", utf8));

    // Fixed: the diagnostics are cleared.
    let fixed = BROKEN.replace("serch", "search");
    t.send(json!({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": fixed}]}}));
    assert_eq!(diagnostics(t, URI), Vec::<Value>::new());

    // Hover on the step's name, and on `defaultStep`.
    t.send(json!({"id": 2, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": URI}, "position": position_of(&fixed, "search\", \"desc", 0, utf8)}}));
    let hover = response(t, 2, &mut Vec::new());
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .expect("markdown")
        .to_owned();
    assert!(text.contains("**Step `R𝄞search`** (2 of 2)"), "{text}");
    assert!(text.contains("Look things up"), "{text}");
    assert!(text.contains("`message_contains` `research`"), "{text}");
    assert!(
        text.contains("**Allowed tools**: all 2 (`search`, `think`)"),
        "{text}"
    );
    assert!(text.contains("**Sequence**: `search` → `think`"), "{text}");
    assert_eq!(
        hover["result"]["range"]["start"],
        position_of(&fixed, "\"R𝄞search\"", 0, utf8)
    );

    t.send(json!({"id": 3, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": URI}, "position": position_of(&fixed, "Chat\",", 0, utf8)}}));
    let hover = response(t, 3, &mut Vec::new());
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .expect("markdown")
        .to_owned();
    assert!(text.contains("the default step"), "{text}");

    // Definition: `defaultStep` → the step; a sequence tool → its declaration.
    t.send(
        json!({"id": 4, "method": "textDocument/definition", "params": {
        "textDocument": {"uri": URI}, "position": position_of(&fixed, "Chat\",", 0, utf8)}}),
    );
    let def = response(t, 4, &mut Vec::new());
    assert_eq!(def["result"]["uri"], URI);
    assert_eq!(
        def["result"]["range"]["start"],
        position_of(&fixed, "\"Chat\"}", 0, utf8)
    );
    t.send(
        json!({"id": 5, "method": "textDocument/definition", "params": {
        "textDocument": {"uri": URI}, "position": position_of(&fixed, "think\"]}", 0, utf8)}}),
    );
    let def = response(t, 5, &mut Vec::new());
    assert_eq!(
        def["result"]["range"]["start"],
        position_of(&fixed, "\"think\"", 0, utf8)
    );
    assert_eq!(
        def["result"]["range"]["end"],
        end_of(&fixed, "\"think\"", utf8)
    );

    // A misspelt `approve` is E021 with a suggestion; spelt right, the hover names the
    // gate (and the orchestration's own gate, for the step's tools).
    let misspelt = fixed.replace(
        "{\"name\": \"Chat\"}",
        "{\"name\": \"Chat\", \"availableTools\": {\"aprove\": [\"think\"]}}",
    );
    t.send(json!({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": 3}, "contentChanges": [{"text": misspelt}]}}));
    let d = diagnostics(t, URI);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["code"], "E021");
    assert!(
        d[0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `approve`?"),
        "{}",
        d[0]
    );
    let gated = misspelt.replace("aprove", "approve");
    t.send(json!({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": 4}, "contentChanges": [{"text": gated}]}}));
    assert_eq!(diagnostics(t, URI), Vec::<Value>::new());
    t.send(json!({"id": 9, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": URI}, "position": position_of(&gated, "Chat\", \"avail", 0, utf8)}}));
    let text = response(t, 9, &mut Vec::new())["result"]["contents"]["value"]
        .as_str()
        .expect("markdown")
        .to_owned();
    assert!(
        text.contains("**Needs a human's approval of each call**: `think`"),
        "{text}"
    );
    t.send(json!({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": 5}, "contentChanges": [{"text": fixed}]}}));
    assert_eq!(diagnostics(t, URI), Vec::<Value>::new());

    // Nothing at a position: null. Unknown method and bad params: JSON-RPC errors.
    t.send(json!({"id": 6, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}}));
    assert_eq!(response(t, 6, &mut Vec::new())["result"], Value::Null);
    t.send(json!({"id": 7, "method": "textDocument/formatting", "params": {}}));
    assert_eq!(response(t, 7, &mut Vec::new())["error"]["code"], -32601);
    t.send(json!({"id": 8, "method": "textDocument/hover", "params": {"position": "nowhere"}}));
    assert_eq!(response(t, 8, &mut Vec::new())["error"]["code"], -32602);

    // A warning, then closing the file clears its diagnostics.
    let warned = fixed.replace(
        "{\"name\": \"Chat\"}",
        "{\"name\": \"Chat\"}, {\"name\": \"Idle\"}",
    );
    t.send(json!({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": 3}, "contentChanges": [{"text": warned}]}}));
    let diags = diagnostics(t, URI);
    assert!(
        diags
            .iter()
            .any(|d| d["code"] == "W001" && d["severity"] == 2),
        "{diags:?}"
    );
    t.send(json!({"method": "textDocument/didClose", "params": {"textDocument": {"uri": URI}}}));
    assert_eq!(diagnostics(t, URI), Vec::<Value>::new());

    t.send(json!({"id": 9, "method": "shutdown"}));
    assert_eq!(response(t, 9, &mut Vec::new())["result"], Value::Null);
    t.send(json!({"method": "exit"}));
}

#[test]
fn in_process_utf16() {
    let (server, client) = Connection::memory();
    let thread =
        std::thread::spawn(move || orch_cli::lsp::serve(&server).map_err(|e| e.to_string()));
    conversation(&mut InProcess { client }, false);
    thread.join().unwrap().unwrap();
}

#[test]
fn in_process_utf8() {
    let (server, client) = Connection::memory();
    let thread =
        std::thread::spawn(move || orch_cli::lsp::serve(&server).map_err(|e| e.to_string()));
    conversation(&mut InProcess { client }, true);
    thread.join().unwrap().unwrap();
}

fn spawn() -> Pipe {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orch"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("orch lsp starts");
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Pipe {
        child,
        stdin,
        stdout,
    }
}

#[test]
fn over_a_stdio_pipe() {
    for utf8 in [false, true] {
        let mut pipe = spawn();
        conversation(&mut pipe, utf8);
        let status = pipe.child.wait().unwrap();
        assert!(status.success(), "exit after shutdown + exit: {status}");
    }
}

#[test]
fn a_client_that_hangs_up_ends_the_server() {
    // After the handshake: the server stops cleanly when its input ends.
    let mut pipe = spawn();
    pipe.send(json!({"id": 1, "method": "initialize", "params": {"capabilities": {}}}));
    response(&mut pipe, 1, &mut Vec::new());
    pipe.send(json!({"method": "initialized", "params": {}}));
    drop(pipe.stdin);
    let status = pipe.child.wait().unwrap();
    assert!(status.success(), "{status}");

    // In the middle of the handshake: a protocol error, said on stderr, exit status 2.
    let mut pipe = spawn();
    pipe.send(json!({"id": 1, "method": "initialize", "params": {"capabilities": {}}}));
    response(&mut pipe, 1, &mut Vec::new());
    drop(pipe.stdin);
    let status = pipe.child.wait().unwrap();
    let mut err = String::new();
    pipe.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: orch lsp: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

impl Pipe {
    fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    fn finish(mut self) -> (Option<i32>, String) {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status.code(), err)
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut v = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    v.extend_from_slice(body);
    v
}

#[test]
fn malformed_messages_get_json_rpc_errors_and_the_server_goes_on() {
    let mut pipe = spawn();
    pipe.send(json!({"id": 1, "method": "initialize", "params": {"capabilities": {}}}));
    response(&mut pipe, 1, &mut Vec::new());
    pipe.send(json!({"method": "initialized", "params": {}}));

    pipe.send_raw(&frame(b"{\"id\": 2, \"method\": "));
    let reply = pipe.recv();
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(reply["error"]["code"], -32700, "{reply}");

    pipe.send_raw(&frame(b"[1, 2, 3]"));
    let reply = pipe.recv();
    assert_eq!(reply["error"]["code"], -32600, "{reply}");

    pipe.send_raw(&frame(&[0xff, 0xfe, b'{']));
    assert_eq!(pipe.recv()["error"]["code"], -32700);

    // Still serving.
    pipe.send(json!({"id": 3, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}}));
    assert_eq!(
        response(&mut pipe, 3, &mut Vec::new())["result"],
        Value::Null
    );
    pipe.send(json!({"id": 4, "method": "shutdown"}));
    response(&mut pipe, 4, &mut Vec::new());
    pipe.send(json!({"method": "exit"}));
    let (code, err) = pipe.finish();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn broken_framing_ends_the_server_with_a_clear_error() {
    let cases: [(&[u8], &str); 4] = [
        (b"Content-Length: 99999999999\r\n\r\n", "over the limit"),
        (b"Content-Length: ten\r\n\r\n", "bad Content-Length"),
        (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
        (b"Content-Length: 10\n\n{}", "CRLF"),
    ];
    for (bytes, says) in cases {
        let mut pipe = spawn();
        pipe.send(json!({"id": 1, "method": "initialize", "params": {"capabilities": {}}}));
        response(&mut pipe, 1, &mut Vec::new());
        pipe.send(json!({"method": "initialized", "params": {}}));
        pipe.send_raw(bytes);
        let (code, err) = pipe.finish();
        assert_eq!(code, Some(2), "{says}: {err}");
        assert!(
            err.contains(says) && err.starts_with("error: orch lsp: "),
            "{says}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A template with rules on arguments (semantics §16), its regex broken.
const RULES: &str = r#"{
  "agentId": "payments",
  "tools": ["get_contacts", "send_money"],
  "orchestration": {
    "approve": [{"name": "large-payment", "tool": "send_money", "when": {"path": "/amount", "range": {"min": 1000}}}],
    "rules": [{"name": "iban", "tool": "send_money", "require": {"path": "/to", "regex": "^[A-Z]{2"}}],
    "budgets": [{"name": "daily-spend", "tool": "send_money", "sum": "/amount", "within": "24h"}],
    "steps": [
      {"name": "Pay", "isDefault": true, "rules": [
        {"name": "known-recipient", "tool": "send_money", "require": {"path": "/to", "inResult": {"tool": "get_contacts", "path": "/*/iban"}}},
        {"name": "written-by-the-user", "tool": "send_money", "require": {"path": "/to", "from": ["user", {"arguments": "get_contacts", "path": "/name"}]}},
        {"name": "daily-limit", "tool": "send_money", "require": {"budget": "daily-spend", "range": {"max": 10000}}},
        {"name": "within-limit", "tool": "send_money", "require": {"path": "/amount", "range": {"max": {"result": "get_contacts", "path": "/limit"}}}}
      ]},
      {"name": "Review", "conditions": [{"type": "budget", "value": "daily-spend", "range": {"min": 5000}}]}
    ]
  }
}"#;

#[test]
fn rules_on_arguments_get_diagnostics_at_their_place_and_hovers() {
    let mut pipe = spawn();
    let t = &mut pipe;
    t.send(json!({"id": 1, "method": "initialize", "params": {"capabilities": {}}}));
    response(t, 1, &mut Vec::new());
    t.send(json!({"method": "initialized", "params": {}}));
    let uri = "file:///work/payments/template.json";
    t.send(
        json!({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "json", "version": 1, "text": RULES}}}),
    );
    // E016 exactly on the rule's regex.
    let diags = diagnostics(t, uri);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["code"], "E016");
    assert_eq!(
        diags[0]["range"]["start"],
        position_of(RULES, "\"^[A-Z]{2\"", 0, false)
    );
    assert_eq!(
        diags[0]["range"]["end"],
        end_of(RULES, "\"^[A-Z]{2\"", false)
    );

    let fixed = RULES.replace("{2\"", "{2}\"");
    t.send(json!({"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]}}));
    assert_eq!(diagnostics(t, uri), Vec::<Value>::new());

    // The step's hover lists the rules that judge its calls, the orchestration's first.
    t.send(json!({"id": 2, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": uri}, "position": position_of(&fixed, "\"Pay\"", 0, false)}}));
    let hover = response(t, 2, &mut Vec::new());
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .expect("markdown");
    let rules = text.split("**Rules on arguments**:").nth(1).expect(text);
    let lines: Vec<&str> = rules.trim().lines().collect();
    assert_eq!(
        lines,
        [
            "- `large-payment` on `send_money`: asks a human about a call whose arguments satisfy: `/amount` must be a number of at least 1000",
            "- `iban` on `send_money`: refuses a call unless: `/to` must be a string matching the regex `^[A-Z]{2}`",
            "- `known-recipient` on `send_money`: refuses a call unless: `/to` must be one of the values earlier results of `get_contacts` held at `/*/iban`",
            "- `written-by-the-user` on `send_money`: refuses a call unless: `/to` must be either a value the user wrote in a message or one of the values earlier admitted calls of `get_contacts` were given at `/name`",
            "- `daily-limit` on `send_money`: refuses a call unless: budget `daily-spend` with this call must be at most 10000",
            "- `within-limit` on `send_money`: refuses a call unless: `/amount` must be a number at most the number the newest result of `get_contacts` held at `/limit`",
        ],
        "{text}"
    );
    // A step a budget moves the run to says so.
    t.send(json!({"id": 20, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": uri}, "position": position_of(&fixed, "\"Review\"", 0, false)}}));
    let hover = response(t, 20, &mut Vec::new());
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .expect("markdown");
    assert!(
        text.contains("- `budget` `daily-spend` at least 5000"),
        "{text}"
    );

    // A rule's name: what it says and where it applies.
    t.send(json!({"id": 3, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": uri}, "position": position_of(&fixed, "known-recipient", 0, false)}}));
    let hover = response(t, 3, &mut Vec::new());
    assert_eq!(
        hover["result"]["contents"]["value"],
        "**Rule** `known-recipient` on `send_money`: refuses a call unless: `/to` must be one of the values earlier results of `get_contacts` held at `/*/iban` (while step `Pay` is active)"
    );
    assert_eq!(
        hover["result"]["range"]["start"],
        position_of(&fixed, "\"known-recipient\"", 0, false)
    );
    t.send(json!({"id": 4, "method": "shutdown"}));
    response(t, 4, &mut Vec::new());
    t.send(json!({"method": "exit"}));
    let (code, err) = pipe.finish();
    assert_eq!(code, Some(0), "{err}");
}
