//! How orch's MCP front ends ask a client's human about a gated call (semantics §13) and
//! read the answer, as JSON: the question's form, the `requestState` that names the call,
//! and the strict reading of an answer. `orch mcp` sends the question as an
//! `elicitation/create` request or an `InputRequiredResult` (MCP 2026-07-28); `orch
//! policy` puts it in the JSON-RPC error it rejects the call with. Either way the client
//! answers by retrying the call with `requestState` echoed and the answer under
//! [`INPUT_KEY`] in `inputResponses`.
//!
//! The run holds the question (a pending verdict in its session, with the question's
//! identity), and an answer applies only while the run still holds that very question,
//! so the `requestState` needs no secret: it is the question's [`Ticket`] (its nonce,
//! expiry and call), from which the host recomputes the identity with the run, step, tool
//! and template it knows; a forged, moved or replayed one can only fail to match
//! ([`crate::protocol`]).

use crate::protocol::{Question, Ticket, Unanswered};
use crate::Gate;
use orch_runtime::CallDigest;
use serde_json::{json, Value};

/// The key of orch's question in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "orch_approval";

/// What a `requestState` orch issues starts with ([`Ticket`]'s text).
pub const STATE_PREFIX: &str = crate::protocol::TICKET_PREFIX;

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
/// (in workflow step `step`). `arguments` is shown as given: pass the exact text the call
/// carries (or its canonical form), so the human sees every digit the tool will get.
pub fn question_text(tool: &str, arguments: &str, step: Option<&str>) -> String {
    question_text_with_origins(tool, arguments, step, &[])
}

/// [`question_text`], saying where the call's values were seen ([`Question::origins`]),
/// one line each, so that the human sees a value that came only from a web page or a
/// file before approving it.
pub fn question_text_with_origins(
    tool: &str,
    arguments: &str,
    step: Option<&str>,
    origins: &[String],
) -> String {
    let args = arguments;
    let step = step.map_or(String::new(), |s| format!(" (workflow step `{s}`)"));
    let seen = if origins.is_empty() {
        String::new()
    } else {
        let lines: Vec<String> = origins.iter().map(|l| format!("- {l}")).collect();
        format!("Where its values were seen:\n{}\n", lines.join("\n"))
    };
    format!(
        "The agent asks to call `{tool}`{step} with these arguments:\n{args}\n{seen}Approve this exact call? It runs once if you approve it."
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

/// The `requestState` that names `question`: its [`Ticket`].
pub fn request_state(question: &Question) -> String {
    question.ticket().to_string()
}

/// Is this `requestState` one orch issues (others are an upstream's own)?
pub fn is_ours(request_state: Option<&str>) -> bool {
    request_state.is_some_and(|s| s.starts_with(STATE_PREFIX))
}

/// What is wrong with an answer to orch's approval question, or with the retry that
/// carries it ([`answer_of`], [`answer_in_retry`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerError {
    /// An accepted answer without a boolean `approve`.
    NoApprove,
    /// An `action` other than `accept`, `decline` and `cancel`.
    UnknownAction(String),
    /// No `action`.
    NoAction,
    /// `inputResponses` answer the question, but the retry lacks its `requestState`.
    NoRequestState,
    /// The `requestState` claims to be orch's but is malformed, or names another call.
    Ticket(Unanswered),
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match self {
            AnswerError::NoApprove => "has no boolean `approve`".to_owned(),
            AnswerError::UnknownAction(other) => format!("has the unknown action `{other}`"),
            AnswerError::NoAction => "has no `action`".to_owned(),
            AnswerError::NoRequestState => {
                return f.write_str("inputResponses answer orch's approval question, but the retry lacks the requestState it was issued with");
            }
            AnswerError::Ticket(unanswered) => return unanswered.fmt(f),
        };
        write!(f, "the answer to orch's approval question {why}: expected {{\"action\": \"accept\", \"content\": {{\"approve\": true|false}}}}, \"decline\" or \"cancel\"")
    }
}

impl std::error::Error for AnswerError {}

/// The answer an `elicitation/create` result carries (`action`, and `content` with the
/// form's `approve` field when accepted); an error says what is wrong with it.
pub fn answer_of(result: &Value) -> Result<Answer, AnswerError> {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => match result
            .get("content")
            .and_then(|c| c.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
        {
            Some(true) => Ok(Answer::Approved),
            Some(false) => Ok(Answer::Rejected),
            None => Err(AnswerError::NoApprove),
        },
        Some("decline") => Ok(Answer::Rejected),
        Some("cancel") => Ok(Answer::Dismissed),
        Some(other) => Err(AnswerError::UnknownAction(other.to_owned())),
        None => Err(AnswerError::NoAction),
    }
}

/// The answer a retried call carries for the call `digest`, with the ticket of the
/// question it answers: `None` on a first call, or when the retry lacks the answer (the
/// human is asked anew). `response` is the entry under [`INPUT_KEY`] in the call's
/// `inputResponses`. A `requestState` that claims to be orch's but is malformed or names
/// another call is an error (its text says why); one that is not orch's is not read
/// here. Whether the run still holds the question is the run's to say
/// ([`crate::Policy::answer_ticket`]).
pub fn answer_in_retry(
    request_state: Option<&str>,
    response: Option<&Value>,
    digest: &CallDigest,
) -> Result<Option<(Ticket, Answer)>, AnswerError> {
    let Some(state) = request_state.filter(|s| is_ours(Some(s))) else {
        if response.is_some() {
            return Err(AnswerError::NoRequestState);
        }
        return Ok(None);
    };
    let ticket = Ticket::parse(state).map_err(AnswerError::Ticket)?;
    if ticket.call != *digest {
        return Err(AnswerError::Ticket(Unanswered::OtherCall));
    }
    let Some(response) = response else {
        return Ok(None);
    };
    Ok(Some((ticket, answer_of(response)?)))
}

/// The gate for a call that carries `retry` (the human's answer and the ticket of the
/// question it answers) in `run`, else `otherwise` (ask, or refuse); `None` when the
/// human dismissed the question (nothing is held, the call is not run).
pub fn gate<'a>(
    run: &'a str,
    retry: Option<(Ticket, Answer)>,
    otherwise: Gate<'a>,
) -> Option<Gate<'a>> {
    let (ticket, answer) = match retry {
        None => return Some(otherwise),
        Some(retry) => retry,
    };
    let approved = match answer {
        Answer::Approved => true,
        Answer::Rejected => false,
        Answer::Dismissed => return None,
    };
    Some(Gate::Answer {
        run,
        ticket,
        approved,
    })
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
    fn request_state_names_the_question() {
        use std::time::Duration;
        let d = CallDigest::of_canonical("pay", b"{}");
        let other = CallDigest::of_canonical("pay", b"{\"a\":1}");
        let q = Question::new("run", None, "pay", d, 1, Duration::from_secs(60));
        let state = request_state(&q);
        let declined = json!({"action": "decline"});
        assert_eq!(answer_in_retry(None, None, &d), Ok(None));
        assert_eq!(
            answer_in_retry(Some(&state), Some(&declined), &d),
            Ok(Some((q.ticket(), Answer::Rejected)))
        );
        assert_eq!(answer_in_retry(Some(&state), None, &d), Ok(None));
        assert!(answer_in_retry(Some(&state), Some(&declined), &other).is_err());
        assert!(answer_in_retry(Some("orch-q1:forged"), Some(&declined), &d).is_err());
        // Another server's state is not orch's to read.
        assert_eq!(answer_in_retry(Some("upstream-state"), None, &d), Ok(None));
        assert!(answer_in_retry(None, Some(&declined), &d).is_err());
        assert_eq!(form_schema()["required"], json!(["approve"]));
    }
}
