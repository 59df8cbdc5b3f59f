//! The approvals API from the approver's side (what `orch approvals` uses): list, show
//! and answer questions at a host's API with a bearer token.

use serde_json::{json, Value};
use std::time::Duration;

/// A connection to an approvals API.
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// Why a request did not succeed.
#[derive(Debug)]
pub enum ClientError {
    /// The API was not reached, or its answer was not JSON: why.
    Transport(String),
    /// The API answered with an error: its status and its words.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The API's `error`.
        error: String,
        /// The whole answer (a 409 carries the question as it stands).
        body: Value,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Transport(why) => f.write_str(why),
            ClientError::Refused { status, error, .. } => write!(f, "{error} (HTTP {status})"),
        }
    }
}

impl std::error::Error for ClientError {}

impl Client {
    /// The API at `base` (e.g. `http://127.0.0.1:7070`), as the bearer of `token`.
    pub fn new(base: &str, token: &str) -> Result<Client, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ClientError::Transport(format!("cannot make an HTTP client: {e}")))?;
        Ok(Client {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http,
        })
    }

    /// The open questions (`GET /v1/approvals`).
    pub async fn list(&self) -> Result<Value, ClientError> {
        self.send(self.http.get(format!("{}/v1/approvals", self.base)))
            .await
    }

    /// The open question `id`.
    pub async fn show(&self, id: &str) -> Result<Value, ClientError> {
        let url = format!("{}/v1/approvals/{}", self.base, path_segment(id));
        self.send(self.http.get(url)).await
    }

    /// Approves (`approve`) or rejects the question `id`, with `reason`.
    pub async fn answer(
        &self,
        id: &str,
        approve: bool,
        reason: Option<&str>,
    ) -> Result<Value, ClientError> {
        let url = format!("{}/v1/approvals/{}", self.base, path_segment(id));
        let decision = if approve { "approve" } else { "reject" };
        let mut body = json!({"decision": decision});
        if let Some(reason) = reason {
            body["reason"] = json!(reason);
        }
        self.send(self.http.post(url).json(&body)).await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, ClientError> {
        let response = request.bearer_auth(&self.token).send().await.map_err(|e| {
            ClientError::Transport(format!(
                "the approvals API at {} was not reached: {e}",
                self.base
            ))
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| {
            ClientError::Transport(format!("the approvals API's answer was cut off: {e}"))
        })?;
        let body: Value = serde_json::from_slice(&bytes).map_err(|_| {
            ClientError::Transport(format!(
                "the approvals API answered {status} with a body that is not JSON"
            ))
        })?;
        if status.is_success() {
            return Ok(body);
        }
        let error = body
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no reason given")
            .to_owned();
        Err(ClientError::Refused {
            status: status.as_u16(),
            error,
            body,
        })
    }
}

/// `id` as one path segment: anything but letters, digits, `-` and `_` percent-encoded.
pub(crate) fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => out.push(char::from(b)),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
