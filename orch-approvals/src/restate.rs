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
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The query that lists every run's pending questions.
const QUERY: &str =
    "SELECT service_key, value_utf8 FROM state WHERE service_name = 'OrchApprovals' AND key = 'pending'";

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

    /// Every run's pending questions, as Restate holds them now.
    async fn pending(&self) -> Result<Vec<Posted>, String> {
        let url = format!("{}/query", self.admin);
        let response = self
            .http
            .post(&url)
            .header("accept", "application/json")
            .json(&json!({"query": QUERY}))
            .send()
            .await
            .map_err(|e| format!("Restate's admin API at {} was not reached: {e}", self.admin))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("Restate's admin API answered {status} with no JSON: {e}"))?;
        if !status.is_success() {
            return Err(format!("Restate's admin API answered {status}: {body}"));
        }
        let rows = body["rows"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
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
