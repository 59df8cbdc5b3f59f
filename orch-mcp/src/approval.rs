//! Asking the client's human about a gated call (semantics §13), on both kinds of MCP
//! revision:
//!
//! - on a handshake revision (2025-06-18, 2025-11-25), the gateway sends the client an
//!   `elicitation/create` request while the call waits;
//! - on 2026-07-28, which has no server-to-client requests, the call is answered with an
//!   `InputRequiredResult` carrying the same elicitation; the client retries the call
//!   with the answer in `inputResponses` and the `requestState` echoed.
//!
//! Either way the run holds the question (a pending verdict in its session, written to
//! the store), and an answer is applied only while the run still holds that very
//! question: nothing happened in the run meanwhile, and it was not answered already. So
//! the `requestState` needs no secret: it names the call (its digest), and a forged or
//! replayed one can only fail to match. A call is never forwarded before the answer.

use orch_runtime::CallDigest;
use rmcp::model::{
    ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::ErrorData as McpError;

/// The key of the gateway's question in `inputRequests` / `inputResponses`.
pub(crate) const INPUT_KEY: &str = "orch_approval";

/// What `requestState` starts with; the call's digest follows.
const STATE_PREFIX: &str = "orch-approval:";

/// The boolean field of the form the human fills in.
const APPROVE_FIELD: &str = "approve";

/// A human's answer, as the client relays it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Run the call, once.
    Approved,
    /// Do not run it.
    Rejected,
    /// Dismissed without a choice: the call is not run, and nothing is held.
    Dismissed,
}

/// Can the client be asked with a form (its `elicitation` capability; an empty object
/// means form mode)?
pub(crate) fn can_ask(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.elicitation.as_ref())
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The question put to the human about a call of `tool` with `arguments`.
pub(crate) fn question(
    tool: &str,
    arguments: &serde_json::Value,
    step: Option<&str>,
) -> Result<ElicitRequestParams, McpError> {
    let args = serde_json::to_string_pretty(arguments).unwrap_or_default();
    let step = step.map_or(String::new(), |s| format!(" (workflow step `{s}`)"));
    let message = format!(
        "The agent asks to call `{tool}`{step} with these arguments:\n{args}\nApprove this exact call? It runs once if you approve it."
    );
    let schema = ElicitationSchema::builder()
        .required_bool_property(APPROVE_FIELD, |b| {
            b.title("Approve this call")
                .description("true runs the call once; false rejects it")
        })
        .build()
        .map_err(|e| McpError::internal_error(format!("the approval form: {e}"), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// The answer a client's `elicitation/create` result carries (`action`, and `content`
/// with the form's `approve` field when accepted).
pub(crate) fn answer_of(result: &serde_json::Value) -> Result<Answer, McpError> {
    let bad = |why: &str| {
        McpError::invalid_params(
            format!("the answer to orch's approval question {why}: expected {{\"action\": \"accept\", \"content\": {{\"approve\": true|false}}}}, \"decline\" or \"cancel\""),
            None,
        )
    };
    match result.get("action").and_then(|a| a.as_str()) {
        Some("accept") => match result
            .get("content")
            .and_then(|c| c.get(APPROVE_FIELD))
            .and_then(|a| a.as_bool())
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

/// Is this `requestState` one the gateway issues (others are the upstream's own, passed
/// through)?
pub(crate) fn is_ours(request_state: Option<&str>) -> bool {
    request_state.is_some_and(|s| s.starts_with(STATE_PREFIX))
}

/// The answer a 2026-07-28 retry carries for the call `digest`: `None` on a first call,
/// or when the retry lacks the answer (the client is asked again). A `requestState` that
/// claims to be the gateway's but names another call, or is malformed, is an error;
/// one that is not the gateway's is not read here.
pub(crate) fn answer_in_retry(
    request_state: Option<&str>,
    responses: Option<&InputResponses>,
    digest: &CallDigest,
) -> Result<Option<Answer>, McpError> {
    let Some(state) = request_state.filter(|s| is_ours(Some(s))) else {
        if responses.is_some_and(|r| r.contains_key(INPUT_KEY)) {
            return Err(McpError::invalid_params(
                "inputResponses answer orch's approval question, but the retry lacks the requestState it was issued with",
                None,
            ));
        }
        return Ok(None);
    };
    let named = state
        .strip_prefix(STATE_PREFIX)
        .and_then(CallDigest::from_hex)
        .ok_or_else(|| {
            McpError::invalid_params(
                "requestState is not one this gateway issued (it must be echoed unchanged)",
                None,
            )
        })?;
    if named != *digest {
        return Err(McpError::invalid_params(
            "requestState belongs to another call: a retry must repeat the tool and arguments the human was asked about",
            None,
        ));
    }
    responses
        .and_then(|r| r.get(INPUT_KEY))
        .map(answer_of)
        .transpose()
}

/// The `InputRequiredResult` that asks the client's human about the call `digest`.
pub(crate) fn input_required(
    params: ElicitRequestParams,
    digest: &CallDigest,
) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    InputRequiredResult::new(Some(requests), Some(format!("{STATE_PREFIX}{digest}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(
            answer_of(&json!({"action": "accept", "content": {"approve": true}})).unwrap(),
            Answer::Approved
        );
        assert_eq!(
            answer_of(&json!({"action": "accept", "content": {"approve": false}})).unwrap(),
            Answer::Rejected
        );
        assert_eq!(
            answer_of(&json!({"action": "decline"})).unwrap(),
            Answer::Rejected
        );
        assert_eq!(
            answer_of(&json!({"action": "cancel"})).unwrap(),
            Answer::Dismissed
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
        let state = format!("{STATE_PREFIX}{d}");
        let mut responses = InputResponses::new();
        responses.insert(INPUT_KEY.into(), json!({"action": "decline"}));
        assert_eq!(answer_in_retry(None, None, &d).unwrap(), None);
        assert_eq!(
            answer_in_retry(Some(&state), Some(&responses), &d).unwrap(),
            Some(Answer::Rejected)
        );
        assert_eq!(answer_in_retry(Some(&state), None, &d).unwrap(), None);
        assert!(answer_in_retry(Some(&state), Some(&responses), &other).is_err());
        assert!(answer_in_retry(Some("orch-approval:forged"), Some(&responses), &d).is_err());
        // Another server's state is not the gateway's to read.
        assert_eq!(
            answer_in_retry(Some("upstream-state"), None, &d).unwrap(),
            None
        );
        assert!(answer_in_retry(None, Some(&responses), &d).is_err());
        let result = input_required(question("pay", &json!({}), None).unwrap(), &d);
        let v = serde_json::to_value(&result).unwrap();
        assert_eq!(v["resultType"], "input_required");
        assert_eq!(v["requestState"], state);
        assert_eq!(
            v["inputRequests"][INPUT_KEY]["method"],
            "elicitation/create"
        );
        assert_eq!(
            v["inputRequests"][INPUT_KEY]["params"]["requestedSchema"]["required"],
            json!(["approve"])
        );
    }
}
