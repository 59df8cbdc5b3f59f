//! `orch lsp`: a language server for template.json files, over stdio (or any
//! [`Connection`], e.g. an in-memory pair in tests).
//!
//! - **Diagnostics** as the user types: every check `orch check` runs, with its code,
//!   severity, exact range and help; an empty list once fixed, or when the file closes.
//! - **Hover** on a step's name (in `steps[].name` or `defaultStep`): its conditions,
//!   effective allowed tools and sequence.
//! - **Go to definition** from `defaultStep` to the step, and from a tool name (in a
//!   sequence, `availableTools`, or a condition's `value`) to its declaration in
//!   `tools`/`nodes` (or, with no declared tools, its first mention).
//!
//! Positions are UTF-8 when the client offers it (`general.positionEncodings`), UTF-16
//! otherwise, as LSP requires. Documents are synced whole (`TextDocumentSyncKind::Full`).

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::{
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    GotoDefinitionParams, HoverParams,
};
use orch_codegen::ir::Ir;
use orch_codegen::model::{ConditionType, SequenceEntry, Span, Spanned, Template};
use orch_codegen::{Compiled, Diagnostic, Severity};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Any error that ends the server (a broken connection or protocol).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Runs the server on standard input and output until the client says `exit` (or its
/// input ends).
pub fn run_stdio() -> Result<(), Error> {
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let (to_client, outgoing) = crossbeam_channel::bounded::<Message>(16);
    let (incoming, from_client) = crossbeam_channel::bounded::<Message>(16);
    let out = Arc::clone(&stdout);
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        for message in outgoing {
            let body = serde_json::to_vec(&framed(&message)).map_err(std::io::Error::other)?;
            write_frame(&out, &body)?;
        }
        Ok(())
    });
    let reader = std::thread::spawn(move || {
        let stdin = std::io::stdin();
        read_messages(&mut stdin.lock(), &incoming, &stdout)
    });
    let connection = Connection {
        sender: to_client,
        receiver: from_client,
    };
    let served = serve(&connection);
    drop(connection);
    // The writer ends once every message is written; the reader has ended if the client
    // said `exit` or closed its output (after an error it may still be blocked reading).
    let written = writer.join();
    served?;
    match written {
        Ok(result) => result?,
        Err(_) => return Err("the writer thread panicked".into()),
    }
    match reader.join() {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err("the reader thread panicked".into()),
    }
}

/// The largest message body the server reads (a longer one ends the connection: the
/// framing cannot be trusted past it).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// A header line longer than this ends the connection.
const MAX_HEADER_LINE: usize = 8 << 10;

/// A message as JSON-RPC 2.0 on the wire.
fn framed(message: &Message) -> Value {
    let mut v = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut v {
        o.insert("jsonrpc".to_owned(), json!("2.0"));
    }
    v
}

fn write_frame(out: &Mutex<std::io::Stdout>, body: &[u8]) -> std::io::Result<()> {
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
fn read_messages(
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
fn read_frame(input: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
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

/// Serves one client on `connection`: the initialize handshake, then requests and
/// notifications until `shutdown` and `exit`.
pub fn serve(connection: &Connection) -> Result<(), Error> {
    let (id, params) = connection.initialize_start()?;
    let utf8 = params
        .pointer("/capabilities/general/positionEncodings")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|e| e == "utf-8"));
    let capabilities = json!({
        "positionEncoding": if utf8 { "utf-8" } else { "utf-16" },
        "textDocumentSync": {"openClose": true, "change": 1},
        "hoverProvider": true,
        "definitionProvider": true,
    });
    connection.initialize_finish(
        id,
        json!({
            "capabilities": capabilities,
            "serverInfo": {"name": "orch", "version": env!("CARGO_PKG_VERSION")},
        }),
    )?;
    let mut server = Server {
        docs: HashMap::new(),
        utf8,
    };
    for message in &connection.receiver {
        match message {
            Message::Request(req) => {
                if connection.handle_shutdown(&req)? {
                    return Ok(());
                }
                connection.sender.send(server.request(req).into())?;
            }
            Message::Notification(n) => {
                for out in server.notification(n) {
                    connection.sender.send(out.into())?;
                }
            }
            Message::Response(_) => {}
        }
    }
    Ok(())
}

/// An open document, compiled.
struct Doc {
    text: String,
    lines: Lines,
    compiled: Compiled,
}

impl Doc {
    fn new(uri: &str, text: String) -> Doc {
        let fallback = orch_codegen::fallback_name(&file_path(uri));
        let compiled = orch_codegen::compile_json(&text, fallback.as_deref());
        let lines = Lines::new(&text);
        Doc {
            text,
            lines,
            compiled,
        }
    }
}

struct Server {
    docs: HashMap<String, Doc>,
    utf8: bool,
}

impl Server {
    fn request(&mut self, req: Request) -> Response {
        let id = req.id.clone();
        let result = match req.method.as_str() {
            "textDocument/hover" => serde_json::from_value::<HoverParams>(req.params).map(|p| {
                let at = &p.text_document_position_params;
                self.hover(at.text_document.uri.as_str(), at.position)
            }),
            "textDocument/definition" => serde_json::from_value::<GotoDefinitionParams>(req.params)
                .map(|p| {
                    let at = &p.text_document_position_params;
                    self.definition(at.text_document.uri.as_str(), at.position)
                }),
            other => {
                return Response::new_err(
                    id,
                    ErrorCode::MethodNotFound as i32,
                    format!("orch lsp does not handle `{other}`"),
                )
            }
        };
        match result {
            Ok(value) => Response::new_ok(id, value),
            Err(e) => Response::new_err(
                id,
                ErrorCode::InvalidParams as i32,
                format!("invalid params: {e}"),
            ),
        }
    }

    /// Handles a notification; returns the notifications to send (diagnostics).
    fn notification(&mut self, n: Notification) -> Vec<Notification> {
        let (uri, text) = match n.method.as_str() {
            "textDocument/didOpen" => {
                match serde_json::from_value::<DidOpenTextDocumentParams>(n.params) {
                    Ok(p) => (
                        p.text_document.uri.as_str().to_owned(),
                        Some(p.text_document.text),
                    ),
                    Err(_) => return Vec::new(),
                }
            }
            "textDocument/didChange" => {
                match serde_json::from_value::<DidChangeTextDocumentParams>(n.params) {
                    // Full sync: the last change holds the whole text.
                    Ok(mut p) => match p.content_changes.pop() {
                        Some(c) => (p.text_document.uri.as_str().to_owned(), Some(c.text)),
                        None => return Vec::new(),
                    },
                    Err(_) => return Vec::new(),
                }
            }
            "textDocument/didClose" => {
                match serde_json::from_value::<DidCloseTextDocumentParams>(n.params) {
                    Ok(p) => (p.text_document.uri.as_str().to_owned(), None),
                    Err(_) => return Vec::new(),
                }
            }
            _ => return Vec::new(),
        };
        let diagnostics: Vec<Value> = match text {
            Some(text) => {
                let doc = Doc::new(&uri, text);
                let out = doc
                    .compiled
                    .diagnostics
                    .iter()
                    .map(|d| self.diagnostic(&doc, d))
                    .collect();
                self.docs.insert(uri.clone(), doc);
                out
            }
            None => {
                self.docs.remove(&uri);
                Vec::new()
            }
        };
        vec![Notification::new(
            "textDocument/publishDiagnostics".to_owned(),
            json!({"uri": uri, "diagnostics": diagnostics}),
        )]
    }

    fn range(&self, doc: &Doc, span: Option<Span>) -> Value {
        let (start, end) = span
            .and_then(Span::byte_range)
            .map_or((0, 0), |r| (r.start, r.end));
        json!({
            "start": doc.lines.position(&doc.text, start, self.utf8),
            "end": doc.lines.position(&doc.text, end, self.utf8),
        })
    }

    fn diagnostic(&self, doc: &Doc, d: &Diagnostic) -> Value {
        let mut message = d.message.clone();
        if let Some(help) = &d.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        json!({
            "range": self.range(doc, d.span),
            "severity": match d.severity() { Severity::Error => 1, Severity::Warning => 2 },
            "code": d.code.as_str(),
            "source": "orch",
            "message": message,
        })
    }

    fn hover(&self, uri: &str, at: lsp_types::Position) -> Value {
        let Some(doc) = self.docs.get(uri) else {
            return Value::Null;
        };
        let Some(t) = doc.compiled.template() else {
            return Value::Null;
        };
        let offset = doc.lines.offset(&doc.text, at, self.utf8);
        // A step's name, or `defaultStep` naming one.
        let named = t
            .steps
            .iter()
            .find(|s| s.name.as_ref().is_some_and(|n| contains(n.span, offset)))
            .and_then(|s| s.name.as_ref().map(|n| (s, n)));
        let hit = named.or_else(|| {
            let d = t
                .default_step
                .as_ref()
                .filter(|d| contains(d.span, offset))?;
            let step = t
                .steps
                .iter()
                .find(|s| s.name.as_ref().is_some_and(|n| n.value == d.value))?;
            Some((step, d))
        });
        let Some((step, hit)) = hit else {
            // A rule's name: what the rule says.
            let rule = t
                .rules
                .iter()
                .chain(t.steps.iter().flat_map(|s| s.rules.iter()))
                .find(|r| r.name.as_ref().is_some_and(|n| contains(n.span, offset)));
            let Some((rule, name)) = rule.and_then(|r| r.name.as_ref().map(|n| (r, n))) else {
                return Value::Null;
            };
            let text = match doc.compiled.ir.as_ref() {
                Some(ir) => rule_summary(ir, rule.span),
                None => None,
            }
            .unwrap_or_else(|| {
                format!(
                    "**Rule {}** on {}\n\n(fix the template's errors to see what it says)",
                    code(&name.value),
                    code(&rule.tool.value)
                )
            });
            return json!({
                "contents": {"kind": "markdown", "value": text},
                "range": self.range(doc, Some(name.span)),
            });
        };
        let text = step_summary(t, doc.compiled.ir.as_ref(), step);
        json!({
            "contents": {"kind": "markdown", "value": text},
            "range": self.range(doc, Some(hit.span)),
        })
    }

    fn definition(&self, uri: &str, at: lsp_types::Position) -> Value {
        let Some(doc) = self.docs.get(uri) else {
            return Value::Null;
        };
        let Some(t) = doc.compiled.template() else {
            return Value::Null;
        };
        let offset = doc.lines.offset(&doc.text, at, self.utf8);
        let ir = doc.compiled.ir.as_ref();
        let target = if let Some(d) = t.default_step.as_ref().filter(|d| contains(d.span, offset)) {
            match ir {
                Some(ir) => ir
                    .steps
                    .iter()
                    .find(|s| s.name == d.value)
                    .map(|s| s.spans.name),
                None => t
                    .steps
                    .iter()
                    .filter_map(|s| s.name.as_ref())
                    .find(|n| n.value == d.value)
                    .map(|n| n.span),
            }
        } else {
            let reference = t
                .steps
                .iter()
                .flat_map(tool_references)
                .find(|r| contains(r.span, offset));
            // Where the compiled tool is declared; before the template compiles, where
            // the model says.
            reference.and_then(|r| match ir {
                Some(ir) => ir.tools.iter().find(|u| u.name == r.value).map(|u| u.span),
                None => tool_declaration(t, &r.value).map(|n| n.span),
            })
        };
        match target {
            Some(span) => json!({"uri": uri, "range": self.range(doc, Some(span))}),
            None => Value::Null,
        }
    }
}

/// Does `span` (a JSON value, quotes included) hold byte `offset`?
fn contains(span: Span, offset: usize) -> bool {
    span.byte_range()
        .is_some_and(|r| r.start <= offset && offset < r.end.max(r.start + 1))
}

/// The places a step names a tool: its sequence, `availableTools` (plain names, not
/// patterns) and the conditions whose value is a tool.
fn tool_references(s: &orch_codegen::model::Step) -> Vec<&Spanned<String>> {
    s.tool_mentions()
        .filter(|m| !orch_runtime::compiled::is_pattern(&m.value))
        .collect()
}

/// Where `tool` is declared: its entry in `tools`/`nodes`, or without a declared
/// universe, its first mention.
fn tool_declaration<'t>(t: &'t Template, tool: &str) -> Option<&'t Spanned<String>> {
    match &t.universe {
        Some(universe) => universe.iter().find(|u| u.value == tool),
        None => t
            .steps
            .iter()
            .flat_map(|s| s.tool_mentions())
            .find(|m| m.value == tool),
    }
}

fn code(s: &str) -> String {
    let ticks = if s.contains('`') { "`` " } else { "`" };
    let close = if s.contains('`') { " ``" } else { "`" };
    format!("{ticks}{s}{close}")
}

/// The hover text of `step`: description, conditions, effective allowed tools (from
/// the IR step written at the same place, when the template compiles) and sequence.
fn step_summary(t: &Template, ir: Option<&Ir>, step: &orch_codegen::model::Step) -> String {
    let index = t
        .steps
        .iter()
        .position(|s| s.span == step.span)
        .unwrap_or(0);
    let name = step.name.as_ref().map_or("", |n| n.value.as_str());
    let is_default = step.is_default.as_ref().is_some_and(|d| d.value)
        || t.default_step.as_ref().is_some_and(|d| d.value == name);
    let mut out = format!(
        "**Step {}** ({} of {})",
        code(name),
        index + 1,
        t.steps.len()
    );
    if let Some(d) = &step.description {
        out.push_str(&format!("\n\n{d}"));
    }
    conditions_summary(step, is_default, &mut out);
    allowed_summary(ir, step, &mut out);
    sequence_summary(step, &mut out);
    rules_summary(ir, step, &mut out);
    out
}

/// What rule `r` says, in the words refusals use: "`iban` on `send_money`: refuses a
/// call unless: `/recipient` must be …" (semantics §16).
fn rule_words(ir: &Ir, r: &orch_codegen::ir::IrArgRule) -> String {
    let (flat, root) = orch_codegen::ir::flatten_predicate(&r.pred);
    let tool = |i: u16| ir.tools.get(usize::from(i)).map_or("", |t| t.name.as_str());
    let what = flat.view().describe(root, &tool);
    let on = code(tool(r.tool as u16));
    match r.kind {
        orch_runtime::compiled::RuleKind::Require => {
            format!("{} on {on}: refuses a call unless: {what}", code(&r.name))
        }
        orch_runtime::compiled::RuleKind::ApproveWhen => format!(
            "{} on {on}: asks a human about a call whose arguments satisfy: {what}",
            code(&r.name)
        ),
    }
}

/// The hover of a rule's name: the rule compiled at `span`, its scope and what it says.
fn rule_summary(ir: &Ir, span: Span) -> Option<String> {
    let r = ir.arg_rules.iter().find(|r| r.span == span)?;
    let scope = match r.step.and_then(|i| ir.steps.get(i)) {
        Some(s) => format!("while step {} is active", code(&s.name)),
        None => "in every step".to_owned(),
    };
    Some(format!("**Rule** {} ({scope})", rule_words(ir, r)))
}

/// The hover's **Rules on arguments** section: the orchestration's rules and the step's
/// own, in the order they judge a call.
fn rules_summary(ir: Option<&Ir>, step: &orch_codegen::model::Step, out: &mut String) {
    let Some(ir) = ir else { return };
    let index = ir.steps.iter().position(|s| s.spans.step == step.span);
    let rules: Vec<String> = ir
        .arg_rules
        .iter()
        .filter(|r| r.step.is_none() || r.step == index)
        .map(|r| format!("\n- {}", rule_words(ir, r)))
        .collect();
    if !rules.is_empty() {
        out.push_str("\n\n**Rules on arguments**:");
        out.extend(rules);
    }
}

/// The hover's **Conditions** section.
fn conditions_summary(step: &orch_codegen::model::Step, is_default: bool, out: &mut String) {
    out.push_str("\n\n**Conditions**: ");
    if is_default {
        out.push_str("the default step: active when no other step's conditions hold");
        if !step.conditions.is_empty() {
            out.push_str(" (its own conditions are ignored)");
        }
    } else if step.conditions.is_empty() {
        out.push_str("none, so it never becomes active");
    } else {
        out.push_str("all of");
        for c in &step.conditions {
            let kind = match c.kind.as_ref().map(|k| &k.value) {
                Some(ConditionType::Known(k)) => k.as_str().to_owned(),
                Some(ConditionType::Unknown(u)) => format!("{u} (unknown)"),
                None => "(no type)".to_owned(),
            };
            out.push_str(&format!("\n- `{kind}`"));
            if let Some(v) = &c.value {
                out.push_str(&format!(" {}", code(&v.value)));
            }
            if let Some(w) = &c.window {
                out.push_str(&format!(" within the last {} tools", w.value));
            }
        }
    }
}

/// The hover's **Allowed tools** section, from the IR step written at the same place.
fn allowed_summary(ir: Option<&Ir>, step: &orch_codegen::model::Step, out: &mut String) {
    out.push_str("\n\n**Allowed tools**: ");
    let compiled = ir.and_then(|ir| {
        ir.steps
            .iter()
            .find(|s| s.spans.step == step.span)
            .map(|s| (ir, s))
    });
    match compiled {
        Some((ir, s)) => {
            let tools: Vec<String> = s
                .static_set
                .iter()
                .filter_map(|i| ir.tools.get(i))
                .map(|t| code(&t.name))
                .collect();
            if tools.is_empty() {
                out.push_str("none");
            } else if s.allow_all && s.deny_patterns.is_empty() && tools.len() == ir.tools.len() {
                out.push_str(&format!("all {} ({})", tools.len(), tools.join(", ")));
            } else {
                out.push_str(&tools.join(", "));
            }
            if !s.allow_patterns.is_empty() || !s.deny_patterns.is_empty() {
                let list = |p: &[String]| p.iter().map(|p| code(p)).collect::<Vec<_>>().join(", ");
                out.push_str("; tools the template does not declare are judged by");
                if !s.allow_patterns.is_empty() {
                    out.push_str(&format!(" allowed {}", list(&s.allow_patterns)));
                }
                if !s.deny_patterns.is_empty() {
                    out.push_str(&format!(" denied {}", list(&s.deny_patterns)));
                }
            }
            // Approval gates (semantics §13): the step's own and the orchestration's.
            if !s.approve.is_empty() {
                let mut gated: Vec<String> = s
                    .approve
                    .tools
                    .iter()
                    .filter(|&i| s.static_set.contains(i))
                    .filter_map(|i| ir.tools.get(i))
                    .map(|t| code(&t.name))
                    .collect();
                gated.extend(s.approve.patterns.iter().map(|p| code(p)));
                if !gated.is_empty() {
                    out.push_str(&format!(
                        "\n\n**Needs a human's approval of each call**: {}",
                        gated.join(", ")
                    ));
                }
            }
        }
        _ => out.push_str("(fix the template's errors to see them)"),
    }
}

/// The hover's **Sequence** section.
fn sequence_summary(step: &orch_codegen::model::Step, out: &mut String) {
    match &step.sequence {
        Some(seq) if !seq.value.is_empty() => {
            let entries: Vec<String> = seq
                .value
                .iter()
                .map(|e| match e {
                    SequenceEntry::Tool(t) => code(&t.value),
                    SequenceEntry::Group(g) => format!(
                        "({})",
                        g.value
                            .iter()
                            .map(|t| code(&t.value))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ),
                })
                .collect();
            out.push_str(&format!(
                "\n\n**Sequence**: {} (while it runs, only the tool at the current position)",
                entries.join(" → ")
            ));
            if !step.reset_sequence_on.is_empty() {
                let on: Vec<String> = step
                    .reset_sequence_on
                    .iter()
                    .map(|r| code(&r.value))
                    .collect();
                out.push_str(&format!("; restarts on {}", on.join(", ")));
            }
        }
        _ => out.push_str("\n\n**Sequence**: none"),
    }
}

/// The file a `file:` URI names (for the machine's fallback name); other URIs give
/// their last path segment.
fn file_path(uri: &str) -> std::path::PathBuf {
    let path = uri.strip_prefix("file://").unwrap_or(uri);
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Path::new(&String::from_utf8_lossy(&out).into_owned()).to_path_buf()
}

/// Line starts of a text, for byte offset ⇄ LSP position, and marks for counting UTF-16
/// code units without rescanning a line: a position costs at most [`MARK_EVERY`] bytes
/// of scanning, however long its line (a one-line template of megabytes with thousands
/// of diagnostics is common enough: minified JSON).
struct Lines {
    starts: Vec<usize>,
    /// `(byte offset, UTF-16 code units before it)`, at character boundaries about
    /// every [`MARK_EVERY`] bytes, from `(0, 0)`.
    marks: Vec<(usize, usize)>,
}

/// The distance between two marks of [`Lines`], in bytes.
const MARK_EVERY: usize = 1024;

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let mut marks = vec![(0, 0)];
        let mut units = 0;
        for (i, c) in text.char_indices() {
            if i >= marks[marks.len() - 1].0 + MARK_EVERY {
                marks.push((i, units));
            }
            units += c.len_utf16();
        }
        Lines { starts, marks }
    }

    /// UTF-16 code units in `text[..offset]` (`offset` a character boundary).
    fn utf16_before(&self, text: &str, offset: usize) -> usize {
        let i = self
            .marks
            .partition_point(|m| m.0 <= offset)
            .saturating_sub(1);
        let (at, units) = self.marks.get(i).copied().unwrap_or((0, 0));
        units + text.get(at..offset).map_or(0, |s| s.encode_utf16().count())
    }

    /// The position of byte `offset` (clamped to the text, rounded down to a
    /// character): its line, and its column in UTF-8 bytes or UTF-16 code units.
    fn position(&self, text: &str, offset: usize, utf8: bool) -> Value {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self
            .starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let start = self.starts.get(line).copied().unwrap_or(0).min(offset);
        let character = if utf8 {
            offset - start
        } else {
            self.utf16_before(text, offset) - self.utf16_before(text, start)
        };
        json!({"line": line, "character": character})
    }

    /// The byte offset of an LSP position (a column past the line's end is its end).
    fn offset(&self, text: &str, at: lsp_types::Position, utf8: bool) -> usize {
        let Some(&start) = self.starts.get(at.line as usize) else {
            return text.len();
        };
        let end = self
            .starts
            .get(at.line as usize + 1)
            .map_or(text.len(), |next| next - 1);
        let line = &text[start..end.max(start)];
        let want = at.character as usize;
        let mut units = 0;
        for (i, c) in line.char_indices() {
            if units >= want {
                return start + i;
            }
            units += if utf8 { c.len_utf8() } else { c.len_utf16() };
        }
        start + line.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_in_utf16_and_utf8() {
        let text = "{\n  \"𝄞é\": \"x\"\n}";
        let lines = Lines::new(text);
        let x = text.find('x').unwrap();
        assert_eq!(
            lines.position(text, x, false),
            json!({"line": 1, "character": 10})
        );
        assert_eq!(
            lines.position(text, x, true),
            json!({"line": 1, "character": 13})
        );
        let back = |line, character, utf8| {
            lines.offset(text, lsp_types::Position { line, character }, utf8)
        };
        assert_eq!(back(1, 10, false), x);
        assert_eq!(back(1, 13, true), x);
        assert_eq!(back(1, 99, false), text.find("\n}").unwrap());
        assert_eq!(back(9, 0, false), text.len());
    }

    #[test]
    fn positions_on_long_lines_agree_with_counting_from_the_line_start() {
        // Long lines with characters of every UTF-8 and UTF-16 width, marks falling
        // inside and between them.
        let piece = "ab\u{e9}\u{4e2d}\u{1d11e}\"k\": 1, ";
        let text = format!(
            "{}\n{}\n\n{}",
            piece.repeat(700),
            "x".repeat(3000),
            piece.repeat(90)
        );
        let lines = Lines::new(&text);
        assert!(lines.marks.len() > 10, "{}", lines.marks.len());
        let naive = |offset: usize| {
            let line = text[..offset].matches('\n').count();
            let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
            (
                line,
                text[start..offset].encode_utf16().count(),
                offset - start,
            )
        };
        for (offset, _) in text.char_indices().step_by(7).chain([(text.len(), ' ')]) {
            let (line, utf16, utf8) = naive(offset);
            assert_eq!(
                lines.position(&text, offset, false),
                json!({"line": line, "character": utf16}),
                "at {offset}"
            );
            assert_eq!(
                lines.position(&text, offset, true),
                json!({"line": line, "character": utf8}),
                "at {offset}"
            );
        }
    }

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_path("file:///tmp/my%20agent/template.json"),
            Path::new("/tmp/my agent/template.json")
        );
        assert_eq!(
            file_path("untitled:Untitled-1"),
            Path::new("untitled:Untitled-1")
        );
    }
}
