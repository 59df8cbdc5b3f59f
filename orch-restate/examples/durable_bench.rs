//! What a durable call costs: the refund desk's three calls per run (look up, refund,
//! email) through the in-memory session, and through `OrchRun` on a real
//! `restate-server` — per call p50/p99 and calls/s, one client and eight — and how long
//! a run takes to continue after its service is killed mid-call and started again.
//! Restate's own floor is measured beside `OrchRun` in the same run: `Floor/call`, a
//! virtual object whose handler does one journaled `ctx.run` (the tool, answering at
//! once) and one state write, on the same server, through the same client.
//! docs/performance.md keeps the numbers.
//!
//! ```sh
//! cargo run --release -p orch-restate --example durable_bench
//! ```
//!
//! Needs restate-server (`restate/` after `cargo xtask test`, or `ORCH_RESTATE_SERVER`).

#[path = "../tests/harness/mod.rs"]
mod harness;

use orch_agent::protocol::{self, ToolResult};
use orch_agent::Policy;
use orch_restate::{Runs, ToolCall, ToolError};
use orch_runtime::{Call, CallDigest, DynSession};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The refund desk: look the order up, refund it (a human approves refunds of 100 or
/// more), tell the customer.
const DESK: &str = include_str!("../tests/desk.json");

/// A run's calls.
fn calls(run: &str) -> [(&'static str, String); 3] {
    [
        ("lookup_order", json!({"order": run}).to_string()),
        (
            "issue_refund",
            json!({"order": run, "amount": 20}).to_string(),
        ),
        ("send_email", json!({"to": "c@example.com"}).to_string()),
    ]
}

fn result() -> Value {
    json!({"content": [{"type": "text", "text": "done"}]})
}

/// Restate's floor for a durable call: a virtual object whose handler journals one step
/// (the tool, answering at once) and writes one state entry — what `OrchRun/call` does
/// at the least, without judging anything.
struct Floor;

mod floor {
    #![allow(missing_docs)]
    use super::*;
    use restate_sdk::prelude::*;

    #[restate_sdk::object]
    impl Floor {
        #[handler]
        async fn call(
            &self,
            ctx: ObjectContext<'_>,
            request: Json<Value>,
        ) -> HandlerResult<Json<Value>> {
            let tool = request.0["tool"].as_str().unwrap_or("tool").to_owned();
            let Json(ran) = ctx.run(|| async { Ok(Json(result())) }).name(&tool).await?;
            ctx.set("last", ran.to_string().into_bytes());
            Ok(Json(json!({"outcome": "ran", "result": ran})))
        }
    }
}

/// The service (this program run again with `DURABLE_BENCH_SERVE=<port>`): every tool
/// answers at once, except a lookup of an order named HOLD…, which writes `started` in
/// `DURABLE_BENCH_DIR` and waits for `release` there. [`Floor`] is served on the next
/// port `DURABLE_BENCH_FLOOR` names.
fn serve(port: &str) {
    let dir = PathBuf::from(std::env::var("DURABLE_BENCH_DIR").unwrap_or_default());
    let machine = orch_codegen::compile_json(DESK, None)
        .to_machine()
        .expect("the desk compiles");
    let runs = Runs::new().template(machine, move |call: ToolCall| {
        let dir = dir.clone();
        async move {
            if call.arguments.contains("HOLD") {
                let _ = std::fs::write(dir.join("started"), b"");
                while !dir.join("release").exists() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            Ok::<_, ToolError>(result())
        }
    });
    let address = format!("127.0.0.1:{port}").parse().expect("an address");
    let floor_port = std::env::var("DURABLE_BENCH_FLOOR").unwrap_or_default();
    let floor_address: std::net::SocketAddr = format!("127.0.0.1:{floor_port}")
        .parse()
        .expect("an address");
    let floor = restate_sdk::prelude::Endpoint::builder()
        .bind(Floor)
        .build();
    tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(async move {
            // The floor is served as `OrchRun` is: HTTP/2 with `TCP_NODELAY`.
            let floor_listener = tokio::net::TcpListener::bind(floor_address)
                .await
                .expect("the floor listens");
            let (served, ()) = tokio::join!(
                runs.serve(address),
                orch_restate::serve_endpoint(floor, floor_listener, std::future::pending())
            );
            served.expect("the service listens");
        });
}

/// The service on `port` (`OrchRun`) and `floor` ([`Floor`]).
fn service(port: u16, floor: u16, dir: &Path) -> Child {
    let child = Command::new(std::env::current_exe().expect("this program"))
        .env("DURABLE_BENCH_SERVE", port.to_string())
        .env("DURABLE_BENCH_FLOOR", floor.to_string())
        .env("DURABLE_BENCH_DIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the service starts");
    harness::wait_for_port(port, "the service");
    harness::wait_for_port(floor, "the floor service");
    child
}

/// ns per call through the in-memory session (admit, the tool's result read, record).
fn in_memory(runs: usize) -> f64 {
    let machine = orch_codegen::compile_json(DESK, None)
        .to_machine()
        .expect("the desk compiles");
    let policy = Policy::new(machine.tools().iter().cloned());
    let names: Vec<String> = (0..runs).map(|i| format!("run{i}")).collect();
    let start = Instant::now();
    for run in &names {
        let mut session = DynSession::new(&machine);
        policy.prepare(&mut session);
        for (tool, arguments) in calls(run) {
            let call = Call::new(CallDigest::of_text(tool, &arguments), &arguments);
            assert!(policy.admit_call(&mut session, tool, &call).is_ok());
            let result = result();
            assert_eq!(protocol::classify(&result), ToolResult::Ran);
            policy.record_result(&mut session, tool, &result.to_string());
        }
        std::hint::black_box(session.snapshot_bytes());
    }
    start.elapsed().as_nanos() as f64 / (runs * 3) as f64
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at].as_secs_f64() * 1e3
}

/// Runs `runs` runs' calls on `clients` clients at once: every call's latency, and the
/// time it all took.
async fn durable(
    http: &reqwest::Client,
    ingress: &str,
    service: &str,
    prefix: &str,
    runs: usize,
    clients: usize,
) -> (Vec<Duration>, Duration) {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (http, ingress, service, prefix) = (
            http.clone(),
            ingress.to_owned(),
            service.to_owned(),
            prefix.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for r in (c..runs).step_by(clients) {
                let run = format!("{prefix}{r}");
                for (tool, arguments) in calls(&run) {
                    let body = format!(r#"{{"tool": "{tool}", "arguments": {arguments}}}"#);
                    let t = Instant::now();
                    let answer = http
                        .post(format!("{ingress}/{service}/{run}/call"))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                        .expect("the ingress answers");
                    let reply: Value = answer.json().await.expect("a reply");
                    latencies.push(t.elapsed());
                    assert_eq!(reply["outcome"], "ran", "{reply}");
                }
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a client"));
    }
    let took = start.elapsed();
    all.sort();
    (all, took)
}

fn main() {
    if let Ok(port) = std::env::var("DURABLE_BENCH_SERVE") {
        serve(&port);
        return;
    }
    let runs: usize = std::env::var("DURABLE_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let memory_ns = in_memory(20_000);
    println!(
        "in-memory session: {memory_ns:.0} ns per call ({:.0} calls/s)",
        1e9 / memory_ns
    );

    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        // Removed when the example ends (after the server: declared before it).
        let dir = orch_test_support::scratch::Scratch::new("durable-bench");
        let server = harness::Server::start(&dir);
        let port = harness::free_port();
        let floor_port = harness::free_port();
        let mut child = service(port, floor_port, &dir);
        let http = reqwest::Client::new();
        for p in [port, floor_port] {
            harness::register(&http, &server.admin_url(), &format!("http://127.0.0.1:{p}")).await;
        }
        let ingress = server.ingress_url();
        durable(&http, &ingress, "OrchRun", "warm", 30, 1).await;
        durable(&http, &ingress, "Floor", "warm", 30, 1).await;

        // Alternating rounds, so that a slow minute of the machine lands on both.
        println!(
            "\n| service | clients | calls | p50 ms | p99 ms | calls/s |\n|---|---|---|---|---|---|"
        );
        let mut p50 = [Vec::new(), Vec::new()];
        for round in 0..3 {
            for clients in [1, 8] {
                for (at, service) in ["OrchRun", "Floor"].into_iter().enumerate() {
                    let prefix = format!("r{round}c{clients}");
                    let (latencies, took) =
                        durable(&http, &ingress, service, &prefix, runs, clients).await;
                    let median = percentile(&latencies, 0.5);
                    if clients == 1 {
                        p50[at].push(median);
                    }
                    println!(
                        "| {service} | {clients} | {} | {median:.2} | {:.2} | {:.0} |",
                        latencies.len(),
                        percentile(&latencies, 0.99),
                        latencies.len() as f64 / took.as_secs_f64()
                    );
                }
            }
        }
        let ratios: Vec<String> = p50[0]
            .iter()
            .zip(&p50[1])
            .map(|(run, floor)| format!("{:.2}×", run / floor))
            .collect();
        println!(
            "\nOrchRun/call over the floor at p50, one client, by round: {}",
            ratios.join(", ")
        );

        println!("\nrestart of the service killed mid-call (SIGKILL), to the call's answer:");
        let mut trials = Vec::new();
        for trial in 0..5 {
            let _ = std::fs::remove_file(dir.join("started"));
            let _ = std::fs::remove_file(dir.join("release"));
            let run = format!("restart{trial}");
            let answer: Value = http
                .post(format!("{ingress}/OrchRun/{run}/call/send"))
                .json(&json!({"tool": "lookup_order", "arguments": {"order": "HOLD"}}))
                .send()
                .await
                .expect("the ingress answers")
                .json()
                .await
                .expect("an invocation");
            let id = answer["invocationId"].as_str().expect("an id").to_owned();
            while !dir.join("started").exists() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
            std::fs::write(dir.join("release"), b"").expect("release");
            let restarted = Instant::now();
            child = service(port, floor_port, &dir);
            let listening = restarted.elapsed();
            let output: Value = http
                .get(format!("{ingress}/restate/invocation/{id}/attach"))
                .send()
                .await
                .expect("the ingress answers")
                .json()
                .await
                .expect("an output");
            let continued = restarted.elapsed();
            assert_eq!(output["outcome"], "ran", "{output}");
            println!(
                "  trial {trial}: listening after {:.0} ms, the call answered after {:.0} ms",
                listening.as_secs_f64() * 1e3,
                continued.as_secs_f64() * 1e3
            );
            trials.push(continued);
        }
        trials.sort();
        println!(
            "  median {:.0} ms (min {:.0}, max {:.0})",
            trials[2].as_secs_f64() * 1e3,
            trials[0].as_secs_f64() * 1e3,
            trials[4].as_secs_f64() * 1e3
        );
        let _ = child.kill();
        let _ = child.wait();
        drop(server);
    });
}
