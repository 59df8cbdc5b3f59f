//! Which runs a list shows: the filter a query asks for (template, step, state, page),
//! those needing someone first, fifty to a page — for the console's runs page and the
//! API's `/v1/runs` alike.

use orch_run::runs::{RunRow, RunState};
use std::fmt::Write;

/// Runs on one page.
pub(crate) const PAGE: usize = 50;

/// What the runs page is asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// Only the runs of this template.
    pub(crate) template: Option<String>,
    /// Only the runs in this step.
    pub(crate) step: Option<String>,
    /// Only the runs in this state.
    pub(crate) state: Option<RunState>,
    /// The page, 1-based.
    pub(crate) page: usize,
}

impl Filter {
    /// The filter a query string asks for (empty fields ask for nothing; a page that is
    /// not a number is the first).
    pub(crate) fn parse(query: Option<&str>) -> Filter {
        let field = |name: &str| {
            query
                .and_then(|q| crate::form::form_value(q.as_bytes(), name))
                .filter(|v| !v.is_empty())
        };
        Filter {
            template: field("template"),
            step: field("step"),
            state: field("state").and_then(|s| RunState::parse(&s)),
            page: field("page")
                .and_then(|p| p.parse().ok())
                .filter(|&p| p > 0)
                .unwrap_or(1),
        }
    }

    fn keeps(&self, row: &RunRow) -> bool {
        self.template.as_ref().is_none_or(|t| *t == row.template)
            && self
                .step
                .as_ref()
                .is_none_or(|s| row.step.as_ref() == Some(s))
            && self.state.is_none_or(|s| s == row.state)
    }

    /// The query string of this filter on page `page`.
    pub(crate) fn query(&self, page: usize) -> String {
        let mut q = String::new();
        for (name, value) in [
            ("template", self.template.as_deref()),
            ("step", self.step.as_deref()),
            ("state", self.state.map(RunState::as_str)),
        ] {
            if let Some(value) = value {
                let _ = write!(q, "{name}={}&", crate::client::path_segment(value));
            }
        }
        let _ = write!(q, "page={page}");
        q
    }
}

/// The rows `filter` keeps, those needing someone first (waiting, held, unreadable),
/// then by id; and how many it keeps in all.
pub(crate) fn select<'r>(rows: &'r [RunRow], filter: &Filter) -> (Vec<&'r RunRow>, usize) {
    let mut kept: Vec<&RunRow> = rows.iter().filter(|r| filter.keeps(r)).collect();
    let urgency = |r: &RunRow| match r.state {
        RunState::Waiting => 0,
        RunState::Held => 1,
        RunState::Unreadable => 2,
        RunState::Calling => 3,
        RunState::Ready => 4,
    };
    kept.sort_by(|a, b| urgency(a).cmp(&urgency(b)).then_with(|| a.id.cmp(&b.id)));
    let total = kept.len();
    let start = (filter.page - 1).saturating_mul(PAGE).min(total);
    let end = (start + PAGE).min(total);
    (kept[start..end].to_vec(), total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, step: &str, state: RunState) -> RunRow {
        RunRow {
            id: id.into(),
            template: "t".into(),
            step: Some(step.into()),
            state,
            tool: None,
            question: None,
            expires_ms: None,
            unreadable: None,
        }
    }

    #[test]
    fn filters_page_and_put_waiting_runs_first() {
        let mut rows: Vec<RunRow> = (0..120)
            .map(|i| {
                row(
                    &format!("run:{i:03}"),
                    if i % 2 == 0 { "A" } else { "B" },
                    RunState::Ready,
                )
            })
            .collect();
        rows.push(row("run:zzz", "B", RunState::Waiting));
        let all = Filter::parse(None);
        let (shown, total) = select(&rows, &all);
        assert_eq!((shown.len(), total), (PAGE, 121));
        assert_eq!(shown[0].id, "run:zzz", "the waiting run comes first");
        let b = Filter::parse(Some("step=B&page=2"));
        let (shown, total) = select(&rows, &b);
        assert_eq!(total, 61);
        assert_eq!(shown.len(), 11);
        assert!(shown.iter().all(|r| r.step.as_deref() == Some("B")));
        let waiting = Filter::parse(Some("state=waiting"));
        assert_eq!(select(&rows, &waiting).1, 1);
        let beyond = Filter::parse(Some("page=99"));
        assert_eq!(select(&rows, &beyond), (Vec::new(), 121));
        assert_eq!(
            Filter::parse(Some("page=x&state=nonsense")),
            Filter {
                page: 1,
                ..Filter::default()
            }
        );
        assert_eq!(b.query(3), "step=B&page=3");
    }
}
