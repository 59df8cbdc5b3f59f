//! The console (docs/console.md): the questions of every run, the runs themselves, the
//! decision log and the templates, as server-rendered HTML pages an operator opens in a
//! browser, with approve and reject forms for those who hold the approver role.
//!
//! | request | what |
//! | --- | --- |
//! | `GET /console` | the sign-in form, or the questions (pending first, then those answered or closed until their expiry) |
//! | `POST /console/login` (`token`) | signs in with an operator token or a JWT: a session cookie (`HttpOnly`, `SameSite=Strict`) |
//! | `POST /console/approvals/{id}` (`csrf`, `decision`, `reason`) | answers a question (approver role), then back to the list |
//! | `POST /console/logout` (`csrf`) | signs out |
//! | `GET /console/runs` (`template`, `step`, `state`, `page`) | every run, filtered, fifty to a page |
//! | `GET /console/runs/{id}` | one run: the diagram with its step marked, its history, its question, its decisions |
//! | `GET /console/log` | the decision log checked (chain, anchor, signatures) and its last records |
//! | `GET /console/templates` | each template's diagram, diagnostics and `orch verify` findings |
//! | `GET /console/style.css` | the page's style sheet |
//!
//! Tool names and arguments come from the model and the pages it read: everything shown
//! is HTML-escaped (control and direction characters made visible), the page has no
//! script at all, its Content-Security-Policy allows none and no framing, and every form
//! carries the session's CSRF token, checked with the `Origin` a browser sends.

mod log;
mod pages;
mod runs;
mod sessions;
mod templates;

use crate::auth::Role;
use crate::form::form_value;
use crate::state::Approvals;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use orch_run::approvals::{NotAnswered, PostedState};
use sessions::Sessions;
use std::sync::Arc;

/// The cookie that names a console session.
const COOKIE: &str = "orch_console";

/// What the console pages serve: the API's state, and the signed-in sessions.
#[derive(Clone)]
pub(crate) struct Console {
    pub(crate) api: Approvals,
    pub(crate) sessions: Arc<Sessions>,
}

/// The console's routes (`/console...`).
pub(crate) fn routes(api: Approvals) -> Router {
    let console = Console {
        api,
        sessions: Arc::new(Sessions::default()),
    };
    Router::new()
        .route("/console", get(home))
        .route("/console/login", post(login))
        .route("/console/logout", post(logout))
        .route("/console/approvals/{id}", post(answer))
        .route("/console/runs", get(runs::list))
        .route("/console/runs/{id}", get(runs::one))
        .route("/console/log", get(log::show))
        .route("/console/templates", get(templates::show))
        .route("/console/style.css", get(style))
        .with_state(console)
}

/// A page: HTML with the console's security headers.
fn page(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure(headers);
    response
}

/// The headers every console response carries: no script, no framing, no caching, no
/// referrer beyond this origin, no sniffing.
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends the page's
    // forms with `Origin: null`, which the CSRF check must refuse.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// Back to the list (after a form), with a note for the next page.
fn back(note: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let location = format!("/console?note={}", crate::client::path_segment(note));
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    secure(response.headers_mut());
    response
}

/// The session a request's cookie names, if it is one.
fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Does the request come from this origin (a browser sends `Origin` with a form's POST;
/// a request without one is not a browser's cross-site form)?
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority == host)
}

/// The session a request is signed in with, if any.
fn signed_in(console: &Console, headers: &HeaderMap) -> Option<sessions::Session> {
    session_id(headers).and_then(|id| console.sessions.get(&id))
}

/// The sign-in page, for a request that is not signed in.
fn sign_in_first() -> Response {
    page(StatusCode::OK, pages::login(None))
}

async fn home(
    State(console): State<Console>,
    headers: HeaderMap,
    query: axum::extract::RawQuery,
) -> Response {
    let Some(session) = session_id(&headers).and_then(|id| console.sessions.get(&id)) else {
        return page(StatusCode::OK, pages::login(None));
    };
    // Only the console's own notes are shown: a link with another `note` says nothing.
    let note = query
        .0
        .as_deref()
        .and_then(|q| form_value(q.as_bytes(), "note"))
        .filter(|n| is_own_note(n));
    match console.api.desk().questions().await {
        Ok(mut questions) => {
            // Pending first, each group newest first (the desk's order).
            questions.sort_by_key(|q| q.state != PostedState::Pending);
            page(
                StatusCode::OK,
                pages::questions(&session, &questions, note.as_deref()),
            )
        }
        Err(why) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            pages::problem(
                &session,
                &format!("the questions cannot be read now: {why}"),
            ),
        ),
    }
}

async fn login(State(console): State<Console>, headers: HeaderMap, body: Bytes) -> Response {
    if !same_origin(&headers) {
        return page(
            StatusCode::FORBIDDEN,
            pages::login(Some("this form was sent from another site")),
        );
    }
    let token = form_value(&body, "token").unwrap_or_default();
    let bearer = format!("Bearer {token}");
    match console.api.approvers().identify(Some(&bearer)).await {
        Ok(identity) => {
            let Some((id, _)) = console.sessions.open(identity) else {
                let why = "no randomness to make a session with: try again";
                return page(StatusCode::SERVICE_UNAVAILABLE, pages::login(Some(why)));
            };
            let mut response = back("signed in");
            let cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/console");
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(why) => page(
            StatusCode::UNAUTHORIZED,
            pages::login(Some(&why.to_string())),
        ),
    }
}

async fn logout(State(console): State<Console>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(id) = session_id(&headers) {
        let csrf = form_value(&body, "csrf").unwrap_or_default();
        if same_origin(&headers) && console.sessions.check(&id, &csrf).is_some() {
            console.sessions.close(&id);
        }
    }
    let mut response = back("signed out");
    let expired = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn answer(
    State(console): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let Some(session_id) = session_id(&headers) else {
        return page(
            StatusCode::UNAUTHORIZED,
            pages::login(Some("sign in first")),
        );
    };
    let csrf = form_value(&body, "csrf").unwrap_or_default();
    let session = match console.sessions.check(&session_id, &csrf) {
        Some(session) if same_origin(&headers) => session,
        _ => {
            return page(
                StatusCode::FORBIDDEN,
                pages::login(Some(
                    "this form was not sent from this console's page: sign in and try again",
                )),
            )
        }
    };
    if session.identity.role < Role::Approver {
        let why = format!("`{}` may only view questions", session.identity.name);
        return page(StatusCode::FORBIDDEN, pages::problem(&session, &why));
    }
    let approved = match form_value(&body, "decision").as_deref() {
        Some("approve") => true,
        Some("reject") => false,
        _ => {
            return page(
                StatusCode::BAD_REQUEST,
                pages::problem(&session, "choose approve or reject"),
            )
        }
    };
    let reason = form_value(&body, "reason").filter(|r| !r.trim().is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.len() > orch_run::approvals::MAX_REASON_BYTES)
    {
        return page(
            StatusCode::BAD_REQUEST,
            pages::problem(&session, "the reason is too long"),
        );
    }
    let by = &session.identity.name;
    match console
        .api
        .answer(&id, approved, by, reason.as_deref())
        .await
    {
        Ok(Ok(answered)) => back(&format!("{} {}", answered.state.as_str(), answered.id)),
        Ok(Err(NotAnswered::Unknown)) => page(
            StatusCode::NOT_FOUND,
            pages::problem(&session, &format!("no question `{id}` is known here")),
        ),
        Ok(Err(why @ (NotAnswered::Settled(_) | NotAnswered::Stale(_)))) => page(
            StatusCode::CONFLICT,
            pages::problem(&session, &why.to_string()),
        ),
        Ok(Err(why)) => page(
            StatusCode::FORBIDDEN,
            pages::problem(&session, &why.to_string()),
        ),
        Err(why) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            pages::problem(&session, &why),
        ),
    }
}

async fn style() -> Response {
    let mut response = pages::STYLE.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    secure(response.headers_mut());
    response
}

/// Is `note` one the console writes after a form: `signed in`, `signed out`, or
/// `approved`/`rejected` and a question's id?
fn is_own_note(note: &str) -> bool {
    let answered = |id: &str| {
        id.strip_prefix("q-")
            .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_alphanumeric()))
    };
    match note.split_once(' ') {
        Some(("signed", "in" | "out")) => true,
        Some(("approved" | "rejected", id)) => answered(id),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_consoles_own_notes_are_shown() {
        for own in [
            "signed in",
            "signed out",
            "approved q-30fd71bce8d52298",
            "rejected q-ab12",
        ] {
            assert!(is_own_note(own), "{own}");
        }
        for other in [
            "approve everything",
            "approved q-",
            "approved q-<b>",
            "signed up",
            "",
        ] {
            assert!(!is_own_note(other), "{other}");
        }
    }
}
