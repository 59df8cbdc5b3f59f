//! Every answer `orch policy` gives agentgateway other than "pass" or "mutated", as one
//! enum, and its mapping to the ExtMcp wire in one place ([`CheckError::into_error`]):
//! which `AuthorizationError` code each gets, the words it says, and the JSON-RPC error
//! data the gateway hands the client (a refused call's facts, as `orch mcp` gives them).

use crate::wire::{authorization_error::Code, AuthorizationError};
use orch_agent::elicitation::AnswerError;
use orch_run::RunError;
use serde_json::Value;
use std::fmt;

/// Why a check was not passed.
#[derive(Debug)]
pub(crate) enum CheckError {
    /// The workflow refuses the call (or holds it for a human's approval): orch's words
    /// and the refusal's facts (`PERMISSION_DENIED`).
    Refused {
        /// orch's words.
        reason: String,
        /// The facts, with the approval question when one is asked.
        data: Value,
    },
    /// Another call of the run stayed in flight past `--busy-wait-ms`
    /// (`RESOURCE_EXHAUSTED`, with the refusal's facts).
    Busy {
        /// orch's words.
        reason: String,
        /// The facts.
        data: Value,
    },
    /// The server is handling its maximum of checks at once (`RESOURCE_EXHAUSTED`).
    Overloaded {
        /// `--max-in-flight`.
        limit: usize,
    },
    /// `metadata_context` names no run under the run key (`PERMISSION_DENIED`).
    NoRun {
        /// The run key.
        key: String,
    },
    /// The run under the run key is not a string (`PERMISSION_DENIED`).
    RunNotString {
        /// The run key.
        key: String,
    },
    /// The run's name is empty or too long (`PERMISSION_DENIED`).
    RunNameLength {
        /// The run key.
        key: String,
        /// The longest name.
        max: usize,
    },
    /// The human dismissed the question about the call (`PERMISSION_DENIED`).
    Dismissed {
        /// The tool.
        tool: String,
    },
    /// A result came after the call's admission lapsed (`PERMISSION_DENIED`).
    Lapsed {
        /// The lease, in seconds.
        lease_secs: f64,
    },
    /// A result for a run with no call in flight (`PERMISSION_DENIED`).
    NoCall,
    /// The gateway sent something orch cannot read (`INVALID`).
    Invalid(Invalid),
    /// orch's own failure (the store, a corrupt record): the check fails closed
    /// (`UNKNOWN`).
    Fault {
        /// The run.
        run: String,
        /// What failed.
        error: RunError,
    },
    /// A run found busy after waiting had ended (`UNKNOWN`: a bug if it happens).
    BusyAfterWait {
        /// The tool.
        tool: String,
    },
}

/// What the gateway sent that orch cannot read.
#[derive(Debug)]
pub(crate) enum Invalid {
    /// A `tools/call` request without params.
    NoParams,
    /// Params larger than `--max-params-bytes`.
    ParamsTooLarge {
        /// Their size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Params that are not JSON (or not UTF-8).
    ParamsNotJson(String),
    /// Params that are not an object.
    ParamsNotObject,
    /// Params that write a key twice.
    DuplicateKey(String),
    /// An empty `name`.
    NameEmpty,
    /// A `name` that is not a string.
    NameNotString,
    /// No `name`.
    NoName,
    /// `arguments` that are not an object.
    ArgumentsNotObject,
    /// `arguments` that write a key of one object twice.
    ArgumentsDuplicateKey,
    /// A `requestState` that is not a string.
    RequestStateNotString,
    /// A malformed answer to orch's approval question, or a retry without its ticket.
    Answer(AnswerError),
    /// A `tools/call` result that is not JSON.
    ResultNotJson(String),
    /// A `tools/call` result that is not a tool result.
    NotAToolResult(String),
    /// A `tools/list` result that is not JSON.
    ListNotJson(String),
    /// A `tools/list` result without a `tools` array.
    ListNoTools,
    /// A tool in a `tools/list` result without a string `name`.
    ListToolNoName,
    /// A call token orch did not issue.
    BadToken,
}

impl CheckError {
    /// The `AuthorizationError` code it goes out with.
    pub(crate) fn code(&self) -> Code {
        match self {
            CheckError::Refused { .. }
            | CheckError::NoRun { .. }
            | CheckError::RunNotString { .. }
            | CheckError::RunNameLength { .. }
            | CheckError::Dismissed { .. }
            | CheckError::Lapsed { .. }
            | CheckError::NoCall => Code::PermissionDenied,
            CheckError::Busy { .. } | CheckError::Overloaded { .. } => Code::ResourceExhausted,
            CheckError::Invalid(_) => Code::Invalid,
            CheckError::Fault { .. } | CheckError::BusyAfterWait { .. } => Code::Unknown,
        }
    }

    /// The refusal's facts, for a refused or busy call.
    pub(crate) fn data(&self) -> Option<&Value> {
        match self {
            CheckError::Refused { data, .. } | CheckError::Busy { data, .. } => Some(data),
            _ => None,
        }
    }

    /// The ExtMcp error: the code, the words, and the data for the client's JSON-RPC
    /// error, if any.
    pub(crate) fn into_error(self) -> AuthorizationError {
        AuthorizationError {
            code: self.code() as i32,
            reason: self.to_string(),
            mcp_error: self.data().map(|d| d.to_string().into_bytes()),
        }
    }
}

impl From<Invalid> for CheckError {
    fn from(invalid: Invalid) -> CheckError {
        CheckError::Invalid(invalid)
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Refused { reason, .. } | CheckError::Busy { reason, .. } => {
                f.write_str(reason)
            }
            CheckError::Overloaded { limit } => write!(
                f,
                "orch policy is handling its maximum of {limit} checks at once; try again shortly"
            ),
            CheckError::NoRun { key } => write!(
                f,
                "orch policy: the gateway named no workflow run: `metadata_context` has no `{key}` \
                 (configure the guardrails processor's metadata with `{key}: <CEL naming the run, e.g. jwt.sub>`)"
            ),
            CheckError::RunNotString { key } => write!(
                f,
                "orch policy: the run named by `metadata_context.{key}` must be a string"
            ),
            CheckError::RunNameLength { key, max } => write!(
                f,
                "orch policy: the run named by `metadata_context.{key}` must be 1 to {max} bytes long"
            ),
            CheckError::Dismissed { tool } => write!(
                f,
                "error: `{tool}` was not run: the human dismissed the question about it; call it again to ask again"
            ),
            CheckError::Lapsed { lease_secs } => write!(
                f,
                "orch policy: this call's admission lapsed (after {lease_secs} s): its result counted as lost, and what that means was decided by the template's `lostResults`, or its result was reported already: it is withheld and not recorded"
            ),
            CheckError::NoCall => f.write_str(
                "orch policy: no call of this workflow run is in flight (was the request phase of tools/call configured?): the result is withheld and not recorded",
            ),
            CheckError::Invalid(invalid) => invalid.fmt(f),
            CheckError::Fault { run, error } => {
                write!(f, "orch policy: workflow run `{run}`: {error}")
            }
            CheckError::BusyAfterWait { tool } => write!(
                f,
                "orch policy: `{tool}` found its run busy after waiting had ended"
            ),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::NoParams => {
                f.write_str("tools/call without params: the gateway sent no `mcp_request`")
            }
            Invalid::ParamsTooLarge { len, max } => write!(
                f,
                "tools/call params of {len} bytes exceed orch policy's limit of {max} bytes"
            ),
            Invalid::ParamsNotJson(e) => write!(f, "tools/call params are not JSON: {e}"),
            Invalid::ParamsNotObject => f.write_str("tools/call params are not a JSON object"),
            Invalid::DuplicateKey(key) => {
                write!(f, "tools/call params write the key `{key}` twice")
            }
            Invalid::NameEmpty => f.write_str("tools/call `name` is empty"),
            Invalid::NameNotString => f.write_str("tools/call `name` is not a string"),
            Invalid::NoName => f.write_str("tools/call params have no `name`"),
            Invalid::ArgumentsNotObject => {
                f.write_str("tools/call `arguments` is not a JSON object")
            }
            Invalid::ArgumentsDuplicateKey => f.write_str(
                "tools/call `arguments` writes a key of one object twice: orch judges a call only as every reader reads it",
            ),
            Invalid::RequestStateNotString => {
                f.write_str("tools/call `requestState` is not a string")
            }
            Invalid::Answer(e) => e.fmt(f),
            Invalid::ResultNotJson(e) => write!(f, "the tools/call result is not JSON: {e}"),
            Invalid::NotAToolResult(why) => write!(
                f,
                "the tools/call result is not a tool result ({why}): it is withheld and the call is not recorded"
            ),
            Invalid::ListNotJson(e) => write!(f, "the tools/list result is not JSON: {e}"),
            Invalid::ListNoTools => f.write_str("the tools/list result has no `tools` array"),
            Invalid::ListToolNoName => {
                f.write_str("a tool in the tools/list result has no string `name`")
            }
            Invalid::BadToken => write!(
                f,
                "`metadata_context.{}` is not a call token orch policy issued (16 hex digits)",
                crate::engine::TOKEN_FIELD
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes agentgateway acts on: a refusal is PERMISSION_DENIED with the facts as
    /// the client's error data, load is RESOURCE_EXHAUSTED, what orch cannot read is
    /// INVALID, orch's own failure UNKNOWN (the gateway fails closed).
    #[test]
    fn each_check_error_goes_out_with_its_code_and_its_data() {
        let refused = CheckError::Refused {
            reason: "error: `pay` is not allowed".into(),
            data: serde_json::json!({"refusal": "not_allowed"}),
        }
        .into_error();
        assert_eq!(refused.code, Code::PermissionDenied as i32);
        assert_eq!(refused.reason, "error: `pay` is not allowed");
        assert_eq!(
            refused.mcp_error.as_deref(),
            Some(br#"{"refusal":"not_allowed"}"#.as_slice())
        );
        let cases = [
            (CheckError::Overloaded { limit: 2 }, Code::ResourceExhausted),
            (CheckError::NoCall, Code::PermissionDenied),
            (Invalid::NoName.into(), Code::Invalid),
            (
                CheckError::BusyAfterWait { tool: "a".into() },
                Code::Unknown,
            ),
        ];
        for (error, code) in cases {
            let wire = error.into_error();
            assert_eq!(wire.code, code as i32, "{}", wire.reason);
            assert!(wire.mcp_error.is_none(), "{}", wire.reason);
        }
    }
}
