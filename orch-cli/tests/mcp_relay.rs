//! `orch mcp` relays everything the workflow does not decide, per session: what the
//! upstream asks of a client (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`) goes to the client whose call caused it and its answer comes back;
//! progress reaches that client under its own token; log lines only the session they
//! belong to; `logging/setLevel` is the session's own. Real components: the official
//! Python MCP SDK as client (`tests/mcp/relay_client.py`, on 2025-11-25) and as upstream
//! (`tests/mcp/relay_tools.py`, over stdio and over Streamable HTTP).

mod support;

use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{free_port, here, python, temp_dir, wait_for_port, Gateway, Guard, ORCH};

/// `relay_tools.py` over Streamable HTTP on a free port: what keeps it up, and its URL.
fn http_upstream(python: &str) -> (Guard, String) {
    let port = free_port();
    let upstream = Guard(
        Command::new(python)
            .args([here("relay_tools.py"), "--http".into(), port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start relay_tools.py"),
    );
    wait_for_port(port, Duration::from_secs(30), "relay_tools.py");
    (upstream, format!("http://127.0.0.1:{port}/mcp"))
}

/// Two clients connected at once, each calling `converse` while the other is
/// connected: each sees exactly its own conversation.
fn two_clients_see_only_their_own(python: &str, url: &str, dir: &std::path::Path) {
    let barrier = dir.join("barrier");
    std::fs::create_dir_all(&barrier).expect("barrier dir");
    let barrier = barrier.to_string_lossy().into_owned();
    let spawn = |who: &str, level: &str| {
        let args = [
            "--url",
            url,
            "--who",
            who,
            "--level",
            level,
            "--barrier",
            &barrier,
            "--peers",
            "2",
        ];
        let python = python.to_owned();
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            support::python_report(&python, "relay_client.py", &args)
        })
    };
    let a = spawn("a", "debug");
    let b = spawn("b", "error");
    let a = a.join().expect("client a");
    let b = b.join().expect("client b");
    // Each session's level is its own: a asked for everything, b for errors only.
    assert_eq!(a["logs"], json!(["a: debug", "a: info", "a: error"]), "{a}");
    assert_eq!(a["result"]["level"], "debug", "{a}");
    assert_eq!(b["logs"], json!(["b: error"]), "{b}");
    assert_eq!(b["result"]["level"], "error", "{b}");
    for (who, seen) in [("a", &a), ("b", &b)] {
        assert_conversed(who, seen);
    }
}

/// What `relay_client.py` saw of its `converse(who)`, apart from the log lines: its
/// progress, the question, the sample and the roots asked of it, and the upstream got
/// its answers.
fn assert_conversed(who: &str, seen: &Value) {
    // Progress, under the client's own token (the SDK matches it to the call).
    assert_eq!(
        seen["progress"],
        json!([
            [1.0, 2.0, format!("{who}: half")],
            [2.0, 2.0, format!("{who}: done")]
        ]),
        "{seen}"
    );
    // The questions, samples and roots were the calling client's, and its answers
    // reached the upstream.
    assert_eq!(seen["asked"], json!([format!("{who}: confirm?")]), "{seen}");
    assert_eq!(seen["sampled"], json!([who]), "{seen}");
    assert_eq!(seen["roots"], 1, "{seen}");
    let result = &seen["result"];
    assert_eq!(
        result["elicited"],
        json!({"action": "accept", "content": {"ok": true}}),
        "{seen}"
    );
    assert_eq!(result["sampled"], format!("{who} sampled {who}"), "{seen}");
    assert_eq!(result["roots"], json!([format!("file:///{who}")]), "{seen}");
}

#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn each_session_talks_with_its_own_upstream_session_over_stdio_upstreams() {
    let python = python();
    let dir = temp_dir("relay-stdio-upstream");
    let tools = here("relay_tools.py");
    let gw = Gateway::http(&here("relay.json"), &[], &[], &[&python, &tools]);
    two_clients_see_only_their_own(&python, &gw.url, &dir);
}

#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn each_session_talks_with_its_own_upstream_session_over_http_upstreams() {
    let python = python();
    let dir = temp_dir("relay-http-upstream");
    let (_upstream, upstream) = http_upstream(&python);
    let gw = Gateway::http(
        &here("relay.json"),
        &["--upstream-url", &upstream],
        &[],
        &[],
    );
    two_clients_see_only_their_own(&python, &gw.url, &dir);
}

/// Every progress notification the upstream sends before its answer reaches the client
/// before the answer (the SDK drops progress that comes after), in the order sent (the
/// gateway relays each in a turn of its wire order): `countdown(10)` reports
/// ten back to back and answers at once, 30 times, through both upstream transports.
/// Each session has its own upstream connection; the gateway counts progress off that
/// connection's wire in order with the answers, and holds an answer until the progress
/// before it has been relayed (rmcp handles notifications in tasks of their own).
#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn every_progress_before_an_answer_arrives_before_it() {
    let python = python();
    let (_upstream, upstream) = http_upstream(&python);
    let template = here("relay.json");
    let tools = here("relay_tools.py");
    let over_http = Gateway::http(&template, &["--upstream-url", &upstream], &[], &[]);
    let over_stdio = Gateway::http(&template, &[], &[], &[&python, &tools]);
    for gw in [&over_http, &over_stdio] {
        let args = ["--url", &gw.url, "--who", "p", "--countdown", "10", "30"];
        let seen = support::python_report(&python, "relay_client.py", &args);
        assert_eq!(
            seen["countdowns"],
            json!(vec![10; 30]),
            "through {}: {seen}",
            gw.url
        );
    }
}

/// Over stdio, end to end; and a client that offers no elicitation, sampling or roots
/// is presented upstream as it is: what the upstream asks anyway reaches the client,
/// which refuses it itself (the gateway no longer answers `roots/list` with an empty
/// list, or declines a question, on its behalf).
#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn a_stdio_client_is_asked_itself_and_a_bare_client_refuses_itself() {
    let python = python();
    let tools = here("relay_tools.py");
    let template = here("relay.json");
    let command = [ORCH, "mcp", &template, "--", &python, &tools];
    let mut args = vec!["--who", "solo", "--level", "info", "--"];
    args.extend(command);
    let seen = support::python_report(&python, "relay_client.py", &args);
    assert_eq!(seen["logs"], json!(["solo: info", "solo: error"]), "{seen}");
    assert_eq!(seen["result"]["roots"], json!(["file:///solo"]), "{seen}");
    assert_eq!(seen["result"]["sampled"], "solo sampled solo", "{seen}");
    assert_eq!(seen["progress"].as_array().map(Vec::len), Some(2), "{seen}");

    let mut args = vec!["--who", "bare", "--bare", "--"];
    args.extend(command);
    let seen = support::python_report(&python, "relay_client.py", &args);
    let result: &Value = &seen["result"];
    for (key, refusal) in [
        ("elicited", "Elicitation not supported"),
        ("sampled", "Sampling not supported"),
        ("roots", "List roots not supported"),
    ] {
        assert_eq!(result[key], json!({"error": refusal}), "{seen}");
    }
    assert_eq!(seen["asked"], json!([]), "{seen}");
}

/// A refusal of a tool that declares an `outputSchema` reaches the official TypeScript
/// SDK's `callTool` as a result: its facts in `_meta["orch/refusal"]`, no
/// `structuredContent` that the SDK would check against the schema and reject
/// (`conformance/refusal-client.mjs`, on the Node.js and SDK `conformance/` installs).
#[test]
#[ignore = "needs Node.js 22 and the MCP TypeScript SDK (conformance/): `cargo xtask test` installs them"]
fn a_refusal_of_a_tool_with_an_output_schema_is_a_result_to_the_typescript_sdk() {
    let python = python();
    let dir = temp_dir("relay-output-schema");
    let gw = support::shop_gateway(&python, &dir.join("executed.log"), &[], &[]);
    let conformance = support::repo_root().join("conformance");
    let node = conformance.join("node_modules/node/bin/node");
    assert!(
        node.exists(),
        "{} is missing: `cargo xtask test` installs it",
        node.display()
    );
    // `pay` twice: the shop's tools declare output schemas (the Python SDK derives them),
    // and the second `pay` is refused.
    let calls = r#"[["pay", {"run": "ts"}], ["pay", {"run": "ts"}]]"#;
    let out = Command::new(&node)
        .arg(conformance.join("refusal-client.mjs"))
        .args([gw.url.as_str(), calls])
        .current_dir(&conformance)
        .output()
        .expect("run refusal-client.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the SDK threw: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(seen[0]["isError"], false, "{seen}");
    let refused = &seen[1];
    assert_eq!(refused["hasOutputSchema"], true, "{seen}");
    assert_eq!(refused["isError"], true, "{seen}");
    assert_eq!(refused["structuredContent"], Value::Null, "{seen}");
    assert_eq!(refused["refusal"]["reason"], "not_allowed", "{seen}");
    assert_eq!(refused["refusal"]["step"], "Paid", "{seen}");
}

/// One session spread over three instances sharing a `redis-server`, by a balancer
/// that sends each kind of request to another instance: the client's requests to the
/// second, its notifications and its answers to what the upstream asked to the third,
/// its standalone (GET) stream to the first. The answers reach the instance that relayed the questions
/// (passed on over Redis), and the log lines of the call the second serves reach the
/// stream the first holds open — as if one gateway served the session.
#[test]
#[ignore = "needs the MCP Python SDK and redis-server: `cargo xtask test` installs them and runs this"]
fn a_session_spread_over_instances_gets_its_answers_and_logs_where_they_belong() {
    let python = python();
    let (_redis, redis_url) = support::redis();
    let (_upstream, upstream) = http_upstream(&python);
    let instances: Vec<Gateway> = (0..3)
        .map(|_| {
            Gateway::http(
                &here("relay.json"),
                &["--upstream-url", &upstream, "--redis", &redis_url],
                &[],
                &[],
            )
        })
        .collect();
    // `notifications/initialized` reaches another instance than the `initialize` that
    // created the session, and the calls come back to the one that created it: that
    // one learns the session's id from the `initialize` response (the log lines of its
    // calls went nowhere while it did not know it).
    let balancer = support::balance::by_kind(support::balance::Split {
        streams: instances[0].addr.clone(),
        requests: instances[1].addr.clone(),
        notifications: instances[2].addr.clone(),
        answers: instances[2].addr.clone(),
    });
    let url = format!("http://{balancer}/mcp");
    let args = ["--url", &url, "--who", "a", "--level", "debug"];
    let seen = support::python_report(&python, "relay_client.py", &args);
    assert_eq!(
        seen["logs"],
        json!(["a: debug", "a: info", "a: error"]),
        "{seen}"
    );
    assert_eq!(seen["result"]["level"], "debug", "{seen}");
    assert_conversed("a", &seen);
}
