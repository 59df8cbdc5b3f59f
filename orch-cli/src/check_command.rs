//! `orch check` (human, JSON, SARIF, GitHub) and `orch explain`.

use super::*;

pub(crate) fn check(
    files: &[String],
    format: CheckFormat,
    deny_warnings: bool,
    color: Color,
) -> u8 {
    let color = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let (mut errors, mut warnings, mut unreadable) = (0usize, 0usize, 0usize);
    let mut compiled_files: Vec<(&str, String, Compiled)> = Vec::new();
    for path in files {
        match compile_file(path) {
            Ok((source, compiled)) => compiled_files.push((path, source, compiled)),
            Err(e) => {
                unreadable += 1;
                eprintln!("error: {e}");
            }
        }
    }
    let mut out = String::new();
    for (path, source, compiled) in &compiled_files {
        let text = diagnostic::SourceText::new(source);
        for d in &compiled.diagnostics {
            match d.severity() {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
            }
            match format {
                CheckFormat::Human => {
                    out.push_str(&diagnostic::render(d, path, &text, color));
                    out.push_str("\n\n");
                }
                CheckFormat::Json => {
                    out.push_str(&json_diagnostic(d, path, &text));
                    out.push('\n');
                }
                CheckFormat::Sarif | CheckFormat::Github => {}
            }
        }
    }
    let checked: Vec<report::Checked<'_>> = compiled_files
        .iter()
        .map(|(path, source, compiled)| report::Checked {
            path,
            source,
            diagnostics: &compiled.diagnostics,
        })
        .collect();
    match format {
        CheckFormat::Sarif => out = report::sarif(&checked),
        CheckFormat::Github => out = report::github(&checked),
        CheckFormat::Human | CheckFormat::Json => {}
    }
    let summary = format!(
        "checked {} file{}: {errors} error{}, {warnings} warning{}{}",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" },
        if unreadable > 0 {
            format!(", {unreadable} unreadable")
        } else {
            String::new()
        }
    );
    match format {
        CheckFormat::Human => {
            out.push_str(&summary);
            out.push('\n');
        }
        _ => eprintln!("{summary}"),
    }
    let written = print_out(&out);
    if unreadable > 0 || written != OK {
        USAGE_OR_IO
    } else if errors > 0 || (deny_warnings && warnings > 0) {
        FOUND_ERRORS
    } else {
        OK
    }
}

pub(crate) fn json_diagnostic(
    d: &Diagnostic,
    path: &str,
    source: &diagnostic::SourceText<'_>,
) -> String {
    let (line, column, end_line, end_column) = match d.span.and_then(orch_codegen::Span::byte_range)
    {
        Some(s) => {
            let (l, c) = source.line_col(s.start);
            let (el, ec) = source.line_col(s.end);
            (l, c, el, ec)
        }
        None => (1, 1, 1, 1),
    };
    serde_json::json!({
        "file": path,
        "line": line,
        "column": column,
        "endLine": end_line,
        "endColumn": end_column,
        "code": d.code.as_str(),
        "name": d.code.name(),
        "severity": d.severity().as_str(),
        "message": d.message,
        "help": d.help,
        "step": d.subject.step,
        "tool": d.subject.tool,
        "position": d.subject.position,
    })
    .to_string()
}

pub(crate) fn explain(code: &str) -> u8 {
    match Code::parse(code) {
        Some(c) => print_out(&orch_codegen::explain::render(c)),
        None => {
            eprintln!("error: unknown diagnostic code `{code}`");
            eprintln!("codes:");
            for c in Code::ALL {
                eprintln!("  {}  {:<32} {}", c.as_str(), c.name(), c.summary());
            }
            USAGE_OR_IO
        }
    }
}
