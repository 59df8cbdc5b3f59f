//! `update` round trips for MemoryStore and RedisStore (a real redis-server on a
//! loopback port, started here), and the bytes per session of each encoding.
//! Run: `cargo bench -p orch-store --features redis --bench update`.

use criterion::{criterion_group, criterion_main, Criterion};
use orch_store::{MemoryStore, RedisStore, SessionStore};
use std::time::Duration;

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

fn redis_server() -> Option<(std::process::Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .ok()?;
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((child, format!("redis://127.0.0.1:{port}/")));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    None
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
    match redis_server() {
        Some((mut child, url)) => {
            let redis = rt
                .block_on(RedisStore::connect(&url))
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
            let _ = child.kill();
            let _ = child.wait();
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
