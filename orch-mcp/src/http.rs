//! Streamable HTTP for many clients: the MCP SDK's service at `/mcp`, served by an
//! accept loop of our own (a connection cap, a time limit on request headers), behind a
//! guard that checks every request before the SDK sees it:
//!
//! - the credential: the operator's bearer token when one is configured, or a run token
//!   minted by `POST /runs` (401 otherwise, and for a run token that is unknown, revoked
//!   or expired); a request on a revision without sessions (2026-07-28) that reads or
//!   changes a workflow (`tools/list`, `tools/call`, `subscriptions/listen`) must
//!   present a run token, since nothing else names its run;
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
//! [`orch_store::lease`]), so that any gateway instance sharing the store serves it.
//!
//! Besides `/mcp`, the guard answers `/runs` itself: `POST /runs` mints a run and its
//! token, `DELETE /runs/<id>` revokes one (see [`crate::runs`]).

use crate::framing::{self, classify, jsonrpc_error_body};
use crate::handler::{Change, Shared};
use crate::instances::FreshSession;
use crate::jwt::JwtVerifier;
use crate::runs::{is_run_id, run_key, RunKey, TOKEN_PREFIX};
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
    ClientRequest, GetMeta, RequestId,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionManager, SessionState, SessionStore as HandshakeStore, SessionStoreError,
};
use serde_json::Value;
use std::collections::HashMap;
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
    /// Checks bearer JWTs, when the gateway accepts them.
    pub(crate) jwt: Option<JwtVerifier>,
    /// Sessions this instance is restoring from the store (their handshake replayed into
    /// a new worker), each with the gate its requests pass one at a time until the
    /// restore is done ([`Guarded::restore_gate`]).
    pub(crate) restoring: RestoreGates,
}

/// The gates of sessions being restored, by session id.
pub(crate) type RestoreGates = Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;

/// A request's pass through a restoring session's gate: held while the request is handed
/// to the MCP SDK; the first request's pass also ends the restore when it is dropped
/// (the SDK has restored the session by then, or failed to).
struct RestorePass {
    _held: tokio::sync::OwnedMutexGuard<()>,
    /// Set on the request that began the restore: the map entry to remove.
    ends: Option<(RestoreGates, String)>,
}

impl Drop for RestorePass {
    fn drop(&mut self) {
        if let Some((gates, id)) = self.ends.take() {
            gates
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&id);
        }
    }
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

/// The bearer tokens a request presents.
fn bearers(headers: &http::HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
}

/// The credential a request presented.
enum Presented {
    /// None (or, when no operator token is configured, one that is not a run token).
    Nothing,
    /// The operator's token (`--auth-token-file`).
    Operator,
    /// A live run's token, or a valid JWT naming a run by its claim.
    Run(RunKey),
}

fn unauthorized(why: &str) -> Response {
    let mut response = error_response(
        http::StatusCode::UNAUTHORIZED,
        -32001,
        format!("Unauthorized: {why}"),
        Value::Null,
    );
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"orch mcp\""),
    );
    response
}

const NEEDS_TOKEN: &str = "this orch mcp gateway requires `Authorization: Bearer <token>` (the operator's token, a run token from POST /runs, or a JWT from its identity provider when it takes them)";

const RUN_UNKNOWN: &str =
    "the run token is unknown, revoked or expired; start a new run (POST /runs)";

const RUN_REQUIRED: &str = "orch mcp keeps a workflow run per credential, and this request (MCP 2026-07-28, no sessions) presents no run token: send `Authorization: Bearer <run token>`; POST /runs starts a run and returns its token";

fn json_response(status: http::StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    // Tokens are secrets: no cache keeps this answer.
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

fn plain_error(status: http::StatusCode, message: String) -> Response {
    json_response(status, &serde_json::json!({ "error": message }))
}

/// Does this request read or change a workflow run (and so need one to be named)?
fn reads_a_run(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::ListToolsRequest(_)
            | ClientRequest::CallToolRequest(_)
            | ClientRequest::SubscriptionsListenRequest(_)
    )
}

/// Does the request carry the per-request `_meta` of 2026-07-28 (no session)?
fn is_modern(request: &ClientRequest) -> bool {
    crate::handler::names_modern_revision(request.get_meta())
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

/// Where the protected-resource metadata is served (and, with the MCP endpoint's path
/// appended, `/.well-known/oauth-protected-resource/mcp`).
const WELL_KNOWN_RESOURCE: &str = "/.well-known/oauth-protected-resource";

/// The guard proper: credentials, the run a request belongs to, bodies, restores.
async fn admit<S: SessionStore + 'static>(
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
                _held: None,
            };
            Response::from_parts(parts, Body::new(watched))
        }
        // The session's standalone stream: while it is open here, notifications for the
        // session that arise on other instances are sent here.
        (Some(session), None) if standalone && response.status().is_success() => {
            let held = guarded.shared.relay.instances.hold(&session).await;
            let (parts, body) = response.into_parts();
            let watched = Watched {
                inner: body,
                done: false,
                on_abandon: None,
                _held: Some(held),
            };
            Response::from_parts(parts, Body::new(watched))
        }
        (_, _) => response,
    }
}

/// What a POST carried, read whole and checked.
struct Posted {
    /// The request, rebuilt with its body.
    request: Request,
    /// The id of a `tools/call` (watched for the client abandoning it).
    call_id: Option<RequestId>,
    /// A client's answer to a question the upstream asked through this gateway: its id
    /// and bytes.
    answer: Option<(RequestId, Bytes)>,
    /// The token of an `initialize` that creates a session ([`FreshSession`]).
    fresh: Option<u64>,
}

/// Reads a POST's body (bounded in size and time) and checks it before the MCP SDK
/// sees it: methods the client's revision removed, malformed messages, the session cap
/// at `initialize`, and a run credential where a run is read. `has_session`: the
/// request names a session; `run`: it presents a run's credential. `Err` is the answer.
async fn read_post<S: SessionStore + 'static>(
    guarded: &Guarded<S>,
    mut parts: http::request::Parts,
    body: Body,
    has_session: bool,
    run: bool,
) -> Result<Posted, Response> {
    let mut call_id = None;
    let mut answer = None;
    let mut fresh = None;
    let read = tokio::time::timeout(
        guarded.options.body_timeout,
        axum::body::to_bytes(body, MAX_BODY),
    )
    .await;
    let bytes = match read {
        Err(_) => {
            return Err(error_response(
                http::StatusCode::REQUEST_TIMEOUT,
                -32600,
                format!(
                    "Invalid Request: the body did not arrive within {} s",
                    guarded.options.body_timeout.as_secs_f64()
                ),
                Value::Null,
            ))
        }
        Ok(Err(_)) => {
            return Err(error_response(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                format!("Invalid Request: the body is larger than {MAX_BODY} bytes or was cut off"),
                Value::Null,
            ))
        }
        Ok(Ok(bytes)) => bytes,
    };
    let header_version = parts
        .headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok());
    if let Some(refused) = framing::unknown_on_modern(&bytes, header_version) {
        return Err(error_response(
            http::StatusCode::NOT_FOUND,
            refused.code,
            refused.message,
            refused.id,
        ));
    }
    let message = match classify(&bytes) {
        Ok(message) => message,
        Err(refused) => {
            return Err(error_response(
                http::StatusCode::BAD_REQUEST,
                refused.code,
                refused.message,
                refused.id,
            ))
        }
    };
    if let ClientJsonRpcMessage::Request(r) = &message {
        let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
        if !has_session && matches!(r.request, ClientRequest::InitializeRequest(_)) {
            let max = guarded.options.max_sessions;
            if guarded.live_sessions().await >= max {
                return Err(session_full(max, id));
            }
            let token = orch_store::lease::token();
            parts.extensions.insert(FreshSession(token));
            fresh = Some(token);
        }
        if !run && !has_session && is_modern(&r.request) && guarded.options.anonymous_run {
            parts
                .extensions
                .insert(RunKey(crate::ANONYMOUS_RUN.to_owned()));
        } else if !run && !has_session && reads_a_run(&r.request) && is_modern(&r.request) {
            let mut refused = unauthorized(RUN_REQUIRED);
            *refused.body_mut() = Body::from(jsonrpc_error_body(
                -32001,
                format!("Unauthorized: {RUN_REQUIRED}"),
                id,
            ));
            return Err(refused);
        }
        if matches!(r.request, ClientRequest::CallToolRequest(_)) {
            call_id = Some(r.id.clone());
        }
    }
    match &message {
        ClientJsonRpcMessage::Response(r) => answer = Some((r.id.clone(), bytes.clone())),
        ClientJsonRpcMessage::Error(e) => {
            answer = e.id.clone().map(|id| (id, bytes.clone()));
        }
        _ => {}
    }
    Ok(Posted {
        request: Request::from_parts(parts, Body::from(bytes)),
        call_id,
        answer,
        fresh,
    })
}

impl<S: SessionStore + 'static> Guarded<S> {
    /// This gateway's URL for a request with `headers` (its `Host`, and
    /// `X-Forwarded-Proto` when a TLS proxy in front says so), when the gateway takes JWTs
    /// and the host is a plain host name or address.
    fn base_url(&self, headers: &http::HeaderMap) -> Option<String> {
        self.jwt.as_ref()?;
        let host = headers.get(http::header::HOST)?.to_str().ok()?;
        let plain = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
        let scheme = match headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
        {
            Some("https") => "https",
            _ => "http",
        };
        plain.then(|| format!("{scheme}://{host}"))
    }

    /// The URL of this gateway's protected-resource metadata, when it takes JWTs.
    fn resource_metadata_url(&self, headers: &http::HeaderMap) -> Option<String> {
        Some(format!(
            "{}{WELL_KNOWN_RESOURCE}/mcp",
            self.base_url(headers)?
        ))
    }

    /// `GET /.well-known/oauth-protected-resource[/mcp]`: the MCP endpoint as a protected
    /// resource whose tokens come from the configured JWT issuer (404 when the gateway
    /// takes no JWTs: its credentials come from its operator or `POST /runs`).
    fn resource_metadata(&self, headers: &http::HeaderMap) -> Response {
        let (Some(jwt), Some(base)) = (self.jwt.as_ref(), self.base_url(headers)) else {
            return plain_error(
                http::StatusCode::NOT_FOUND,
                "this orch mcp gateway takes no tokens from an authorization server: present the operator's token or a run token from POST /runs".into(),
            );
        };
        json_response(
            http::StatusCode::OK,
            &serde_json::json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [jwt.issuer()],
                "bearer_methods_supported": ["header"],
                "resource_name": "orch mcp",
            }),
        )
    }

    /// Must every request present a credential (an operator token or JWTs are
    /// configured)?
    fn auth_required(&self) -> bool {
        self.options.bearer_token.is_some() || self.jwt.is_some()
    }

    /// The credential the request presents; an error response when it presents a run
    /// token that names no live run, a JWT that fails its checks, or a wrong token where
    /// authentication is required.
    async fn presented(&self, headers: &http::HeaderMap) -> Result<Presented, Response> {
        let operator = self.options.bearer_token.as_deref();
        let mut any = false;
        for token in bearers(headers) {
            any = true;
            if operator.is_some_and(|op| same_secret(token.as_bytes(), op.as_bytes())) {
                return Ok(Presented::Operator);
            }
            if let Some(jwt) = self
                .jwt
                .as_ref()
                .filter(|_| JwtVerifier::looks_like_jwt(token))
            {
                return match jwt.verify(token).await {
                    Ok(key) => Ok(Presented::Run(key)),
                    Err(why) => Err(unauthorized(&why)),
                };
            }
            if token.starts_with(TOKEN_PREFIX) {
                return match self.shared.run_for_token(token).await {
                    Ok(Some(key)) => Ok(Presented::Run(key)),
                    Ok(None) => Err(unauthorized(RUN_UNKNOWN)),
                    Err(e) => Err(error_response(
                        http::StatusCode::INTERNAL_SERVER_ERROR,
                        -32603,
                        e.message.into_owned(),
                        Value::Null,
                    )),
                };
            }
        }
        if any && self.auth_required() {
            return Err(unauthorized(NEEDS_TOKEN));
        }
        Ok(Presented::Nothing)
    }

    /// `/runs`: `POST /runs` mints a run (the operator's token, when one is set; a body
    /// `{"ttlSeconds": n}` may shorten its life), `DELETE /runs/<id>` revokes one (the
    /// operator, or the run's own token).
    async fn runs(&self, request: Request, presented: Presented) -> Response {
        let operator_set = self.options.bearer_token.is_some();
        // Without an operator token, whoever passes the gateway's authentication (a JWT,
        // when it takes them; anyone, when it takes nothing) may start a run.
        let may_mint = matches!(presented, Presented::Operator)
            || (!operator_set && (self.jwt.is_none() || matches!(presented, Presented::Run(_))));
        let path = request.uri().path().to_owned();
        let method = request.method().clone();
        if path == "/runs" && method == http::Method::POST {
            if !may_mint {
                return unauthorized(if operator_set {
                    "starting a run takes the operator's token (`Authorization: Bearer <token>`)"
                } else {
                    "starting a run takes a JWT from this gateway's identity provider"
                });
            }
            let body = tokio::time::timeout(
                self.options.body_timeout,
                axum::body::to_bytes(request.into_body(), 4096),
            )
            .await;
            let Ok(Ok(body)) = body else {
                return plain_error(
                    http::StatusCode::BAD_REQUEST,
                    "the body of POST /runs did not arrive whole within the body timeout, or is larger than 4096 bytes".into(),
                );
            };
            let ttl = match run_ttl(&body, self.options.run_ttl) {
                Ok(ttl) => ttl,
                Err(why) => return plain_error(http::StatusCode::BAD_REQUEST, why),
            };
            let max = self.options.max_sessions;
            if self.shared.store.count().unwrap_or(0) >= max {
                return session_full(max, Value::Null);
            }
            return match self.shared.mint_run(ttl).await {
                Ok(minted) => json_response(
                    http::StatusCode::CREATED,
                    &serde_json::json!({
                        "run": minted.id,
                        "token": minted.token,
                        "expiresAtMs": minted.expires_ms,
                        "ttlSeconds": ttl.as_secs(),
                    }),
                ),
                Err(e) => plain_error(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    e.message.into_owned(),
                ),
            };
        }
        if let Some(id) = path.strip_prefix("/runs/") {
            if method != http::Method::DELETE {
                return method_not_allowed("DELETE");
            }
            if !is_run_id(id) {
                return plain_error(
                    http::StatusCode::NOT_FOUND,
                    format!("`{id}` is not a run id (64 lowercase hex digits)"),
                );
            }
            // Ending a run takes the operator's token or the token minted for that run
            // — never a JWT (its holder would reset a run whose once-only tools then run
            // again), and never nothing, whether or not the gateway authenticates calls.
            let own = matches!(&presented, Presented::Run(RunKey(key)) if *key == run_key(id));
            if !own && !matches!(presented, Presented::Operator) {
                return unauthorized(
                    "ending a run takes the operator's token or the token minted for that run (`Authorization: Bearer <token>`)",
                );
            }
            return match self.shared.revoke_run(id).await {
                Ok(true) => {
                    let mut response = Response::new(Body::empty());
                    *response.status_mut() = http::StatusCode::NO_CONTENT;
                    response
                }
                Ok(false) => plain_error(
                    http::StatusCode::NOT_FOUND,
                    format!("there is no run `{id}` (never started, revoked, or expired)"),
                ),
                Err(e) => plain_error(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    e.message.into_owned(),
                ),
            };
        }
        method_not_allowed("POST")
    }

    /// Sessions held now: the larger of this instance's session workers and, when the
    /// store can count cheaply (in memory), the sessions stored.
    /// The pass of a request of session `id` through its restore gate: `None` when this
    /// instance holds the session's worker and no restore of it is under way.
    async fn restore_gate(&self, id: &str) -> Option<RestorePass> {
        let local = self.manager.sessions.read().await.contains_key(id);
        let (gate, begins) = {
            let mut gates = self
                .restoring
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match gates.get(id) {
                Some(gate) => (Arc::clone(gate), false),
                None if local => return None,
                None => {
                    let gate = Arc::new(tokio::sync::Mutex::new(()));
                    gates.insert(id.to_owned(), Arc::clone(&gate));
                    (gate, true)
                }
            }
        };
        let held = gate.lock_owned().await;
        let ends = begins.then(|| (Arc::clone(&self.restoring), id.to_owned()));
        Some(RestorePass { _held: held, ends })
    }

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

fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = plain_error(
        http::StatusCode::METHOD_NOT_ALLOWED,
        format!("this path takes {allow}"),
    );
    response
        .headers_mut()
        .insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    response
}

/// The life of a run asked for in the body of `POST /runs` (empty, or
/// `{"ttlSeconds": n}` with 1 ≤ n), at most `max`.
fn run_ttl(body: &[u8], max: Duration) -> Result<Duration, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(max);
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Asked {
        ttl_seconds: Option<u64>,
    }
    let asked: Asked = serde_json::from_slice(body).map_err(|e| {
        format!("the body of POST /runs must be empty or {{\"ttlSeconds\": <seconds>}}: {e}")
    })?;
    match asked.ttl_seconds {
        None => Ok(max),
        Some(0) => Err("`ttlSeconds` must be at least 1".into()),
        Some(n) => Ok(Duration::from_secs(n).min(max)),
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
/// client's connection closed before the answer was sent), and holds `held` as long as
/// it lives.
struct Watched {
    inner: Body,
    done: bool,
    on_abandon: Option<Box<dyn FnOnce() + Send>>,
    _held: Option<crate::instances::Holding>,
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
