//! Who a request is: the operator's bearer token, a run token, or a JWT, compared in
//! constant time; the protected-resource metadata that tells a client where JWTs come from.

use super::guarded::Guarded;
use super::prelude::*;
use super::responses::{error_response, json_response, plain_error, unauthorized};

/// Constant-time comparison of two byte strings (their lengths are not secret).
pub(super) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The bearer tokens a request presents.
pub(super) fn bearers(headers: &http::HeaderMap) -> impl Iterator<Item = &str> {
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
pub(super) enum Presented {
    /// None (or, when no operator token is configured, one that is not a run token).
    Nothing,
    /// The operator's token (`--auth-token-file`).
    Operator,
    /// A live run's token, or a valid JWT naming a run by its claim.
    Run(RunKey),
}

pub(super) const NEEDS_TOKEN: &str = "this orch mcp gateway requires `Authorization: Bearer <token>` (the operator's token, a run token from POST /runs, or a JWT from its identity provider when it takes them)";

pub(super) const RUN_UNKNOWN: &str =
    "the run token is unknown, revoked or expired; start a new run (POST /runs)";

pub(super) const RUN_REQUIRED: &str = "orch mcp keeps a workflow run per credential, and this request (MCP 2026-07-28, no sessions) presents no run token: send `Authorization: Bearer <run token>`; POST /runs starts a run and returns its token";

impl<S: SessionStore + 'static> Guarded<S> {
    /// This gateway's URL for a request with `headers` (its `Host`, and
    /// `X-Forwarded-Proto` when a TLS proxy in front says so), when the gateway takes JWTs
    /// and the host is a plain host name or address.
    pub(super) fn base_url(&self, headers: &http::HeaderMap) -> Option<String> {
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
    pub(super) fn resource_metadata_url(&self, headers: &http::HeaderMap) -> Option<String> {
        Some(format!(
            "{}{WELL_KNOWN_RESOURCE}/mcp",
            self.base_url(headers)?
        ))
    }

    /// `GET /.well-known/oauth-protected-resource[/mcp]`: the MCP endpoint as a protected
    /// resource whose tokens come from the configured JWT issuer (404 when the gateway
    /// takes no JWTs: its credentials come from its operator or `POST /runs`).
    pub(super) fn resource_metadata(&self, headers: &http::HeaderMap) -> Response {
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
    pub(super) fn auth_required(&self) -> bool {
        self.options.bearer_token.is_some() || self.jwt.is_some()
    }

    /// The credential the request presents; an error response when it presents a run
    /// token that names no live run, a JWT that fails its checks, or a wrong token where
    /// authentication is required.
    pub(super) async fn presented(&self, headers: &http::HeaderMap) -> Result<Presented, Response> {
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
}

/// Where the protected-resource metadata is served (and, with the MCP endpoint's path
/// appended, `/.well-known/oauth-protected-resource/mcp`).
pub(super) const WELL_KNOWN_RESOURCE: &str = "/.well-known/oauth-protected-resource";
