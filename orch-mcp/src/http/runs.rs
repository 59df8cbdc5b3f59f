//! `/runs`: `POST /runs` mints a run and its token, `DELETE /runs/<id>` revokes one.

use super::credentials::Presented;
use super::guarded::Guarded;
use super::prelude::*;
use super::responses::{
    json_response, method_not_allowed, plain_error, session_full, unauthorized,
};

/// The life of a run asked for in the body of `POST /runs` (empty, or
/// `{"ttlSeconds": n}` with 1 ≤ n), at most `max`.
pub(super) fn run_ttl(body: &[u8], max: Duration) -> Result<Duration, String> {
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

impl<S: SessionStore + 'static> Guarded<S> {
    /// `/runs`: `POST /runs` mints a run (the operator's token, when one is set; a body
    /// `{"ttlSeconds": n}` may shorten its life), `DELETE /runs/<id>` revokes one (the
    /// operator, or the run's own token).
    pub(super) async fn runs(&self, request: Request, presented: Presented) -> Response {
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
}
