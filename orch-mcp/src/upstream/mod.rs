//! The connection to the upstream MCP server: started as a child process or reached
//! over Streamable HTTP, with a client handler that relays its notifications to the
//! gateway's clients.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `connect.rs` | starting or reaching the upstream, the MCP handshake (either revision family), a session's own connection, listening to a 2026-07-28 upstream |
//! | `client.rs` | the client handler: the upstream's requests and notifications, relayed to the client they belong to |
//! | `routes.rs` | which client request something the upstream says belongs to, in order with the answers |
//! | `relay.rs` | the gateway's clients, their standalone streams and listeners |
//! | `link.rs` | one connection as a forwarded request uses it, and what a handshake session keeps on 2026-07-28 |
//! | `http_client.rs` | the HTTP upstream's client: the standalone stream watched, a call's answer read as bytes first |
//! | `observed.rs` | the transport wrapper that counts progress, so an answer waits for the progress before it |
//! | `tool_list.rs` | the upstream's tools as a connection last listed them |

// Logging and resources/subscribe are deprecated by the 2026-07-28 revision only; the
// gateway also speaks the handshake revisions, where they are current.
#![allow(deprecated)]

mod client;
mod connect;
mod http_client;
mod link;
mod observed;
mod relay;
mod routes;
mod tool_list;

use client::*;
use connect::*;
use http_client::*;
use link::*;
use observed::*;
use routes::*;

pub(crate) use connect::{
    connect, connect_on, connect_session, is_modern, listen_upstream, OnGone, Running,
};
pub(crate) use link::{Link, SessionLink};
pub(crate) use relay::Relay;
pub(crate) use routes::Origin;
pub(crate) use tool_list::ToolList;

use crate::error::Error;
use crate::GatewayError;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ClientRequest, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, GetExtensions, GetMeta,
    Implementation, ListRootsRequest, ListRootsResult, LoggingLevel, LoggingMessageNotification,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestId, ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
    SubscriptionFilter, Tool,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, OriginatingRequestId, PeerRequestOptions,
    RequestContext, RequestHandle, RunningService, ServiceError, SubscriptionSink,
};
use rmcp::transport::IntoTransport;
use rmcp::ErrorData as McpError;
use rmcp::{ClientHandler, ClientLifecycleMode, Peer, RoleClient, RoleServer};
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// Where the upstream MCP server is.
#[derive(Clone, Debug)]
pub enum Upstream {
    /// Start this program with these arguments and speak MCP over its standard input
    /// and output. It inherits the gateway's environment and standard error.
    Command {
        /// The program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// An MCP server speaking Streamable HTTP at this URL.
    Url(String),
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Command { program, args } => {
                write!(f, "`{}", program.to_string_lossy())?;
                for a in args {
                    write!(f, " {}", a.to_string_lossy())?;
                }
                f.write_str("`")
            }
            Upstream::Url(url) => write!(f, "{url}"),
        }
    }
}
