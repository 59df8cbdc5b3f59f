//! Approvers elsewhere through `orch mcp`, as deployed: two gateway instances with their
//! sessions in a real `redis-server`, the official Python MCP SDK's server as the
//! upstream (`tests/mcp/shop_tools.py`, logging every call it runs), clients on raw
//! HTTP. A gated payment waits in the gateway while an approver who is not the agent's
//! user finds it on the other instance with `orch approvals` and approves it: the
//! waiting call then runs, once, and the run moves on. With no wait, the call is refused
//! with the question's id, its retry is the same question, and a rejection is held.

mod support;

use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use support::http::{modern_request, run_token};
use support::{eventually, here, log_lines, python, redis, temp_dir, Gateway, ORCH};

const OPERATOR: &str = "operator-token-for-the-approver-tests";
const FINANCE: &str = "finance-approver-0123456789";

/// `orch approvals ARGS... --json` at `api` as `token`: status, JSON, stderr.
fn approvals(api: &str, token: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let output = Command::new(ORCH)
        .arg("approvals")
        .args(args)
        .args(["--url", api, "--json"])
        .env("ORCH_APPROVALS_TOKEN", token)
        .output()
        .expect("run orch approvals");
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), json, stderr)
}

/// `orch mcp` on the gated shop with the approvals API, sessions in `redis`: the gateway
/// and its API's URL.
fn gateway(
    python: &str,
    log: &std::path::Path,
    redis: &str,
    tokens: &str,
    wait: &str,
) -> (Gateway, String) {
    let upstream = support::shop_upstream(python, log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    let extra = [
        "--redis",
        redis,
        "--approvals",
        "127.0.0.1:0",
        "--approvers",
        tokens,
        "--approval-wait",
        wait,
    ];
    let gw = Gateway::http(
        &here("gated_shop.json"),
        &extra,
        &[("ORCH_MCP_TOKEN", OPERATOR)],
        &upstream,
    );
    let mut api = String::new();
    eventually(
        Duration::from_secs(30),
        "the approvals API's address",
        || {
            let printed = gw.stdout();
            match printed
                .lines()
                .find_map(|l| l.strip_prefix("approvals listening on "))
            {
                Some(addr) => {
                    api = format!("http://{addr}");
                    true
                }
                None => false,
            }
        },
    );
    (gw, api)
}

fn pay(addr: &str, token: &str, id: i64, run: &str, amount: i64) -> Value {
    let params = json!({"name": "pay", "arguments": {"run": run, "amount": amount}});
    let reply = modern_request(addr, Some(token), id, "tools/call", params, &[]);
    reply
        .response(id)
        .unwrap_or_else(|| panic!("no response: {} {}", reply.status, reply.text()))
}

#[test]
#[ignore = "needs redis-server and the MCP Python SDK: `cargo xtask test` installs them and runs this"]
fn a_waiting_payment_runs_once_when_an_approver_elsewhere_approves_it() {
    let python = python();
    let (_redis, redis_url) = redis();
    let dir = temp_dir("approvers-elsewhere");
    let log = dir.join("executed.log");
    let tokens = dir.join("approvers");
    std::fs::write(&tokens, format!("finance approver {FINANCE}\n")).unwrap();
    let tokens = tokens.to_str().unwrap();
    let (a, _) = gateway(&python, &log, &redis_url, tokens, "60");
    let (_b, other_api) = gateway(&python, &log, &redis_url, tokens, "60");

    // The agent's payment waits in instance A.
    let token = run_token(&a.addr, Some(OPERATOR));
    let (addr, agent) = (a.addr.clone(), token.clone());
    let waiting = std::thread::spawn(move || {
        let answer = pay(&addr, &agent, 1, "r1", 5);
        (answer, Instant::now())
    });

    // The approver finds it on instance B: the exact call, where it was asked.
    let mut question = Value::Null;
    eventually(Duration::from_secs(30), "the question to be listed", || {
        let (status, listed, _) = approvals(&other_api, FINANCE, &["list"]);
        question = listed["questions"][0].clone();
        status == Some(0) && question.is_object()
    });
    assert_eq!(question["tool"], "pay");
    assert_eq!(question["step"], "Shop");
    assert_eq!(question["template"], "gated-shop");
    let args: Value = serde_json::from_str(question["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"run": "r1", "amount": 5}));
    assert!(
        log_lines(&log).iter().all(|l| l["tool"] != "pay"),
        "paid before the approval"
    );

    // Approved on B: the call waiting on A runs, once.
    let id = question["id"].as_str().unwrap().to_owned();
    let approved_at = Instant::now();
    let (status, answered, err) =
        approvals(&other_api, FINANCE, &["approve", &id, "--reason", "ok"]);
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(answered["state"], "approved");
    let (answer, returned_at) = waiting.join().unwrap();
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    eprintln!(
        "the waiting call returned {} ms after the approval was sent (the upstream's pay takes 300 ms)",
        returned_at.saturating_duration_since(approved_at).as_millis()
    );
    let paid: Vec<_> = log_lines(&log)
        .into_iter()
        .filter(|l| l["tool"] == "pay")
        .collect();
    assert_eq!(paid.len(), 1, "{paid:?}");
    // The run moved on: `pay` is no longer allowed, `receipt` is.
    let again = pay(&a.addr, &token, 2, "r1", 5);
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert_eq!(
        again["result"]["_meta"]["orch/refusal"]["reason"], "not_allowed",
        "{again}"
    );
}

#[test]
#[ignore = "needs redis-server and the MCP Python SDK: `cargo xtask test` installs them and runs this"]
fn without_a_wait_the_call_is_refused_with_its_question_and_a_rejection_is_held() {
    let python = python();
    let (_redis, redis_url) = redis();
    let dir = temp_dir("approvers-no-wait");
    let log = dir.join("executed.log");
    let tokens = dir.join("approvers");
    std::fs::write(&tokens, format!("finance approver {FINANCE}\n")).unwrap();
    let (gw, api) = gateway(&python, &log, &redis_url, tokens.to_str().unwrap(), "0");
    let token = run_token(&gw.addr, Some(OPERATOR));

    // `pay` declares an output schema: a refusal's facts are in `_meta`.
    let first = pay(&gw.addr, &token, 1, "r2", 9000);
    let meta = &first["result"]["_meta"];
    assert_eq!(meta["orch/refusal"]["reason"], "needs_approval", "{first}");
    assert_eq!(meta["orch/approval"]["step"], "Shop", "{first}");
    let id = meta["orch/approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = first["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&id), "{text}");
    // The retry is the same question, not a new one.
    let retry = pay(&gw.addr, &token, 2, "r2", 9000);
    assert_eq!(
        retry["result"]["_meta"]["orch/approval"]["question"],
        id.as_str()
    );
    let (status, listed, _) = approvals(&api, FINANCE, &["list"]);
    assert_eq!(status, Some(0));
    assert_eq!(listed["questions"].as_array().unwrap().len(), 1, "{listed}");

    let (status, answered, err) = approvals(
        &api,
        FINANCE,
        &["reject", &id, "--reason", "9000 is more than the cart"],
    );
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(answered["state"], "rejected");
    let held = pay(&gw.addr, &token, 3, "r2", 9000);
    assert_eq!(
        held["result"]["_meta"]["orch/refusal"]["reason"], "rejected",
        "{held}"
    );
    assert!(log_lines(&log).iter().all(|l| l["tool"] != "pay"));
}
