//! The console's page time over a store of 10,000 runs (docs/performance.md, "The
//! console"): the time from sending `GET` to the whole page read, over loopback, for the
//! runs page (every run listed, filtered, sorted and paged), a filtered page further on,
//! and one run's page. Once with the runs in memory, once in a real `redis-server` (when
//! one is installed; `cargo xtask test` installs it):
//!
//! ```sh
//! cargo bench -p orch-approvals --bench console
//! ```

use orch_approvals::store::StoreDesk;
use orch_approvals::{Approvals, Approvers, Role};
use orch_runtime::dynamic::DynMachine;
use orch_store::lease::Record;
use orch_store::SessionStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 10_000;
const SAMPLES: usize = 30;
const TOKEN: &str = "viewer-token-for-the-console-bench";

const TEMPLATE: &str = r#"{
  "name": "refund-desk",
  "tools": ["lookup_order", "issue_refund", "send_email"],
  "orchestration": {
    "steps": [
      {"name": "Help", "isDefault": true, "availableTools": {"allowed": ["lookup_order"]}},
      {"name": "Refund", "conditions": [{"type": "tool_used", "value": "lookup_order"}],
       "sequence": ["issue_refund", "send_email"]}
    ]
  }
}"#;

fn main() {
    // `cargo test --benches` runs benchmarks as tests: nothing to check here.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let machine = orch_codegen::compile_json(TEMPLATE, None)
        .to_machine()
        .expect("the template compiles");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let memory = orch_store::MemoryStore::builder().no_ttl().build();
        fill(&memory, &machine).await;
        measure("runs in memory", memory, &machine).await;
        match orch_test_support::redis::RedisServer::try_start() {
            Some(server) => {
                let store = orch_store::RedisStore::connect(&server.url)
                    .await
                    .unwrap()
                    .namespace("bench");
                fill(&store, &machine).await;
                measure("runs in one redis-server", store, &machine).await;
            }
            None => println!("runs in one redis-server: not measured (no redis-server)"),
        }
    });
}

/// 10,000 runs: a third in step Refund, the rest in Help.
async fn fill<S: SessionStore>(store: &S, machine: &DynMachine) {
    let help = machine.session();
    let help = Record {
        snapshot: Some(help.snapshot_bytes()),
        ..Record::default()
    }
    .encode();
    let mut refund = machine.session();
    refund.record("lookup_order");
    let refund = Record {
        snapshot: Some(refund.snapshot_bytes()),
        ..Record::default()
    }
    .encode();
    for i in 0..RUNS {
        let bytes = if i % 3 == 0 { &refund } else { &help };
        store
            .store(&format!("run:{i:05}"), bytes.clone())
            .await
            .expect("a run written");
    }
}

async fn measure<S: SessionStore + 'static>(what: &str, store: S, machine: &DynMachine) {
    let desk = StoreDesk::new(store, machine.clone());
    let approvers = Approvers::new().token("viewer", Role::Viewer, TOKEN);
    let console = Approvals::new(Arc::new(desk), Arc::new(approvers), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(orch_approvals::serve(
        listener,
        console,
        std::future::pending(),
    ));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed = http
        .post(format!("{base}/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"))
        .send()
        .await
        .unwrap();
    let cookie = signed.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    for (page, path, expect) in [
        (
            "runs page 1 (all 10,000 listed)",
            "/console/runs",
            "10000 of 10000 runs",
        ),
        (
            "runs filtered by step, page 20",
            "/console/runs?step=Refund&page=20",
            "3334 of 10000 runs",
        ),
        ("one run's page", "/console/runs/run%3A04242", "run:04242"),
    ] {
        let mut times = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let start = Instant::now();
            let body = http
                .get(format!("{base}{path}"))
                .header("cookie", &cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            times.push(start.elapsed());
            assert!(body.contains(expect), "{page}: {body}");
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{what}, {page}: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms ({SAMPLES} requests)",
            ms(times[SAMPLES / 2]),
            ms(times[SAMPLES * 9 / 10]),
            ms(times[SAMPLES - 1])
        );
    }
}
