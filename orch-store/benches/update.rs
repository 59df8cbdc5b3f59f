//! `update` round trips for MemoryStore and RedisStore (a real redis-server on a
//! loopback port, started here), and the bytes per session of each encoding.
//! Run: `cargo bench -p orch-store --features redis --bench update`.

use criterion::{criterion_group, criterion_main, Criterion};
use orch_store::{MemoryStore, RedisStore, SessionStore};
use std::time::Duration;

// The tests' redis-server harness (a free loopback port, stopped on drop).
#[path = "../tests/common/mod.rs"]
mod common;
use common::RedisServer;

// A small machine, like the cognitive reasoner (history of 10), for the numbers in the README.
orch_macros::orchestration! {
    pub machine "bench" {
        tools: [search, think, reflect, critique];
        default step Idle;
        step Research {
            when message_contains("research");
            sequence: [search, think, reflect];
            allow: [search, think, reflect];
        }
    }
}
use bench::{Machine, Session, Tool};

fn one_update(s: &mut Session) {
    s.on_user_message("research this");
    s.record(Tool::Search);
    s.record_usage(120, 30);
}

fn sizes() {
    let mut s = Session::new();
    for _ in 0..4 {
        one_update(&mut s);
        s.record(Tool::Think);
    }
    let snap = s.snapshot();
    println!(
        "bytes per session: binary snapshot {} B, JSON snapshot {} B, in memory (Session) {} B",
        snap.to_bytes().len(),
        snap.to_json().len(),
        std::mem::size_of::<Session>()
    );
}

fn bench(c: &mut Criterion) {
    sizes();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("update_round_trip");
    let memory = MemoryStore::new();
    g.bench_function("memory", |b| {
        b.to_async(&rt).iter(|| async {
            memory
                .update::<Machine, _>("s", one_update)
                .await
                .expect("update");
        })
    });
    match RedisServer::try_start() {
        Some(server) => {
            let redis = rt
                .block_on(RedisStore::connect(&server.url))
                .expect("connect")
                .namespace("bench");
            g.bench_function("redis_loopback", |b| {
                b.to_async(&rt).iter(|| async {
                    redis
                        .update::<Machine, _>("s", one_update)
                        .await
                        .expect("update");
                })
            });
        }
        None => eprintln!("redis-server not available: the Redis benchmark is skipped"),
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3)).sample_size(30);
    targets = bench
}
criterion_main!(benches);
