//! `orch console` as deployed: alone, over the runs that `orch policy` keeps in a real
//! `redis-server` and in a real Redis Cluster. An operator signs in, pages through the
//! runs, filters them, opens a waiting run and answers its question from the console;
//! the gateway's retry runs once. The template page carries what `orch verify` found;
//! the decision log page says the chain holds.

mod support;

use orch_test_support::cluster::Cluster;
use orch_test_support::ext_mcp::{Gateway, GATED_REFUND};
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::http::{request_to, Reply};
use support::{redis, temp_dir, Guard, ORCH};

const FINANCE: &str = "finance-0123456789abcdef";

/// Starts `orch SUBCOMMAND ARGS` and waits for the line of stdout that starts with
/// `prefix`: the process and the rest of that line. Both its outputs are drained, so a
/// chatty process never blocks on a full pipe.
fn started(args: &[&str], prefix: &str) -> (Guard, String) {
    let mut child = Command::new(ORCH)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start orch");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = std::sync::Arc::clone(&said);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            kept.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = prefix.to_owned();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix(&wanted) {
                let _ = tx.send(rest.to_owned());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(rest) => (Guard(child), rest),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "orch {args:?} did not say {prefix:?}:\n{}",
                said.lock().unwrap()
            );
        }
    }
}

/// A signed-in console session over HTTP.
struct Operator {
    addr: String,
    cookie: String,
}

impl Operator {
    fn sign_in(addr: &str, token: &str) -> Operator {
        let body = format!("token={token}");
        let reply = form(addr, "/console/login", "", &body);
        assert_eq!(reply.status, 303, "{}", reply.text());
        let cookie = reply
            .header("set-cookie")
            .and_then(|c| c.split(';').next())
            .expect("a session cookie")
            .to_owned();
        Operator {
            addr: addr.to_owned(),
            cookie,
        }
    }

    fn get(&self, path: &str) -> Reply {
        request_to(&self.addr, "GET", path, &[("Cookie", &self.cookie)], b"")
            .expect("the console answers")
    }

    fn post(&self, path: &str, body: &str) -> Reply {
        form(&self.addr, path, &self.cookie, body)
    }
}

fn form(addr: &str, path: &str, cookie: &str, body: &str) -> Reply {
    let origin = format!("http://{addr}");
    let mut headers = vec![
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin.as_str()),
    ];
    if !cookie.is_empty() {
        headers.push(("Cookie", cookie));
    }
    request_to(addr, "POST", path, &headers, body.as_bytes()).expect("the console answers")
}

/// How many runs rows a runs page shows.
fn rows(page: &str) -> usize {
    page.matches("<tr class=\"run\">").count()
}

/// The console over the runs `orch policy` keeps in `store` (the flags that name it).
async fn console_over(store: &[&str], dir: &std::path::Path) {
    let file = dir.join("gated.json");
    std::fs::write(&file, GATED_REFUND).unwrap();
    let file = file.to_str().unwrap();
    let tokens = dir.join("approvers");
    std::fs::write(&tokens, format!("finance approver {FINANCE}\n")).unwrap();
    let tokens = tokens.to_str().unwrap();
    let log = dir.join("decisions.jsonl");
    let log = log.to_str().unwrap();
    let mut args = vec![
        "policy",
        file,
        "--ext-mcp",
        "127.0.0.1:0",
        "--approvals",
        "127.0.0.1:0",
    ];
    args.extend(["--approvers", tokens, "--audit-log", log, "--audit-chain"]);
    args.extend(store);
    let (_policy, grpc) = started(&args, "ext-mcp listening on ");
    let grpc = format!("http://{grpc}");

    // 54 runs: one waits for an approver, 53 are in step Refund, ready.
    let mut gw = Gateway::connect(&grpc, "alice").await;
    gw.run_tool("lookup_order").await.unwrap();
    let asked = gw.call("issue_refund", json!({"amount": 10})).await;
    let id = asked.data()["approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..53 {
        let mut other = gw.for_run(&format!("r{i:02}"));
        other.run_tool("lookup_order").await.unwrap();
    }

    let own = dir.join("console-decisions.jsonl");
    let own = own.to_str().unwrap();
    let mut args = vec!["console", "--listen", "127.0.0.1:0", "--template", file];
    args.extend(["--namespace", "orch-policy", "--approvers", tokens]);
    args.extend(["--decision-log", log, "--audit-log", own, "--audit-chain"]);
    args.extend(store);
    let (_console, addr) = started(&args, "approvals listening on ");
    let operator = Operator::sign_in(&addr, FINANCE);

    // Paged, filtered, the waiting run first.
    let first = operator.get("/console/runs").text();
    assert!(first.contains("54 of 54 runs, 1–50 shown"), "{first}");
    assert_eq!(rows(&first), 50);
    assert!(first.find("run:alice") < first.find("run:r00"), "{first}");
    assert!(
        first.contains("rel=\"next\" href=\"/console/runs?page=2\""),
        "{first}"
    );
    let second = operator.get("/console/runs?page=2").text();
    assert_eq!(rows(&second), 4, "{second}");
    let waiting = operator.get("/console/runs?state=waiting").text();
    assert_eq!(rows(&waiting), 1, "{waiting}");

    // The waiting run's page, and its question answered from the console.
    let run = operator.get("/console/runs/run%3Aalice").text();
    assert!(
        run.contains("aria-current=\"step\"><strong>Refund</strong>"),
        "{run}"
    );
    let at = run.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = run[at..].split('"').next().unwrap().to_owned();
    let answered = operator.post(
        &format!("/console/approvals/{id}"),
        &format!("csrf={csrf}&decision=approve&reason=checked"),
    );
    assert_eq!(answered.status, 303, "{}", answered.text());
    let retried = gw.call("issue_refund", json!({"amount": 10})).await;
    assert!(retried.is_admitted());
    // The console's own decision log records the answer: who, why, approved.
    let recorded = std::fs::read_to_string(own).unwrap();
    let answer: serde_json::Value = recorded
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|r: &serde_json::Value| r["event"]["kind"] == "answer")
        .unwrap_or_else(|| panic!("an answer event in {recorded}"));
    assert_eq!(answer["event"]["by"], "token:finance", "{answer}");
    assert_eq!(answer["event"]["reason"], "checked", "{answer}");
    assert_eq!(answer["event"]["approved"], true, "{answer}");
    assert_eq!(answer["run"], "run:alice", "{answer}");
    orch_agent::audit::verify_chain(&recorded).expect("the console's log is chained");

    // What `orch verify` found, and the decision log checked.
    let template = operator.get("/console/templates").text();
    assert!(
        template.contains("reachable") && template.contains("Refund"),
        "{template}"
    );
    let checked = operator.get("/console/log").text();
    assert!(checked.contains("The chain holds"), "{checked}");
    assert!(checked.contains("No anchor was given"), "{checked}");

    // Anchored at more records than the log holds: it was cut short, and the page says so.
    let mut args = vec!["console", "--listen", "127.0.0.1:0", "--template", file];
    args.extend(["--namespace", "orch-policy", "--approvers", tokens]);
    args.extend(["--decision-log", log, "--expect-count", "100000"]);
    args.extend(store);
    let (_anchored, addr) = started(&args, "approvals listening on ");
    let checked = Operator::sign_in(&addr, FINANCE).get("/console/log").text();
    assert!(checked.contains("The chain is broken at line"), "{checked}");
}

#[tokio::test]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn the_console_alone_over_runs_in_redis() {
    let (_redis, url) = redis();
    console_over(&["--redis", &url], &temp_dir("console-redis")).await;
}

#[tokio::test]
#[ignore = "needs redis-server and redis-cli: `cargo xtask test` installs them and runs this"]
async fn the_console_alone_over_runs_in_a_redis_cluster() {
    let cluster = Cluster::start();
    let urls = cluster.urls();
    let mut store = Vec::new();
    for url in &urls {
        store.extend(["--redis-cluster", url.as_str()]);
    }
    console_over(&store, &temp_dir("console-cluster")).await;
}

#[test]
fn the_console_refuses_to_write_the_log_it_shows() {
    let dir = temp_dir("console-one-log");
    let file = dir.join("gated.json");
    std::fs::write(&file, GATED_REFUND).unwrap();
    let out = Command::new(ORCH)
        .args(["console", "--listen", "127.0.0.1:0", "--template"])
        .arg(&file)
        .args([
            "--redis",
            "redis://127.0.0.1:1/",
            "--namespace",
            "orch-policy",
        ])
        .args(["--decision-log", "d.jsonl", "--audit-log", "d.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another file than --decision-log"), "{err}");
}

#[test]
fn the_console_says_what_it_is_missing() {
    let out = Command::new(ORCH)
        .args(["console", "--listen", "127.0.0.1:0", "--template", "x.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--redis") && err.contains("--restate-admin"),
        "{err}"
    );
}
