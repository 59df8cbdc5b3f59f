//! Approvals through `orch mcp` (semantics §13), with the official Python MCP SDK as the
//! client (`tests/mcp/approval_client.py`, answering through its elicitation callback)
//! and as the upstream (`tests/mcp/shop_tools.py`, logging every call it runs). The
//! workflow (`tests/mcp/gated_shop.json`) gates `pay`.
//!
//! On a handshake revision the gateway asks with `elicitation/create` while the call
//! waits; on 2026-07-28 it answers with an `InputRequiredResult` and the SDK retries with
//! the answer. Either way: a rejected payment never reaches the upstream, a rejection is
//! held (the same call is refused without asking again), an approved payment runs
//! exactly once, a dismissed question runs nothing, and a client that cannot be asked is
//! refused. Every promise is checked on the upstream's own log.

mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::http::{run_token, MODERN};
use support::{here, log_lines, python, temp_dir, Gateway};

const OPERATOR: &str = "operator-token-for-the-approval-tests";

/// approval_client.py's report.
fn client(
    python: &str,
    gw: &Gateway,
    mode: &str,
    run: &str,
    answers: &str,
    extra: &[&str],
) -> Value {
    let token = run_token(&gw.addr, Some(OPERATOR));
    let mut args = vec![
        "--url", &gw.url, "--token", &token, "--mode", mode, "--run", run,
    ];
    args.extend(["--answers", answers]);
    args.extend(extra);
    support::python_report(python, "approval_client.py", &args)
}

/// `orch mcp` on the gated shop over HTTP with `extra` options, its upstream logging
/// to `log`.
fn gated_gateway(python: &str, log: &std::path::Path, extra: &[&str]) -> Gateway {
    let upstream = support::shop_upstream(python, log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    Gateway::http(
        &here("gated_shop.json"),
        extra,
        &[("ORCH_MCP_TOKEN", OPERATOR)],
        &upstream,
    )
}

/// The payments the upstream ran for `run`: their amounts.
fn paid(log: &std::path::Path, run: &str) -> Vec<i64> {
    log_lines(log)
        .iter()
        .filter(|l| l["tool"] == "pay" && l["run"] == run && l["event"] == "start")
        .map(|l| l["amount"].as_i64().unwrap_or(-1))
        .collect()
}

#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn a_human_approves_or_rejects_each_payment_on_both_revisions() {
    let python = python();
    let dir = temp_dir("approvals");
    let log = dir.join("executed.log");
    let gw = gated_gateway(&python, &log, &[]);
    for (mode, version) in [(MODERN, MODERN), ("legacy", "2025-11-25")] {
        let run = format!("{mode}-a");
        let seen = client(&python, &gw, mode, &run, "reject,approve", &[]);
        assert_eq!(seen["version"], version, "{seen}");
        let calls = seen["calls"].as_array().unwrap();
        // pay 5: asked once, rejected; never ran.
        assert_eq!(calls[0]["asked"], 1, "{mode}: {seen}");
        assert_eq!(calls[0]["isError"], true, "{mode}: {seen}");
        assert_eq!(
            calls[0]["structured"]["refusal"]["reason"], "rejected",
            "{mode}"
        );
        assert!(
            calls[0]["text"]
                .as_str()
                .unwrap()
                .contains("a human rejected this call in step `Shop`"),
            "{mode}: {seen}"
        );
        // pay 5 again: the rejection is held; no new question.
        assert_eq!(calls[1]["asked"], 0, "{mode}: {seen}");
        assert_eq!(
            calls[1]["structured"]["refusal"]["reason"], "rejected",
            "{mode}"
        );
        // pay 6: asked, approved, ran.
        assert_eq!(calls[2]["asked"], 1, "{mode}: {seen}");
        assert_eq!(calls[2]["isError"], false, "{mode}: {seen}");
        assert_eq!(calls[3]["tool"], "receipt");
        assert_eq!(calls[3]["isError"], false, "{mode}: {seen}");
        // The question shows the exact call and asks for a boolean.
        let q = &seen["questions"][0];
        let message = q["message"].as_str().unwrap();
        assert!(
            message.contains("`pay`") && message.contains("\"amount\": 5"),
            "{message}"
        );
        assert_eq!(q["schema"]["required"], json!(["approve"]), "{q}");
        assert_eq!(
            q["schema"]["properties"]["approve"]["type"], "boolean",
            "{q}"
        );
        assert_eq!(
            paid(&log, &run),
            [6],
            "{mode}: exactly the approved payment ran"
        );

        // A dismissed question runs nothing, and every call asks again.
        let run = format!("{mode}-cancel");
        let seen = client(&python, &gw, mode, &run, "cancel", &[]);
        let calls = seen["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 5, "{mode}: {seen}");
        for call in &calls[..4] {
            assert_eq!(call["asked"], 1, "{mode}: {seen}");
            assert_eq!(
                call["structured"]["refusal"]["reason"], "needs_approval",
                "{seen}"
            );
        }
        assert_eq!(
            calls[4]["structured"]["refusal"]["reason"], "not_allowed",
            "{seen}"
        );
        assert!(paid(&log, &run).is_empty(), "{mode}");

        // A client that declares no elicitation capability cannot be asked: refused.
        let run = format!("{mode}-mute");
        let seen = client(&python, &gw, mode, &run, "", &["--no-elicitation"]);
        let first = &seen["calls"][0];
        assert_eq!(first["asked"], 0, "{mode}: {seen}");
        assert_eq!(
            first["structured"]["refusal"]["reason"], "needs_approval",
            "{seen}"
        );
        assert!(paid(&log, &run).is_empty(), "{mode}");
    }
}

/// A tools/call on 2026-07-28 over raw HTTP, by a client that can be asked.
fn call(addr: &str, token: &str, id: i64, arguments: Value, retry: Option<(&str, Value)>) -> Value {
    let mut meta = support::http::modern_meta(MODERN);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let mut params = json!({"name": "pay", "arguments": arguments, "_meta": meta});
    if let Some((state, responses)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = responses;
    }
    let reply = support::http::modern_request(addr, Some(token), id, "tools/call", params, &[]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.response(id).expect("a response")
}

/// Rules on arguments (semantics §16) through the `orch mcp` process, in front of the
/// official Python SDK's server: a payment over the limit is refused with the rule's name
/// and words and never reaches the upstream; a small one runs without a question; a
/// large one runs once, after a human approved that exact call.
#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn rules_on_arguments_refuse_and_gate_calls_by_what_they_carry() {
    let python = python();
    let dir = temp_dir("approvals-rules");
    let log = dir.join("executed.log");
    let upstream = support::shop_upstream(&python, &log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    let gw = Gateway::http(
        &here("rules_shop.json"),
        &[],
        &[("ORCH_MCP_TOKEN", OPERATOR)],
        &upstream,
    );
    let addr = gw.addr.as_str();
    let token = run_token(addr, Some(OPERATOR));

    let small = call(addr, &token, 1, json!({"run": "rules", "amount": 5}), None);
    assert_eq!(small["result"]["isError"], false, "{small}");
    assert_eq!(paid(&log, "rules"), [5]);

    let over = call(
        addr,
        &token,
        2,
        json!({"run": "rules", "amount": 5000}),
        None,
    );
    let facts = &over["result"]["_meta"]["orch/refusal"];
    assert_eq!(over["result"]["isError"], true, "{over}");
    assert_eq!(facts["reason"], "broken_rule", "{over}");
    assert_eq!(facts["rule"], "limit", "{over}");
    let words = over["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        words.contains("it breaks rule `limit` in step `Shop`: `/amount` is 5000: it must be a number from 1 to 1000"),
        "{words}"
    );
    assert_eq!(paid(&log, "rules"), [5], "a broken rule runs nothing");

    let large = json!({"run": "rules", "amount": 500});
    let asked = call(addr, &token, 3, large.clone(), None);
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    assert_eq!(paid(&log, "rules"), [5], "nothing runs before the answer");
    let approve = json!({"orch_approval": {"action": "accept", "content": {"approve": true}}});
    let done = call(addr, &token, 4, large.clone(), Some((&state, approve)));
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(paid(&log, "rules"), [5, 500]);
    // The approval was for that call: the same payment again is asked about again.
    let again = call(addr, &token, 5, large, None);
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(paid(&log, "rules"), [5, 500]);
}

#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn request_state_cannot_be_replayed_forged_or_moved_to_another_call() {
    let python = python();
    let dir = temp_dir("approvals-raw");
    let log = dir.join("executed.log");
    let gw = gated_gateway(&python, &log, &[]);
    let addr = gw.addr.as_str();
    let token = run_token(addr, Some(OPERATOR));
    let args = json!({"run": "raw", "amount": 9});

    // Without capability the call is refused; with it, the client is asked.
    let asked = call(addr, &token, 1, args.clone(), None);
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let state = result["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    let question = &result["inputRequests"]["orch_approval"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["mode"], "form", "{asked}");
    assert!(
        paid(&log, "raw").is_empty(),
        "nothing runs before the answer"
    );

    let approve = json!({"orch_approval": {"action": "accept", "content": {"approve": true}}});
    // The answer moved to other arguments is an error, and nothing runs.
    let moved = call(
        addr,
        &token,
        2,
        json!({"run": "raw", "amount": 900}),
        Some((&state, approve.clone())),
    );
    assert_eq!(moved["error"]["code"], -32602, "{moved}");
    // A forged state is an error.
    let forged = call(
        addr,
        &token,
        3,
        args.clone(),
        Some(("orch-q1:00", approve.clone())),
    );
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    // A malformed answer is an error.
    let bad = call(
        addr,
        &token,
        4,
        args.clone(),
        Some((&state, json!({"orch_approval": {"action": "accept"}}))),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(paid(&log, "raw").is_empty());

    // The real answer runs the call once.
    let done = call(
        addr,
        &token,
        5,
        args.clone(),
        Some((&state, approve.clone())),
    );
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(paid(&log, "raw"), [9]);
    // Replayed, the same retry runs nothing: the run no longer holds that question (and
    // `pay` is no longer allowed: the run is in step `Paid`).
    let replayed = call(addr, &token, 6, args, Some((&state, approve)));
    assert_eq!(replayed["result"]["isError"], true, "{replayed}");
    assert_eq!(
        replayed["result"]["_meta"]["orch/refusal"]["reason"], "stale_answer",
        "{replayed}"
    );
    assert_eq!(paid(&log, "raw"), [9], "a replay runs nothing");
}

/// Where a payment stays allowed after one ran, an approved retry sent again — in a row,
/// or many copies at once — runs the payment once: a copy that finds its question
/// answered is refused as a stale answer, and nothing is asked on it (a question asked
/// then would be answered by the next copy).
#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn one_approval_runs_one_payment_however_often_it_is_sent() {
    let python = python();
    let dir = temp_dir("approvals-repeat");
    let log = dir.join("executed.log");
    let upstream = support::shop_upstream(&python, &log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    let gw = Gateway::http(
        &here("repeat_shop.json"),
        &[],
        &[("ORCH_MCP_TOKEN", OPERATOR)],
        &upstream,
    );
    let addr = gw.addr.as_str();
    let approve = json!({"orch_approval": {"action": "accept", "content": {"approve": true}}});
    for (run, copies_at_once) in [("row", 1), ("burst", 8)] {
        let token = run_token(addr, Some(OPERATOR));
        let args = json!({"run": run, "amount": 7});
        let asked = call(addr, &token, 1, args.clone(), None);
        let state = asked["result"]["requestState"]
            .as_str()
            .unwrap_or_else(|| panic!("asked: {asked}"))
            .to_owned();
        let mut replies = Vec::new();
        for round in 0..5i64 {
            let sent: Vec<_> = (0..copies_at_once)
                .map(|i| {
                    let (addr, token, state) = (addr.to_owned(), token.clone(), state.clone());
                    let (args, approve) = (args.clone(), approve.clone());
                    let id = 10 + round * 100 + i;
                    std::thread::spawn(move || {
                        call(&addr, &token, id, args, Some((&state, approve)))
                    })
                })
                .collect();
            replies.extend(sent.into_iter().map(|t| t.join().unwrap()));
        }
        assert_eq!(paid(&log, run), [7], "{run}: {replies:?}");
        let ran = replies
            .iter()
            .filter(|r| r["result"]["isError"] == false)
            .count();
        assert_eq!(ran, 1, "{run}: {replies:?}");
        for reply in replies.iter().filter(|r| r["result"]["isError"] != false) {
            assert_ne!(
                reply["result"]["resultType"], "input_required",
                "asked again: {reply}"
            );
            let reason = &reply["result"]["_meta"]["orch/refusal"]["reason"];
            assert!(
                reason == "stale_answer" || reason == "busy",
                "{run}: {reply}"
            );
        }
    }
}

#[test]
#[ignore = "needs the MCP Python SDK and redis-server: `cargo xtask test` installs them and runs this"]
fn a_question_asked_by_one_instance_is_answered_through_another() {
    let python = python();
    let (_redis, redis_url) = support::redis();
    let dir = temp_dir("approvals-shared");
    let log = dir.join("executed.log");
    let extra = ["--redis", redis_url.as_str(), "--namespace", "approvals"];
    let a = gated_gateway(&python, &log, &extra);
    let b = gated_gateway(&python, &log, &extra);
    let token = run_token(&a.addr, Some(OPERATOR));
    let args = json!({"run": "shared", "amount": 3});
    let asked = call(&a.addr, &token, 1, args.clone(), None);
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("asked: {asked}"))
        .to_owned();
    let approve = json!({"orch_approval": {"action": "accept", "content": {"approve": true}}});
    // The retry lands on the other instance: the run in Redis holds the question.
    let done = call(
        &b.addr,
        &token,
        2,
        args.clone(),
        Some((&state, approve.clone())),
    );
    assert_eq!(done["result"]["isError"], false, "{done}");
    // Replayed through the first instance: nothing runs again.
    let replayed = call(&a.addr, &token, 3, args, Some((&state, approve)));
    assert_eq!(replayed["result"]["isError"], true, "{replayed}");
    assert_eq!(paid(&log, "shared"), [3]);
}

#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn the_gateway_writes_a_chained_decision_log_that_replays() {
    let python = python();
    let dir = temp_dir("approvals-audit");
    let log = dir.join("executed.log");
    let audit = dir.join("decisions.jsonl");
    let audit_arg = audit.display().to_string();
    let gw = gated_gateway(&python, &log, &["--audit-log", &audit_arg, "--audit-chain"]);
    let addr = gw.addr.as_str();
    let token = run_token(addr, Some(OPERATOR));
    // Refused: no receipt before paying.
    let mut meta = support::http::modern_meta(MODERN);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let receipt = json!({"name": "receipt", "arguments": {"run": "audited"}, "_meta": meta});
    let r = support::http::modern_request(addr, Some(&token), 1, "tools/call", receipt, &[]);
    assert_eq!(r.response(1).unwrap()["result"]["isError"], true);
    // Asked, approved, run.
    let args = json!({"run": "audited", "amount": 4});
    let asked = call(addr, &token, 2, args.clone(), None);
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    let approve = json!({"orch_approval": {"action": "accept", "content": {"approve": true}}});
    let done = call(addr, &token, 3, args, Some((&state, approve)));
    assert_eq!(done["result"]["isError"], false, "{done}");
    drop(gw);

    let text = std::fs::read_to_string(&audit).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decisions: Vec<&str> = records
        .iter()
        .map(|r| r["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        [
            "tools",
            "refused",
            "needs_approval",
            "asked",
            "approved",
            "admitted",
            "recorded"
        ],
        "{text}"
    );
    assert_eq!(records[1]["rule"], json!({"rule": "step", "step": "Shop"}));
    assert_eq!(records[5]["rule"], json!({"rule": "gate", "step": "Shop"}));
    assert_eq!(records[6]["after"]["step"], "Paid");
    let orch = |args: &[&str]| {
        std::process::Command::new(support::ORCH)
            .args(args)
            .output()
            .expect("orch runs")
    };
    let verified = orch(&["audit", "verify", &audit_arg]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let replayed = orch(&["replay", &here("gated_shop.json"), &audit_arg]);
    assert_eq!(replayed.status.code(), Some(0), "{replayed:?}");
}

/// With `--audit-key`, the gateway signs checkpoints into its chained log (after every
/// `--checkpoint-every` records and when it stops on SIGTERM); `orch audit verify
/// --public-key` checks every signature, and a record edited with the chain rebuilt
/// around it — what someone without the key can do — fails at the next checkpoint.
#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn the_gateway_signs_checkpoints_that_orch_audit_verify_checks() {
    let python = python();
    let dir = temp_dir("approvals-signed");
    let log = dir.join("executed.log");
    let audit = dir.join("decisions.jsonl");
    let audit_arg = audit.display().to_string();
    let orch = |args: &[&str]| {
        std::process::Command::new(support::ORCH)
            .args(args)
            .output()
            .expect("orch runs")
    };
    let prefix = dir.join("audit").display().to_string();
    let made = orch(&["audit", "keygen", &prefix]);
    assert_eq!(made.status.code(), Some(0), "{made:?}");
    let (key, public) = (format!("{prefix}.key"), format!("{prefix}.pub"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the private key is its owner's alone");
    }
    // Keygen never overwrites.
    assert_eq!(orch(&["audit", "keygen", &prefix]).status.code(), Some(2));
    let mut gw = gated_gateway(
        &python,
        &log,
        &[
            "--audit-log",
            &audit_arg,
            "--audit-key",
            &key,
            "--checkpoint-every",
            "3",
        ],
    );
    let addr = gw.addr.clone();
    let token = run_token(&addr, Some(OPERATOR));
    let mut meta = support::http::modern_meta(MODERN);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let receipt = json!({"name": "receipt", "arguments": {"run": "signed"}, "_meta": meta});
    let r = support::http::modern_request(&addr, Some(&token), 1, "tools/call", receipt, &[]);
    assert_eq!(r.response(1).unwrap()["result"]["isError"], true);
    let args = json!({"run": "signed", "amount": 4});
    let asked = call(&addr, &token, 2, args.clone(), None);
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    let approve = json!({"orch_approval": {"action": "accept", "content": {"approve": true}}});
    let done = call(&addr, &token, 3, args, Some((&state, approve)));
    assert_eq!(done["result"]["isError"], false, "{done}");
    // Stopped cleanly: the last records are signed at shutdown.
    let pid = gw.child.0.id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    let status = support::wait(&mut gw.child.0, Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", gw.stderr());

    let verified = orch(&[
        "audit",
        "verify",
        &audit_arg,
        "--public-key",
        &public,
        "--format",
        "json",
    ]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let v: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(v["records"], 7, "{v}");
    assert_eq!(
        v["checkpoints"], 3,
        "after records 3 and 6, and at shutdown: {v}"
    );
    assert_eq!(v["unanchored"], 0, "{v}");
    // The events still replay (checkpoints are not events).
    let replayed = orch(&["replay", &here("gated_shop.json"), &audit_arg]);
    assert_eq!(replayed.status.code(), Some(0), "{replayed:?}");
    // Another key's public half does not verify it.
    let other = dir.join("other").display().to_string();
    assert_eq!(orch(&["audit", "keygen", &other]).status.code(), Some(0));
    let wrong = orch(&[
        "audit",
        "verify",
        &audit_arg,
        "--public-key",
        &format!("{other}.pub"),
    ]);
    assert_eq!(wrong.status.code(), Some(1), "{wrong:?}");
    assert!(
        String::from_utf8_lossy(&wrong.stdout).contains("line 4:"),
        "{wrong:?}"
    );
}

#[test]
#[ignore = "needs the MCP Python SDK and redis-server: `cargo xtask test` installs them and runs this"]
fn a_gateway_with_runs_in_redis_takes_its_own_questions_answers_on_both_revisions() {
    // The client's answer to the gateway's own `elicitation/create` (handshake revisions)
    // is a request of its own: on a gateway sharing a store, the instance that asked must
    // take it, not pass it to the others (and time the call out).
    let python = python();
    let (_redis, redis_url) = support::redis();
    let dir = temp_dir("approvals-redis");
    let log = dir.join("executed.log");
    let extra = [
        "--redis",
        redis_url.as_str(),
        "--namespace",
        "own-questions",
    ];
    let gw = gated_gateway(&python, &log, &extra);
    for (mode, version) in [("legacy", "2025-11-25"), (MODERN, MODERN)] {
        let run = format!("{mode}-redis");
        let seen = client(&python, &gw, mode, &run, "reject,approve", &[]);
        assert_eq!(seen["version"], version, "{seen}");
        let calls = seen["calls"].as_array().unwrap();
        assert_eq!(calls[0]["asked"], 1, "{mode}: {seen}");
        assert_eq!(
            calls[0]["structured"]["refusal"]["reason"], "rejected",
            "{mode}: {seen}"
        );
        assert_eq!(calls[2]["asked"], 1, "{mode}: {seen}");
        assert_eq!(calls[2]["isError"], false, "{mode}: {seen}");
        assert_eq!(
            paid(&log, &run),
            [6],
            "{mode}: exactly the approved payment ran"
        );
    }
}
