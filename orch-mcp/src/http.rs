//! Streamable HTTP for many clients: the MCP SDK's service at `/mcp`, served by an
//! accept loop of our own (a connection cap, a time limit on request headers), behind a
//! guard that checks every request before the SDK sees it:
//!
//! - the bearer token, when one is configured (401 otherwise);
//! - the body of a POST: read within the body timeout (408), at most [`MAX_BODY`]
//!   bytes (413), a JSON-RPC message an MCP client may send (-32700 / -32600 /
//!   -32602, status 400);
//! - the session: a request naming a session that has ended (DELETE, or its TTL
//!   passed) gets 404 and its in-memory worker is closed; a new session (`initialize`)
//!   or one this instance must restore is refused with 503 while the gateway holds its
//!   maximum of sessions;
//! - a `tools/call` whose client goes away before the answer is cancelled, so that its
//!   lease is released at once.
//!
//! Each MCP session's handshake is kept in the session's record (see
//! [`crate::record`]), so that any gateway instance sharing the store serves it.

use crate::framing::{classify, jsonrpc_error_body};
use crate::handler::{Change, Shared};
use crate::HttpOptions;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;
use orch_store::SessionStore;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    ClientRequest, RequestId,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionManager, SessionState, SessionStore as HandshakeStore, SessionStoreError,
};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The largest request body the gateway reads (the MCP SDK's default).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// What the guard needs.
pub(crate) struct Guarded<S> {
    pub(crate) shared: Arc<Shared<S>>,
    pub(crate) manager: Arc<LocalSessionManager>,
    pub(crate) options: HttpOptions,
}

fn error_response(status: http::StatusCode, code: i64, message: String, id: Value) -> Response {
    let mut response = Response::new(Body::from(jsonrpc_error_body(code, message, id)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// Constant-time comparison of two byte strings (their lengths are not secret).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Does the request carry the configured bearer token (or is none configured)?
fn authorized(token: Option<&str>, headers: &http::HeaderMap) -> bool {
    let Some(token) = token else { return true };
    headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .any(|presented| same_secret(presented.as_bytes(), token.as_bytes()))
}

fn unauthorized() -> Response {
    let mut response = error_response(
        http::StatusCode::UNAUTHORIZED,
        -32001,
        "Unauthorized: this orch mcp gateway requires `Authorization: Bearer <token>`".into(),
        Value::Null,
    );
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"orch mcp\""),
    );
    response
}

fn session_full(max: usize, id: Value) -> Response {
    let mut response = error_response(
        http::StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        format!(
            "orch mcp holds its maximum of {max} sessions: try again later, or end a session you no longer need (DELETE)"
        ),
        id,
    );
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("5"),
    );
    response
}

/// Checks every request before the MCP service sees it (see the module's text).
pub(crate) async fn guard<S: SessionStore + 'static>(
    State(guarded): State<Arc<Guarded<S>>>,
    request: Request,
    next: Next,
) -> Response {
    if !authorized(guarded.options.bearer_token.as_deref(), request.headers()) {
        return unauthorized();
    }
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (parts, body) = request.into_parts();
    let mut call_id = None;
    let request = if parts.method == http::Method::POST {
        let read = tokio::time::timeout(
            guarded.options.body_timeout,
            axum::body::to_bytes(body, MAX_BODY),
        )
        .await;
        let bytes = match read {
            Err(_) => {
                return error_response(
                    http::StatusCode::REQUEST_TIMEOUT,
                    -32600,
                    format!(
                        "Invalid Request: the body did not arrive within {} s",
                        guarded.options.body_timeout.as_secs_f64()
                    ),
                    Value::Null,
                )
            }
            Ok(Err(_)) => {
                return error_response(
                    http::StatusCode::PAYLOAD_TOO_LARGE,
                    -32600,
                    format!(
                        "Invalid Request: the body is larger than {MAX_BODY} bytes or was cut off"
                    ),
                    Value::Null,
                )
            }
            Ok(Ok(bytes)) => bytes,
        };
        let message = match classify(&bytes) {
            Ok(message) => message,
            Err(refused) => {
                return error_response(
                    http::StatusCode::BAD_REQUEST,
                    refused.code,
                    refused.message,
                    refused.id,
                )
            }
        };
        if let ClientJsonRpcMessage::Request(r) = &message {
            let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
            if session.is_none() && matches!(r.request, ClientRequest::InitializeRequest(_)) {
                let max = guarded.options.max_sessions;
                if guarded.live_sessions().await >= max {
                    return session_full(max, id);
                }
            }
            if matches!(r.request, ClientRequest::CallToolRequest(_)) {
                call_id = Some(r.id.clone());
            }
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        Request::from_parts(parts, body)
    };
    if let Some(id) = &session {
        if let Some(refused) = guarded.check_session(id).await {
            return refused;
        }
    }
    let response = next.run(request).await;
    match (session, call_id) {
        (Some(session), Some(request_id)) if response.status().is_success() => {
            let manager = Arc::clone(&guarded.manager);
            let (parts, body) = response.into_parts();
            let watched = Watched {
                inner: body,
                done: false,
                on_abandon: Some(Box::new(move || {
                    tokio::spawn(cancel_call(manager, session, request_id));
                })),
            };
            Response::from_parts(parts, Body::new(watched))
        }
        (_, _) => response,
    }
}

impl<S: SessionStore + 'static> Guarded<S> {
    /// Sessions held now: the larger of this instance's session workers and, when the
    /// store can count cheaply (in memory), the sessions stored.
    async fn live_sessions(&self) -> usize {
        let workers = self.manager.sessions.read().await.len();
        workers.max(self.shared.store.count().unwrap_or(0))
    }

    /// `None` when the session may be served; otherwise the response. Reading the
    /// record also keeps the session alive (the store's TTL counts from the last access).
    async fn check_session(&self, id: &str) -> Option<Response> {
        let stored = match self.shared.record(id).await {
            Ok(stored) => stored,
            Err(e) => {
                return Some(error_response(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    -32603,
                    e.message.into_owned(),
                    Value::Null,
                ))
            }
        };
        let session_id: Arc<str> = id.into();
        if stored.is_none_or(|r| r.handshake.is_none()) {
            // Ended (DELETE on another instance, or the TTL passed): free the worker.
            let _ = self.manager.close_session(&session_id).await;
            return Some(error_response(
                http::StatusCode::NOT_FOUND,
                -32600,
                "Session not found: it ended (DELETE) or expired (--session-ttl); initialize a new one".into(),
                Value::Null,
            ));
        }
        let max = self.options.max_sessions;
        let full = {
            let workers = self.manager.sessions.read().await;
            !workers.contains_key(&session_id) && workers.len() >= max
        };
        if full {
            return Some(session_full(max, Value::Null));
        }
        None
    }
}

/// Tells session `session` that the client of request `request_id` went away: the
/// handler's cancellation token fires, the upstream is told, the lease is released.
async fn cancel_call(manager: Arc<LocalSessionManager>, session: String, request_id: RequestId) {
    let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(
            Some(request_id),
            Some("the client went away before the answer".into()),
        ),
    ));
    let message = ClientJsonRpcMessage::notification(notification);
    let _ = manager.accept_message(&session.into(), message).await;
}

/// A response body that runs `on_abandon` when it is dropped before its end (the
/// client's connection closed before the answer was sent).
struct Watched {
    inner: Body,
    done: bool,
    on_abandon: Option<Box<dyn FnOnce() + Send>>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.done = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.done && !http_body::Body::is_end_stream(&self.inner) {
            if let Some(f) = self.on_abandon.take() {
                f();
            }
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves: at most `max_connections`
/// connections at once (one more is closed at once), request headers within
/// `header_timeout`. Connections still open at shutdown get two seconds to finish.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    max_connections: usize,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, a connection reset before it was accepted:
                // keep serving the others.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), graceful.shutdown()).await;
    Ok(())
}

/// Keeps MCP handshakes (the client's `initialize` parameters) in each session's
/// record, so that a request reaching another gateway instance finds its session
/// there, and a DELETE removes the whole record: handshake, workflow state and lease.
pub(crate) struct Handshakes<S>(pub(crate) Arc<Shared<S>>);

#[async_trait::async_trait]
impl<S: SessionStore + 'static> HandshakeStore for Handshakes<S> {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let record = self
            .0
            .record(session_id)
            .await
            .map_err(|e| SessionStoreError::from(e.message.into_owned()))?;
        match record.and_then(|r| r.handshake) {
            None => Ok(None),
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let handshake = serde_json::to_vec(state)?;
        self.0
            .modify(session_id, |record| {
                let mut record = record.unwrap_or_default();
                record.handshake = Some(handshake.clone());
                Ok(Change::Write(record, ()))
            })
            .await
            .map_err(|e| SessionStoreError::from(e.message.into_owned()))
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.0.store.remove(session_id).await?;
        Ok(())
    }
}
