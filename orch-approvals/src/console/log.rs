//! The console's decision log page (`/console/log`): the log checked as `orch audit
//! verify` checks it — its chain, what an auditor anchored, its checkpoints' signatures —
//! and its last records; and a run's decisions for the run page.

use super::pages::{document, escape, header, run_link};
use super::{page, sign_in_first, signed_in, Console};
use crate::report::DecisionLog;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use orch_agent::audit::CheckpointKeys;
use serde_json::Value;
use std::fmt::Write;

/// Records shown: the log's last, and a run's last.
const SHOWN: usize = 100;

/// One line of the log, as the pages show it.
#[derive(Debug)]
pub(crate) struct Entry {
    seq: String,
    time: String,
    run: String,
    /// The event's kind, and its tool when it has one.
    event: String,
    /// The decision, or `checkpoint`.
    decision: String,
    /// The step before and after.
    steps: String,
    /// Who answered, and why, for an answer.
    answer: Option<String>,
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A line of the log as an entry (`None`: not JSON).
fn entry(line: &str) -> Option<Entry> {
    let value: Value = serde_json::from_str(line).ok()?;
    if let Some(checkpoint) = value.get("checkpoint") {
        return Some(Entry {
            seq: text(&value["seq"]),
            time: text(&value["time"]),
            run: String::new(),
            event: format!("checkpoint, key {}", text(&checkpoint["key"])),
            decision: "checkpoint".into(),
            steps: String::new(),
            answer: None,
        });
    }
    let event = &value["event"];
    let kind = text(&event["kind"]);
    let event_words = match event.get("tool") {
        Some(tool) => format!("{kind} {}", text(tool)),
        None => kind,
    };
    let answer = (event["kind"] == "answer").then(|| {
        let by = event
            .get("by")
            .map(text)
            .unwrap_or_else(|| "the run's user".into());
        match event.get("reason") {
            Some(reason) => format!("by {by}: {}", text(reason)),
            None => format!("by {by}"),
        }
    });
    Some(Entry {
        seq: text(&value["seq"]),
        time: text(&value["time"]),
        run: text(&value["run"]),
        event: event_words,
        decision: text(&value["decision"]),
        steps: format!(
            "{} → {}",
            text(&value["before"]["step"]),
            text(&value["after"]["step"])
        ),
        answer,
    })
}

/// The log's text, read whole.
async fn read(log: &DecisionLog) -> Result<String, String> {
    tokio::fs::read_to_string(&log.path).await.map_err(|e| {
        format!(
            "the decision log {} cannot be read: {e}",
            log.path.display()
        )
    })
}

/// Run `run`'s last decisions, oldest first.
pub(crate) async fn run_decisions(log: &DecisionLog, run: &str) -> Result<Vec<Entry>, String> {
    let text = read(log).await?;
    // Only the lines that name the run (as JSON writes it) are parsed.
    let named = serde_json::to_string(run).unwrap_or_default();
    let mut mine: Vec<Entry> = text
        .lines()
        .filter(|line| line.contains(&named))
        .filter_map(entry)
        .filter(|e| e.run == run)
        .collect();
    let cut = mine.len().saturating_sub(SHOWN);
    mine.drain(..cut);
    Ok(mine)
}

/// Entries as a table.
fn table(entries: &[Entry], with_run: bool) -> String {
    let mut out =
        String::from("<table><thead><tr><th scope=\"col\">#</th><th scope=\"col\">Time</th>");
    if with_run {
        out.push_str("<th scope=\"col\">Run</th>");
    }
    out.push_str("<th scope=\"col\">Event</th><th scope=\"col\">Decision</th><th scope=\"col\">Step</th></tr></thead><tbody>");
    for e in entries {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td>",
            escape(&e.seq),
            escape(&e.time)
        );
        if with_run {
            let _ = match e.run.is_empty() {
                true => write!(out, "<td></td>"),
                false => write!(out, "<td>{}</td>", run_link(&e.run)),
            };
        }
        let _ = write!(
            out,
            "<td><code>{}</code>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&e.event),
            e.answer
                .as_deref()
                .map(|a| format!("<br>{}", escape(a)))
                .unwrap_or_default(),
            escape(&e.decision),
            escape(&e.steps)
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// A run's decisions on its page.
pub(crate) fn timeline(decisions: &Result<Vec<Entry>, String>) -> String {
    match decisions {
        Err(why) => format!("<p class=\"problem\">{}</p>", escape(why)),
        Ok(entries) if entries.is_empty() => "<p>The decision log holds none.</p>".into(),
        Ok(entries) => table(entries, false),
    }
}

/// What checking the log says, in a paragraph.
fn verdict(text: &str, log: &DecisionLog) -> String {
    let keys = log.keys.as_deref().map(|k| k as &dyn CheckpointKeys);
    match orch_agent::audit::verify_signed(text, &log.anchor, keys) {
        Ok(v) => {
            let mut out = format!(
                "<p class=\"good\" id=\"verdict\">The chain holds: {} records, {} checkpoints",
                v.records, v.checkpoints
            );
            if let Some(head) = &v.head {
                let _ = write!(out, "; head <code>{}</code>", escape(head));
            }
            out.push_str(".</p><ul>");
            let anchored = log.anchor.head.is_some() || log.anchor.count.is_some();
            out.push_str(match anchored {
                true => "<li>It holds what was anchored.</li>",
                false => {
                    "<li>No anchor was given: records cut off its end would go unnoticed.</li>"
                }
            });
            out.push_str(match (v.signed, log.keys.is_some()) {
                (true, _) => "<li>Every checkpoint is signed by a given key.</li>",
                (false, _) => "<li>Signatures not checked: no public key was given.</li>",
            });
            if v.unanchored > 0 {
                let _ = write!(
                    out,
                    "<li>{} records after the last checkpoint{}.</li>",
                    v.unanchored,
                    v.unanchored_from
                        .map(|l| format!(", from line {l}"))
                        .unwrap_or_default()
                );
            }
            out.push_str("</ul>");
            out
        }
        Err(broken) => format!(
            "<p class=\"bad\" id=\"verdict\" role=\"alert\">The chain is broken at line {}: {}</p>",
            broken.line,
            escape(&broken.why)
        ),
    }
}

/// `GET /console/log`.
pub(super) async fn show(State(console): State<Console>, headers: HeaderMap) -> Response {
    let Some(session) = signed_in(&console, &headers) else {
        return sign_in_first();
    };
    let mut body = header(&session);
    body.push_str("<main><h2>Decision log</h2>");
    let status = match console.api.decision_log() {
        None => {
            body.push_str(
                "<p>No decision log is shown by this console (it was started without one).</p>",
            );
            StatusCode::OK
        }
        Some(log) => match read(log).await {
            Err(why) => {
                let _ = write!(
                    body,
                    "<p class=\"problem\" role=\"alert\">{}</p>",
                    escape(&why)
                );
                StatusCode::SERVICE_UNAVAILABLE
            }
            Ok(text) => {
                let _ = write!(
                    body,
                    "<p>File <code>{}</code>.</p>",
                    escape(&log.path.display().to_string())
                );
                body.push_str(&verdict(&text, log));
                let mut entries: Vec<Entry> = text.lines().filter_map(entry).collect();
                let cut = entries.len().saturating_sub(SHOWN);
                entries.drain(..cut);
                entries.reverse();
                let _ = write!(
                    body,
                    "<h3>The last {} lines, newest first</h3>",
                    entries.len()
                );
                body.push_str(&table(&entries, true));
                StatusCode::OK
            }
        },
    };
    body.push_str("</main>");
    page(status, document("Decision log — orch console", &body))
}
