//! Machine-readable reports of `orch check`: SARIF 2.1.0 (code scanning, IDEs) and
//! GitHub Actions workflow commands (annotations on a pull request's diff).

use orch_codegen::diagnostic::SourceText;
use orch_codegen::{Code, Diagnostic, Severity};
use serde_json::{json, Value};

/// One checked file: its path as given, its text, and what the compiler found.
pub struct Checked<'a> {
    /// The path as given on the command line.
    pub path: &'a str,
    /// The template's text.
    pub source: &'a str,
    /// The diagnostics.
    pub diagnostics: &'a [Diagnostic],
}

/// 1-based (line, column, end line, end column) of a diagnostic, columns in Unicode
/// code points; `None` for a diagnostic about the whole file.
pub fn region(d: &Diagnostic, text: &SourceText<'_>) -> Option<(usize, usize, usize, usize)> {
    let r = d.span.and_then(orch_codegen::Span::byte_range)?;
    let (line, col) = text.line_col(r.start);
    let (end_line, end_col) = text.line_col(r.end);
    Some((line, col, end_line, end_col))
}

/// A file path as a SARIF `uri`: a relative reference for a relative path, a `file:`
/// URI for an absolute one, separators as `/`, every byte outside the unreserved
/// characters percent-encoded.
pub fn uri(path: &str) -> String {
    let slashed = path.replace('\\', "/");
    let mut out = String::with_capacity(slashed.len() + 8);
    if slashed.starts_with('/') {
        out.push_str("file://");
    }
    for b in slashed.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// The SARIF 2.1.0 log of one `orch check` run: every code as a rule (with the text of
/// `orch explain` as its help), one result per diagnostic.
pub fn sarif(files: &[Checked<'_>]) -> String {
    let rules: Vec<Value> = Code::ALL
        .iter()
        .map(|&c| {
            json!({
                "id": c.as_str(),
                "name": c.name(),
                "shortDescription": {"text": c.summary()},
                "fullDescription": {"text": orch_codegen::explain::explain(c).text},
                "help": {"text": orch_codegen::explain::render(c)},
                "defaultConfiguration": {"level": level(c.severity())},
                "properties": {"tags": [if c.severity() == Severity::Error { "error" } else { "lint" }]},
            })
        })
        .collect();
    let mut results = Vec::new();
    for f in files {
        let uri = uri(f.path);
        let text = SourceText::new(f.source);
        for d in f.diagnostics {
            let mut message = d.message.clone();
            if let Some(help) = &d.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            let mut physical = json!({"artifactLocation": {"uri": uri}});
            physical["region"] = match region(d, &text) {
                Some((line, col, end_line, end_col)) => json!({
                    "startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col,
                }),
                // About the whole file: its first line, so every viewer can show it.
                None => json!({"startLine": 1}),
            };
            let rule_index = Code::ALL.iter().position(|c| *c == d.code).unwrap_or(0);
            results.push(json!({
                "ruleId": d.code.as_str(),
                "ruleIndex": rule_index,
                "level": level(d.severity()),
                "message": {"text": message},
                "locations": [{"physicalLocation": physical}],
            }));
        }
    }
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "orch",
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "informationUri": env!("CARGO_PKG_HOMEPAGE"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
    text.push('\n');
    text
}

/// Escapes the message of a workflow command (`%`, CR, LF).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property of a workflow command (also `:` and `,`).
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands, one line per diagnostic:
/// `::error file=F,line=L,col=C,endLine=..,endColumn=..,title=CODE::message`
/// (`::warning` for warnings).
pub fn github(files: &[Checked<'_>]) -> String {
    let mut out = String::new();
    for f in files {
        let text = SourceText::new(f.source);
        for d in f.diagnostics {
            let mut props = format!("file={}", escape_property(f.path));
            if let Some((line, col, end_line, end_col)) = region(d, &text) {
                props.push_str(&format!(
                    ",line={line},col={col},endLine={end_line},endColumn={end_col}"
                ));
            }
            props.push_str(&format!(",title={}", d.code.as_str()));
            let mut message = d.message.clone();
            if let Some(help) = &d.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            out.push_str(&format!(
                "::{} {props}::{}\n",
                level(d.severity()),
                escape_data(&message)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_references() {
        assert_eq!(
            uri("agents/a b/template.json"),
            "agents/a%20b/template.json"
        );
        assert_eq!(uri("/tmp/x,y.json"), "file:///tmp/x%2Cy.json");
        assert_eq!(uri("dir\\t.json"), "dir/t.json");
        assert_eq!(uri("ü.json"), "%C3%BC.json");
    }

    #[test]
    fn workflow_commands_are_escaped() {
        assert_eq!(escape_data("50%\r\nnext"), "50%25%0D%0Anext");
        assert_eq!(escape_property("a:b,c%"), "a%3Ab%2Cc%25");
    }
}
