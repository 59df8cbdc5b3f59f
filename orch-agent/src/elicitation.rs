//! How orch's MCP front ends ask a client's human about a gated call (semantics §13) and
//! read the answer, as JSON: the question's form, the `requestState` that names the call,
//! and the strict reading of an answer. `orch mcp` sends the question as an
//! `elicitation/create` request or an `InputRequiredResult` (MCP 2026-07-28); `orch
//! policy` puts it in the JSON-RPC error it rejects the call with. Either way the client
//! answers by retrying the call with `requestState` echoed and the answer under
//! [`INPUT_KEY`] in `inputResponses`.
//!
//! The run holds the question (a pending verdict in its session), and an answer applies
//! only while the run still holds that very question, so the `requestState` needs no
//! secret: it names the call (its [`CallDigest`]), and a forged or replayed one can only
//! fail to match.

use orch_runtime::CallDigest;
use serde_json::{json, Value};

/// The key of orch's question in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "orch_approval";

/// What a `requestState` orch issues starts with; the call's digest (hex) follows.
pub const STATE_PREFIX: &str = "orch-approval:";

/// The boolean field of the form the human fills in.
pub const APPROVE_FIELD: &str = "approve";

/// A human's answer, as the client relays it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run the call, once.
    Approved,
    /// Do not run it.
    Rejected,
    /// Dismissed without a choice: the call is not run, and nothing is held.
    Dismissed,
}

/// The text of the question put to the human about a call of `tool` with `arguments`
/// (in workflow step `step`).
pub fn question_text(tool: &str, arguments: &Value, step: Option<&str>) -> String {
    let args = serde_json::to_string_pretty(arguments).unwrap_or_default();
    let step = step.map_or(String::new(), |s| format!(" (workflow step `{s}`)"));
    format!(
        "The agent asks to call `{tool}`{step} with these arguments:\n{args}\nApprove this exact call? It runs once if you approve it."
    )
}

/// The form's JSON schema: one required boolean, [`APPROVE_FIELD`].
pub fn form_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            APPROVE_FIELD: {
                "type": "boolean",
                "title": "Approve this call",
                "description": "true runs the call once; false rejects it"
            }
        },
        "required": [APPROVE_FIELD]
    })
}

/// The `requestState` that names the call `digest`.
pub fn request_state(digest: &CallDigest) -> String {
    format!("{STATE_PREFIX}{digest}")
}

/// Is this `requestState` one orch issues (others are an upstream's own)?
pub fn is_ours(request_state: Option<&str>) -> bool {
    request_state.is_some_and(|s| s.starts_with(STATE_PREFIX))
}

/// The answer an `elicitation/create` result carries (`action`, and `content` with the
/// form's `approve` field when accepted); an error says what is wrong with it.
pub fn answer_of(result: &Value) -> Result<Answer, String> {
    let bad = |why: &str| {
        format!("the answer to orch's approval question {why}: expected {{\"action\": \"accept\", \"content\": {{\"approve\": true|false}}}}, \"decline\" or \"cancel\"")
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => match result
            .get("content")
            .and_then(|c| c.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
        {
            Some(true) => Ok(Answer::Approved),
            Some(false) => Ok(Answer::Rejected),
            None => Err(bad("has no boolean `approve`")),
        },
        Some("decline") => Ok(Answer::Rejected),
        Some("cancel") => Ok(Answer::Dismissed),
        Some(other) => Err(bad(&format!("has the unknown action `{other}`"))),
        None => Err(bad("has no `action`")),
    }
}

/// The answer a retried call carries for the call `digest`: `None` on a first call, or
/// when the retry lacks the answer (the human is asked again). `response` is the entry
/// under [`INPUT_KEY`] in the call's `inputResponses`. A `requestState` that claims to be
/// orch's but names another call, or is malformed, is an error (its text says why); one
/// that is not orch's is not read here.
pub fn answer_in_retry(
    request_state: Option<&str>,
    response: Option<&Value>,
    digest: &CallDigest,
) -> Result<Option<Answer>, String> {
    let Some(state) = request_state.filter(|s| is_ours(Some(s))) else {
        if response.is_some() {
            return Err("inputResponses answer orch's approval question, but the retry lacks the requestState it was issued with".into());
        }
        return Ok(None);
    };
    let named = state
        .strip_prefix(STATE_PREFIX)
        .and_then(CallDigest::from_hex)
        .ok_or("requestState is not one orch issued (it must be echoed unchanged)")?;
    if named != *digest {
        return Err("requestState belongs to another call: a retry must repeat the tool and arguments the human was asked about".into());
    }
    response.map(answer_of).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(
            answer_of(&json!({"action": "accept", "content": {"approve": true}})),
            Ok(Answer::Approved)
        );
        assert_eq!(
            answer_of(&json!({"action": "accept", "content": {"approve": false}})),
            Ok(Answer::Rejected)
        );
        assert_eq!(
            answer_of(&json!({"action": "decline"})),
            Ok(Answer::Rejected)
        );
        assert_eq!(
            answer_of(&json!({"action": "cancel"})),
            Ok(Answer::Dismissed)
        );
        for bad in [
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {"approve": "yes"}}),
            json!({"action": "maybe"}),
            json!([]),
        ] {
            assert!(answer_of(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn request_state_names_the_call() {
        let d = CallDigest::of_canonical("pay", b"{}");
        let other = CallDigest::of_canonical("pay", b"{\"a\":1}");
        let state = request_state(&d);
        let declined = json!({"action": "decline"});
        assert_eq!(answer_in_retry(None, None, &d), Ok(None));
        assert_eq!(
            answer_in_retry(Some(&state), Some(&declined), &d),
            Ok(Some(Answer::Rejected))
        );
        assert_eq!(answer_in_retry(Some(&state), None, &d), Ok(None));
        assert!(answer_in_retry(Some(&state), Some(&declined), &other).is_err());
        assert!(answer_in_retry(Some("orch-approval:forged"), Some(&declined), &d).is_err());
        // Another server's state is not orch's to read.
        assert_eq!(answer_in_retry(Some("upstream-state"), None, &d), Ok(None));
        assert!(answer_in_retry(None, Some(&declined), &d).is_err());
        assert_eq!(form_schema()["required"], json!(["approve"]));
    }
}
