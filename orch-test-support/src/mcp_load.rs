//! MCP traffic for the gateway benchmarks (`orch mcp`'s and `orch policy` behind
//! agentgateway) and tests: rmcp tool servers over Streamable HTTP (one that answers at
//! once), client sessions, and the two loads every gateway row is measured under — an open loop at a
//! fixed rate, and callers back to back.

use crate::pacing;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, ContentBlock,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    Tool,
};
use rmcp::service::{Peer, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A template whose one tool, `search`, is always allowed: a gateway's full path (admit
/// and lease, forward, record, release) with no call ever refused.
pub const DESK: &str = r#"{
  "name": "desk",
  "tools": ["search"],
  "orchestration": {"steps": [{"name": "Desk", "isDefault": true}]}
}"#;

/// Client sessions an open loop's calls are spread over (a session's calls are admitted
/// one at a time, so each sees a call every `SESSIONS / rate` seconds).
pub const SESSIONS: usize = 50;

/// Callers of a saturation run, each with a session of its own.
pub const CALLERS: usize = 32;

/// A tool server whose tools (these names, each taking any object) answer `found` at
/// once.
#[derive(Clone, Copy, Debug)]
pub struct AnswersAtOnce(pub &'static [&'static str]);

impl ServerHandler for AnswersAtOnce {
    fn get_info(&self) -> InitializeResult {
        tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(tool_list(self.0))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text("found")]).into())
    }
}

/// What an rmcp tool server says about itself: it serves tools.
pub fn tool_server_info() -> InitializeResult {
    let mut info = InitializeResult::default();
    info.capabilities = ServerCapabilities::builder().enable_tools().build();
    info
}

/// `names` as an rmcp tool list: each `the NAME tool`, taking any object.
pub fn tool_list(names: &[&str]) -> ListToolsResult {
    let schema = Arc::new(serde_json::Map::from_iter([(
        "type".to_owned(),
        serde_json::Value::from("object"),
    )]));
    let tools = names
        .iter()
        .map(|name| {
            Tool::new(
                name.to_string(),
                format!("the {name} tool"),
                Arc::clone(&schema),
            )
        })
        .collect();
    ListToolsResult::with_all_items(tools)
}

/// [`AnswersAtOnce`] with one tool, `search`, over Streamable HTTP on a free loopback
/// port: its URL (see [`serve_http`] for `nodelay`).
pub async fn serve_tools(nodelay: bool) -> String {
    serve_http(AnswersAtOnce(&["search"]), nodelay).await
}

/// `handler` (a fresh clone per session) over Streamable HTTP at `/mcp` on a free
/// loopback port, served until the runtime ends: its URL. With `nodelay`, its
/// connections set `TCP_NODELAY`; without, they keep Nagle's algorithm, as axum's
/// default does (a client that keeps connections alive then waits for a delayed ACK
/// between an answer's SSE events unless it acknowledges at once).
///
/// # Panics
/// When no loopback port can be bound (a test cannot go on without one).
pub async fn serve_http<H>(handler: H, nodelay: bool) -> String
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let addr = serve_router(axum::Router::new().nest_service("/mcp", service), nodelay).await;
    format!("http://{addr}/mcp")
}

/// `app` on a free loopback port, served until the runtime ends: its address. With
/// `nodelay`, its connections set `TCP_NODELAY`.
///
/// # Panics
/// When no loopback port can be bound.
async fn serve_router(app: axum::Router, nodelay: bool) -> std::net::SocketAddr {
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound port");
    let listener = listener.tap_io(move |stream| {
        if nodelay {
            let _ = stream.set_nodelay(true);
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A reverse proxy on a free loopback port that forwards every HTTP request to
/// `upstream`'s server as it is and streams the answer back, reading nothing of MCP: a
/// gateway's floor (one more HTTP exchange on the same cores, no decision). Its
/// connections to the upstream are kept alive and pooled, and both sides set
/// `TCP_NODELAY`. Served until the runtime ends: its URL, with `upstream`'s path.
///
/// # Panics
/// When `upstream` is not an `http://` URL or no loopback port can be bound.
pub async fn serve_forwarding(upstream: &str) -> String {
    use axum::response::IntoResponse;
    use hyper_util::client::legacy::{connect::HttpConnector, Client};
    let upstream: http::Uri = upstream.parse().expect("an upstream URL");
    let authority = upstream.authority().expect("an upstream host").clone();
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, axum::body::Body> =
        Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let host = http::HeaderValue::from_str(authority.as_str()).expect("a host header");
    let forward = move |mut request: axum::extract::Request| {
        let client = client.clone();
        let host = host.clone();
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str);
        let uri = http::Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query(path)
            .build();
        async move {
            let Ok(uri) = uri else {
                return http::StatusCode::BAD_REQUEST.into_response();
            };
            *request.uri_mut() = uri;
            request.headers_mut().insert(http::header::HOST, host);
            match client.request(request).await {
                Ok(answer) => answer.map(axum::body::Body::new),
                Err(e) => (http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
            }
        }
    };
    let addr = serve_router(axum::Router::new().fallback(forward), true).await;
    format!("http://{addr}{}", upstream.path())
}

/// How the clients connect.
#[derive(Clone, Debug, Default)]
pub struct Clients {
    /// A header naming each session's run, `run-{i}` for session `i` (a gateway passes
    /// it on to its policy server).
    pub run_header: Option<&'static str>,
    /// The protocol revision offered (rmcp's newest when `None`).
    pub protocol: Option<ProtocolVersion>,
}

/// A client session.
pub type Session = RunningService<RoleClient, ClientConfig>;

/// Sessions `first..first + n` on `url`, each warmed up by one call.
///
/// # Panics
/// When a session cannot be made or its first call fails.
pub async fn sessions(url: &str, first: usize, n: usize, how: &Clients) -> Vec<Session> {
    let mut sessions = Vec::with_capacity(n);
    for i in first..first + n {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        if let Some(name) = how.run_header {
            let name = http::HeaderName::from_static(name);
            let value = http::HeaderValue::from_str(&format!("run-{i}")).expect("a header value");
            config = config.custom_headers(HashMap::from([(name, value)]));
        }
        let mut client = ClientConfig::default();
        if let Some(protocol) = &how.protocol {
            client.protocol_version = protocol.clone();
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let session = client.serve(transport).await.expect("an MCP session");
        search(session.peer().clone()).await;
        sessions.push(session);
    }
    sessions
}

/// One `tools/call` of `search`.
///
/// # Panics
/// When the call fails or its result is an error.
pub async fn search(peer: Peer<RoleClient>) {
    let result = peer
        .call_tool(CallToolRequestParams::new("search"))
        .await
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
}

/// Ends the sessions.
pub async fn close(sessions: Vec<Session>) {
    for session in sessions {
        let _ = session.cancel().await;
    }
}

/// `callers` callers against `url`, each on a session of its own (numbered from
/// `first`), calling back to back for 3 s: calls completed per second.
pub async fn saturate(url: &str, callers: usize, first: usize, how: &Clients) -> f64 {
    let sessions = sessions(url, first, callers, how).await;
    let peers: Vec<_> = sessions.iter().map(|s| s.peer().clone()).collect();
    let per_second = pacing::closed_loop(callers, Duration::from_secs(3), move |caller, _| {
        search(peers[caller].clone())
    })
    .await;
    close(sessions).await;
    per_second
}

/// `rate` calls a second for `seconds` against `url` over `n` sessions (numbered from
/// 0), each started on schedule: each call's latency from its scheduled start, sorted,
/// and how late the pacer started them.
pub async fn measure(
    url: &str,
    rate: u64,
    seconds: u64,
    n: usize,
    how: &Clients,
) -> pacing::OpenLoop {
    let sessions = sessions(url, 0, n, how).await;
    let peers: Vec<_> = sessions.iter().map(|s| s.peer().clone()).collect();
    let latencies = pacing::open_loop(rate, seconds, move |i| search(peers[i % n].clone())).await;
    close(sessions).await;
    latencies
}
