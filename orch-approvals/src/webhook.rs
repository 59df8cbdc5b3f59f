//! A webhook that announces each question as it is posted, and each answer, so a chat
//! bot or a ticket system can show it where the approver is.
//!
//! Each event is one `POST` of JSON: `{"type": "question.asked" | "question.answered",
//! "question": {...}}` (the question as the approvals API shows it). With a secret, the
//! request carries `X-Orch-Signature: sha256=<hex>`, the HMAC-SHA256 of the body under
//! the secret, so the receiver can tell orch sent it. Delivery is at most once, in the
//! background, within 5 seconds; a failure is written to standard error and does not
//! touch the run (the question waits in the API whatever the webhook did).

use orch_run::approvals::Posted;
use std::time::Duration;

/// How long one delivery may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The header that carries the body's signature.
pub const SIGNATURE_HEADER: &str = "x-orch-signature";

/// Where events are announced.
#[derive(Clone, Debug)]
pub struct Webhook {
    url: String,
    secret: Option<String>,
    http: reqwest::Client,
}

/// What happened to a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// It was posted: an approver is wanted.
    Asked,
    /// It was answered.
    Answered,
}

impl Event {
    /// The event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Asked => "question.asked",
            Event::Answered => "question.answered",
        }
    }
}

impl Webhook {
    /// A webhook at `url` (http or https), signing with `secret` when given.
    pub fn new(url: &str, secret: Option<&str>) -> Result<Webhook, String> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("the webhook `{url}` is not an http or https URL"));
        }
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Webhook {
            url: url.to_owned(),
            secret: secret.map(str::to_owned),
            http,
        })
    }

    /// The body of `event` about `question`, and its signature header's value when the
    /// webhook has a secret.
    pub fn body(&self, event: Event, question: &Posted) -> (Vec<u8>, Option<String>) {
        let body = serde_json::json!({"type": event.as_str(), "question": question});
        let bytes = body.to_string().into_bytes();
        let signature = self.secret.as_ref().map(|secret| signature(secret, &bytes));
        (bytes, signature)
    }

    /// Announces `event` about `question` in the background (on the current Tokio
    /// runtime).
    pub fn announce(&self, event: Event, question: &Posted) {
        let (body, signature) = self.body(event, question);
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(signature) = signature {
            request = request.header(SIGNATURE_HEADER, signature);
        }
        let (url, id) = (self.url.clone(), question.id.clone());
        tokio::spawn(async move {
            match request.send().await {
                Ok(response) if response.status().is_success() => {}
                Ok(response) => orch_runtime::eprintln_printable!(
                    "orch: warning: the webhook {url} answered {} to the announcement of question {id}",
                    response.status()
                ),
                Err(e) => orch_runtime::eprintln_printable!(
                    "orch: warning: the webhook {url} was not reached about question {id}: {e}"
                ),
            }
        });
    }
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mac = hmac_sha256::HMAC::mac(body, secret.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256=");
    for b in mac {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231s_hmac() {
        // RFC 4231, test case 2.
        let mac = signature("Jefe", b"what do ya want for nothing?");
        assert_eq!(
            mac,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(Webhook::new("ftp://x", None).is_err());
    }
}
