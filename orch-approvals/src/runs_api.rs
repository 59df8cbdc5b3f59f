//! The runs over HTTP, for scripts and dashboards (docs/console.md, "The runs as JSON"):
//!
//! | request | role | answer |
//! | --- | --- | --- |
//! | `GET /v1/runs` (`?template=`, `?step=`, `?state=`, `?page=`) | viewer | `{"runs": [...], "total": N, "page": P, "pageSize": 50}`: the page of the runs the filter keeps, those needing someone first |
//! | `GET /v1/runs/{id}` | viewer | the run in full: its step, state, the template's steps, what it may call, what it ran, its budgets, its question |
//!
//! The same bearer tokens as the approvals API ([`crate::api`]); 404 for an unknown run,
//! 503 when the host's store cannot be read.

use crate::api::error;
use crate::auth::Role;
use crate::listing::{select, Filter, PAGE};
use crate::state::Approvals;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

/// The runs routes, over `api`.
pub(crate) fn routes(api: Approvals) -> Router {
    Router::new()
        .route("/v1/runs", get(list))
        .route("/v1/runs/{id}", get(show))
        .with_state(api)
}

fn unavailable(why: &str) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("the runs cannot be read now: {why}"),
    )
}

async fn list(
    State(api): State<Approvals>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if let Err(response) = api.caller(&headers, Role::Viewer).await {
        return response;
    }
    let rows = match api.desk().runs().await {
        Ok(rows) => rows,
        Err(why) => return unavailable(&why),
    };
    let filter = Filter::parse(query.as_deref());
    let (shown, total) = select(&rows, &filter);
    Json(json!({"runs": shown, "total": total, "page": filter.page, "pageSize": PAGE}))
        .into_response()
}

async fn show(
    State(api): State<Approvals>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(response) = api.caller(&headers, Role::Viewer).await {
        return response;
    }
    match api.desk().run(&id).await {
        Ok(Some(view)) => Json(view).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            &format!("no run `{id}` is stored here"),
        ),
        Err(why) => unavailable(&why),
    }
}
