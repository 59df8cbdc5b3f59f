//! Every JSON-RPC error `orch mcp` answers with (to a client, or to the upstream when it
//! relays a question), as one enum, and its mapping to the wire in one place
//! ([`From<Error> for McpError`](Error#impl-From<Error>-for-ErrorData)): which JSON-RPC
//! code each failure gets, and the words it says. A refused tool call is not an error:
//! it is a tool result (`isError`) in orch's words.

use orch_store::StoreError;
use rmcp::model::ErrorCode;
use rmcp::ErrorData as McpError;
use std::fmt;
use std::time::Duration;

/// A request `orch mcp` could not serve.
#[derive(Debug)]
pub(crate) enum Error {
    /// The gateway is handling its maximum of requests at once (`-32000`, retryable).
    Busy {
        /// The cap (`--max-in-flight`).
        limit: usize,
    },
    /// The client cancelled the request (`-32800`).
    Cancelled {
        /// The method.
        method: String,
    },
    /// The session (or run) has ended: deleted, revoked or expired (`-32600`).
    Ended {
        /// Its id (a run's starts with the run prefix).
        id: String,
    },
    /// Over Streamable HTTP with runs, a request with neither a run credential nor a
    /// session id (`-32600`).
    NoRun,
    /// The session store failed (`-32603`).
    Store(StoreError),
    /// A stored record does not decode; it was left as it is (`-32603`).
    Corrupt {
        /// The session.
        id: String,
        /// What is wrong with it.
        why: String,
    },
    /// Every attempt to update a session conflicted with another writer (`-32603`).
    Conflict {
        /// The session.
        id: String,
        /// How many were made.
        attempts: u32,
    },
    /// The upstream did not answer within the call timeout; the request was cancelled
    /// (`-32603`).
    UpstreamTimeout {
        /// The method.
        method: String,
        /// The timeout.
        limit: Duration,
    },
    /// The upstream went away before answering (`-32603`).
    UpstreamGone {
        /// The method.
        method: String,
    },
    /// The upstream cannot be used (`-32603`).
    UpstreamUnavailable {
        /// Why, in the transport's words.
        why: String,
    },
    /// The upstream answered with a result of another kind than the method's
    /// (`-32603`).
    UpstreamUnexpected {
        /// The method.
        method: String,
    },
    /// The upstream answered a `tools/call` with something other than a tool result
    /// (`-32603`; the call is not recorded).
    NotAToolResult {
        /// The tool.
        tool: String,
    },
    /// The upstream answered a `tools/call` with a task: the call has not completed, and
    /// this gateway does not relay tasks (`-32603`; the call is not recorded).
    UnfinishedResult {
        /// The tool.
        tool: String,
    },
    /// A tool ran, but its admission lapsed meanwhile: the result is withheld and not
    /// recorded (`-32603`).
    AdmissionLapsed {
        /// The tool.
        tool: String,
    },
    /// A tool ran, but the orchestration could not record it (`-32603`; the template's
    /// `lostResults` decides what the lapsed lease means).
    NotRecorded {
        /// The tool.
        tool: String,
        /// Why.
        why: String,
    },
    /// The upstream did not confirm `subscriptions/listen` in time (`-32603`).
    ListenTimeout {
        /// The timeout.
        limit: Duration,
    },
    /// The operating system's random source failed (minting a run) (`-32603`).
    Random(String),
    /// A freshly minted run id was already taken (`-32603`; retrying works).
    RunIdTaken,
    /// The approval form could not be written (`-32603`).
    ApprovalForm(String),
    /// A client's answer to a question is malformed (`-32602`).
    BadAnswer(String),
    /// An upstream question (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`) with no client request in flight on its connection (`-32603`).
    NoOneToAsk {
        /// The method.
        method: String,
    },
    /// Relaying an upstream question to the client failed (`-32603`).
    RelayFailed {
        /// The method.
        method: String,
        /// Why.
        why: String,
    },
    /// A relayed question was cancelled (`-32603`).
    RelayCancelled {
        /// The method.
        method: String,
    },
    /// The client did not answer a relayed question (`-32603`).
    ClientSilent {
        /// The method.
        method: String,
        /// Why.
        why: String,
    },
    /// The client answered a relayed question with a result of another kind
    /// (`-32603`).
    ClientUnexpected {
        /// The method.
        method: String,
    },
    /// What reached another instance as the client's answer to a relayed question is
    /// not a JSON-RPC response (`-32603`).
    ClientNotAResponse {
        /// The method.
        method: String,
    },
}

impl Error {
    /// The JSON-RPC code the failure goes out with.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Error::Busy { .. } => ErrorCode(-32000),
            Error::Cancelled { .. } => ErrorCode(-32800),
            Error::Ended { .. } | Error::NoRun => ErrorCode::INVALID_REQUEST,
            Error::BadAnswer(_) => ErrorCode::INVALID_PARAMS,
            Error::Store(_)
            | Error::Corrupt { .. }
            | Error::Conflict { .. }
            | Error::UpstreamTimeout { .. }
            | Error::UpstreamGone { .. }
            | Error::UpstreamUnavailable { .. }
            | Error::UpstreamUnexpected { .. }
            | Error::NotAToolResult { .. }
            | Error::UnfinishedResult { .. }
            | Error::AdmissionLapsed { .. }
            | Error::NotRecorded { .. }
            | Error::ListenTimeout { .. }
            | Error::Random(_)
            | Error::RunIdTaken
            | Error::ApprovalForm(_)
            | Error::NoOneToAsk { .. }
            | Error::RelayFailed { .. }
            | Error::RelayCancelled { .. }
            | Error::ClientSilent { .. }
            | Error::ClientUnexpected { .. }
            | Error::ClientNotAResponse { .. } => ErrorCode::INTERNAL_ERROR,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Busy { limit } => write!(
                f,
                "orch mcp is handling its maximum of {limit} requests at once; try again shortly"
            ),
            Error::Cancelled { method } => write!(f, "`{method}` was cancelled by the client"),
            Error::Ended { id } if id.starts_with(crate::runs::RUN_PREFIX) => f.write_str(
                "this run has ended (revoked, or it expired); start a new one (POST /runs)",
            ),
            Error::Ended { id } => write!(
                f,
                "session `{id}` has ended (DELETE, or its TTL passed); initialize a new one"
            ),
            Error::NoRun => f.write_str(
                "orch mcp keeps a workflow run per credential: this request presents no run \
                 credential (`Authorization: Bearer <run token>`; POST /runs starts a run) \
                 and no Mcp-Session-Id",
            ),
            Error::Store(e) => write!(f, "orchestration session store: {e}"),
            Error::Corrupt { id, why } => write!(
                f,
                "the stored record of session `{id}` is corrupt ({why}); it was left as it is"
            ),
            Error::Conflict { id, attempts } => write!(
                f,
                "orchestration session `{id}` could not be updated: {attempts} attempts conflicted with concurrent updates"
            ),
            Error::UpstreamTimeout { method, limit } => write!(
                f,
                "the upstream MCP server did not answer `{method}` within {} s (the call timeout); the request was cancelled",
                limit.as_secs_f64()
            ),
            Error::UpstreamGone { method } => write!(
                f,
                "the upstream MCP server is unavailable: it went away before answering `{method}`"
            ),
            Error::UpstreamUnavailable { why } => {
                write!(f, "the upstream MCP server is unavailable: {why}")
            }
            Error::UpstreamUnexpected { method } => write!(
                f,
                "the upstream MCP server answered `{method}` with a result of another kind"
            ),
            Error::NotAToolResult { tool } => write!(
                f,
                "the upstream MCP server answered `tools/call` of `{tool}` with something other than a tool result"
            ),
            Error::UnfinishedResult { tool } => write!(
                f,
                "the upstream MCP server answered `tools/call` of `{tool}` with a task: the call has not completed, this gateway does not relay tasks, and the call is not recorded"
            ),
            Error::AdmissionLapsed { tool } => write!(
                f,
                "`{tool}` ran, but its admission lapsed meanwhile (the store took longer than the call timeout and its margin): its result is withheld and not recorded"
            ),
            Error::NotRecorded { tool, why } => write!(
                f,
                "`{tool}` ran, but the orchestration could not record it: {why}"
            ),
            Error::ListenTimeout { limit } => write!(
                f,
                "the upstream MCP server did not answer `subscriptions/listen` within {} s",
                limit.as_secs_f64()
            ),
            Error::Random(why) => {
                write!(f, "the operating system's random source failed: {why}")
            }
            Error::RunIdTaken => {
                f.write_str("a freshly minted run id is already taken; try again")
            }
            Error::ApprovalForm(why) => write!(f, "the approval form: {why}"),
            Error::BadAnswer(why) => f.write_str(why),
            Error::NoOneToAsk { method } => write!(
                f,
                "orch mcp cannot relay `{method}`: no client request of the gateway is in flight on this connection"
            ),
            Error::RelayFailed { method, why } => write!(f, "cannot relay `{method}`: {why}"),
            Error::RelayCancelled { method } => write!(f, "`{method}` was cancelled"),
            Error::ClientSilent { method, why } => {
                write!(f, "the client did not answer `{method}`: {why}")
            }
            Error::ClientUnexpected { method } => write!(
                f,
                "the client answered `{method}` with a result of another kind"
            ),
            Error::ClientNotAResponse { method } => write!(
                f,
                "the client's answer to `{method}` is not a JSON-RPC response"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for McpError {
    fn from(e: Error) -> McpError {
        McpError::new(e.code(), e.to_string(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes clients rely on: retry on -32000, a cancelled request is -32800, an
    /// ended session is the client's to fix (-32600), a malformed answer -32602, the
    /// gateway's and the upstream's failures -32603.
    #[test]
    fn each_failure_goes_out_with_its_code() {
        let cases = [
            (Error::Busy { limit: 4 }, -32000),
            (
                Error::Cancelled {
                    method: "tools/call".into(),
                },
                -32800,
            ),
            (Error::Ended { id: "s".into() }, -32600),
            (Error::NoRun, -32600),
            (Error::BadAnswer("no".into()), -32602),
            (Error::RunIdTaken, -32603),
            (
                Error::UpstreamGone {
                    method: "tools/call".into(),
                },
                -32603,
            ),
        ];
        for (e, code) in cases {
            let wire = McpError::from(e);
            assert_eq!(wire.code.0, code, "{}", wire.message);
        }
    }

    /// A run's end and a session's end say what to do about each.
    #[test]
    fn an_ended_run_and_an_ended_session_say_what_to_do() {
        let run = Error::Ended {
            id: format!("{}abc", crate::runs::RUN_PREFIX),
        };
        assert!(run.to_string().contains("POST /runs"), "{run}");
        let session = Error::Ended { id: "s1".into() };
        assert!(
            session.to_string().contains("initialize a new one"),
            "{session}"
        );
    }
}
