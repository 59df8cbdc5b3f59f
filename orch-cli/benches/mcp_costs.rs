//! What `orch mcp` costs, measured (the numbers docs/mcp.md and docs/performance.md
//! state): bytes per live session, sessions created per second, allowed and refused tool
//! calls per second through one instance (sessions in memory) and through two sharing
//! one `redis-server`, and the latency the gateway adds to a tool call at a fixed offered
//! load (`ORCH_BENCH_RATE` calls/s, 200 unless set, for 10 s), measured against the same
//! upstream called directly.
//! Loopback only, bounded. Needs what the gateway tests need (`cargo xtask test`
//! installs it):
//!
//! ```sh
//! cargo bench -p orch-cli --bench mcp_costs
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use support::http::{succeeded, Client};
use support::load::rate;
use support::{python, redis, shop_gateway, temp_dir};

fn main() {
    // `cargo test --benches` runs benchmarks as tests: nothing to check here.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let python = python();
    let dir = temp_dir("load-costs");
    let log = dir.join("executed.log");

    added_latency(&python, &log);

    // Bytes per live session: 5,000 sessions held open.
    let gw = shop_gateway(&python, &log, &["--max-sessions", "100000"], &[]);
    let held = 5_000;
    let before = gw.rss_kib();
    let addr = gw.addr.clone();
    let start = Instant::now();
    let clients: Vec<Client> = (0..held)
        .map(|_| Client::connect(&addr, None).expect("a session"))
        .collect();
    let created = held as f64 / start.elapsed().as_secs_f64();
    for c in &clients {
        assert!(succeeded(&c.call("browse", json!({"run": "held"}))));
    }
    let after = gw.rss_kib();
    println!(
        "held: {held} live sessions (each with one recorded call): RSS {before} KiB -> {after} KiB, {:.0} bytes per session; {created:.0} sessions/s created (one client thread)",
        (after.saturating_sub(before) * 1024) as f64 / held as f64
    );
    drop(clients);
    drop(gw);

    // Calls per second, one instance (sessions in memory).
    let gw = shop_gateway(&python, &log, &[], &[]);
    calls_per_second(
        "one instance, sessions in memory",
        std::slice::from_ref(&gw.addr),
    );
    drop(gw);

    // Two instances sharing Redis, each session's calls alternating between them.
    let (_redis, url) = redis();
    let a = shop_gateway(
        &python,
        &log,
        &["--redis", &url, "--namespace", "load"],
        &[],
    );
    let b = shop_gateway(
        &python,
        &log,
        &["--redis", &url, "--namespace", "load"],
        &[],
    );
    calls_per_second(
        "two instances sharing Redis, calls alternating",
        &[a.addr.clone(), b.addr.clone()],
    );
}

/// Allowed calls (forwarded to the upstream) and refused calls (answered by the
/// gateway alone) per second, 4 client threads with a session each.
fn calls_per_second(what: &str, addrs: &[String]) {
    let threads = 4;
    let per_thread = 250;
    let sessions: Arc<Vec<Vec<Client>>> = Arc::new(
        (0..threads)
            .map(|_| {
                let first = Client::connect(&addrs[0], None).expect("a session");
                let mut via: Vec<Client> = addrs.iter().skip(1).map(|a| first.via(a)).collect();
                via.insert(0, first);
                via
            })
            .collect(),
    );
    let s = Arc::clone(&sessions);
    let allowed = rate(threads, per_thread, move |i| {
        let via = &s[i / per_thread];
        let client = &via[i % via.len()];
        assert!(succeeded(&client.call("browse", json!({"run": "rate"}))));
    });
    let s = Arc::clone(&sessions);
    let refused = rate(threads, per_thread, move |i| {
        let via = &s[i / per_thread];
        let client = &via[i % via.len()];
        assert!(!succeeded(&client.call("receipt", json!({"run": "rate"}))));
    });
    println!("{what}: {allowed:.0} allowed calls/s (forwarded to the Python SDK upstream), {refused:.0} refused calls/s (answered by the gateway)");
}

/// The latency `orch mcp` adds to an allowed tool call: the shop upstream over
/// Streamable HTTP, called at a fixed rate (open loop, each call timed from its scheduled
/// start) directly, then through a gateway in front of it; the percentiles of both and
/// their differences.
fn added_latency(python: &str, log: &std::path::Path) {
    let rate: u64 = std::env::var("ORCH_BENCH_RATE")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let seconds = 10;
    let port = support::free_port();
    let upstream = support::Guard(
        std::process::Command::new(python)
            .arg(support::here("shop_tools.py"))
            .args(["--log", &log.to_string_lossy(), "--http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the shop upstream"),
    );
    support::wait_for_port(
        port,
        std::time::Duration::from_secs(60),
        "the shop upstream",
    );
    let direct_addr = format!("127.0.0.1:{port}");
    let gw = support::Gateway::http(
        &support::here("shop.json"),
        &["--upstream-url", &format!("http://{direct_addr}/mcp")],
        &[],
        &[],
    );
    let direct = open_loop(&direct_addr, rate, seconds);
    let via = open_loop(&gw.addr, rate, seconds);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let line = |what: &str, l: &[std::time::Duration]| {
        format!(
            "{what}: p50 {:.3} ms, p99 {:.3} ms",
            ms(percentile(l, 50.0)),
            ms(percentile(l, 99.0))
        )
    };
    println!(
        "added latency at {rate} calls/s for {seconds} s: {}; {}; added p50 {:.3} ms, p99 {:.3} ms",
        line("upstream directly", &direct),
        line("through orch mcp (memory)", &via),
        ms(percentile(&via, 50.0).saturating_sub(percentile(&direct, 50.0))),
        ms(percentile(&via, 99.0).saturating_sub(percentile(&direct, 99.0))),
    );
    drop(gw);
    drop(upstream);
}

/// `rate` allowed calls a second for `seconds` against `addr`, 16 client sessions each
/// taking every 16th scheduled call: each call's latency from its scheduled start,
/// sorted.
fn open_loop(addr: &str, rate: u64, seconds: u64) -> Vec<std::time::Duration> {
    let threads = 16usize;
    let total = (rate * seconds) as usize;
    let interval = std::time::Duration::from_secs_f64(1.0 / rate as f64);
    let clients: Vec<Client> = (0..threads)
        .map(|_| Client::connect(addr, None).expect("a session"))
        .collect();
    // Warm up each session.
    for c in &clients {
        assert!(succeeded(&c.call("browse", json!({"run": "warm"}))));
    }
    let begin = Instant::now() + std::time::Duration::from_millis(20);
    let mut latencies: Vec<std::time::Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(k, client)| {
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    for i in (k..total).step_by(threads) {
                        let at = begin + interval * i as u32;
                        let now = Instant::now();
                        if at > now {
                            std::thread::sleep(at - now);
                        }
                        assert!(succeeded(&client.call("browse", json!({"run": "latency"}))));
                        mine.push(at.elapsed());
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a load thread"))
            .collect()
    });
    latencies.sort();
    latencies
}

/// The `p`th percentile of sorted `samples` (nearest rank).
fn percentile(samples: &[std::time::Duration], p: f64) -> std::time::Duration {
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}
