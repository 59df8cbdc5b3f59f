//! An HTTP upstream says what is not about one request (a question a tool asks without
//! naming its call, a log line) on its standalone stream — the GET the client opens once
//! the upstream has named a session — and a server drops what it says while that stream
//! is not open (the official TypeScript SDK's server does). So `orch mcp` forwards
//! nothing to an HTTP upstream before that GET has been answered: here the upstream's
//! GETs are held back for a while, and a tool call made the moment the client's handshake
//! ends must still find the stream open.

#[allow(dead_code)]
mod common;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const DESK: &str = r#"{
  "name": "desk",
  "tools": ["ask"],
  "orchestration": {"steps": [{"name": "Desk", "isDefault": true}]}
}"#;

/// How long the upstream holds a GET before serving it.
const GET_DELAY: Duration = Duration::from_millis(1500);

/// A tool server whose `ask` fails when the standalone stream was not open yet (where the
/// TypeScript SDK would have dropped the tool's question).
#[derive(Clone)]
struct Upstairs {
    standalone_open: Arc<AtomicBool>,
}

impl ServerHandler for Upstairs {
    fn get_info(&self) -> rmcp::model::InitializeResult {
        orch_test_support::mcp_load::tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(orch_test_support::mcp_load::tool_list(&["ask"]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.standalone_open.load(Ordering::SeqCst) {
            return Err(ErrorData::internal_error(
                "the call arrived before the standalone stream was open: a question asked on it now would be lost",
                None,
            ));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("asked")]).into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_reaches_an_http_upstream_before_its_standalone_stream_is_open() {
    let standalone_open = Arc::new(AtomicBool::new(false));
    let server = Upstairs {
        standalone_open: Arc::clone(&standalone_open),
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let opened = Arc::clone(&standalone_open);
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let opened = Arc::clone(&opened);
                async move {
                    if request.method() == axum::http::Method::GET {
                        tokio::time::sleep(GET_DELAY).await;
                        opened.store(true, Ordering::SeqCst);
                    }
                    next.run(request).await
                }
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let url = common::gateway_over_http(DESK, &upstream).await;

    // Each client session has a connection of its own upstream, whose GET is held anew.
    for session in 0..2 {
        standalone_open.store(false, Ordering::SeqCst);
        let client =
            ().serve(StreamableHttpClientTransport::from_uri(url.clone()))
                .await
                .expect("the handshake");
        let result = client
            .peer()
            .call_tool(CallToolRequestParams::new("ask"))
            .await;
        assert!(
            result.as_ref().is_ok_and(|r| r.is_error != Some(true)),
            "session {session}: {result:?}"
        );
        let _ = client.cancel().await;
    }
}
