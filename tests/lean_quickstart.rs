//! The quick start stays lean: `cargo run -p orch-examples --example cognitive_reasoner`
//! compiles only what the examples use. Its dependency tree (normal and build
//! dependencies, on this host) is held to a bound, and no heavy crate may enter it — an
//! LLM client, an HTTP or TLS stack, Redis, MCP, the CLI's parser, a test or benchmark
//! harness. Counted with `cargo tree`, not timed.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates in the quick start's tree: 37 when this was written, 39 on 2026-11-27 (7 of
/// them this workspace's). Raise it only for a crate the examples really need, and say
/// why in the commit.
const BOUND: usize = 40;

/// Crates that must never be built for the quick start.
const HEAVY: [&str; 16] = [
    "reqwest",
    "hyper",
    "rustls",
    "ring",
    "aws-lc-sys",
    "openssl-sys",
    "redis",
    "rmcp",
    "axum",
    "genai",
    "rig-core",
    "clap",
    "criterion",
    "gungraun",
    "jsonschema",
    "trybuild",
];

#[test]
fn the_quick_start_builds_only_what_it_uses() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--locked", "--offline", "-p", "orch-examples"])
        .args(["-e", "normal,build", "--prefix", "none"])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crates: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .collect();
    let heavy: Vec<&String> = crates
        .iter()
        .filter(|c| HEAVY.iter().any(|h| c.split(' ').next() == Some(h)))
        .collect();
    assert!(
        heavy.is_empty(),
        "heavy crates in the quick start: {heavy:?}"
    );
    assert!(
        crates.len() <= BOUND,
        "the quick start compiles {} crates (bound {BOUND}): {crates:#?}",
        crates.len()
    );
}
