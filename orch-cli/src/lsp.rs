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
use orch_codegen::model::{Span, Spanned, Template};
use orch_codegen::{Compiled, Diagnostic, Severity};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

mod framing;
mod hover;

pub use framing::MAX_MESSAGE_BYTES;
use framing::{framed, read_messages, write_frame};
use hover::*;

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
