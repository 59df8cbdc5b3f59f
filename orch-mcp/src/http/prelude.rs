//! What the guard's files use from the rest of the gateway and from their crates, in
//! one place (no item of `http` itself, so that each file names its siblings).

#![allow(unused_imports)]

pub(super) use crate::framing::{self, classify, jsonrpc_error_body};
pub(super) use crate::handler::{Change, Shared};
pub(super) use crate::instances::FreshSession;
pub(super) use crate::jwt::JwtVerifier;
pub(super) use crate::runs::{is_run_id, run_key, RunKey, TOKEN_PREFIX};
pub(super) use crate::HttpOptions;
pub(super) use axum::body::Body;
pub(super) use axum::extract::{Request, State};
pub(super) use axum::middleware::Next;
pub(super) use axum::response::Response;
pub(super) use bytes::Bytes;
pub(super) use http_body::Frame;
pub(super) use orch_store::SessionStore;
pub(super) use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    ClientRequest, GetMeta, RequestId,
};
pub(super) use rmcp::transport::common::server_side_http::SessionId;
pub(super) use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
pub(super) use rmcp::transport::streamable_http_server::session::{
    SessionManager, SessionState, SessionStore as HandshakeStore, SessionStoreError,
};
pub(super) use serde_json::Value;
pub(super) use std::collections::HashMap;
pub(super) use std::future::Future;
pub(super) use std::pin::Pin;
pub(super) use std::sync::Arc;
pub(super) use std::task::{Context, Poll};
pub(super) use std::time::Duration;
pub(super) use tokio::sync::Semaphore;
