//! The console's runs page (`/console/runs`: every run, filtered by template, step and
//! state, fifty to a page) and run page (`/console/runs/{id}`: the template's diagram
//! with the run's step marked, the run's history as a timeline, what it may call now,
//! what its budgets counted, its question with the answer forms, and its decisions from
//! the decision log).

use super::pages::{card, document, escape, header, run_link};
use super::sessions::Session;
use super::{page, sign_in_first, signed_in, Console};
use crate::listing::{select, Filter, PAGE};
use crate::report::{StepBox, TemplateReport};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use orch_run::runs::{RunRow, RunState, RunView};
use std::collections::BTreeSet;
use std::fmt::Write;

/// `GET /console/runs`.
pub(super) async fn list(
    State(console): State<Console>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let Some(session) = signed_in(&console, &headers) else {
        return sign_in_first();
    };
    let filter = Filter::parse(query.as_deref());
    match console.api.desk().runs().await {
        Ok(rows) => page(StatusCode::OK, runs_page(&session, &rows, &filter)),
        Err(why) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            super::pages::problem(&session, &format!("the runs cannot be read now: {why}")),
        ),
    }
}

/// A `<select>` of `choices`, `chosen` selected, with an "any" first.
fn select_field(name: &str, label: &str, choices: &BTreeSet<&str>, chosen: Option<&str>) -> String {
    let mut out = format!(
        "<label for=\"{name}\">{label}<select id=\"{name}\" name=\"{name}\"><option value=\"\">any</option>"
    );
    for choice in choices {
        let selected = if chosen == Some(*choice) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<option value=\"{v}\"{selected}>{v}</option>",
            v = escape(choice)
        );
    }
    out.push_str("</select></label>");
    out
}

fn runs_page(session: &Session, rows: &[RunRow], filter: &Filter) -> String {
    let templates: BTreeSet<&str> = rows.iter().map(|r| r.template.as_str()).collect();
    let steps: BTreeSet<&str> = rows.iter().filter_map(|r| r.step.as_deref()).collect();
    let states: BTreeSet<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let (shown, total) = select(rows, filter);
    let mut body = header(session);
    let _ =
        write!(
        body,
        "<main><h2>Runs</h2><form class=\"filter\" method=\"get\" action=\"/console/runs\">{}{}{}\
<button type=\"submit\">Filter</button></form><p>{total} of {} runs{}.</p>",
        select_field("template", "Template", &templates, filter.template.as_deref()),
        select_field("step", "Step", &steps, filter.step.as_deref()),
        select_field("state", "State", &states, filter.state.map(RunState::as_str)),
        rows.len(),
        match total {
            0 => String::new(),
            _ => format!(
                ", {}–{} shown",
                (filter.page - 1) * PAGE + 1,
                (filter.page - 1) * PAGE + shown.len()
            ),
        }
    );
    body.push_str(
        "<table><thead><tr><th scope=\"col\">Run</th><th scope=\"col\">Template</th>\
<th scope=\"col\">Step</th><th scope=\"col\">State</th><th scope=\"col\">Tool</th>\
<th scope=\"col\">Question</th></tr></thead><tbody>",
    );
    for row in &shown {
        let _ = write!(
            body,
            "<tr class=\"run\"><td>{}</td><td>{}</td><td>{}</td><td><span class=\"state\">{}</span></td><td>{}</td><td>{}</td></tr>",
            run_link(&row.id),
            escape(&row.template),
            row.step.as_deref().map(escape).unwrap_or_else(|| "—".into()),
            row.state.as_str(),
            row.tool.as_deref().map(|t| format!("<code>{}</code>", escape(t))).unwrap_or_default(),
            row.question.as_deref().map(|q| format!("<code>{}</code>", escape(q))).unwrap_or_default(),
        );
    }
    body.push_str("</tbody></table><nav aria-label=\"Pages\">");
    if filter.page > 1 {
        let _ = write!(
            body,
            "<a rel=\"prev\" href=\"/console/runs?{}\">Previous page</a> ",
            escape(&filter.query(filter.page - 1))
        );
    }
    if filter.page.saturating_mul(PAGE) < total {
        let _ = write!(
            body,
            "<a rel=\"next\" href=\"/console/runs?{}\">Next page</a>",
            escape(&filter.query(filter.page + 1))
        );
    }
    body.push_str("</nav></main>");
    document("Runs — orch console", &body)
}

/// `GET /console/runs/{id}`.
pub(super) async fn one(
    State(console): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Some(session) = signed_in(&console, &headers) else {
        return sign_in_first();
    };
    let view = match console.api.desk().run(&id).await {
        Ok(Some(view)) => view,
        Ok(None) => {
            return page(
                StatusCode::NOT_FOUND,
                super::pages::problem(&session, &format!("no run `{id}` is stored here")),
            )
        }
        Err(why) => {
            return page(
                StatusCode::SERVICE_UNAVAILABLE,
                super::pages::problem(&session, &format!("the run cannot be read now: {why}")),
            )
        }
    };
    let decisions = match console.api.decision_log() {
        Some(log) => Some(super::log::run_decisions(log, &id).await),
        None => None,
    };
    let template = console
        .api
        .templates()
        .iter()
        .find(|t| t.name == view.row.template);
    page(
        StatusCode::OK,
        run_page(&session, &view, template, decisions.as_ref()),
    )
}

/// A template's diagram, no step marked.
pub(crate) fn diagram_of(template: &TemplateReport) -> String {
    diagram(Some(template), &[], None)
}

/// The template's diagram with `current` marked: the report's steps, or the bare names.
fn diagram(template: Option<&TemplateReport>, names: &[String], current: Option<&str>) -> String {
    let boxes: Vec<StepBox> = match template {
        Some(t) if !t.steps.is_empty() => t.steps.clone(),
        _ => names
            .iter()
            .map(|name| StepBox {
                name: name.clone(),
                ..StepBox::default()
            })
            .collect(),
    };
    if boxes.is_empty() {
        return "<p>The template has no steps: its rules hold throughout the run.</p>".into();
    }
    let mut out = String::from("<ol class=\"diagram\" aria-label=\"The template's steps\">");
    for step in &boxes {
        let here = current == Some(step.name.as_str());
        let _ = write!(
            out,
            "<li class=\"step{}\"{}><strong>{}</strong>{}",
            if here { " current" } else { "" },
            if here { " aria-current=\"step\"" } else { "" },
            escape(&step.name),
            if here { " (current step)" } else { "" },
        );
        if step.default {
            out.push_str("<small>where a run starts</small>");
        }
        if let Some(when) = &step.entered_when {
            let _ = write!(out, "<small>entered when {}</small>", escape(when));
        }
        if !step.sequence.is_empty() {
            let _ = write!(
                out,
                "<small>sequence: {}</small>",
                escape(&step.sequence.join(" → "))
            );
        }
        if let Some(mark) = &step.mark {
            let _ = write!(out, "<small class=\"bad\">{}</small>", escape(mark));
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
    out
}

fn names(tools: &[String]) -> String {
    match tools.is_empty() {
        true => "none".into(),
        false => tools
            .iter()
            .map(|t| format!("<code>{}</code>", escape(t)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn run_page(
    session: &Session,
    view: &RunView,
    template: Option<&TemplateReport>,
    decisions: Option<&Result<Vec<super::log::Entry>, String>>,
) -> String {
    let row = &view.row;
    let mut body = header(session);
    let _ = write!(
        body,
        "<main><h2>Run <code>{}</code></h2><dl><dt>template</dt><dd>{}</dd>\
<dt>step</dt><dd id=\"step\">{}</dd><dt>state</dt><dd><span class=\"state\">{}</span>{}</dd>\
<dt>mode</dt><dd id=\"mode\">{}</dd><dt>allowed now</dt><dd>{}</dd>",
        escape(&row.id),
        escape(&row.template),
        row.step
            .as_deref()
            .map(escape)
            .unwrap_or_else(|| "—".into()),
        row.state.as_str(),
        row.tool
            .as_deref()
            .map(|t| format!(" <code>{}</code>", escape(t)))
            .unwrap_or_default(),
        match view.mode {
            orch_agent::Mode::Enforce => "enforce",
            orch_agent::Mode::Observe =>
                "observe: calls are judged and recorded, never refused or asked",
        },
        names(&view.allowed),
    );
    if let Some(expected) = &view.expected {
        let _ = write!(body, "<dt>expected next</dt><dd>{}</dd>", names(expected));
    }
    if let Some(why) = &row.unreadable {
        let _ = write!(
            body,
            "<dt>unreadable</dt><dd class=\"bad\">{}</dd>",
            escape(why)
        );
    }
    body.push_str("</dl><h3>Where it is</h3>");
    body.push_str(&diagram(template, &view.steps, row.step.as_deref()));
    if let Some(question) = &view.question {
        body.push_str("<h3>Its question</h3>");
        body.push_str(&card(session, question));
    }
    body.push_str("<h3>What it ran</h3>");
    if view.history.is_empty() {
        body.push_str("<p>No tool recorded yet.</p>");
    } else {
        body.push_str("<ol class=\"timeline\" aria-label=\"Tools recorded, oldest first\">");
        for tool in &view.history {
            let _ = match tool {
                Some(tool) => write!(body, "<li><code>{}</code></li>", escape(tool)),
                None => write!(body, "<li>a tool the template does not declare</li>"),
            };
        }
        body.push_str("</ol>");
    }
    body.push_str("<h3>What it remembers</h3>");
    let _ = write!(
        body,
        "<p>Remembered values are kept as keys, not text; {} forgotten to make room for newer ones{}.</p>",
        view.forgotten,
        if view.forgotten > 0 {
            " (the template's <code>rememberedValues</code> is small for this run)"
        } else {
            ""
        }
    );
    if !view.budgets.is_empty() {
        body.push_str("<table><thead><tr><th scope=\"col\">Budget</th><th scope=\"col\">Counted</th></tr></thead><tbody>");
        for (name, total) in &view.budgets {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(name),
                escape(total)
            );
        }
        body.push_str("</tbody></table>");
    }
    if let Some(decisions) = decisions {
        body.push_str("<h3>Its decisions</h3>");
        body.push_str(&super::log::timeline(decisions));
    }
    body.push_str("</main>");
    document(&format!("Run {} — orch console", row.id), &body)
}
