//! What `orch mcp` costs, measured (the numbers docs/mcp.md states): bytes per live
//! session, sessions created per second, allowed and refused tool calls per second
//! through one instance (sessions in memory) and through two sharing one `redis-server`.
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
