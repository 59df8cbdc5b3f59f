//! What `orch policy` costs behind a real agentgateway: the same MCP tool calls through
//! three agentgateway processes — one with no policy, one whose `mcpGuardrails` processor
//! allows everything at once (orch's messages, answered without looking: the floor any
//! policy server stands on), and one asking `orch policy` about every `tools/call` (both
//! phases, runs in memory) — in rounds within one run:
//!
//! - **added latency** at a fixed offered load (open loop, each call timed from its
//!   scheduled start): p50, p90 and p99 through each gateway, and the difference;
//! - **saturation**: 32 callers back to back, each on an MCP session of its own, through
//!   each gateway: calls per second, and the share the policy costs.
//!
//! Clients are rmcp's Streamable HTTP client (each session its own run, named by an
//! `x-orch-run` header the gateway passes on as the run's metadata); the tool server is
//! rmcp's Streamable HTTP server answering at once; `orch policy`, the allow-everything
//! server and the tool server share one runtime of two worker threads, the clients
//! another, and each agentgateway runs as its own process with its default threads.
//! Everything shares the machine's cores.
//!
//! agentgateway is not built here (it takes its own toolchain and about half an hour): build it
//! once with `orch-policy/benches/agentgateway/build.py` (from its source at v1.4.1),
//! then
//!
//! ```sh
//! AGENTGATEWAY=target/agentgateway/target/release/agentgateway \
//!     cargo bench -p orch-policy --bench agentgateway
//! ORCH_BENCH_ROUNDS=5 ORCH_BENCH_SECONDS=5 AGENTGATEWAY=... cargo bench -p orch-policy --bench agentgateway
//! ```
//!
//! The numbers go to docs/performance.md.

use orch_policy::Options;
use orch_store::MemoryStore;
use orch_test_support::ext_mcp::{serve_allow_all, start};
use orch_test_support::mcp_load::{
    measure, saturate, serve_tools, Clients, CALLERS, DESK, SESSIONS,
};
use orch_test_support::pacing::{self, env_or};
use orch_test_support::scratch::Scratch;
use rmcp::model::ProtocolVersion;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The header naming a session's run, which the gateway hands `orch policy` as `run`.
const RUN_HEADER: &str = "x-orch-run";

fn main() {
    if !pacing::benchmarking() {
        return;
    }
    let Some(binary) = std::env::var_os("AGENTGATEWAY").map(PathBuf::from) else {
        eprintln!(
            "set AGENTGATEWAY to an agentgateway binary (build one from its source with \
             `python3 orch-policy/benches/agentgateway/build.py`)"
        );
        std::process::exit(2);
    };
    let rate = env_or("ORCH_BENCH_RATE", 1_000);
    let seconds = env_or("ORCH_BENCH_SECONDS", 10);
    let rounds = env_or("ORCH_BENCH_ROUNDS", 3);
    let servers = pacing::side_runtime("servers");
    let clients = pacing::side_runtime("clients");
    let (tools, policy, allow_all) = servers.block_on(async {
        // With Nagle on, agentgateway's kept-alive upstream connections wait for a delayed
        // ACK between the answer's SSE events: p50 44 ms a call.
        let tools = serve_tools(true).await;
        let policy = start(DESK, MemoryStore::new(), Options::default()).await;
        (tools, policy, serve_allow_all().await)
    });
    let scratch = Scratch::new("agentgateway-bench");
    let dir = scratch.path();
    let gateways = [
        (
            "no policy",
            Agentgateway::spawn(&binary, dir, "plain", &tools, None),
        ),
        (
            "a policy server allowing all",
            Agentgateway::spawn(&binary, dir, "allow-all", &tools, Some(&allow_all)),
        ),
        (
            "orch policy",
            Agentgateway::spawn(&binary, dir, "orch", &tools, Some(&policy)),
        ),
    ];
    println!("{}", version(&binary));
    println!(
        "the machine, every core busy for 5 s: {}",
        pacing::stalls(Duration::from_secs(5))
    );
    println!(
        "agentgateway, tools/call over loopback Streamable HTTP, {rate} calls/s offered for {seconds} s over {SESSIONS} sessions, {rounds} rounds:"
    );
    // agentgateway v1.4.1 takes the 2025 revisions, not rmcp's newest.
    let how = Clients {
        run_header: Some(RUN_HEADER),
        protocol: Some(ProtocolVersion::V_2025_06_18),
    };
    for round in 1..=rounds {
        println!("  round {round}:");
        let mut p50s = Vec::new();
        for (what, gateway) in &gateways {
            let paced = clients.block_on(measure(&gateway.url, rate, seconds, SESSIONS, &how));
            println!("    {what}: {paced}");
            p50s.push(paced.ms(50.0));
        }
        println!(
            "    added at p50: by a policy server allowing all {:.3} ms, by orch policy {:.3} ms ({:.3} ms above allowing all)",
            p50s[1] - p50s[0],
            p50s[2] - p50s[0],
            p50s[2] - p50s[1]
        );
        let saturated: Vec<f64> = gateways
            .iter()
            .map(|(_, gateway)| clients.block_on(saturate(&gateway.url, CALLERS, SESSIONS, &how)))
            .collect();
        println!(
            "    saturated ({CALLERS} callers back to back): no policy {:.0} calls/s, allowing all {:.0} calls/s ({:.1} % less), orch policy {:.0} calls/s ({:.1} % less; {:.1} % less than allowing all)",
            saturated[0],
            saturated[1],
            (1.0 - saturated[1] / saturated[0]) * 100.0,
            saturated[2],
            (1.0 - saturated[2] / saturated[0]) * 100.0,
            (1.0 - saturated[2] / saturated[1]) * 100.0,
        );
    }
    drop(gateways);
    drop(clients);
    servers.shutdown_timeout(Duration::from_secs(1));
}

/// The binary's version and revision, from what `--version` prints (JSON).
fn version(binary: &Path) -> String {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", binary.display()));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    format!(
        "agentgateway {} ({})",
        printed["version"].as_str().unwrap_or("of unknown version"),
        printed["git_revision"]
            .as_str()
            .unwrap_or("revision not printed")
    )
}

/// An agentgateway process, killed on drop.
struct Agentgateway {
    child: Child,
    url: String,
}

impl Agentgateway {
    /// Starts agentgateway in front of `tools`, asking the ExtMcp server at `policy`
    /// about every `tools/call` when there is one, and waits until it answers.
    fn spawn(
        binary: &Path,
        dir: &Path,
        name: &str,
        tools: &str,
        policy: Option<&str>,
    ) -> Agentgateway {
        let [port, admin, stats, readiness] = free_ports();
        let guardrails = policy.map_or(String::new(), |url| {
            let host = url.trim_start_matches("http://");
            format!(
                r#"  policies:
    mcpGuardrails:
      processors:
      - kind: remote
        host: {host}
        failureMode: failClosed
        methods:
          tools/call: full
        metadata:
          run: 'request.headers["{RUN_HEADER}"]'
          orch_call: 'mcpGuardrails.orch_call'
"#
            )
        });
        let config = format!(
            "mcp:\n  port: {port}\n{guardrails}  targets:\n  - name: tools\n    mcp:\n      host: {tools}\n"
        );
        let config_path = dir.join(format!("{name}.yaml"));
        std::fs::write(&config_path, config).expect("writing the gateway's configuration");
        let log_path = dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).expect("creating the gateway's log");
        let child = Command::new(binary)
            .arg("--file")
            .arg(&config_path)
            .env("ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .env("STATS_ADDR", format!("127.0.0.1:{stats}"))
            .env("READINESS_ADDR", format!("127.0.0.1:{readiness}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let gateway = Agentgateway {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "agentgateway ({name}) did not listen on {port} within 30 s; its log:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        gateway
    }
}

impl Drop for Agentgateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Four free loopback ports (held together while chosen, so they differ).
fn free_ports() -> [u16; 4] {
    let listeners: Vec<_> = (0..4)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("a bound port").port())
}
