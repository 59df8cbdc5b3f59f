//! The questions of durable runs on Restate (`orch-restate`'s `OrchApprovals`), as a
//! [`Desk`]: listed with Restate's SQL introspection (the admin API's `/query`, over the
//! `state` of every `OrchApprovals` object) and answered through the ingress
//! (`OrchApprovals/<run>/resolve`, naming the question by its ticket, with the
//! approver's identity, which Restate's journal keeps with the answer).
//!
//! Restate forgets a question once it is answered; this desk remembers the answers it
//! gave itself until their question's expiry, so a second answer through the same API is
//! told who answered (another API process, or an answer through Restate's own API, is
//! not known here: such a second answer is a 404).

use crate::desk::{Desk, Pending};
use orch_run::approvals::{Answer, Answered, NotAnswered, Posted, PostedState};
use orch_run::runs::{RunRow, RunState, RunView};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The query that lists every run's pending questions.
const QUERY: &str =
    "SELECT service_key, value_utf8 FROM state WHERE service_name = 'OrchApprovals' AND key = 'pending'";

/// The query that lists every run (an `OrchRun` object with a session).
const RUNS: &str =
    "SELECT service_key FROM state WHERE service_name = 'OrchRun' AND key = 'session'";

/// How many runs' statuses are asked of the ingress at once.
const STATUS_AT_ONCE: usize = 32;

/// A run as `OrchRun/status` tells it (the fields the console shows).
#[derive(Debug, Deserialize)]
struct Status {
    template: String,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    allowed: Vec<String>,
    #[serde(default)]
    expected: Option<Vec<String>>,
    #[serde(default)]
    history: Vec<Option<String>>,
    #[serde(default)]
    forgotten: u32,
    #[serde(default)]
    mode: orch_agent::Mode,
}

/// A question as `OrchApprovals` keeps it (the fields an approver needs).
#[derive(Debug, Deserialize)]
struct Kept {
    ticket: String,
    tool: String,
    arguments: String,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    origins: Vec<String>,
    expires_ms: u64,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    asked_ms: Option<u64>,
}

/// The questions of the runs of one Restate server.
#[derive(Debug)]
pub struct RestateDesk {
    admin: String,
    ingress: String,
    http: reqwest::Client,
    /// The answers given through this desk, by question id, until their expiry.
    answered: Mutex<HashMap<String, Posted>>,
}

impl RestateDesk {
    /// The runs of the Restate server whose admin API is at `admin` (e.g.
    /// `http://127.0.0.1:9070`) and ingress at `ingress` (`http://127.0.0.1:8080`).
    pub fn new(admin: &str, ingress: &str) -> Result<RestateDesk, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(RestateDesk {
            admin: admin.trim_end_matches('/').to_owned(),
            ingress: ingress.trim_end_matches('/').to_owned(),
            http,
            answered: Mutex::default(),
        })
    }

    /// The rows of an SQL `query` of Restate's introspection.
    async fn query(&self, query: &str) -> Result<Vec<Value>, String> {
        let url = format!("{}/query", self.admin);
        let response = self
            .http
            .post(&url)
            .header("accept", "application/json")
            .json(&json!({"query": query}))
            .send()
            .await
            .map_err(|e| format!("Restate's admin API at {} was not reached: {e}", self.admin))?;
        let status = response.status();
        let mut body: Value = response
            .json()
            .await
            .map_err(|e| format!("Restate's admin API answered {status} with no JSON: {e}"))?;
        if !status.is_success() {
            return Err(format!("Restate's admin API answered {status}: {body}"));
        }
        match body["rows"].take() {
            Value::Array(rows) => Ok(rows),
            _ => Err("Restate's admin API answered a query without rows".to_owned()),
        }
    }

    /// Run `run`'s status, from the ingress (`OrchRun/<run>/status`, a shared handler:
    /// it waits for no call in flight).
    async fn status(&self, run: &str) -> Result<Status, String> {
        let url = format!(
            "{}/OrchRun/{}/status",
            self.ingress,
            crate::client::path_segment(run)
        );
        let response =
            self.http.post(&url).send().await.map_err(|e| {
                format!("Restate's ingress at {} was not reached: {e}", self.ingress)
            })?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(format!(
                "Restate's ingress answered {status} for the status of run `{run}`: {body}"
            ));
        }
        response
            .json()
            .await
            .map_err(|e| format!("the status of run `{run}` cannot be read: {e}"))
    }

    /// The row of run `run` from its status (`Err`: why it cannot be read) and the id of
    /// the question it holds open, if any.
    fn row(run: &str, status: Result<&Status, &String>, open: Option<&Posted>) -> RunRow {
        let mut row = RunRow {
            id: run.to_owned(),
            template: String::new(),
            step: None,
            state: RunState::Ready,
            tool: None,
            question: open.map(|q| q.id.clone()),
            expires_ms: None,
            unreadable: None,
        };
        match status {
            Ok(status) => {
                row.template = status.template.clone();
                row.step = status.step.clone();
                if let Some(q) = open {
                    row.state = RunState::Waiting;
                    row.tool = Some(q.tool.clone());
                }
            }
            Err(why) => {
                row.state = RunState::Unreadable;
                row.unreadable = Some(why.clone());
            }
        }
        row
    }

    /// Every run's pending questions, as Restate holds them now.
    async fn pending(&self) -> Result<Vec<Posted>, String> {
        let rows = self.query(QUERY).await?;
        let mut found = Vec::new();
        for row in rows {
            let (Some(run), Some(value)) =
                (row["service_key"].as_str(), row["value_utf8"].as_str())
            else {
                continue;
            };
            let kept: Vec<Kept> = serde_json::from_str(value)
                .map_err(|e| format!("the pending questions of run `{run}` cannot be read: {e}"))?;
            found.extend(kept.into_iter().map(|k| posted(run, k)));
        }
        Ok(found)
    }
}

/// A kept question as the API shows it: its id is `q-` and its ticket's nonce.
fn posted(run: &str, kept: Kept) -> Posted {
    let nonce = kept.ticket.split(':').nth(1).unwrap_or_default().to_owned();
    Posted {
        id: format!("q-{nonce}"),
        ticket: kept.ticket,
        run: run.to_owned(),
        template: kept.template.unwrap_or_default(),
        step: kept.step,
        tool: kept.tool,
        arguments: kept.arguments,
        origins: kept.origins,
        asked_by: None,
        asked_ms: kept.asked_ms.unwrap_or_default(),
        expires_ms: kept.expires_ms,
        state: PostedState::Pending,
        answer: None,
    }
}

impl Desk for RestateDesk {
    fn runs(&self) -> Pending<'_, Vec<RunRow>> {
        Box::pin(async move {
            let mut ids: Vec<String> = self
                .query(RUNS)
                .await?
                .iter()
                .filter_map(|row| row["service_key"].as_str().map(str::to_owned))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let pending = self.pending().await?;
            let mut rows = Vec::with_capacity(ids.len());
            for chunk in ids.chunks(STATUS_AT_ONCE) {
                let statuses =
                    futures_util::future::join_all(chunk.iter().map(|run| self.status(run))).await;
                for (run, status) in chunk.iter().zip(statuses) {
                    let open = pending.iter().find(|q| q.run == *run);
                    rows.push(Self::row(run, status.as_ref(), open));
                }
            }
            Ok(rows)
        })
    }

    fn run<'a>(&'a self, id: &'a str) -> Pending<'a, Option<RunView>> {
        Box::pin(async move {
            let known = self
                .query(&format!(
                    "{RUNS} AND service_key = '{}'",
                    id.replace('\'', "''")
                ))
                .await?;
            if known.is_empty() {
                return Ok(None);
            }
            let questions = self.questions().await?;
            let question = questions.into_iter().find(|q| q.run == id);
            let open = question
                .as_ref()
                .filter(|q| q.state == PostedState::Pending);
            let status = self.status(id).await;
            let row = Self::row(id, status.as_ref(), open);
            let mut view = RunView {
                row,
                steps: Vec::new(),
                allowed: Vec::new(),
                expected: None,
                history: Vec::new(),
                forgotten: 0,
                budgets: Vec::new(),
                question,
                mode: orch_agent::Mode::Enforce,
            };
            if let Ok(status) = status {
                view.mode = status.mode;
                view.allowed = status.allowed;
                view.expected = status.expected;
                view.history = status.history;
                view.forgotten = status.forgotten;
            }
            Ok(Some(view))
        })
    }

    fn questions(&self) -> Pending<'_, Vec<Posted>> {
        Box::pin(async move {
            let mut found = self.pending().await?;
            let now = orch_agent::protocol::now_ms();
            let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
            answered.retain(|_, p| now < p.expires_ms);
            found.extend(answered.values().cloned());
            found.sort_by(|a, b| b.asked_ms.cmp(&a.asked_ms).then_with(|| a.id.cmp(&b.id)));
            Ok(found)
        })
    }

    fn answer<'a>(
        &'a self,
        run: &'a str,
        answer: Answer<'a>,
    ) -> Pending<'a, Result<Posted, NotAnswered>> {
        Box::pin(async move {
            let given = self
                .answered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(answer.id)
                .cloned();
            if let Some(given) = given {
                return Ok(Err(NotAnswered::Settled(Box::new(given))));
            }
            let pending = self.pending().await?;
            let Some(mut question) = pending
                .into_iter()
                .find(|q| q.id == answer.id && q.run == run)
            else {
                return Ok(Err(NotAnswered::Unknown));
            };
            let url = format!(
                "{}/OrchApprovals/{}/resolve",
                self.ingress,
                crate::client::path_segment(run)
            );
            let body = json!({
                "ticket": question.ticket,
                "approved": answer.approved,
                "reason": answer.reason,
                "by": answer.by,
            });
            let response = self.http.post(&url).json(&body).send().await.map_err(|e| {
                format!("Restate's ingress at {} was not reached: {e}", self.ingress)
            })?;
            let status = response.status();
            let resolved: Value = response
                .json()
                .await
                .map_err(|e| format!("Restate's ingress answered {status} with no JSON: {e}"))?;
            if !status.is_success() {
                return Err(format!("Restate's ingress answered {status}: {resolved}"));
            }
            match (resolved["resolved"].as_bool(), resolved["why"].as_str()) {
                (Some(true), _) => {
                    question.state = match answer.approved {
                        true => PostedState::Approved,
                        false => PostedState::Rejected,
                    };
                    question.answer = Some(Answered {
                        by: answer.by.to_owned(),
                        approved: answer.approved,
                        reason: answer.reason.map(str::to_owned),
                        at_ms: answer.now_ms,
                    });
                    self.answered
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(question.id.clone(), question.clone());
                    Ok(Ok(question))
                }
                (_, Some("expired")) => {
                    question.state = PostedState::Expired;
                    Ok(Err(NotAnswered::Settled(Box::new(question))))
                }
                _ => Ok(Err(NotAnswered::Unknown)),
            }
        })
    }
}
