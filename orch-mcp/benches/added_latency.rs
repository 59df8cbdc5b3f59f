//! The latency `orch mcp` adds to a `tools/call`, measured the way
//! `orch-policy/benches/ext_mcp.rs` measures `orch policy` (docs/performance.md): an
//! open loop at a fixed offered load over loopback, each call timed from its scheduled
//! start, against an rmcp tool server over Streamable HTTP that answers at once —
//! called directly, then through the gateway (sessions in memory). The difference of
//! the two distributions is what the gateway adds: one more HTTP hop, the decision, the
//! lease and the record. Then the saturation throughput of each: 32 callers, each on a
//! session of its own, calling back to back for 3 s.
//!
//! ```sh
//! cargo bench -p orch-mcp --bench added_latency           # 1,000 calls/s for 10 s
//! ORCH_BENCH_RATE=500 cargo bench -p orch-mcp --bench added_latency
//! ORCH_BENCH_WORKERS=1 cargo bench -p orch-mcp --bench added_latency  # one thread a side
//! ```
//!
//! The servers' runtime and the clients' have two worker threads each, as `orch mcp`
//! runs, unless `ORCH_BENCH_WORKERS` says otherwise. The run begins by printing how often
//! the machine itself stalls a busy thread, against which to read the tail.

// The tests' rmcp tool-server helpers (the rest of that module is not used here).
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;

use orch_test_support::pacing::{self, env_or, percentile};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams,
};
use rmcp::service::{Peer, RequestContext, RunningService};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;
use std::time::Duration;

/// Every call is allowed: the gateway's full path (admit and lease, forward, record).
const DESK: &str = r#"{
  "name": "desk",
  "tools": ["search"],
  "orchestration": {"steps": [{"name": "Desk", "isDefault": true}]}
}"#;

/// Client sessions the calls are spread over (a session's calls are admitted one at a
/// time, so each sees a call every `SESSIONS / rate` seconds).
const SESSIONS: usize = 50;

/// Callers of the saturation run, each with a session of its own.
const CALLERS: usize = 32;

/// A tool server that answers at once.
#[derive(Clone)]
struct Instant_;

impl ServerHandler for Instant_ {
    fn get_info(&self) -> rmcp::model::InitializeResult {
        common::tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(common::tool_list(&["search"]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text("found")]).into())
    }
}

fn main() {
    if !pacing::benchmarking() {
        return;
    }
    let rate = env_or("ORCH_BENCH_RATE", 1_000);
    let seconds = env_or("ORCH_BENCH_SECONDS", 10);
    // The servers' runtime (the tool server and the gateway), and the clients'.
    let servers = pacing::side_runtime();
    let clients = pacing::side_runtime();
    let (upstream, gateway) = servers.block_on(async {
        let upstream = serve_tools().await;
        let gateway = common::gateway_over_http(DESK, &upstream).await;
        (upstream, gateway)
    });
    println!(
        "the machine, every core busy for 5 s: {}",
        pacing::stalls(Duration::from_secs(5))
    );
    println!("orch mcp, tools/call over loopback Streamable HTTP, {rate} calls/s offered for {seconds} s over {SESSIONS} sessions:");
    let direct = clients.block_on(measure(&upstream, rate, seconds));
    let through = clients.block_on(measure(&gateway, rate, seconds));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (what, paced) in [
        ("tool server directly", &direct),
        ("through orch mcp", &through),
    ] {
        let l = &paced.latencies;
        println!(
            "  {what}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, worst {:.3} ms over {} calls (started late by the pacer: p99 {:.3} ms)",
            ms(percentile(l, 50.0)),
            ms(percentile(l, 90.0)),
            ms(percentile(l, 99.0)),
            ms(*l.last().unwrap()),
            l.len(),
            ms(percentile(&paced.late, 99.0)),
        );
    }
    let (direct, through) = (direct.latencies, through.latencies);
    let added = |p| ms(percentile(&through, p)) - ms(percentile(&direct, p));
    println!(
        "  added by orch mcp: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
        added(50.0),
        added(90.0),
        added(99.0)
    );
    let direct = clients.block_on(saturate(&upstream));
    let through = clients.block_on(saturate(&gateway));
    println!(
        "  saturated ({CALLERS} callers back to back): the tool server directly {direct:.0} calls/s, through orch mcp {through:.0} calls/s"
    );
    drop(clients);
    servers.shutdown_timeout(Duration::from_secs(1));
}

/// The tool server over Streamable HTTP on a free loopback port: its URL.
async fn serve_tools() -> String {
    let service = StreamableHttpService::new(
        || Ok(Instant_),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

/// Sessions on `url`, each warmed up by one call.
async fn sessions(url: &str, n: usize) -> Vec<RunningService<RoleClient, ()>> {
    let mut sessions: Vec<RunningService<RoleClient, ()>> = Vec::new();
    for _ in 0..n {
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        let session = ().serve(transport).await.expect("a session");
        search(session.peer().clone()).await;
        sessions.push(session);
    }
    sessions
}

/// One `tools/call` of `search`, which must succeed.
async fn search(peer: Peer<RoleClient>) {
    let result = peer
        .call_tool(CallToolRequestParams::new("search"))
        .await
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true));
}

/// Ends the sessions.
async fn close(sessions: Vec<RunningService<RoleClient, ()>>) {
    for session in sessions {
        let _ = session.cancel().await;
    }
}

/// `CALLERS` callers against `url`, each on a session of its own, calling back to back
/// for 3 s: calls completed per second.
async fn saturate(url: &str) -> f64 {
    let sessions = sessions(url, CALLERS).await;
    let peers: Vec<_> = sessions.iter().map(|s| s.peer().clone()).collect();
    let per_second = pacing::closed_loop(CALLERS, Duration::from_secs(3), move |caller, _| {
        search(peers[caller].clone())
    })
    .await;
    close(sessions).await;
    per_second
}

/// `rate` calls a second for `seconds` against `url`, over `SESSIONS` sessions, each
/// started on schedule (a thread of its own paces them): each call's latency from its
/// scheduled start, sorted, and how late the pacer started them.
async fn measure(url: &str, rate: u64, seconds: u64) -> pacing::OpenLoop {
    let sessions = sessions(url, SESSIONS).await;
    let peers: Vec<_> = sessions.iter().map(|s| s.peer().clone()).collect();
    let latencies =
        pacing::open_loop(rate, seconds, move |i| search(peers[i % SESSIONS].clone())).await;
    close(sessions).await;
    latencies
}
