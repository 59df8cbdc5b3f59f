//! The console's templates page (`/console/templates`): each template the host serves,
//! with its diagram, what `orch check` says about it, and what `orch verify` found, with
//! the shortest witness of each finding.

use super::pages::{document, escape, header};
use super::{page, sign_in_first, signed_in, Console};
use crate::report::TemplateReport;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use std::fmt::Write;

/// One template's section.
fn section(t: &TemplateReport) -> String {
    let mut out = format!(
        "<section class=\"template\"><h3>{}</h3><dl><dt>file</dt><dd><code>{}</code></dd>\
<dt>fingerprint</dt><dd><code>{}</code></dd></dl><h4>Steps</h4>",
        escape(&t.name),
        escape(&t.file),
        escape(&t.fingerprint)
    );
    out.push_str(&super::runs::diagram_of(t));
    out.push_str("<h4>Diagnostics</h4>");
    match t.diagnostics.is_empty() {
        true => {
            out.push_str("<p class=\"good\">None: the template compiles without a warning.</p>")
        }
        false => {
            out.push_str("<ul>");
            for d in &t.diagnostics {
                let _ = write!(out, "<li><pre>{}</pre></li>", escape(d));
            }
            out.push_str("</ul>");
        }
    }
    out.push_str("<h4>Verified</h4>");
    if t.findings.is_empty() {
        out.push_str(
            "<p>Nothing to verify: the template has no steps, sequences or properties.</p>",
        );
    } else {
        out.push_str(
            "<table><thead><tr><th scope=\"col\">What</th><th scope=\"col\">Of</th>\
<th scope=\"col\">Answer</th><th scope=\"col\">Witness</th></tr></thead><tbody>",
        );
        for f in &t.findings {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}{}</td><td>{}</td></tr>",
                escape(&f.kind),
                escape(&f.subject),
                if f.bad { "bad" } else { "good" },
                escape(&f.answer),
                f.detail
                    .as_deref()
                    .map(|d| format!("<br><small>{}</small>", escape(d)))
                    .unwrap_or_default(),
                match f.witness.is_empty() {
                    true => String::new(),
                    false => format!("<pre>{}</pre>", escape(&f.witness.join("\n"))),
                }
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    out
}

/// `GET /console/templates`.
pub(super) async fn show(State(console): State<Console>, headers: HeaderMap) -> Response {
    let Some(session) = signed_in(&console, &headers) else {
        return sign_in_first();
    };
    let mut body = header(&session);
    body.push_str("<main><h2>Templates</h2>");
    let templates = console.api.templates();
    if templates.is_empty() {
        body.push_str("<p>This console was started without its templates' reports.</p>");
    }
    for t in templates {
        body.push_str(&section(t));
    }
    body.push_str("</main>");
    page(StatusCode::OK, document("Templates — orch console", &body))
}
