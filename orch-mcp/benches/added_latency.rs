//! The latency `orch mcp` adds to a `tools/call`, measured the way
//! `orch-policy/benches/ext_mcp.rs` measures `orch policy` (docs/performance.md): an
//! open loop at a fixed offered load over loopback, each call timed from its scheduled
//! start, against an rmcp tool server over Streamable HTTP that answers at once —
//! called directly, then through the gateway (sessions in memory). The difference of
//! the two distributions is what the gateway adds: one more HTTP hop, the decision, the
//! lease and the record. The same calls also go through a reverse proxy that forwards
//! bytes and reads nothing of MCP ([`serve_forwarding`]): the floor of any gateway on
//! these cores, one more HTTP exchange and nothing else. Then the saturation throughput
//! of each: 32 callers, each on a session of its own, calling back to back for 3 s.
//!
//! ```sh
//! cargo bench -p orch-mcp --bench added_latency           # 1,000 calls/s for 10 s
//! ORCH_BENCH_RATE=500 cargo bench -p orch-mcp --bench added_latency
//! ORCH_BENCH_WORKERS=1 cargo bench -p orch-mcp --bench added_latency  # one thread a side
//! ORCH_BENCH_ONLY="orch mcp" cargo bench -p orch-mcp --bench added_latency  # saturate one (to profile it)
//! ```
//!
//! The servers' runtime and the clients' have two worker threads each, as `orch mcp`
//! runs, unless `ORCH_BENCH_WORKERS` says otherwise. The run begins by printing how often
//! the machine itself stalls a busy thread, against which to read the tail.

// The tests' gateway helpers (the rest of that module is not used here).
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;

use orch_test_support::mcp_load::{
    measure, saturate, serve_forwarding, serve_tools, Clients, CALLERS, DESK, SESSIONS,
};
use orch_test_support::pacing::{self, env_or, percentile};
use std::time::Duration;

fn main() {
    if !pacing::benchmarking() {
        return;
    }
    let rate = env_or("ORCH_BENCH_RATE", 1_000);
    let seconds = env_or("ORCH_BENCH_SECONDS", 10);
    // The servers' runtime (the tool server and the gateway), and the clients'.
    let servers = pacing::side_runtime("servers");
    let clients = pacing::side_runtime("clients");
    let (upstream, gateway, proxy) = servers.block_on(async {
        // `TCP_NODELAY` on: with Nagle's algorithm on (axum's default) a proxy's
        // kept-alive connections wait up to 40 ms for a delayed acknowledgement between
        // an answer's events (orch mcp acknowledges at once; the proxy does not).
        let upstream = serve_tools(true).await;
        let gateway = common::gateway_over_http(DESK, &upstream).await;
        let proxy = serve_forwarding(&upstream).await;
        (upstream, gateway, proxy)
    });
    println!(
        "the machine, every core busy for 5 s: {}",
        pacing::stalls(Duration::from_secs(5))
    );
    println!("orch mcp, tools/call over loopback Streamable HTTP, {rate} calls/s offered for {seconds} s over {SESSIONS} sessions:");
    let how = Clients::default();
    // One target saturated alone, to profile it: `directly`, `proxy` or `orch mcp`.
    if let Ok(only) = std::env::var("ORCH_BENCH_ONLY") {
        let url = match only.as_str() {
            "directly" => &upstream,
            "proxy" => &proxy,
            _ => &gateway,
        };
        let saturated = clients.block_on(saturate(url, CALLERS, 0, &how));
        println!("  saturated ({CALLERS} callers back to back), {only}: {saturated:.0} calls/s");
        return;
    }
    let direct = clients.block_on(measure(&upstream, rate, seconds, SESSIONS, &how));
    let forwarded = clients.block_on(measure(&proxy, rate, seconds, SESSIONS, &how));
    let through = clients.block_on(measure(&gateway, rate, seconds, SESSIONS, &how));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("  tool server directly: {direct}");
    println!("  through a proxy that forwards bytes: {forwarded}");
    println!("  through orch mcp: {through}");
    let direct = direct.latencies;
    let added = |what: &str, through: &[Duration]| {
        let added = |p| ms(percentile(through, p)) - ms(percentile(&direct, p));
        println!(
            "  added by {what}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
            added(50.0),
            added(90.0),
            added(99.0)
        );
    };
    added("the proxy", &forwarded.latencies);
    added("orch mcp", &through.latencies);
    let direct = clients.block_on(saturate(&upstream, CALLERS, 0, &how));
    let forwarded = clients.block_on(saturate(&proxy, CALLERS, 0, &how));
    let through = clients.block_on(saturate(&gateway, CALLERS, 0, &how));
    println!(
        "  saturated ({CALLERS} callers back to back): the tool server directly {direct:.0} calls/s, through the proxy {forwarded:.0} calls/s ({:.0} %), through orch mcp {through:.0} calls/s ({:.0} %)",
        100.0 * forwarded / direct,
        100.0 * through / direct,
    );
    drop(clients);
    servers.shutdown_timeout(Duration::from_secs(1));
}
