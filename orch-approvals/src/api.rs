//! The approvals API over HTTP (docs/approvals.md, "Approvers elsewhere"):
//!
//! | request | role | answer |
//! | --- | --- | --- |
//! | `GET /v1/approvals` (`?state=`, `?tool=`, `?template=`, `?run=` filter) | viewer | `{"questions": [...]}`, newest first: the pending ones (`?state=all`: also those answered or closed, until their expiry) |
//! | `GET /v1/approvals/{id}` | viewer | the question `id` as it stands |
//! | `POST /v1/approvals/{id}` `{"decision": "approve" \| "reject", "reason": "..."}` | approver | the question as answered |
//!
//! Every request carries `Authorization: Bearer <token>` ([`crate::auth`]): 401 without a
//! credential that verifies, 403 for one without the role. An answer applies once: 409
//! with the question as it stands when it was answered, expired or closed already (the
//! run moved on), 403 when the approver is who the run's calls come from, 404 when no
//! such question is open. Errors are `{"error": "..."}`; a host that cannot reach its
//! store answers 503.

use crate::auth::{Denied, Identity, Role};
use crate::state::Approvals;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use orch_run::approvals::{NotAnswered, Posted, MAX_REASON_BYTES};
use serde::Deserialize;
use serde_json::json;

impl Approvals {
    /// Who the request's bearer is, if they hold at least `role`.
    pub(crate) async fn caller(
        &self,
        headers: &HeaderMap,
        role: Role,
    ) -> Result<Identity, Response> {
        let authorization = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match self.approvers().identify(authorization).await {
            Ok(identity) if identity.role >= role => Ok(identity),
            Ok(identity) => Err(error(
                StatusCode::FORBIDDEN,
                &format!(
                    "`{}` may only view questions; answering needs the approver role",
                    identity.name
                ),
            )),
            Err(Denied::Forbidden(why)) => Err(error(StatusCode::FORBIDDEN, &why)),
            Err(Denied::Unauthenticated(why)) => {
                let mut response = error(StatusCode::UNAUTHORIZED, &why);
                response.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer"),
                );
                Err(response)
            }
        }
    }

    /// The question `id` as it stands, if the host knows it.
    async fn find(&self, id: &str) -> Result<Posted, Response> {
        let known = self.desk().questions().await.map_err(unavailable)?;
        known
            .into_iter()
            .find(|q| q.id == id)
            .ok_or_else(|| no_question(id))
    }
}

/// The filters of a list.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Filter {
    state: Option<String>,
    tool: Option<String>,
    template: Option<String>,
    run: Option<String>,
}

/// The API's routes, over `api`.
pub(crate) fn routes(api: Approvals) -> Router {
    Router::new()
        .route("/v1/approvals", get(list))
        .route("/v1/approvals/{id}", get(show).post(answer))
        .with_state(api)
}

async fn list(
    State(api): State<Approvals>,
    headers: HeaderMap,
    Query(filter): Query<Filter>,
) -> Response {
    if let Err(response) = api.caller(&headers, Role::Viewer).await {
        return response;
    }
    let known = match api.desk().questions().await {
        Ok(known) => known,
        Err(why) => return unavailable(why),
    };
    let state = filter.state.as_deref().unwrap_or("pending");
    let keep = |q: &Posted| {
        (state == "all" || q.state.as_str() == state)
            && filter.tool.as_ref().is_none_or(|t| *t == q.tool)
            && filter.template.as_ref().is_none_or(|t| *t == q.template)
            && filter.run.as_ref().is_none_or(|r| *r == q.run)
    };
    let questions: Vec<Posted> = known.into_iter().filter(keep).collect();
    Json(json!({"questions": questions})).into_response()
}

async fn show(
    State(api): State<Approvals>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = api.caller(&headers, Role::Viewer).await {
        return response;
    }
    match api.find(&id).await {
        Ok(question) => Json(question).into_response(),
        Err(response) => response,
    }
}

/// An answer's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
}

async fn answer(
    State(api): State<Approvals>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let identity = match api.caller(&headers, Role::Approver).await {
        Ok(identity) => identity,
        Err(response) => return response,
    };
    let decision: Decision = match serde_json::from_slice(&body) {
        Ok(decision) => decision,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body must be {{\"decision\": \"approve\" | \"reject\", \"reason\": \"...\"}} ({e})"),
            )
        }
    };
    let approved = match decision.decision.as_str() {
        "approve" => true,
        "reject" => false,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the decision `{other}` is neither `approve` nor `reject`"),
            )
        }
    };
    if decision
        .reason
        .as_ref()
        .is_some_and(|r| r.len() > MAX_REASON_BYTES)
    {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("the reason is longer than {MAX_REASON_BYTES} bytes"),
        );
    }
    let reason = decision.reason.as_deref();
    match api.answer(&id, approved, &identity.name, reason).await {
        Ok(Ok(answered)) => Json(answered).into_response(),
        Ok(Err(NotAnswered::Unknown)) => no_question(&id),
        Ok(Err(NotAnswered::OwnRun)) => {
            error(StatusCode::FORBIDDEN, &NotAnswered::OwnRun.to_string())
        }
        Ok(Err(why @ (NotAnswered::Settled(_) | NotAnswered::Stale(_)))) => {
            let question = match &why {
                NotAnswered::Settled(q) | NotAnswered::Stale(q) => json!(q),
                _ => serde_json::Value::Null,
            };
            let body = json!({"error": why.to_string(), "question": question});
            (StatusCode::CONFLICT, Json(body)).into_response()
        }
        Err(why) => unavailable(why),
    }
}

/// An error answer: `{"error": why}` with `status`.
pub(crate) fn error(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({"error": why}))).into_response()
}

fn no_question(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        &format!("no question `{id}` is known here (never asked, expired, or replaced by a newer question of its run)"),
    )
}

fn unavailable(why: String) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("the questions cannot be read now: {why}"),
    )
}
