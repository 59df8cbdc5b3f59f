//! Updates per second with 64 concurrent clients, on one `redis-server` and on a
//! three-primary Redis Cluster (both started here on loopback ports), and round trips
//! per update: with the store's cache of last-seen versions (one round trip: a
//! compare-and-set) and without it (`cache_capacity(0)`: a read, then the
//! compare-and-set — the flow before). Each client updates its own session, so the
//! numbers measure the store, not conflicts.
//!
//! Run: `cargo bench -p orch-store --features redis --bench throughput`
//! (`ORCH_BENCH_SECS` sets the seconds per configuration, default 5).

use orch_store::{RedisStore, SessionStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;
use common::cluster::Cluster;
use common::{Machine, RedisServer, Tool};

const CLIENTS: usize = 64;

async fn run(store: RedisStore, label: &str, secs: u64) {
    let store = Arc::new(store);
    // Every session exists first (its creation is not what is measured).
    for c in 0..CLIENTS {
        store
            .put(&format!("c{c}"), &common::Session::new())
            .await
            .expect("put");
    }
    let before = store.round_trips();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut handles = Vec::new();
    for c in 0..CLIENTS {
        let (store, done) = (store.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let id = format!("c{c}");
            while Instant::now() < stop {
                store
                    .update::<Machine, _>(&id, |s| {
                        s.record(Tool::Search);
                        s.record_usage(120, 30);
                    })
                    .await
                    .expect("update");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.expect("client");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    let trips = (store.round_trips() - before) as f64 / n as f64;
    println!(
        "{label:<44} {:>9.0} updates/s   {trips:.3} round trips/update   ({n} updates, {CLIENTS} clients)",
        n as f64 / elapsed
    );
}

fn main() {
    // `cargo bench` passes `--bench`; filters are not supported.
    let secs: u64 = std::env::var("ORCH_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let Some(server) = RedisServer::try_start() else {
        return;
    };
    let Some(cluster) = Cluster::try_start() else {
        return;
    };
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    rt.block_on(async {
        let single = || async { RedisStore::connect(&server.url).await.expect("connect") };
        let clustered = || async { RedisStore::connect_cluster(&seeds).await.expect("connect") };
        run(
            single().await.namespace("a").cache_capacity(0),
            "one node, read + CAS",
            secs,
        )
        .await;
        run(
            single().await.namespace("b"),
            "one node, CAS against last seen",
            secs,
        )
        .await;
        run(
            clustered().await.namespace("c").cache_capacity(0),
            "3-primary cluster, read + CAS",
            secs,
        )
        .await;
        run(
            clustered().await.namespace("d"),
            "3-primary cluster, CAS against last seen",
            secs,
        )
        .await;
        run(
            clustered()
                .await
                .namespace("e")
                .wait_for_replicas(1, Duration::from_secs(1)),
            "3-primary cluster, last seen + WAIT 1",
            secs,
        )
        .await;
    });
}
