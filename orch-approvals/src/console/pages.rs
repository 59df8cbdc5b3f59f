//! The console's HTML, written out here: every value from a run is escaped
//! ([`escape`]), and no page has a script.

use super::sessions::Session;
use crate::auth::Role;
use orch_run::approvals::{Posted, PostedState};
use std::fmt::Write;

/// The style sheet (`/console/style.css`).
pub(crate) const STYLE: &str = "\
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:64rem;padding:1rem 1.5rem;color:#1b1f24}
header{display:flex;justify-content:space-between;align-items:baseline;border-bottom:1px solid #d0d7de;margin-bottom:1rem}
h1{font-size:1.3rem;margin:.4rem 0}
.question{border:1px solid #d0d7de;border-radius:6px;padding:.75rem 1rem;margin:0 0 1rem}
.question h2{font-size:1.05rem;margin:0 0 .4rem}
.state{font-size:.8rem;padding:.1rem .45rem;border-radius:1rem;background:#eaeef2}
.pending .state{background:#fff8c5}
dl{display:grid;grid-template-columns:8rem 1fr;gap:.2rem .75rem;margin:.3rem 0}
dt{color:#57606a}
pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all;margin:0}
form.answer{display:flex;gap:.5rem;align-items:center;margin-top:.6rem;flex-wrap:wrap}
input[type=text],input[type=password]{padding:.35rem;min-width:16rem}
button{padding:.35rem .9rem;cursor:pointer}
button:focus,input:focus{outline:2px solid #0969da;outline-offset:1px}
.note{background:#ddf4ff;padding:.4rem .7rem;border-radius:6px}
.problem{background:#ffebe9;padding:.4rem .7rem;border-radius:6px}
nav a{margin-right:.8rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #d0d7de;vertical-align:top}
th{font-weight:600;color:#57606a}
form.filter{display:flex;gap:.6rem;align-items:end;flex-wrap:wrap}
form.filter label{display:flex;flex-direction:column;font-size:.85rem;color:#57606a}
ol.diagram{list-style:none;display:flex;flex-wrap:wrap;gap:.5rem;padding:0}
ol.diagram li{border:1px solid #d0d7de;border-radius:6px;padding:.4rem .7rem;min-width:8rem}
ol.diagram li.current{border:2px solid #0969da;background:#ddf4ff}
ol.diagram small{display:block;color:#57606a}
ol.timeline{border-left:2px solid #d0d7de;padding-left:1.2rem}
ol.timeline li{margin:.2rem 0}
.bad{color:#cf222e;font-weight:600}
td code,dd code,h2 code{word-break:break-all}
.good{color:#1a7f37}
";

/// `text` made safe inside HTML text and attribute values: `&<>"'` as entities, control
/// and direction characters made visible (`\u{202e}`).
pub(crate) fn escape(text: &str) -> String {
    let visible = orch_runtime::printable::printable_lines(text);
    let mut out = String::with_capacity(visible.len() + 16);
    for c in visible.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The link to run `id`'s page, a long id shortened on the page (whole in its title).
pub(crate) fn run_link(id: &str) -> String {
    let shown: String = match id.chars().count() > 28 {
        true => id.chars().take(24).chain(['…']).collect(),
        false => id.to_owned(),
    };
    format!(
        "<a href=\"/console/runs/{}\" title=\"{}\"><code>{}</code></a>",
        crate::client::path_segment(id),
        escape(id),
        escape(&shown)
    )
}

/// A whole page around `body`.
pub(crate) fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><link rel=\"stylesheet\" href=\"/console/style.css\"></head>\
<body>{body}</body></html>\n",
        escape(title)
    )
}

/// The header of a signed-in page: the console's pages, who is signed in, and the
/// sign-out form.
pub(crate) fn header(session: &Session) -> String {
    format!(
        "<header><h1>orch console</h1><nav aria-label=\"Console\"><a href=\"/console\">Questions</a> \
<a href=\"/console/runs\">Runs</a> <a href=\"/console/log\">Decision log</a> \
<a href=\"/console/templates\">Templates</a></nav><form method=\"post\" action=\"/console/logout\">\
<span>{} ({})</span> <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
<button type=\"submit\">Sign out</button></form></header>",
        escape(&session.identity.name),
        session.identity.role.as_str(),
        escape(&session.csrf)
    )
}

/// The sign-in page, with why the last attempt failed.
pub(crate) fn login(problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p class=\"problem\" role=\"alert\">{}</p>", escape(p)))
        .unwrap_or_default();
    document(
        "Sign in — orch console",
        &format!(
            "<header><h1>orch console</h1></header>{problem}\
<form method=\"post\" action=\"/console/login\"><p><label for=\"token\">Token</label> \
<input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required autofocus> \
<button type=\"submit\">Sign in</button></p></form>\
<p>An operator token of the approvals API, or a JWT with a viewer or approver role.</p>"
        ),
    )
}

/// A page that says what went wrong.
pub(crate) fn problem(session: &Session, why: &str) -> String {
    document(
        "orch console",
        &format!(
            "{}<p class=\"problem\" role=\"alert\">{}</p><p><a href=\"/console\">Back to the questions</a></p>",
            header(session),
            escape(why)
        ),
    )
}

/// The questions page.
pub(crate) fn questions(session: &Session, questions: &[Posted], note: Option<&str>) -> String {
    let mut body = header(session);
    if let Some(note) = note {
        let _ = write!(
            body,
            "<p class=\"note\" role=\"status\">{}</p>",
            escape(note)
        );
    }
    let pending = questions
        .iter()
        .filter(|q| q.state == PostedState::Pending)
        .count();
    let _ = write!(
        body,
        "<main><h2>Questions</h2><p>{pending} waiting for an answer, {} answered or closed.</p>",
        questions.len() - pending
    );
    for question in questions {
        body.push_str(&card(session, question));
    }
    body.push_str("</main>");
    document("Questions — orch console", &body)
}

/// One question, with the answer forms when it is pending and the session may answer.
pub(crate) fn card(session: &Session, q: &Posted) -> String {
    let mut out = format!(
        "<section class=\"question {state}\" id=\"{id}\"><h2><code>{tool}</code> \
<span class=\"state\">{state}</span></h2><dl>\
<dt>question</dt><dd><code>{id}</code></dd><dt>run</dt><dd><code>{run}</code></dd>\
<dt>template</dt><dd>{template}</dd><dt>step</dt><dd>{step}</dd>{asked_by}\
<dt>expires</dt><dd>{expires} ms</dd></dl><pre class=\"arguments\">{arguments}</pre>",
        asked_by = q
            .asked_by
            .as_deref()
            .map(|who| format!("<dt>asked by</dt><dd><code>{}</code></dd>", escape(who)))
            .unwrap_or_default(),
        state = q.state.as_str(),
        id = escape(&q.id),
        tool = escape(&q.tool),
        run = escape(&q.run),
        template = escape(&q.template),
        step = q.step.as_deref().map(escape).unwrap_or_else(|| "—".into()),
        expires = q.expires_ms,
        // Byte for byte as the call carried them: the approver sees every digit.
        arguments = escape(&q.arguments),
    );
    if !q.origins.is_empty() {
        out.push_str("<p>Where its values were seen:</p><ul>");
        for line in &q.origins {
            let _ = write!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>");
    }
    if let Some(answer) = &q.answer {
        let _ = write!(
            out,
            "<p>{} by <code>{}</code>{}</p>",
            if answer.approved {
                "Approved"
            } else {
                "Rejected"
            },
            escape(&answer.by),
            answer
                .reason
                .as_deref()
                .map(|r| format!(": {}", escape(r)))
                .unwrap_or_default()
        );
    }
    if q.state == PostedState::Pending && session.identity.role >= Role::Approver {
        let _ = write!(
            out,
            "<form class=\"answer\" method=\"post\" action=\"/console/approvals/{id}\">\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<label for=\"reason-{id}\">Reason</label> <input type=\"text\" id=\"reason-{id}\" name=\"reason\" maxlength=\"2048\">\
<button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>\
<button type=\"submit\" name=\"decision\" value=\"reject\">Reject</button></form>",
            id = escape(&q.id),
            csrf = escape(&session.csrf),
        );
    }
    out.push_str("</section>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_hidden_characters_are_inert() {
        let hostile = "<script>alert('x')</script>\"&\u{202e}\u{1b}[31m";
        let escaped = escape(hostile);
        assert!(
            !escaped.contains('<') && !escaped.contains('>'),
            "{escaped}"
        );
        assert!(
            !escaped.contains('"') && !escaped.contains('\''),
            "{escaped}"
        );
        assert!(escaped.contains("&lt;script&gt;"), "{escaped}");
        assert!(
            escaped.contains("\\u{202e}") && escaped.contains("\\u{1b}"),
            "{escaped}"
        );
    }
}
