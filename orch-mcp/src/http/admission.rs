//! The guard proper: credentials, the run a request belongs to, bodies, restores — in
//! that order, before the MCP SDK sees the request.

use super::body::read_post;
use super::cancel::{cancel_call, Watched};
use super::credentials::{Presented, NEEDS_TOKEN, WELL_KNOWN_RESOURCE};
use super::guarded::Guarded;
use super::prelude::*;
use super::responses::unauthorized;

/// The guard proper: credentials, the run a request belongs to, bodies, restores.
pub(super) async fn admit<S: SessionStore + 'static>(
    guarded: Arc<Guarded<S>>,
    request: Request,
    next: Next,
) -> Response {
    let presented = match guarded.presented(request.headers()).await {
        Ok(presented) => presented,
        Err(refused) => return refused,
    };
    let path = request.uri().path();
    if path == "/runs" || path.starts_with("/runs/") {
        return guarded.runs(request, presented).await;
    }
    if guarded.auth_required() && matches!(presented, Presented::Nothing) {
        return unauthorized(NEEDS_TOKEN);
    }
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (mut parts, body) = request.into_parts();
    let run = match presented {
        Presented::Run(key) => {
            parts.extensions.insert(key);
            true
        }
        Presented::Nothing | Presented::Operator => false,
    };
    let standalone = parts.method == http::Method::GET;
    let (request, call_id, answer, fresh) = if parts.method == http::Method::POST {
        match read_post(&guarded, parts, body, session.is_some(), run).await {
            Ok(posted) => (posted.request, posted.call_id, posted.answer, posted.fresh),
            Err(refused) => return refused,
        }
    } else {
        (Request::from_parts(parts, body), None, None, None)
    };
    if let Some(id) = &session {
        if let Some(refused) = guarded.check_session(id).await {
            return refused;
        }
    }
    // An answer this instance does not wait for was meant for another instance sharing
    // the store (the balancer sent it here): passed on, and accepted as the MCP SDK
    // accepts an answer.
    if let (Some(session), Some((id, bytes))) = (&session, answer) {
        let instances = &guarded.shared.relay.instances;
        if !instances.awaits(session, &id).await {
            if let Ok(message) = serde_json::from_slice::<Value>(&bytes) {
                if instances.pass_answer(session, message).await {
                    return axum::response::IntoResponse::into_response(http::StatusCode::ACCEPTED);
                }
            }
        }
    }
    // A session this instance does not hold is restored by the SDK on its first request.
    // The SDK publishes the new worker before the handshake replay is done, and a second
    // request of the same session that finds it then is sent to a worker still waiting
    // for `initialize`, which stops the worker (HTTP 500, the session lost): while a
    // restore is under way, the session's requests go one at a time.
    let pass = match &session {
        Some(id) => guarded.restore_gate(id).await,
        None => None,
    };
    let deleting = request.method() == http::Method::DELETE;
    // Open while the request is answered, its response's body included: the session's
    // worker is not let go under it.
    let open = session.as_deref().map(|id| guarded.activity.open(id));
    let mut response = next.run(request).await;
    drop(pass);
    if let Some(token) = fresh {
        let created = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok());
        guarded.shared.relay.instances.named(token, created);
    }
    if deleting && response.status() == http::StatusCode::ACCEPTED {
        // The session is gone when the answer is sent: say so (clients such as the
        // Python SDK take 202 for a failure).
        *response.status_mut() = http::StatusCode::OK;
    }
    // A new session's `initialize` is open from its answer on.
    let open = open.or_else(|| {
        let created = response.headers().get("mcp-session-id")?.to_str().ok()?;
        Some(guarded.activity.open(created))
    });
    let success = response.status().is_success();
    let (on_abandon, held): (Option<Box<dyn FnOnce() + Send>>, _) = match (session, call_id) {
        (Some(session), Some(request_id)) if success => {
            let manager = Arc::clone(&guarded.manager);
            let abandoned = move || {
                tokio::spawn(cancel_call(manager, session, request_id));
            };
            (Some(Box::new(abandoned)), None)
        }
        // The session's standalone stream: while it is open here, notifications for the
        // session that arise on other instances are sent here.
        (Some(session), None) if standalone && success => (
            None,
            Some(guarded.shared.relay.instances.hold(&session).await),
        ),
        (_, _) => (None, None),
    };
    if open.is_none() && on_abandon.is_none() && held.is_none() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body,
        done: false,
        on_abandon,
        _held: held,
        _open: open,
    };
    Response::from_parts(parts, Body::new(watched))
}

/// Checks every request before the MCP service sees it (see the module's text).
pub(crate) async fn guard<S: SessionStore + 'static>(
    State(guarded): State<Arc<Guarded<S>>>,
    request: Request,
    next: Next,
) -> Response {
    // OAuth 2.0 Protected Resource Metadata (RFC 9728), as the MCP authorization
    // specification asks of a server that takes tokens from an authorization server.
    if request.uri().path().starts_with(WELL_KNOWN_RESOURCE) {
        return guarded.resource_metadata(request.headers());
    }
    let metadata = guarded.resource_metadata_url(request.headers());
    let mut response = admit(guarded, request, next).await;
    // Every 401 says where the metadata is (RFC 9728 §5.1), so a client can find the
    // identity provider that issues the JWTs this gateway takes.
    if let (http::StatusCode::UNAUTHORIZED, Some(url)) = (response.status(), metadata) {
        let challenge = format!("Bearer realm=\"orch mcp\", resource_metadata=\"{url}\"");
        if let Ok(value) = http::HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(http::header::WWW_AUTHENTICATE, value);
        }
    }
    response
}
