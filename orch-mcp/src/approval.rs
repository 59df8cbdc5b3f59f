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
//! question; the question, the `requestState` and the reading of answers are
//! [`orch_agent::elicitation`]'s, shared with `orch policy`. A call is never forwarded
//! before the answer.

use orch_agent::elicitation::{self, INPUT_KEY};
pub(crate) use orch_agent::elicitation::{is_ours, Answer};
use orch_agent::protocol::{Question, Ticket};
use orch_runtime::CallDigest;
use rmcp::model::{
    ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::ErrorData as McpError;

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
    question: &Question,
) -> Result<ElicitRequestParams, McpError> {
    let schema: ElicitationSchema = serde_json::from_value(elicitation::form_schema())
        .map_err(|e| McpError::from(crate::error::Error::ApprovalForm(e.to_string())))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: elicitation::question_text_with_origins(
            tool,
            &serde_json::to_string_pretty(arguments).unwrap_or_default(),
            question.step.as_deref(),
            &question.origins,
        ),
        requested_schema: schema,
    })
}

/// The answer a client's `elicitation/create` result carries.
pub(crate) fn answer_of(result: &serde_json::Value) -> Result<Answer, McpError> {
    elicitation::answer_of(result)
        .map_err(|why| crate::error::Error::BadAnswer(why.to_string()).into())
}

/// The answer a 2026-07-28 retry carries for the call `digest`, with the ticket of the
/// question it answers ([`elicitation::answer_in_retry`]), a bad `requestState` an
/// invalid-params error.
pub(crate) fn answer_in_retry(
    request_state: Option<&str>,
    responses: Option<&InputResponses>,
    digest: &CallDigest,
) -> Result<Option<(Ticket, Answer)>, McpError> {
    let response = responses.and_then(|r| r.get(INPUT_KEY));
    elicitation::answer_in_retry(request_state, response, digest)
        .map_err(|why| crate::error::Error::BadAnswer(why.to_string()).into())
}

/// The `InputRequiredResult` that asks the client's human `question`.
pub(crate) fn input_required(
    params: ElicitRequestParams,
    question: &Question,
) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    InputRequiredResult::new(Some(requests), Some(elicitation::request_state(question)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_question_says_where_the_values_were_seen() {
        let d = CallDigest::of_canonical("pay", b"{}");
        let mut q = Question::new("s", None, "pay", d, 1, std::time::Duration::from_secs(9));
        q.origins = vec!["`/to` \"GB33\": seen only in untrusted results of `read_file`".into()];
        let ElicitRequestParams::FormElicitationParams { message, .. } =
            question("pay", &json!({"to": "GB33"}), &q).unwrap()
        else {
            panic!("a form");
        };
        assert!(
            message.contains(
                "Where its values were seen:\n- `/to` \"GB33\": seen only in untrusted results of `read_file`\nApprove this exact call?"
            ),
            "{message}"
        );
    }

    #[test]
    fn the_input_required_result_carries_the_form_and_the_state() {
        let d = CallDigest::of_canonical("pay", b"{}");
        let q = Question::new("s", None, "pay", d, 1, std::time::Duration::from_secs(9));
        let result = input_required(question("pay", &json!({}), &q).unwrap(), &q);
        let v = serde_json::to_value(&result).unwrap();
        assert_eq!(v["resultType"], "input_required");
        assert_eq!(v["requestState"], elicitation::request_state(&q));
        assert_eq!(
            v["inputRequests"][INPUT_KEY]["method"],
            "elicitation/create"
        );
        assert_eq!(
            v["inputRequests"][INPUT_KEY]["params"]["requestedSchema"]["required"],
            json!(["approve"])
        );
        assert_eq!(
            v["inputRequests"][INPUT_KEY]["params"]["requestedSchema"]["properties"]["approve"]
                ["type"],
            "boolean"
        );
    }
}
