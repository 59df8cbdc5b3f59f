//! The gateway's MCP server side: one [`Downstream`] per client session, sharing the
//! gateway's [`Shared`] state.
//!
//! A tool call goes through three steps, each a compare-and-set on the session's
//! [`Record`]: *reserve* (admit the call against the stored state and write a lease in
//! the same compare-and-set; a call that finds another call's lease waits for it),
//! *forward* (bounded by the call timeout, cancelled with the client's cancellation),
//! then *finish* (record the tool and drop the lease) or *release* (drop the lease,
//! record nothing).
//!
//! | file | what it holds |
//! | --- | --- |
//! | `shared.rs` | [`Shared`]: the state every session shares, and reading or changing a session's record |
//! | `admission.rs` | reserving a session for a call (admit and lease in one compare-and-set), settling it, the guard of a lease whose request went away |
//! | `forward.rs` | sending a request upstream and waiting for its answer, relaying what the upstream says meanwhile |
//! | `approvals.rs` | questions put to approvers elsewhere: announced, waited for, answered through the approvals API |
//! | `calls.rs` | a client's requests through the workflow: visible tools, a tool call from admission to its record, the question to the client's human |
//! | `downstream.rs` | [`Downstream`]: one client session, and what a request says of its revision and session |
//! | `server.rs` | the SDK's `ServerHandler`: one method per request kind |
//! | `replies.rs` | what the gateway answers itself: refusals as tool results, result fields, its errors |

// Logging and resources/subscribe are deprecated by the 2026-07-28 revision only; the
// gateway also speaks the handshake revisions, where they are current.
#![allow(deprecated)]

mod admission;
mod approvals;
mod calls;
mod downstream;
mod forward;
mod replies;
mod runs;
mod server;
mod shared;

use admission::*;
use downstream::*;
use replies::*;

pub(crate) use downstream::{names_modern_revision, Downstream};
#[cfg(feature = "otel")]
pub(crate) use replies::REFUSAL_META_KEY;
pub(crate) use replies::{store_error, upstream_error};
pub(crate) use shared::Shared;

use crate::approval::{self, Answer};
use crate::error::Error;
use crate::instances::FreshSession;
use crate::jwt::JWT_PREFIX;
use crate::runs::RunKey;
use crate::telemetry;
use crate::upstream::{self, Link, Origin, Relay, SessionLink, ToolList, Upstream};
use crate::Limits;
use orch_agent::audit::Auditor;
use orch_agent::protocol::{self, Question, ToolResult};
use orch_agent::{Gate, Policy, Refusal, RefusalKind};
use orch_run::{self as run, RunError};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, CallDigest};
pub(crate) use orch_store::lease::Change;
use orch_store::lease::{Delivery, Record};
use orch_store::{SessionStore, StoreError};
use rmcp::model::{
    CacheScope, CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotification, CancelledNotificationParam, ClientRequest, ClientResult,
    CompleteRequest, CompleteRequestParams, CompleteResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, GetPromptRequest, GetPromptRequestParams, GetPromptResponse,
    InitializeRequestParams, InitializeResult, ListPromptsRequest, ListPromptsResult,
    ListResourceTemplatesRequest, ListResourceTemplatesResult, ListResourcesRequest,
    ListResourcesResult, ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject,
    ResultType, ServerRequest, ServerResult, SetLevelRequest, SetLevelRequestParams,
    SubscribeRequest, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequest,
    UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, ServiceError, SubscriptionContext,
};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How much longer than the call timeout a lease lasts: time to record the result.
const LEASE_MARGIN: Duration = Duration::from_secs(10);

/// How often a `subscriptions/listen` stream reads its run, to hear of changes made
/// through other gateway instances (those made through its own wake it at once).
const LISTEN_POLL: Duration = Duration::from_secs(1);

/// How long an answer waits at most for the progress that came before it to be relayed.
const PROGRESS_DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// The longest pause between two looks at a session whose call is in flight.
const MAX_WAIT_PAUSE: Duration = Duration::from_millis(50);
