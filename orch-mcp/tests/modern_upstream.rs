//! A handshake client (2025-11-25) through `orch mcp` to an upstream that speaks only
//! 2026-07-28 (an rmcp server over Streamable HTTP that supports no other revision),
//! which removed `logging/setLevel` and `resources/(un)subscribe`: the gateway never
//! sends the upstream those methods. It answers them for the session itself, sends the
//! session's level in every request's `_meta` (the upstream logs only for requests that
//! carry one), and holds a `subscriptions/listen` stream for the session's
//! subscriptions — so the client gets its logs at its level and its resource updates, on
//! its own revision's terms.

// Logging is deprecated by SEP-2577 but still in every revision this test speaks.
#![allow(deprecated)]

#[allow(dead_code)]
mod common;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams, ProtocolVersion,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerCapabilities,
    ServerNotification, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

const DESK: &str = r#"{
  "name": "desk",
  "tools": ["talk"],
  "orchestration": {"steps": [{"name": "Desk", "isDefault": true}]}
}"#;

/// What reached the upstream: the methods it was sent.
type Seen = Arc<Mutex<Vec<String>>>;

/// A 2026-07-28-only tool server: `talk` logs "debug", "info" and "error" at those
/// levels, each only when the request's `_meta` names a level at or below it; a listen
/// stream that subscribes to `res://a` is told it was updated.
#[derive(Clone)]
struct Modern {
    seen: Seen,
}

impl ServerHandler for Modern {
    fn get_info(&self) -> rmcp::model::InitializeResult {
        let mut info = rmcp::model::InitializeResult::default();
        info.capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![ProtocolVersion::V_2026_07_28])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(orch_test_support::mcp_load::tool_list(&["talk"]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.seen.lock().unwrap().push("tools/call".into());
        if let Some(floor) = context.meta.log_level() {
            let levels = [LoggingLevel::Debug, LoggingLevel::Info, LoggingLevel::Error];
            let rank = |l: LoggingLevel| levels.iter().position(|x| *x == l);
            for level in levels {
                if rank(level) >= rank(floor) {
                    let text = serde_json::to_value(level).unwrap();
                    let _ = context
                        .peer
                        .notify_logging_message(LoggingMessageNotificationParam::new(level, text))
                        .await;
                }
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("talked")]).into())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let resources = context.requested().resource_subscriptions.clone();
        self.seen
            .lock()
            .unwrap()
            .push(format!("subscriptions/listen {resources:?}"));
        if resources.is_some_and(|r| r.iter().any(|u| u == "res://a")) {
            let update =
                ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new("res://a"));
            let _ = context
                .sink()
                .send(ServerNotification::ResourceUpdatedNotification(update))
                .await;
        }
        context.cancelled().await;
        Ok(())
    }
}

/// A handshake client that passes on the log lines and resource updates it gets.
struct Listener {
    logs: mpsc::UnboundedSender<String>,
    updates: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Listener {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self
            .logs
            .send(params.data.as_str().unwrap_or_default().to_owned());
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_client_keeps_its_level_and_subscriptions_on_a_modern_only_upstream() {
    let seen: Seen = Arc::default();
    let server = Modern {
        seen: Arc::clone(&seen),
    };
    let upstream = orch_test_support::mcp_load::serve_http(server, false).await;
    let url = common::gateway_over_http(DESK, &upstream).await;

    let (logs_tx, mut logs) = mpsc::unbounded_channel();
    let (updates_tx, mut updates) = mpsc::unbounded_channel();
    let client = Listener {
        logs: logs_tx,
        updates: updates_tx,
    }
    .serve(StreamableHttpClientTransport::from_uri(url))
    .await
    .expect("the handshake");
    assert!(
        client
            .peer()
            .peer_info()
            .unwrap()
            .protocol_version
            .has_initialize(),
        "the client is on a handshake revision"
    );

    // Its level: answered by the gateway, sent upstream with each call.
    client
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .expect("logging/setLevel is answered");
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new("talk"))
        .await
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let mut got = Vec::new();
    while got.len() < 2 {
        let line = tokio::time::timeout(Duration::from_secs(10), logs.recv())
            .await
            .expect("the call's log lines arrive")
            .expect("a log line");
        got.push(line);
    }
    got.sort();
    assert_eq!(
        got,
        ["error", "info"],
        "at or above the level the session set"
    );

    // Its subscription: answered by the gateway, held as a listen stream upstream.
    client
        .peer()
        .subscribe(SubscribeRequestParams::new("res://a"))
        .await
        .expect("resources/subscribe is answered");
    let updated = tokio::time::timeout(Duration::from_secs(10), updates.recv())
        .await
        .expect("the update arrives")
        .expect("an update");
    assert_eq!(updated, "res://a");

    // Nothing the revision removed reached the upstream.
    let seen = seen.lock().unwrap().clone();
    assert!(seen.contains(&"tools/call".to_owned()), "{seen:?}");
    assert!(
        seen.contains(&r#"subscriptions/listen Some(["res://a"])"#.to_owned()),
        "{seen:?}"
    );
    let _ = client.cancel().await;
}
