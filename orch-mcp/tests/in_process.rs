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
        common::tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(common::tool_list(&[
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
