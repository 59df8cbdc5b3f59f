//! The gateway's own answers on HTTP: JSON-RPC errors with their status, plain errors, the
//! answers for a full gateway and a method the path does not take.

use super::prelude::*;

pub(super) fn error_response(
    status: http::StatusCode,
    code: i64,
    message: String,
    id: Value,
) -> Response {
    let mut response = Response::new(Body::from(jsonrpc_error_body(code, message, id)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) fn json_response(status: http::StatusCode, body: &Value) -> Response {
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

pub(super) fn plain_error(status: http::StatusCode, message: String) -> Response {
    json_response(status, &serde_json::json!({ "error": message }))
}

pub(super) fn session_full(max: usize, id: Value) -> Response {
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

pub(super) fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = plain_error(
        http::StatusCode::METHOD_NOT_ALLOWED,
        format!("this path takes {allow}"),
    );
    response
        .headers_mut()
        .insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    response
}

pub(super) fn unauthorized(why: &str) -> Response {
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
