//! `orch policy`, the command: it says where it listens, refuses templates it cannot
//! enforce and addresses it should not serve, stops cleanly on SIGTERM, and — with
//! Redis — its processes share runs, which survive a restart.

mod support;

use orch_policy::wire::authorization_error::Code;
use orch_test_support::ext_mcp::{self as ext, Answered, Gateway, REFUND_LINE};
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{redis, temp_dir, wait, Guard, ORCH};

/// `orch policy TEMPLATE --ext-mcp 127.0.0.1:0 EXTRA...`, once it says it listens: the
/// process and its gRPC URL.
fn policy(template: &std::path::Path, extra: &[&str]) -> (Guard, String) {
    let mut child = Command::new(ORCH)
        .arg("policy")
        .arg(template)
        .args(["--ext-mcp", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start orch policy");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    let Some(addr) = line.trim().strip_prefix("ext-mcp listening on ") else {
        let mut err = String::new();
        let _ = child.kill();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!("orch policy did not say where it listens: {line:?}\n{err}");
    };
    let url = format!("http://{addr}");
    (Guard(child), url)
}

fn template(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `orch policy ARGS...` expected to stop by itself: its status and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(ORCH)
        .arg("policy")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait(&mut child, Duration::from_secs(60));
    let _ = child.kill();
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status.and_then(|s| s.code()), err)
}

#[tokio::test]
async fn it_says_where_it_listens_and_enforces_the_template() {
    let dir = temp_dir("policy-listen");
    let file = template(&dir, "t.json", REFUND_LINE);
    let (mut process, url) = policy(&file, &[]);
    let mut gw = Gateway::connect(&url, "alice").await;
    assert_eq!(
        gw.call("issue_refund", json!({})).await.code(),
        Code::PermissionDenied
    );
    gw.run_tool("lookup_order").await.unwrap();
    gw.run_tool("issue_refund").await.unwrap();
    // SIGTERM: a clean stop, status 0.
    let pid = process.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = wait(&mut process.0, Duration::from_secs(30)).expect("it stops");
    assert_eq!(status.code(), Some(0));
}

/// `--mode observe`: the process admits what the template refuses, logs what it would
/// have decided (`"mode":"observe"`, the refusal and its rule), and the log replays
/// exactly under the same template.
#[tokio::test]
async fn observe_mode_admits_and_logs_what_it_would_refuse() {
    let dir = temp_dir("policy-observe");
    let file = template(&dir, "t.json", REFUND_LINE);
    let log = dir.join("decisions.jsonl");
    let log_arg = log.display().to_string();
    let (_process, url) = policy(&file, &["--mode", "observe", "--audit-log", &log_arg]);
    let mut gw = Gateway::connect(&url, "alice").await;
    gw.run_tool("issue_refund")
        .await
        .expect("observed, not refused");
    gw.run_tool("lookup_order").await.unwrap();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("the decision log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    assert!(
        records.iter().all(|r| r["mode"] == "observe"),
        "{records:?}"
    );
    let call = records
        .iter()
        .find(|r| r["event"]["kind"] == "call" && r["event"]["tool"] == "issue_refund")
        .expect("the refund's record");
    assert_eq!(call["decision"], "refused", "{call}");
    assert_eq!(call["outcome"], "not_allowed", "{call}");
    let replayed = Command::new(ORCH)
        .args(["replay", &file.display().to_string(), &log_arg])
        .output()
        .expect("orch replay");
    assert_eq!(
        replayed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&replayed.stdout)
    );
}

/// A payments workflow with rules on arguments (semantics §16).
const PAYMENTS: &str = r#"{
  "agentId": "payments",
  "tools": ["get_contacts", "send_money"],
  "orchestration": {
    "approve": [{"name": "large-payment", "tool": "send_money", "when": {"path": "/amount", "range": {"min": 1000}}}],
    "rules": [
      {"name": "known-recipient", "tool": "send_money", "require": {"path": "/to", "inResult": {"tool": "get_contacts", "path": "/contacts/*/iban"}}},
      {"name": "limit", "tool": "send_money", "require": {"path": "/amount", "range": {"min": 0.01, "max": 5000}}}
    ],
    "steps": [{"name": "Assist", "isDefault": true}]
  }
}"#;

#[tokio::test]
async fn the_process_judges_arguments_with_values_from_earlier_results() {
    let dir = temp_dir("policy-rules");
    let file = template(&dir, "payments.json", PAYMENTS);
    let (_process, url) = policy(&file, &[]);
    let mut gw = Gateway::connect(&url, "ana").await;
    let pay = |to: &str, amount: f64| json!({"to": to, "amount": amount});
    // No contacts looked up yet: no recipient is known.
    let refused = gw.call("send_money", pay("DE02", 25.0)).await;
    assert_eq!(refused.code(), Code::PermissionDenied);
    let data = refused.data();
    assert_eq!(data["refusal"]["reason"], "broken_rule", "{data}");
    assert_eq!(data["refusal"]["rule"], "known-recipient", "{data}");
    // The contacts' result (structured content) is remembered for the run.
    let token = gw.call("get_contacts", json!({})).await.token();
    let contacts = json!({"contacts": [{"name": "Landlord", "iban": "DE02"}]});
    let result = json!({"content": [{"type": "text", "text": contacts.to_string()}], "structuredContent": contacts});
    assert_eq!(gw.respond(token.as_deref(), result).await, Answered::Pass);
    let token = gw.call("send_money", pay("DE02", 25.0)).await.token();
    assert_eq!(
        gw.respond(token.as_deref(), ext::ok_result()).await,
        Answered::Pass
    );
    // An injected recipient is refused with the rule, the value and why.
    let injected = gw.call("send_money", pay("GB33ATTACKER", 25.0)).await;
    let data = injected.data();
    assert_eq!(data["refusal"]["rule"], "known-recipient", "{data}");
    let message = data["refusal"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(r#"`/to` is "GB33ATTACKER": it must be one of the values earlier results of `get_contacts` held at `/contacts/*/iban`"#),
        "{message}"
    );
    // Over the limit: refused, even to a known recipient.
    let data = gw.call("send_money", pay("DE02", 9000.0)).await.data();
    assert_eq!(data["refusal"]["rule"], "limit", "{data}");
    // A large payment is put to a human; a small one is not.
    let asked = gw.call("send_money", pay("DE02", 1200.0)).await.data();
    assert!(asked["approval"]["requestState"].is_string(), "{asked}");
    // Another run knows no contacts.
    let mut other = Gateway::connect(&url, "bob").await;
    let data = other.call("send_money", pay("DE02", 25.0)).await.data();
    assert_eq!(data["refusal"]["rule"], "known-recipient", "{data}");
}

#[test]
fn templates_it_cannot_enforce_and_exposed_addresses_are_refused() {
    let dir = temp_dir("policy-refused");
    let chatty = template(
        &dir,
        "chatty.json",
        r#"{"name": "chatty", "tools": ["a"],
            "steps": [{"name": "S", "isDefault": true},
                      {"name": "T", "conditions": [{"type": "message_contains", "value": "refund"}]}]}"#,
    );
    let (status, err) = refused(&[chatty.to_str().unwrap(), "--ext-mcp", "127.0.0.1:0"]);
    assert_eq!(status, Some(1), "{err}");
    assert!(err.contains("reads the user's message"), "{err}");
    assert!(
        err.contains(r#"step `T`: message_contains "refund""#),
        "{err}"
    );

    let broken = template(&dir, "broken.json", r#"{"name": "x", "steps": ["#);
    let (status, err) = refused(&[broken.to_str().unwrap(), "--ext-mcp", "127.0.0.1:0"]);
    assert_eq!(status, Some(1), "{err}");

    let fine = template(&dir, "t.json", REFUND_LINE);
    let (status, err) = refused(&[fine.to_str().unwrap(), "--ext-mcp", "0.0.0.0:0"]);
    assert_eq!(status, Some(2), "{err}");
    assert!(err.contains("no authentication of its own"), "{err}");
    assert!(err.contains("--allow-remote"), "{err}");

    let (status, err) = refused(&[fine.to_str().unwrap(), "--ext-mcp", "not an address"]);
    assert_eq!(status, Some(2), "{err}");
    assert!(err.contains("cannot listen on not an address"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn processes_share_runs_through_redis_and_runs_survive_a_restart() {
    let (_redis, redis_url) = redis();
    let dir = temp_dir("policy-redis");
    let file = template(&dir, "t.json", REFUND_LINE);
    // One decision log per process, each record signed at once (a killed process writes
    // no checkpoint at shutdown).
    let logs = [dir.join("first.jsonl"), dir.join("second.jsonl")];
    let prefix = dir.join("audit").display().to_string();
    let made = Command::new(ORCH)
        .args(["audit", "keygen", &prefix])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let args = |log: &std::path::Path| {
        let log = log.to_str().unwrap().to_owned();
        vec![
            "--redis".to_owned(),
            redis_url.clone(),
            "--audit-log".to_owned(),
            log,
            "--audit-chain".to_owned(),
            "--audit-key".to_owned(),
            format!("{prefix}.key"),
            "--checkpoint-every".to_owned(),
            "1".to_owned(),
        ]
    };
    let first_args = args(&logs[0]);
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let second_args = args(&logs[1]);
    let second_args: Vec<&str> = second_args.iter().map(String::as_str).collect();
    let (first, first_url) = policy(&file, &first_args);
    let (_second, second_url) = policy(&file, &second_args);
    let mut via_first = Gateway::connect(&first_url, "frank").await;
    let mut via_second = Gateway::connect(&second_url, "frank").await;
    via_first.run_tool("lookup_order").await.unwrap();
    // The call is admitted by one process and its result reported to the other.
    let token = via_second.call("issue_refund", json!({})).await.token();
    assert_eq!(
        via_first.respond(token.as_deref(), ext::ok_result()).await,
        Answered::Pass
    );
    // Restart the first: the run goes on where it was (the email is next).
    drop(first);
    let (_restarted, restarted_url) = policy(&file, &first_args);
    let mut via_restarted = Gateway::connect(&restarted_url, "frank").await;
    assert_eq!(
        via_restarted.call("issue_refund", json!({})).await.code(),
        Code::PermissionDenied
    );
    via_restarted.run_tool("send_email").await.unwrap();
    // Each process kept its decisions, the restarted one continuing the first's chain.
    let mut decisions = Vec::new();
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        decisions.extend(
            text.lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|l| l.get("checkpoint").is_none()),
        );
        let public = format!("{prefix}.pub");
        let verified = Command::new(ORCH)
            .args([
                "audit",
                "verify",
                log.to_str().unwrap(),
                "--public-key",
                &public,
            ])
            .args(["--format", "json"])
            .output()
            .unwrap();
        assert!(
            verified.status.success(),
            "{}",
            String::from_utf8_lossy(&verified.stdout)
        );
        let v: serde_json::Value = serde_json::from_slice(&verified.stdout).unwrap();
        assert_eq!(v["unanchored"], 0, "every record is signed: {v}");
        assert_eq!(v["checkpoints"], v["records"], "{v}");
    }
    let count = |what: &str| decisions.iter().filter(|d| d["decision"] == what).count();
    // lookup_order, issue_refund, send_email admitted and recorded; one refund refused.
    assert_eq!(count("admitted"), 3, "{decisions:#?}");
    assert_eq!(count("recorded"), 3, "{decisions:#?}");
    assert_eq!(count("refused"), 1, "{decisions:#?}");
    assert!(
        decisions.iter().all(|d| d["run"] == "run:frank"),
        "{decisions:#?}"
    );
}
