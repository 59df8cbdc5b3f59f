//! A POST's body, read whole within its time limit and size, and checked to be a JSON-RPC
//! message an MCP client may send.

use super::credentials::RUN_REQUIRED;
use super::guarded::{Guarded, MAX_BODY};
use super::prelude::*;
use super::responses::{error_response, session_full, unauthorized};

/// What a POST carried, read whole and checked.
pub(super) struct Posted {
    /// The request, rebuilt with its body.
    pub(super) request: Request,
    /// The id of a `tools/call` (watched for the client abandoning it).
    pub(super) call_id: Option<RequestId>,
    /// A client's answer to a question the upstream asked through this gateway: its id
    /// and bytes.
    pub(super) answer: Option<(RequestId, Bytes)>,
    /// The token of an `initialize` that creates a session ([`FreshSession`]).
    pub(super) fresh: Option<u64>,
}

/// Reads a POST's body (bounded in size and time) and checks it before the MCP SDK
/// sees it: methods the client's revision removed, malformed messages, the session cap
/// at `initialize`, and a run credential where a run is read. `has_session`: the
/// request names a session; `run`: it presents a run's credential. `Err` is the answer.
pub(super) async fn read_post<S: SessionStore + 'static>(
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

/// Does this request read or change a workflow run (and so need one to be named)?
pub(super) fn reads_a_run(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::ListToolsRequest(_)
            | ClientRequest::CallToolRequest(_)
            | ClientRequest::SubscriptionsListenRequest(_)
    )
}

/// Does the request carry the per-request `_meta` of 2026-07-28 (no session)?
pub(super) fn is_modern(request: &ClientRequest) -> bool {
    crate::handler::names_modern_revision(request.get_meta())
}
