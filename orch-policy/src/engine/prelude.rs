//! What the engine's files use from the rest of the policy server and from their
//! crates, in one place (no item of `engine` itself, so that each file names its
//! siblings).

#![allow(unused_imports)]

pub(super) use crate::check_error::{CheckError, Invalid};
pub(super) use crate::wire::{
    mcp_request_result, mcp_response_result, McpRequest, McpRequestResult, McpResponse,
    McpResponseResult, Pass,
};
pub(super) use crate::Options;
pub(super) use orch_agent::audit::Auditor;
pub(super) use orch_agent::elicitation::{self, Answer, INPUT_KEY};
pub(super) use orch_agent::protocol::{self, Question, Ticket, ToolResult};
pub(super) use orch_agent::{Gate, Policy, Refusal, RefusalKind};
pub(super) use orch_run::{self as run, RunError};
pub(super) use orch_runtime::dynamic::{DetachedSession, DynMachine, DynSession};
pub(super) use orch_runtime::CallDigest;
pub(super) use orch_store::lease::{Change, Record};
pub(super) use orch_store::SessionStore;
pub(super) use prost_types::value::Kind;
pub(super) use serde_json::value::RawValue;
pub(super) use serde_json::{json, Value};
pub(super) use std::borrow::Cow;
pub(super) use std::collections::HashMap;
pub(super) use std::sync::atomic::{AtomicUsize, Ordering};
pub(super) use std::sync::{Arc, Mutex, PoisonError};
pub(super) use std::time::Duration;
pub(super) use tokio::sync::Semaphore;
