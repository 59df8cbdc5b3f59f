//! `orch replay LOG --template NEW.json`: the what-if replay, read a line at a time and
//! written as it goes (human, JSON lines, SARIF).

use crate::{with_template_as, FOUND_ERRORS, LEAVE_PROPERTIES, OK, USAGE_OR_IO};
use clap::ValueEnum;
use orch_agent::audit::{is_checkpoint, DecisionRecord};
use orch_cli::whatif::{Change, Logged, Totals, WhatIf};
use orch_runtime::printable::printable;
use std::io::{BufRead, BufWriter, Write};

/// How `orch replay` writes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplayFormat {
    /// Lines for a person.
    Human,
    /// JSON: one object (an exact replay); for a what-if, one object per changed call
    /// and the totals last (`{"summary": ...}`).
    Json,
    /// SARIF 2.1.0 (a what-if only): one result per call the new template decides
    /// otherwise, at its line of the log.
    Sarif,
}

/// Where the log comes from: a file or standard input, read a line at a time.
fn open(path: &str) -> Result<Box<dyn BufRead>, String> {
    if path == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    std::fs::File::open(path)
        .map(|f| Box::new(std::io::BufReader::with_capacity(1 << 16, f)) as Box<dyn BufRead>)
        .map_err(|e| format!("cannot read `{}`: {e}", printable(path)))
}

/// Runs the what-if replay of `log` under the template `template`: 0 when no call the
/// log let run would be refused or asked about, 1 when some would, 2 on usage or I/O
/// errors (a line that is not a decision record included).
pub(crate) fn whatif_cmd(template: &str, log: &str, format: ReplayFormat) -> u8 {
    let mut input = match open(log) {
        Ok(input) => input,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE_OR_IO;
        }
    };
    with_template_as(template, &LEAVE_PROPERTIES, |_, compiled| {
        let Some(machine) = compiled.to_machine() else {
            eprintln!("error: {template}: the template could not be loaded");
            return FOUND_ERRORS;
        };
        let name = format!("`{}`", printable(machine.name()));
        let stdout = std::io::stdout();
        let mut out = Output::new(BufWriter::new(stdout.lock()), format, log);
        let first = peek_first(&mut input);
        let result = match first {
            Ok(Some(line)) if is_transcript(&line) => {
                // A transcript: one JSON document, read whole.
                let mut text = line;
                if let Err(e) = input.read_to_string(&mut text) {
                    eprintln!("error: cannot read `{}`: {e}", printable(log));
                    return USAGE_OR_IO;
                }
                transcript(&machine, log, &text, &mut out)
            }
            Ok(first) => records(&machine, first, &mut input, &mut out),
            Err(e) => Err(e),
        };
        let totals = match result {
            Ok(totals) => totals,
            Err(e) => {
                let _ = out.flush();
                eprintln!("error: {}: {e}", printable(log));
                return USAGE_OR_IO;
            }
        };
        if let Err(e) = out.finish(&totals, &name) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                eprintln!("error: cannot write the output: {e}");
                return USAGE_OR_IO;
            }
        }
        if totals.stops_any() {
            FOUND_ERRORS
        } else {
            OK
        }
    })
}

/// The first line of the input (its newline kept), or `None` when it is empty.
fn peek_first(input: &mut Box<dyn BufRead>) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    match input.read_until(b'\n', &mut line) {
        Ok(0) => Ok(None),
        Ok(_) => String::from_utf8(line)
            .map(Some)
            .map_err(|_| "line 1 is not UTF-8".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// Is this first line the start of a transcript (a JSON document), not of a decision
/// log (a record or a checkpoint)?
fn is_transcript(line: &str) -> bool {
    let line = line.trim_end();
    !line.trim().is_empty()
        && !is_checkpoint(line)
        && serde_json::from_str::<DecisionRecord>(line).is_err()
        && !line.trim_start().starts_with("{\"v\"")
}

/// A decision log, a line at a time.
fn records<W: Write>(
    machine: &orch_runtime::dynamic::DynMachine,
    first: Option<String>,
    input: &mut Box<dyn BufRead>,
    out: &mut Output<W>,
) -> Result<Totals, String> {
    let mut whatif = WhatIf::new(machine);
    let mut buf = Vec::with_capacity(1024);
    let mut n = 0usize;
    let mut pending = first.map(String::into_bytes);
    loop {
        let line: &[u8] = match pending.take() {
            Some(line) => {
                buf = line;
                &buf
            }
            None => {
                buf.clear();
                match input.read_until(b'\n', &mut buf) {
                    Ok(0) => break,
                    Ok(_) => &buf,
                    Err(e) => return Err(e.to_string()),
                }
            }
        };
        n += 1;
        let text = std::str::from_utf8(line).map_err(|_| format!("line {n} is not UTF-8"))?;
        if text.trim().is_empty() || is_checkpoint(text) {
            continue;
        }
        let record: Logged<'_> = serde_json::from_str(text)
            .map_err(|e| format!("line {n}: not a decision record: {e}"))?;
        if let Some(change) = whatif.record(n, &record) {
            out.change(&change).map_err(|e| e.to_string())?;
        }
    }
    Ok(whatif.totals().clone())
}

/// An OpenAI or Anthropic transcript (one run), as `orch check-trace` reads it.
fn transcript<W: Write>(
    machine: &orch_runtime::dynamic::DynMachine,
    path: &str,
    text: &str,
    out: &mut Output<W>,
) -> Result<Totals, String> {
    let (_, events) = orch_cli::trace::parse(text).map_err(|e| e.to_string())?;
    let mut whatif = WhatIf::new(machine);
    for change in whatif.transcript(path, &events) {
        out.change(&change).map_err(|e| e.to_string())?;
    }
    Ok(whatif.totals().clone())
}

/// Where the report goes, in its format.
struct Output<W: Write> {
    out: W,
    format: ReplayFormat,
    log: String,
    written: u64,
}

impl<W: Write> Output<W> {
    fn new(out: W, format: ReplayFormat, log: &str) -> Self {
        Output {
            out,
            format,
            log: log.to_owned(),
            written: 0,
        }
    }

    fn change(&mut self, change: &Change) -> std::io::Result<()> {
        match self.format {
            ReplayFormat::Human => {
                let step = change.step.as_deref().map_or("-".into(), printable);
                writeln!(
                    self.out,
                    "line {}: run `{}`, `{}` in step {step}: {} → {}",
                    change.line,
                    printable(&change.run),
                    printable(&change.tool),
                    printable(&change.before.describe()),
                    printable(&change.after.describe()),
                )?;
            }
            ReplayFormat::Json => writeln!(self.out, "{}", change.json())?,
            ReplayFormat::Sarif => {
                if self.written == 0 {
                    self.out.write_all(sarif_head().as_bytes())?;
                } else {
                    self.out.write_all(b",\n")?;
                }
                write!(self.out, "{}", sarif_result(&self.log, change))?;
            }
        }
        self.written += 1;
        Ok(())
    }

    fn finish(&mut self, totals: &Totals, name: &str) -> std::io::Result<()> {
        match self.format {
            ReplayFormat::Human => writeln!(self.out, "{}", totals.sentence(name))?,
            ReplayFormat::Json => writeln!(
                self.out,
                "{}",
                serde_json::json!({"summary": totals.json()})
            )?,
            ReplayFormat::Sarif => {
                if self.written == 0 {
                    self.out.write_all(sarif_head().as_bytes())?;
                }
                let summary = totals.json().to_string();
                writeln!(
                    self.out,
                    "\n],\"properties\":{{\"summary\":{summary}}}}}]}}"
                )?;
            }
        }
        self.out.flush()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The SARIF log up to its first result.
fn sarif_head() -> String {
    let driver = serde_json::json!({
        "name": "orch", "informationUri": "https://github.com/orch-rs/orch",
        "version": env!("CARGO_PKG_VERSION"),
        "rules": [
            {"id": "would-refuse", "shortDescription": {"text": "A call that ran would be refused"}},
            {"id": "would-ask", "shortDescription": {"text": "A call that ran would be put to a human"}},
            {"id": "would-allow", "shortDescription": {"text": "A call refused before would run"}},
            {"id": "decided-otherwise", "shortDescription": {"text": "A call would be decided otherwise"}},
        ],
    });
    format!(
        "{{\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\",\"version\":\"2.1.0\",\"runs\":[{{\"tool\":{{\"driver\":{driver}}},\"results\":[\n"
    )
}

/// One changed call as a SARIF result at its line of the log.
fn sarif_result(log: &str, change: &Change) -> serde_json::Value {
    let (rule, level) = match (change.before.word(), change.after.word()) {
        ("admitted", "refused") => ("would-refuse", "error"),
        ("admitted", "asked") => ("would-ask", "warning"),
        (_, "admitted") => ("would-allow", "note"),
        _ => ("decided-otherwise", "note"),
    };
    let text = format!(
        "`{}` in run `{}`: {} → {}{}",
        change.tool,
        change.run,
        change.before.describe(),
        change.after.describe(),
        change
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    );
    serde_json::json!({
        "ruleId": rule, "level": level, "message": {"text": text},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": log},
            "region": {"startLine": change.line},
        }}],
    })
}
