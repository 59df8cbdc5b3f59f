//! The gateway in-process, on rmcp at both ends: an rmcp tool server upstream (which
//! records what it executes) and an rmcp client downstream, each over an in-memory pipe.

// Not every helper of the shared module is used here.
#[allow(dead_code)]
mod common;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TEMPLATE: &str = r#"{
  "agentId": "in-process",
  "tools": ["search", "fetch", "summarize", "note", "wipe"],
  "orchestration": {
    "defaultStep": "Research",
    "steps": [
      {"name": "Research", "sequence": ["search", "fetch", "summarize"],
       "availableTools": {"denied": ["wipe"]}},
      {"name": "Report", "conditions": [{"type": "tool_used", "value": "summarize"}],
       "availableTools": {"allowed": ["note", "ext_*"], "denied": ["wipe"]}}
    ]
  }
}"#;

/// The upstream: every tool of the template plus a foreign one (`ext_time`) and one
/// nobody allows (`shell`); `fetch` fails (an `isError` result) for the URL `bad`.
#[derive(Clone, Default)]
struct Upstream {
    executed: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> rmcp::model::InitializeResult {
        orch_test_support::mcp_load::tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(orch_test_support::mcp_load::tool_list(&[
            "search",
            "fetch",
            "summarize",
            "note",
            "wipe",
            "ext_time",
            "shell",
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        self.executed.lock().expect("lock").push(name.clone());
        let url = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("url"))
            .and_then(|u| u.as_str());
        let result = if name == "fetch" && url == Some("bad") {
            CallToolResult::error(vec![ContentBlock::text("cannot fetch `bad`")])
        } else {
            CallToolResult::success(vec![ContentBlock::text(format!("{name} done"))])
        };
        Ok(result.into())
    }
}

/// The client: counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Client {
    list_changed: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }
}

async fn names(client: &rmcp::Peer<RoleClient>) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn call(client: &rmcp::Peer<RoleClient>, tool: &str, url: Option<&str>) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(url) = url {
        params.arguments = Some(serde_json::Map::from_iter([(
            "url".to_owned(),
            serde_json::Value::from(url),
        )]));
    }
    client.call_tool(params).await.expect("tools/call")
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).expect("json")[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn wait_for(counter: &AtomicUsize, above: usize) {
    for _ in 0..200 {
        if counter.load(Ordering::SeqCst) > above {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no tools/list_changed arrived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_through_the_gateway() {
    let upstream = Upstream::default();
    let executed = Arc::clone(&upstream.executed);
    let (client_end, served) = common::gateway_over_pipes(TEMPLATE, upstream).await;

    let handler = Client::default();
    let changed = Arc::clone(&handler.list_changed);
    let client = rmcp::serve_client(handler, client_end)
        .await
        .expect("handshake");
    let info = client.peer().peer_info().expect("server info");
    assert_eq!(
        info.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed),
        Some(true)
    );
    let peer = client.peer().clone();

    assert_eq!(names(&peer).await, ["search"]);
    for refused_tool in ["fetch", "wipe", "shell", "nonexistent"] {
        let refused = call(&peer, refused_tool, None).await;
        assert_eq!(refused.is_error, Some(true), "{refused_tool}");
    }
    assert_eq!(
        text(&call(&peer, "fetch", Some("u")).await),
        "error: `fetch` was not run: the sequence of step `Research` expects `search` at position 0. Allowed now: search."
    );
    assert!(
        executed.lock().expect("lock").is_empty(),
        "a refused call was forwarded"
    );

    let before = changed.load(Ordering::SeqCst);
    assert_eq!(text(&call(&peer, "search", None).await), "search done");
    wait_for(&changed, before).await;
    assert_eq!(names(&peer).await, ["fetch"]);

    // The upstream's isError result: passed on, not recorded.
    let failed = call(&peer, "fetch", Some("bad")).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "cannot fetch `bad`");
    assert_eq!(names(&peer).await, ["fetch"]);

    call(&peer, "fetch", Some("good")).await;
    let before = changed.load(Ordering::SeqCst);
    call(&peer, "summarize", None).await;
    wait_for(&changed, before).await;
    // Report: `note` (declared) and `ext_time` (foreign, by `ext_*`); never `wipe`, `shell`.
    assert_eq!(names(&peer).await, ["note", "ext_time"]);
    assert_eq!(text(&call(&peer, "ext_time", None).await), "ext_time done");
    assert_eq!(call(&peer, "shell", None).await.is_error, Some(true));
    assert_eq!(
        *executed.lock().expect("lock"),
        ["search", "fetch", "fetch", "summarize", "ext_time"]
    );

    // The client hangs up: the gateway ends cleanly.
    client.cancel().await.expect("cancel");
    let ended = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the gateway ends when the client hangs up")
        .expect("join");
    assert!(ended.is_ok(), "{ended:?}");
}

/// A memory store whose record of a session can be made to vanish the moment after it is
/// next read, as a session TTL passing between the gateway's check of a request's session
/// and the request's own look at the workflow.
#[derive(Clone, Default)]
struct Vanishing {
    inner: Arc<orch_store::MemoryStore>,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl orch_store::SessionStore for Vanishing {
    async fn load(
        &self,
        id: &str,
    ) -> Result<Option<orch_store::Versioned>, orch_store::StoreError> {
        let loaded = self.inner.load(id).await?;
        if loaded.is_some() && self.armed.swap(false, Ordering::SeqCst) {
            self.inner.remove(id).await?;
        }
        Ok(loaded)
    }

    async fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Option<u64>, orch_store::StoreError> {
        self.inner.compare_and_set(id, expected, bytes).await
    }

    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, orch_store::StoreError> {
        self.inner.store(id, bytes).await
    }

    async fn remove(&self, id: &str) -> Result<bool, orch_store::StoreError> {
        self.inner.remove(id).await
    }
}

/// A session whose record is gone (its TTL passed, another instance deleted it) is
/// ended, even when the record vanished after the request's session was checked: its
/// tool list is not the fresh workflow's, and no call of it starts the workflow afresh
/// (a once-only or gated tool would run again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_record_vanished_is_never_served_afresh() {
    use rmcp::ServiceExt;
    let upstream = orch_test_support::mcp_load::serve_http(Upstream::default(), false).await;
    let store = Vanishing::default();
    let url = common::gateway_over_http_on(TEMPLATE, &upstream, store.clone()).await;
    let connect = || async {
        ().serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url.clone(),
        ))
        .await
        .expect("the handshake")
    };

    let fresh = names(connect().await.peer()).await;
    let client = connect().await;
    let searched = call(client.peer(), "search", None).await;
    assert_ne!(searched.is_error, Some(true), "{searched:?}");
    let after = names(client.peer()).await;
    assert_ne!(after, fresh, "the search moved the workflow on");

    // The record is there when the request's session is checked, and gone right after.
    store.armed.store(true, Ordering::SeqCst);
    let listed = client.peer().list_tools(None).await;
    let error = listed.expect_err("an ended session lists nothing");
    assert!(error.to_string().contains("ended"), "{error}");
    store.armed.store(true, Ordering::SeqCst);
    let called = client
        .peer()
        .call_tool(CallToolRequestParams::new("search"))
        .await;
    assert!(called.is_err(), "an ended session's call: {called:?}");
}
