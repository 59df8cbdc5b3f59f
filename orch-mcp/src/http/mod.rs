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
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | the guard's state, and the guard every request passes |
//! | `admission.rs` | the guard proper: credentials, the run, bodies, restores |
//! | `credentials.rs` | bearer tokens, run tokens, JWTs; the protected-resource metadata |
//! | `body.rs` | a POST's body, read and checked |
//! | `sessions.rs` | ended sessions, restores, the handshake kept in the record |
//! | `runs.rs` | `POST /runs` and `DELETE /runs/<id>` |
//! | `cancel.rs` | a call cancelled when its client goes away |
//! | `accept.rs` | the accept loop |
//! | `responses.rs` | the gateway's own HTTP answers |

mod accept;
mod admission;
mod body;
mod cancel;
mod credentials;
mod responses;
mod runs;
mod sessions;

use admission::*;
use body::*;
use cancel::*;
use credentials::*;
use responses::*;

pub(crate) use accept::serve;
pub(crate) use sessions::{Handshakes, RestoreGates};

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
