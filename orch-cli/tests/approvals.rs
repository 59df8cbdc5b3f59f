//! Approvers elsewhere, as deployed: `orch policy` with runs in a real `redis-server`
//! serves the approvals API; a gated call's question is posted (and announced to a
//! webhook), found and answered with `orch approvals` by an approver who is not the
//! agent's user, and the call's retry runs once; a second instance on the same Redis
//! sees and answers the same questions; viewers and strangers are turned away; the
//! decision log says who answered.

mod support;

use orch_policy::wire::authorization_error::Code;
use orch_test_support::ext_mcp::{self as ext, Checked, Gateway, GATED_REFUND};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{redis, temp_dir, Guard, ORCH};

const FINANCE: &str = "finance-0123456789abcdef";
const AUDITOR: &str = "auditor-0123456789abcdef";

/// `orch policy` with the approvals API: the process, its gRPC URL and the API's URL.
fn policy_with_approvals(
    template: &std::path::Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Guard, String, String) {
    let mut child = Command::new(ORCH)
        .envs(env.iter().copied())
        .arg("policy")
        .arg(template)
        .args(["--ext-mcp", "127.0.0.1:0", "--approvals", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start orch policy");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for _ in 0..2 {
            let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
        }
    });
    let mut urls = (String::new(), String::new());
    for _ in 0..2 {
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        if let Some(addr) = line.strip_prefix("approvals listening on ") {
            urls.1 = format!("http://{addr}");
        } else if let Some(addr) = line.strip_prefix("ext-mcp listening on ") {
            urls.0 = format!("http://{addr}");
        } else {
            let mut err = String::new();
            let _ = child.kill();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("orch policy did not say where it listens: {line:?}\n{err}");
        }
    }
    (Guard(child), urls.0, urls.1)
}

/// `orch approvals ARGS... --json` against `url` with `token`: its status and the JSON
/// it printed (or its stderr, as a string).
fn approvals(url: &str, token: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let output = Command::new(ORCH)
        .arg("approvals")
        .args(args)
        .args(["--url", url, "--json"])
        .env("ORCH_APPROVALS_TOKEN", token)
        .output()
        .expect("run orch approvals");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), json, stderr)
}

/// A webhook receiver: each request's body and signature header, as they come.
fn webhook() -> (String, std::sync::mpsc::Receiver<(Value, String)>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut length, mut signature) = (0, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("x-orch-signature:") {
                    signature = line["x-orch-signature:".len()..].trim().to_owned();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            use std::io::Write;
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n");
            let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let expected = orch_approvals::webhook::signature("hook-secret", &body);
            let verified = if signature == expected {
                "signed"
            } else {
                "unsigned"
            };
            if tx.send((value, verified.to_owned())).is_err() {
                return;
            }
        }
    });
    (url, rx)
}

#[tokio::test]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn an_approver_elsewhere_answers_a_gated_call_once_on_any_instance() {
    let (_redis, redis_url) = redis();
    let dir = temp_dir("approvals-policy");
    let file = dir.join("gated.json");
    std::fs::write(&file, GATED_REFUND).unwrap();
    let tokens = dir.join("approvers");
    std::fs::write(
        &tokens,
        format!("# who may answer\nfinance approver {FINANCE}\nauditor viewer {AUDITOR}\n"),
    )
    .unwrap();
    let log = dir.join("decisions.jsonl");
    let (hook_url, hooks) = webhook();
    let tokens = tokens.to_str().unwrap();
    // Both instances share the store, the approvers and the webhook, as deployed.
    let common = [
        "--redis",
        &redis_url,
        "--approvers",
        tokens,
        "--webhook",
        &hook_url,
    ];
    let mut first_args = common.to_vec();
    first_args.extend(["--audit-log", log.to_str().unwrap()]);
    // Each instance writes its own decision log.
    let other_log = dir.join("other-decisions.jsonl");
    let mut other_args = common.to_vec();
    other_args.extend(["--audit-log", other_log.to_str().unwrap()]);
    // The webhook's secret comes from the environment.
    let secret = [("ORCH_WEBHOOK_SECRET", "hook-secret")];
    let (_a, grpc, api) = policy_with_approvals(&file, &first_args, &secret);
    let (_b, _, other_api) = policy_with_approvals(&file, &other_args, &secret);

    // The agent's call is gated: refused with the question, which is posted.
    let mut gw = Gateway::connect(&grpc, "alice").await;
    gw.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": "A-1", "amount": 1200.50, "note": "<script>x</script>"});
    let asked = gw.call("issue_refund", args.clone()).await;
    assert_eq!(asked.code(), Code::PermissionDenied);
    let id = asked.data()["approval"]["question"]
        .as_str()
        .expect("the question's id")
        .to_owned();
    assert!(id.starts_with("q-"), "{id}");
    assert!(
        asked.error().reason.contains(&id),
        "{:?}",
        asked.error().reason
    );

    // The webhook is told, signed, with the exact arguments.
    let (announced, signed) = hooks
        .recv_timeout(Duration::from_secs(10))
        .expect("a webhook call");
    assert_eq!(signed, "signed");
    assert_eq!(announced["type"], "question.asked");
    assert_eq!(announced["question"]["id"], id.as_str());
    assert_eq!(announced["question"]["tool"], "issue_refund");
    let sent: Value =
        serde_json::from_str(announced["question"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(sent, args);

    // The agent retrying is not a new question: the same one still waits.
    let again = gw.call("issue_refund", args.clone()).await;
    assert_eq!(again.code(), Code::PermissionDenied);
    assert_eq!(again.data()["approval"]["question"], id.as_str());

    // Both instances list it; a viewer may read, not answer; a stranger may not read.
    for url in [&api, &other_api] {
        let (status, listed, err) = approvals(url, AUDITOR, &["list"]);
        assert_eq!(status, Some(0), "{err}");
        let questions = listed["questions"].as_array().unwrap();
        assert_eq!(questions.len(), 1, "{listed}");
        assert_eq!(questions[0]["id"], id.as_str());
        assert_eq!(questions[0]["step"], "Refund");
        assert_eq!(questions[0]["template"], "gated-refund");
    }
    let (status, _, err) = approvals(&api, AUDITOR, &["approve", &id]);
    assert_eq!(status, Some(1));
    assert!(err.contains("approver role"), "{err}");
    let (status, _, err) = approvals(&api, "not-a-token-of-anyone", &["list"]);
    assert_eq!(status, Some(1));
    assert!(err.contains("401"), "{err}");

    // The approver answers on the other instance; a second answer applies to nothing.
    let (status, answered, err) = approvals(
        &other_api,
        FINANCE,
        &["approve", &id, "--reason", "order A-1 checked"],
    );
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(answered["state"], "approved");
    assert_eq!(answered["answer"]["by"], "token:finance");
    let (status, twice, err) = approvals(&api, FINANCE, &["reject", &id]);
    assert_eq!(status, Some(1));
    assert!(err.contains("approved already, by token:finance"), "{err}");
    assert_eq!(twice["question"]["state"], "approved");
    let (hooked, _) = hooks
        .recv_timeout(Duration::from_secs(10))
        .expect("the answer announced");
    assert_eq!(hooked["type"], "question.answered");

    // The retry runs once; the list of waiting questions is empty.
    let admitted = gw.call("issue_refund", args.clone()).await;
    let Checked::Admitted(token, _) = admitted else {
        panic!("{admitted:?}")
    };
    assert_eq!(
        gw.respond(token.as_deref(), ext::ok_result()).await,
        ext::Answered::Pass
    );
    let (_, listed, _) = approvals(&api, AUDITOR, &["list"]);
    assert_eq!(listed["questions"], json!([]));
    let (status, _, err) = approvals(&api, FINANCE, &["approve", &id]);
    assert_eq!(status, Some(1));
    assert!(err.contains("approved already"), "{err}");
    // The approval was spent: the same call again does not run.
    let again = gw.call("issue_refund", args.clone()).await;
    assert!(!again.is_admitted(), "{again:?}");
    assert!(
        again.data()["approval"]["question"].is_null(),
        "{:?}",
        again.data()
    );

    // The decision log of the instance that took the answer says who answered, and why.
    let lines = support::log_lines(&other_log);
    let answer = lines
        .iter()
        .find(|l| l["event"]["kind"] == "answer")
        .expect("the answer is logged");
    assert_eq!(answer["event"]["by"], "token:finance");
    assert_eq!(answer["event"]["reason"], "order A-1 checked");
    assert_eq!(answer["decision"], "approved");
}

#[test]
fn approvals_flags_are_checked_before_anything_is_served() {
    let dir = temp_dir("approvals-flags");
    let file = dir.join("gated.json");
    std::fs::write(&file, GATED_REFUND).unwrap();
    let bad = dir.join("bad");
    std::fs::write(&bad, "finance admin 0123456789abcdef0123\n").unwrap();
    for (args, says) in [
        (vec!["--approvals", "127.0.0.1:0"], "--approvers FILE"),
        (
            vec!["--approvers", bad.to_str().unwrap()],
            "needs --approvals",
        ),
        (
            vec![
                "--approvals",
                "127.0.0.1:0",
                "--approvers",
                bad.to_str().unwrap(),
            ],
            "line 1: the role `admin`",
        ),
    ] {
        let output = Command::new(ORCH)
            .arg("policy")
            .arg(&file)
            .args(["--ext-mcp", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let output = Command::new(ORCH)
        .args(["approvals", "list"])
        .env_remove("ORCH_APPROVALS_URL")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--url"));
    // The API in front of Restate needs who may answer, too.
    let output = Command::new(ORCH)
        .args(["approvals", "serve", "--listen", "127.0.0.1:0"])
        .args([
            "--restate-admin",
            "http://127.0.0.1:9",
            "--restate-ingress",
            "http://127.0.0.1:9",
        ])
        .env_remove("ORCH_APPROVERS_FILE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("--approvers FILE"), "{err}");
}

#[tokio::test]
#[ignore = "needs the MCP Python SDK (PyJWT): `cargo xtask test` installs it and runs this"]
async fn approvers_jwts_grant_their_roles_and_nothing_else() {
    let python = support::python();
    let dir = temp_dir("approvals-jwt");
    let file = dir.join("gated.json");
    std::fs::write(&file, GATED_REFUND).unwrap();
    let keys = dir.join("idp");
    support::jwt_keys(&python, &keys);
    let jwks = keys.join("jwks.json");
    let (_gw, grpc, api) = policy_with_approvals(
        &file,
        &[
            "--approver-jwks",
            jwks.to_str().unwrap(),
            "--approver-issuer",
            "https://idp.example",
            "--approver-audience",
            "orch-approvals",
        ],
        &[],
    );
    let token = |sub: &str, roles: Value, extra: &[&str]| {
        let claims = json!({"iss": "https://idp.example", "aud": "orch-approvals", "sub": sub, "roles": roles});
        support::jwt(&python, &keys, "rsa1", claims, extra)
    };
    let mut gw = Gateway::connect(&grpc, "alice").await;
    gw.run_tool("lookup_order").await.unwrap();
    let asked = gw
        .call("issue_refund", json!({"order": "J-1", "amount": 10}))
        .await;
    let id = asked.data()["approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();

    let viewer = token("carol-audit", json!("openid orch:viewer"), &[]);
    let (status, listed, err) = approvals(&api, &viewer, &["list"]);
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(listed["questions"][0]["id"], id.as_str());
    let (status, _, err) = approvals(&api, &viewer, &["approve", &id]);
    assert_eq!(status, Some(1));
    assert!(err.contains("approver role"), "{err}");
    for (bad, says) in [
        (token("dave", json!(["orch:user"]), &[]), "grants neither"),
        (
            token("erin", json!(["orch:approver"]), &["--exp-in", "-120"]),
            "expired",
        ),
        (
            support::jwt(
                &python,
                &keys,
                "rsa1",
                json!({"iss": "https://idp.example", "aud": "elsewhere", "sub": "f", "roles": ["orch:approver"]}),
                &[],
            ),
            "audience",
        ),
    ] {
        let (status, _, err) = approvals(&api, &bad, &["approve", &id]);
        assert_eq!(status, Some(1), "{err}");
        assert!(err.contains(says), "{says}: {err}");
    }
    let finance = token("alice-finance", json!(["orch:approver"]), &[]);
    let (status, answered, err) = approvals(&api, &finance, &["approve", &id, "--reason", "ok"]);
    assert_eq!(status, Some(0), "{err}");
    assert_eq!(answered["answer"]["by"], "jwt:alice-finance");
    let admitted = gw
        .call("issue_refund", json!({"order": "J-1", "amount": 10}))
        .await;
    assert!(admitted.is_admitted(), "{admitted:?}");
}
