//! How long an approver's answer takes to reach the gated call that waits for it in
//! `orch mcp` (docs/performance.md, "Approvers elsewhere"): from the moment the approval
//! is sent to the approvals API until the waiting call's result arrives, the upstream's
//! tool included (`browse` of `tests/mcp/shop_tools.py`, which answers at once). Once
//! with one instance, sessions in memory, the approval sent to that instance; once with
//! two instances sharing one `redis-server`, the call waiting in one and the approval
//! sent to the other (told over Redis pub/sub). Loopback only; needs what the gateway
//! tests need (`cargo xtask test` installs it):
//!
//! ```sh
//! cargo bench -p orch-cli --bench approvals
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::http::{modern_request, request_to, run_token};
use support::{eventually, here, python, redis, temp_dir, Gateway};

const OPERATOR: &str = "operator-token-for-the-approvals-bench";
const FINANCE: &str = "finance-approver-0123456789";
const SAMPLES: usize = 40;

fn main() {
    // `cargo test --benches` runs benchmarks as tests: nothing to check here.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let python = python();
    let dir = temp_dir("approvals-bench");
    let log = dir.join("executed.log");
    let tokens = dir.join("approvers");
    std::fs::write(&tokens, format!("finance approver {FINANCE}\n")).unwrap();
    let tokens = tokens.to_str().unwrap();

    let memory = gateway(&python, &log, tokens, &[]);
    measure("one instance, sessions in memory", &memory, &memory);
    drop(memory);

    let (_redis, url) = redis();
    let a = gateway(&python, &log, tokens, &["--redis", &url]);
    let b = gateway(&python, &log, tokens, &["--redis", &url]);
    measure(
        "two instances on Redis, the approval sent to the other",
        &a,
        &b,
    );
}

struct Served {
    gw: Gateway,
    api: String,
}

fn gateway(python: &str, log: &std::path::Path, tokens: &str, extra: &[&str]) -> Served {
    let upstream = support::shop_upstream(python, log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    let mut args = vec!["--approvals", "127.0.0.1:0", "--approvers", tokens];
    args.extend(extra);
    let gw = Gateway::http(
        &here("gated_browse.json"),
        &args,
        &[("ORCH_MCP_TOKEN", OPERATOR)],
        &upstream,
    );
    let mut api = String::new();
    eventually(Duration::from_secs(30), "the approvals API", || {
        match gw
            .stdout()
            .lines()
            .find_map(|l| l.strip_prefix("approvals listening on "))
        {
            Some(addr) => {
                api = addr.to_owned();
                true
            }
            None => false,
        }
    });
    Served { gw, api }
}

/// The open questions at `api`.
fn open(api: &str) -> Vec<Value> {
    let auth = format!("Bearer {FINANCE}");
    let reply = request_to(
        api,
        "GET",
        "/v1/approvals",
        &[("Authorization", &auth)],
        b"",
    )
    .expect("the approvals API answers");
    let body: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    body["questions"].as_array().cloned().unwrap_or_default()
}

fn measure(what: &str, waits: &Served, answers: &Served) {
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let token = run_token(&waits.gw.addr, Some(OPERATOR));
        let (addr, run) = (waits.gw.addr.clone(), format!("bench-{i}"));
        let waiting = std::thread::spawn(move || {
            let params = json!({"name": "browse", "arguments": {"run": run}});
            let reply = modern_request(&addr, Some(&token), 1, "tools/call", params, &[]);
            (reply.response(1), Instant::now())
        });
        let mut id = String::new();
        eventually(Duration::from_secs(30), "the question", || {
            let open = open(&answers.api);
            match open.first().and_then(|q| q["id"].as_str()) {
                Some(q) => {
                    id = q.to_owned();
                    true
                }
                None => false,
            }
        });
        let auth = format!("Bearer {FINANCE}");
        let path = format!("/v1/approvals/{id}");
        let sent = Instant::now();
        let reply = request_to(
            &answers.api,
            "POST",
            &path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            br#"{"decision": "approve"}"#,
        )
        .expect("the approvals API answers");
        assert_eq!(reply.status, 200, "{}", reply.text());
        let (result, returned) = waiting.join().expect("the waiting call");
        let result = result.expect("the call's result");
        assert_ne!(result["result"]["isError"], true, "{result}");
        samples.push(returned.saturating_duration_since(sent));
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what}: approval sent -> waiting call's result, {SAMPLES} calls: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        ms(samples[SAMPLES / 2]),
        ms(samples[SAMPLES * 9 / 10]),
        ms(samples[SAMPLES - 1])
    );
}
