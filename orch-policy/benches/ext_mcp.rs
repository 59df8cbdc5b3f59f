//! What `orch policy` adds to a `tools/call` behind agentgateway, measured over loopback
//! gRPC as the gateway calls it (both phases: `CheckRequest` before the call goes
//! upstream, `CheckResponse` on its result), runs in memory and in a real
//! `redis-server` (started here; left out with a note when it is not installed):
//!
//! - **added latency** at a fixed offered load (open loop: each call starts on schedule
//!   whether or not earlier ones finished, so a stall shows in the tail instead of
//!   slowing the load down): p50, p90, p99 and the worst, from the call's scheduled
//!   start to its response phase's answer;
//! - **decisions per second** at saturation: 32 callers back to back;
//! - the same with the policy server's methods called in-process (no gRPC: the decision
//!   and the store alone), two checks of a method orch passes at once over gRPC (the
//!   transport alone, small messages), and the same two checks as orch's — the same
//!   messages both ways — answered at once by a server that allows everything without
//!   looking (the transport alone for these calls: the floor orch's rows are read
//!   against); with Redis, the same server writing a value the size of orch's record of
//!   a run once per check (one compare-and-set round trip per phase, what keeping a run
//!   in Redis costs at the least: the floor of orch's Redis row).
//!
//! The rows repeat in rounds (`ORCH_BENCH_ROUNDS`, default 1); each round ends with
//! orch's rows against the floors measured in that round (a shared VM drifts between
//! rounds more than rows of one round differ).
//!
//! Server and client share one process and the machine's cores (a gateway and its
//! policy server on one 2-core node). The numbers go to docs/performance.md:
//!
//! ```sh
//! cargo bench -p orch-policy --bench ext_mcp            # 1,000 calls/s for 10 s
//! ORCH_BENCH_RATE=2000 ORCH_BENCH_SECONDS=5 cargo bench -p orch-policy --bench ext_mcp
//! ORCH_BENCH_WORKERS=1 cargo bench -p orch-policy --bench ext_mcp  # one thread a side
//! ORCH_BENCH_ONLY="memory, over" cargo bench -p orch-policy --bench ext_mcp  # one row (to profile it)
//! ORCH_BENCH_ROUNDS=3 ORCH_BENCH_SECONDS=3 cargo bench -p orch-policy --bench ext_mcp  # every row, three times
//! ```
//!
//! Each side's runtime has two worker threads, as `orch policy` runs, unless
//! `ORCH_BENCH_WORKERS` says otherwise. The run begins by printing how often the machine
//! itself stalls a busy thread ([`orch_test_support::pacing::stalls`]), against which to
//! read the tail.

use orch_policy::wire::{
    mcp_request_result, mcp_response_result, McpRequest, McpRequestResult, McpResponse,
    McpResponseResult,
};
use orch_policy::{Options, PolicyServer, TOKEN_FIELD};
use orch_store::{MemoryStore, RedisStore, SessionStore};
use orch_test_support::ext_mcp::{
    ok_result, serve_allow_all, serve_allow_all_writing, start, string, Answered, Checked, Gateway,
};
use orch_test_support::pacing::{self, env_or};
use prost_types::value::Kind;
use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A help desk whose tools are always allowed: every call is admitted, leased, recorded
/// and released — the full path — and runs never block each other.
const DESK: &str = r#"{
  "name": "desk",
  "tools": ["search", "answer"],
  "orchestration": {
    "steps": [{"name": "Desk", "isDefault": true, "availableTools": {"allowed": ["search", "answer"]}}]
  }
}"#;

/// Runs the calls are spread over (each sees a call every `RUNS / rate` seconds, so no
/// call waits for another of its run).
const RUNS: usize = 200;

fn main() {
    if !pacing::benchmarking() {
        return;
    }
    let rate = env_or("ORCH_BENCH_RATE", 1_000);
    let seconds = env_or("ORCH_BENCH_SECONDS", 10);
    let rounds = env_or("ORCH_BENCH_ROUNDS", 1);
    println!(
        "the machine, every core busy for 5 s: {}",
        pacing::stalls(Duration::from_secs(5))
    );
    let redis = orch_test_support::redis::RedisServer::try_start();
    if redis.is_none() {
        println!("  Redis: left out (redis-server is not installed)");
    }
    for round in 1..=rounds {
        println!("orch policy, both ExtMcp phases per tools/call, {rate} calls/s offered for {seconds} s over {RUNS} runs (round {round} of {rounds}):");
        one_round(redis.as_ref().map(|r| r.url.as_str()), rate, seconds);
    }
}

/// Every row once; then orch's rows against the floors measured in the same round.
fn one_round(redis: Option<&str>, rate: u64, seconds: u64) {
    let memory = || async { MemoryStore::new() };
    measure(
        "gRPC alone (two checks passed at once)",
        Via::Floor,
        memory,
        rate,
        seconds,
    );
    let floor = measure(
        "gRPC alone, the same messages (a server that allows everything)",
        Via::AllowAll,
        memory,
        rate,
        seconds,
    );
    let in_memory = measure("memory, over gRPC", Via::Grpc, memory, rate, seconds);
    measure(
        "memory, in-process (no gRPC)",
        Via::Direct,
        memory,
        rate,
        seconds,
    );
    compare("memory", in_memory, "the same messages", floor);
    let Some(url) = redis else {
        return;
    };
    let connect = || async {
        RedisStore::connect(url)
            .await
            .expect("connect to redis-server")
    };
    let in_redis = measure("Redis, over gRPC", Via::Grpc, connect, rate, seconds);
    // The floor with Redis: the same messages answered at once after one write per
    // phase of a value the size of orch's record of a run.
    let record = server_record_len(url);
    let redis_floor = measure(
        &format!("gRPC alone, the same messages, one Redis write of {record} bytes per check"),
        Via::AllowAllWriting(record),
        connect,
        rate,
        seconds,
    );
    measure(
        "Redis, in-process (no gRPC)",
        Via::Direct,
        connect,
        rate,
        seconds,
    );
    compare("Redis", in_redis, "the same messages", floor);
    compare(
        "Redis",
        in_redis,
        "the same messages and a Redis write per check",
        redis_floor,
    );
}

/// What a row measured: its open loop's p50 (ms) and its saturation (calls/s).
type Measured = Option<(f64, f64)>;

/// Prints orch's row `what` against a floor measured in the same round (when both ran).
fn compare(what: &str, orch: Measured, floor_name: &str, floor: Measured) {
    if let (Some((p50, saturated)), Some((floor_p50, floor_saturated))) = (orch, floor) {
        println!(
            "  {what} against {floor_name}: {:.0} % of its saturation, p50 {:+.3} ms",
            100.0 * saturated / floor_saturated,
            p50 - floor_p50,
        );
    }
}

/// How the calls reach the policy server.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// Both phases over loopback gRPC, as agentgateway calls them.
    Grpc,
    /// Two checks of a method orch passes at once, over gRPC: the transport's own cost.
    Floor,
    /// The server's methods called in-process: the decisions and the store alone.
    Direct,
    /// orch's two checks, with the same messages both ways, over gRPC to a server that
    /// allows everything ([`serve_allow_all`]).
    AllowAll,
    /// As [`Via::AllowAll`], the server writing this many bytes to the store in each
    /// check ([`serve_allow_all_writing`]): one store round trip per phase.
    AllowAllWriting(usize),
}

/// The size of orch's record of a run the Redis row called (`bench-0`), in bytes.
fn server_record_len(url: &str) -> usize {
    let rt = pacing::side_runtime("record");
    rt.block_on(async {
        let store = RedisStore::connect(url)
            .await
            .expect("connect to redis-server");
        let found = store.peek(&["run:bench-0".to_owned()]).await;
        match found.as_deref() {
            Ok([Some(record)]) => record.bytes.len(),
            other => panic!("the Redis row left no record of run bench-0: {other:?}"),
        }
    })
}

/// The server's two checks, called in-process.
trait Check: Send + Sync {
    fn request(&self, r: McpRequest)
        -> Pin<Box<dyn Future<Output = McpRequestResult> + Send + '_>>;
    fn response(
        &self,
        r: McpResponse,
    ) -> Pin<Box<dyn Future<Output = McpResponseResult> + Send + '_>>;
}

impl<S: SessionStore + 'static> Check for PolicyServer<S> {
    fn request(
        &self,
        r: McpRequest,
    ) -> Pin<Box<dyn Future<Output = McpRequestResult> + Send + '_>> {
        Box::pin(self.check_request(r))
    }
    fn response(
        &self,
        r: McpResponse,
    ) -> Pin<Box<dyn Future<Output = McpResponseResult> + Send + '_>> {
        Box::pin(self.check_response(r))
    }
}

/// Where one call goes.
#[derive(Clone)]
enum Target {
    Grpc(Box<Gateway>, Via),
    Direct(Arc<dyn Check>),
}

fn measure<S, F, Fut>(what: &str, via: Via, store: F, rate: u64, seconds: u64) -> Measured
where
    S: SessionStore + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = S>,
{
    if std::env::var("ORCH_BENCH_ONLY").is_ok_and(|only| !what.contains(&only)) {
        return None;
    }
    // The server's runtime: its own threads (two, as `orch policy` runs; `side_runtime`).
    let server_rt = pacing::side_runtime("server");
    // The gateway's side: another runtime, one connection (HTTP/2 multiplexes).
    let client_rt = pacing::side_runtime("gateway");
    let target = match via {
        Via::Direct => {
            let server = server_rt.block_on(async {
                let compiled = orch_codegen::compile_json(DESK, None);
                PolicyServer::new(&compiled, store().await, Options::default()).unwrap()
            });
            Target::Direct(Arc::new(server))
        }
        Via::Grpc | Via::Floor | Via::AllowAll | Via::AllowAllWriting(_) => {
            let url = server_rt.block_on(async {
                match via {
                    Via::AllowAll => serve_allow_all().await,
                    Via::AllowAllWriting(bytes) => {
                        serve_allow_all_writing(store().await, bytes).await
                    }
                    _ => start(DESK, store().await, Options::default()).await,
                }
            });
            let gateway = client_rt.block_on(Gateway::connect(&url, "warm-up"));
            Target::Grpc(Box::new(gateway), via)
        }
    };
    let measured = client_rt.block_on(async {
        // Warm up: connections, the store, the allocator.
        for run in 0..RUNS {
            one_call(&target, run).await;
        }
        let paced = open_loop(&target, rate, seconds).await;
        // 32 callers back to back; each has runs of its own: no call waits for another.
        let saturated = {
            let target = target.clone();
            pacing::closed_loop(32, Duration::from_secs(3), move |caller, n| {
                let target = target.clone();
                async move { one_call(&target, caller + 32 * (n % 4)).await }
            })
            .await
        };
        println!(
            "  {what}: latency {paced}; saturated: {saturated:.0} calls/s ({:.0} checks/s)",
            saturated * 2.0,
        );
        (paced.ms(50.0), saturated)
    });
    drop(target);
    drop(client_rt);
    server_rt.shutdown_timeout(Duration::from_secs(1));
    Some(measured)
}

/// Both phases of one admitted call in run `run`.
async fn one_call(target: &Target, run: usize) {
    let run = format!("bench-{run}");
    let tool = if run.len() % 2 == 0 {
        "search"
    } else {
        "answer"
    };
    let params = json!({"name": tool, "arguments": {"q": "where is my order"}});
    match target {
        Target::Grpc(gateway, via) => {
            let mut gw = gateway.for_run(&run);
            if matches!(via, Via::Floor) {
                assert!(gw.request_raw("ping", None).await.is_admitted());
                assert_eq!(gw.response("ping", None, json!({})).await, Answered::Pass);
                return;
            }
            let Checked::Admitted(token, _) = gw.call(tool, params["arguments"].clone()).await
            else {
                panic!("the desk admits every call")
            };
            assert_eq!(
                gw.respond(token.as_deref(), ok_result()).await,
                Answered::Pass
            );
        }
        Target::Direct(check) => {
            let context = |token: Option<String>| {
                let mut fields = std::collections::BTreeMap::new();
                fields.insert("run".to_owned(), string(&run));
                if let Some(token) = token {
                    fields.insert(TOKEN_FIELD.to_owned(), string(&token));
                }
                Some(prost_types::Struct { fields })
            };
            let admitted = check
                .request(McpRequest {
                    service_names: vec!["backend".into()],
                    method: "tools/call".into(),
                    metadata_context: context(None),
                    mcp_request: Some(params.to_string().into_bytes()),
                    headers: vec![],
                })
                .await;
            assert!(matches!(
                admitted.result,
                Some(mcp_request_result::Result::Pass(_))
            ));
            let token = match admitted
                .metadata
                .and_then(|m| m.fields.get(TOKEN_FIELD).cloned())
            {
                Some(prost_types::Value {
                    kind: Some(Kind::StringValue(t)),
                }) => Some(t),
                _ => None,
            };
            let recorded = check
                .response(McpResponse {
                    service_names: vec!["backend".into()],
                    method: "tools/call".into(),
                    metadata_context: context(token),
                    mcp_response: ok_result().to_string().into_bytes(),
                })
                .await;
            assert!(matches!(
                recorded.result,
                Some(mcp_response_result::Result::Pass(_))
            ));
        }
    }
}

/// `rate` calls a second for `seconds` against `target`, each started on schedule.
async fn open_loop(target: &Target, rate: u64, seconds: u64) -> pacing::OpenLoop {
    let target = target.clone();
    pacing::open_loop(rate, seconds, move |i| {
        let target = target.clone();
        async move { one_call(&target, i % RUNS).await }
    })
    .await
}
