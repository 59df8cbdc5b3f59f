//! Several policy-server instances share runs through a real `redis-server` and a real
//! Redis Cluster: many concurrent calls per run, each through any instance, and every
//! run's log of admitted calls is a serial order the workflow allows, which the state
//! stored in Redis agrees with. A lost response lapses across instances; a new instance
//! carries on a run where the old ones left it.

use orch_policy::wire::authorization_error::Code;
use orch_policy::Options;
use orch_run::Resolution;
use orch_runtime::dynamic::DynSession;
use orch_runtime::Snapshot;
use orch_store::lease::Record;
use orch_store::{RedisStore, SessionStore};
use orch_test_support::cluster::Cluster;
use orch_test_support::ext_mcp::*;
use orch_test_support::redis::RedisServer;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const INSTANCES: usize = 3;
const RUNS: usize = 6;
const CALLERS: usize = 6;
const CALLS: usize = 12;

/// A little deterministic randomness per caller.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `INSTANCES` policy servers over the stores `connect` makes (one connection each).
async fn instances<F, Fut>(connect: F) -> Vec<String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = RedisStore>,
{
    let mut urls = Vec::new();
    for _ in 0..INSTANCES {
        let store = connect().await;
        urls.push(start(REFUND_LINE, store, Options::default()).await);
    }
    urls
}

/// Drives `RUNS` runs, each with `CALLERS` concurrent callers making `CALLS` random
/// calls each through random instances; returns each run's log of recorded tools (in
/// admission order).
async fn hammer(urls: &[String]) -> Vec<Vec<String>> {
    let tools = [
        "lookup_order",
        "issue_refund",
        "send_email",
        "close_ticket",
        "kb_search",
        "kb_admin_wipe",
        "format_disk",
    ];
    let mut gateways = Vec::new();
    for url in urls {
        gateways.push(Gateway::connect(url, "unused").await);
    }
    let logs: Vec<Arc<Mutex<Vec<String>>>> = (0..RUNS).map(|_| Arc::default()).collect();
    let mut tasks = Vec::new();
    for (run, log) in logs.iter().enumerate() {
        for caller in 0..CALLERS {
            let gateways: Vec<Gateway> = gateways
                .iter()
                .map(|g| g.for_run(&format!("run-{run}")))
                .collect();
            let log = Arc::clone(log);
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((run * 131 + caller) as u64 + 1));
                for _ in 0..CALLS {
                    let mut gw = gateways[(rng.next() % INSTANCES as u64) as usize].clone();
                    let tool = tools[(rng.next() % tools.len() as u64) as usize];
                    let checked = gw.call(tool, json!({"n": rng.next() % 100})).await;
                    let Checked::Admitted(token, _) = checked else {
                        let code = checked.code();
                        assert!(
                            matches!(code, Code::PermissionDenied | Code::ResourceExhausted),
                            "{checked:?}"
                        );
                        continue;
                    };
                    // One result in five says the tool failed: not recorded.
                    let failed = rng.next().is_multiple_of(5);
                    if !failed {
                        log.lock().unwrap().push(tool.to_owned());
                    }
                    tokio::time::sleep(Duration::from_micros(rng.next() % 3000)).await;
                    // The result comes back through any instance.
                    let mut back = gateways[(rng.next() % INSTANCES as u64) as usize].clone();
                    let result = if failed { error_result() } else { ok_result() };
                    assert_eq!(back.respond(token.as_deref(), result).await, Answered::Pass);
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    logs.iter().map(|l| l.lock().unwrap().clone()).collect()
}

/// Every log is a serial order the workflow allows, and the state stored for the run is
/// the state that log leads to.
async fn check_logs<S: SessionStore>(store: &S, logs: &[Vec<String>]) {
    let machine = orch_codegen::compile_json(REFUND_LINE, None)
        .to_machine()
        .unwrap();
    let mut total = 0;
    for (run, log) in logs.iter().enumerate() {
        allowed_serially(REFUND_LINE, log).unwrap();
        total += log.len();
        let mut expected = machine.session();
        for tool in log {
            expected.record(tool);
        }
        let stored = store.load(&format!("run:run-{run}")).await.unwrap();
        let record = Record::decode(&stored.expect("the run is stored").bytes).unwrap();
        assert_eq!(record.lease, None, "no call is left in flight");
        let snapshot = Snapshot::from_bytes(record.snapshot.as_deref().unwrap_or_default());
        let (session, _) = match record.snapshot {
            Some(_) => DynSession::restore(&machine, &snapshot.unwrap()).unwrap(),
            None => (machine.session(), Default::default()),
        };
        assert_eq!(session.step(), expected.step(), "run {run}: {log:?}");
        assert_eq!(
            session.sequence_index(),
            expected.sequence_index(),
            "run {run}"
        );
        assert_eq!(session.history(), expected.history(), "run {run}");
    }
    // The workload does get through.
    eprintln!("{total} calls recorded over {RUNS} runs");
    assert!(total >= RUNS * 2, "only {total} calls recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn instances_sharing_redis_admit_only_serial_orders() {
    let redis = RedisServer::start();
    let url = redis.url.clone();
    let urls = instances(|| {
        let url = url.clone();
        async move { RedisStore::connect(&url).await.unwrap() }
    })
    .await;
    let logs = hammer(&urls).await;
    check_logs(&RedisStore::connect(&redis.url).await.unwrap(), &logs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and redis-cli: `cargo xtask test` installs them and runs this"]
async fn instances_sharing_a_redis_cluster_admit_only_serial_orders() {
    let cluster = Cluster::start();
    let seeds = cluster.urls();
    let connect = || {
        let seeds = seeds.clone();
        async move {
            let refs: Vec<&str> = seeds.iter().map(String::as_str).collect();
            RedisStore::connect_cluster(&refs).await.unwrap()
        }
    };
    let urls = instances(connect).await;
    let logs = hammer(&urls).await;
    check_logs(&connect().await, &logs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn a_lost_response_lapses_across_instances_and_runs_survive_new_instances() {
    let redis = RedisServer::start();
    let options = || Options {
        lease: Duration::from_millis(400),
        busy_wait: Duration::from_millis(100),
        ..Options::default()
    };
    let a = start(
        REFUND_LINE,
        RedisStore::connect(&redis.url).await.unwrap(),
        options(),
    )
    .await;
    let b = start(
        REFUND_LINE,
        RedisStore::connect(&redis.url).await.unwrap(),
        options(),
    )
    .await;
    let mut via_a = Gateway::connect(&a, "dora").await;
    let mut via_b = Gateway::connect(&b, "dora").await;
    via_a.run_tool("lookup_order").await.unwrap();
    // Admitted through A; its result never comes.
    let lost = via_a.call("issue_refund", json!({})).await.token();
    // B sees the call in flight...
    assert_eq!(
        via_b.call("issue_refund", json!({})).await.code(),
        Code::ResourceExhausted
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ... and once it lapses, nobody knows whether the refund ran: the run is held (no
    // lostResults list names it), on every instance.
    for tool in ["send_email", "issue_refund"] {
        let held = via_b.call(tool, json!({})).await;
        assert_eq!(held.code(), Code::PermissionDenied);
        assert_eq!(held.data()["refusal"]["reason"], "outcome_unknown");
    }
    // An operator checks and says it did not run: the refund is still next.
    let machine = orch_codegen::compile_json(REFUND_LINE, None)
        .to_machine()
        .unwrap();
    let store = RedisStore::connect(&redis.url).await.unwrap();
    let resolved = orch_policy::resolve(&store, &machine, "dora", Resolution::NotRun).await;
    assert_eq!(resolved.unwrap().as_deref(), Some("issue_refund"));
    assert_eq!(
        via_b.call("send_email", json!({})).await.code(),
        Code::PermissionDenied
    );
    let again = via_b.call("issue_refund", json!({})).await.token();
    assert_ne!(again, lost);
    assert_eq!(
        via_b.respond(again.as_deref(), ok_result()).await,
        Answered::Pass
    );
    // The lost call's late result is withheld: it was settled, and another call was
    // admitted since.
    assert!(matches!(
        via_a.respond(lost.as_deref(), ok_result()).await,
        Answered::Rejected(Code::PermissionDenied, _)
    ));
    // A new instance (a restart) carries on where the run is: the email is next.
    let c = start(
        REFUND_LINE,
        RedisStore::connect(&redis.url).await.unwrap(),
        options(),
    )
    .await;
    let mut via_c = Gateway::connect(&c, "dora").await;
    assert_eq!(
        via_c.call("issue_refund", json!({})).await.code(),
        Code::PermissionDenied
    );
    via_c.run_tool("send_email").await.unwrap();
    assert_eq!(
        via_c
            .list(&["lookup_order", "issue_refund", "send_email", "close_ticket"])
            .await,
        ["issue_refund", "send_email", "close_ticket"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn a_store_that_fails_fails_closed() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url).await.unwrap();
    let url = start(REFUND_LINE, store, Options::default()).await;
    let mut gw = Gateway::connect(&url, "erin").await;
    gw.run_tool("lookup_order").await.unwrap();
    let token = gw.call("issue_refund", json!({})).await.token();
    drop(redis);
    // Redis is gone: every check that needs the run fails, as an AuthorizationError
    // (never a gRPC failure, which a gateway set to fail open would pass).
    let checked = gw.call("issue_refund", json!({})).await;
    assert_eq!(checked.code(), Code::Unknown, "{checked:?}");
    assert!(
        checked.error().reason.contains("the session store failed"),
        "{:?}",
        checked.error()
    );
    assert!(matches!(
        gw.respond(token.as_deref(), ok_result()).await,
        Answered::Rejected(Code::Unknown, _)
    ));
    assert!(matches!(
        gw.response(
            "tools/list",
            None,
            json!({"tools": [{"name": "lookup_order"}]})
        )
        .await,
        Answered::Rejected(Code::Unknown, _)
    ));
}
