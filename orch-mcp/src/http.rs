//! Streamable HTTP for many clients: the MCP SDK's service at `/mcp`, behind a guard
//! that answers a body that is not a JSON-RPC message with a JSON-RPC error, and an
//! adapter that keeps each MCP session's handshake in an orch session store so that
//! another gateway instance can take the session over.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use orch_store::SessionStore;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore as HandshakeStore, SessionStoreError,
};
use serde_json::{json, Value};

/// The largest request body the gateway reads (the MCP SDK's default).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

fn jsonrpc_error(status: http::StatusCode, code: i64, message: String, id: Value) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    });
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// Checks the body of every POST: not JSON → -32700, JSON but no JSON-RPC message an
/// MCP client may send → -32600 (with its `id` when it has one), too large → -32600
/// with status 413. Everything else goes on to the MCP service unchanged.
pub(crate) async fn guard(request: Request, next: Next) -> Response {
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return jsonrpc_error(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                format!("Invalid Request: the body is larger than {MAX_BODY} bytes or was cut off"),
                Value::Null,
            )
        }
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return jsonrpc_error(
                http::StatusCode::BAD_REQUEST,
                -32700,
                format!("Parse error: the body is not JSON ({e})"),
                Value::Null,
            )
        }
    };
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    if let Err(e) = serde_json::from_value::<ClientJsonRpcMessage>(value) {
        return jsonrpc_error(
            http::StatusCode::BAD_REQUEST,
            -32600,
            format!("Invalid Request: not a JSON-RPC message an MCP client may send ({e})"),
            id,
        );
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Keeps MCP handshakes (the client's `initialize` parameters, per session) in an orch
/// [`SessionStore`], so that a request reaching another gateway instance finds its
/// session there.
pub(crate) struct Handshakes<S>(pub(crate) S);

#[async_trait::async_trait]
impl<S: SessionStore + 'static> HandshakeStore for Handshakes<S> {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        match self.0.load(session_id).await? {
            None => Ok(None),
            Some(v) => Ok(Some(serde_json::from_slice(&v.bytes)?)),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        self.0.store(session_id, serde_json::to_vec(state)?).await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.0.remove(session_id).await?;
        Ok(())
    }
}
