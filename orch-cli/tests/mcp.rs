//! `orch mcp` against real MCP implementations nobody here wrote: the official Python
//! SDK (PyPI `mcp`) as the client (`tests/mcp/client.py`) and as the upstream server
//! (`examples/mcp/research_tools.py`, which logs every tool it executes), over stdio and
//! Streamable HTTP, with a real `redis-server` for two gateway instances sharing
//! sessions; plus raw JSON-RPC over the gateway's stdio for what an SDK would never
//! send. `.ci/run` installs the SDK into `target/ci-tools/venv`; elsewhere set
//! `ORCH_TEST_PYTHON` to a Python that has it. Without one (or without
//! `redis-server`) the tests that need it say so and pass, except under `CI=true`,
//! where they fail.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ORCH: &str = env!("CARGO_BIN_EXE_orch");

/// What the upstream executes in client.py's workflow: refused calls (`summarize` out of
/// order, `delete_all`, an unknown tool) never reach it; the failing `fetch` does.
const WORKFLOW_EXECUTES: [&str; 6] = [
    "search",
    "fetch",
    "fetch",
    "summarize",
    "lookup_weather",
    "note",
];

/// Waits until something listens on `port` (at most `limit`).
fn wait_for_port(port: u16, limit: Duration, what: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < limit, "{what} never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn here(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

/// The walkthrough's files (docs/mcp.md): the template and the Python tool server.
fn example(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/mcp")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A Python with the MCP SDK, or `None` (the test is skipped) outside CI.
fn python() -> Option<String> {
    let candidate = std::env::var("ORCH_TEST_PYTHON").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/ci-tools/venv/bin/python")
            .to_string_lossy()
            .into_owned()
    });
    let works = Command::new(&candidate)
        .args(["-c", "import mcp, httpx2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        return Some(candidate);
    }
    assert!(
        !in_ci(),
        "CI=true but {candidate} cannot import the MCP SDK (.ci/run installs it)"
    );
    eprintln!("skipped: no Python with the MCP SDK at {candidate} (set ORCH_TEST_PYTHON)");
    None
}

/// A child process killed when the test ends, however it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` to exit, at most `limit`.
fn wait(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs a scenario of client.py; panics with its output unless it passes.
fn scenario(python: &str, args: &[&str]) {
    let mut child = Command::new(python)
        .arg(here("client.py"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start client.py");
    let (mut out, mut err) = (String::new(), String::new());
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let _ = stdout.read_to_string(&mut out);
    let status = wait(&mut child, Duration::from_secs(120));
    let _ = child.kill();
    let err = reader.join().unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "client.py {args:?} failed ({status:?})\n--- stdout\n{out}\n--- stderr\n{err}"
    );
    assert!(out.contains(": ok"), "{out}");
}

/// The tools the upstream executed, in order.
fn executed(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a log line");
            v["tool"].as_str().expect("a tool").to_owned()
        })
        .collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("orch-mcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `orch mcp --listen 127.0.0.1:0 ...`: the process and its URL (from its stderr).
fn http_gateway(extra: &[&str], python: &str, log: &Path) -> (Guard, String) {
    let mut child = Command::new(ORCH)
        .args(["mcp", &example("research.json"), "--listen", "127.0.0.1:0"])
        .args(extra)
        .args(["--", python, &example("research_tools.py"), "--log"])
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start orch mcp");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(i) = line.find("http://") {
                let url = line[i..].split_whitespace().next().unwrap_or("").to_owned();
                let _ = tx.send(url);
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("orch mcp says where it serves");
    (Guard(child), url)
}

#[test]
fn stdio_workflow_through_the_python_sdk() {
    let Some(python) = python() else { return };
    let dir = temp_dir("stdio");
    let log = dir.join("executed.log");
    scenario(
        &python,
        &[
            "stdio",
            ORCH,
            &example("research.json"),
            &example("research_tools.py"),
            log.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(executed(&log), WORKFLOW_EXECUTES);
}

#[test]
fn upstream_over_streamable_http() {
    let Some(python) = python() else { return };
    let dir = temp_dir("upstream-http");
    let log = dir.join("executed.log");
    let port = free_port();
    let _upstream = Guard(
        Command::new(&python)
            .args([&example("research_tools.py"), "--log"])
            .arg(&log)
            .args(["--http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the upstream"),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    wait_for_port(port, Duration::from_secs(60), "the upstream");
    scenario(
        &python,
        &["stdio-url", ORCH, &example("research.json"), &url],
    );
    assert_eq!(executed(&log), WORKFLOW_EXECUTES);
}

#[test]
fn upstream_crash_is_answered_and_ends_the_gateway() {
    let Some(python) = python() else { return };
    let dir = temp_dir("crash");
    let log = dir.join("executed.log");
    scenario(
        &python,
        &[
            "crash",
            ORCH,
            &example("research.json"),
            &example("research_tools.py"),
            log.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(executed(&log), ["search", "fetch", "summarize", "crash"]);

    // The same over raw stdio, for the exit status and the message.
    let mut gw = RawGateway::start(&[
        &python,
        &example("research_tools.py"),
        "--log",
        log.to_str().expect("utf-8"),
    ]);
    gw.initialize();
    for (i, (tool, args)) in [
        ("search", json!({"query": "q"})),
        ("fetch", json!({"url": "u"})),
        ("summarize", json!({"text": "t"})),
    ]
    .into_iter()
    .enumerate()
    {
        let r = gw.call(
            10 + i as i64,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        );
        assert!(
            r["result"].is_object() && r["result"]["isError"] != true,
            "{r}"
        );
    }
    let r = gw.call(20, "tools/call", json!({"name": "crash", "arguments": {}}));
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("upstream MCP server")),
        "{r}"
    );
    let status = wait(&mut gw.child.0, Duration::from_secs(20)).expect("the gateway exits");
    assert_eq!(status.code(), Some(2));
    let err = gw.stderr();
    assert!(
        err.contains("error: orch mcp: the upstream MCP server"),
        "{err}"
    );
    assert!(err.contains("closed the connection"), "{err}");
}

#[test]
fn upstream_crash_over_http_is_answered_and_ends_the_gateway() {
    let Some(python) = python() else { return };
    let dir = temp_dir("crash-http");
    let log = dir.join("executed.log");
    let (mut gateway, url) = http_gateway(&[], &python, &log);
    scenario(&python, &["crash-http", &url]);
    let status = wait(&mut gateway.0, Duration::from_secs(20)).expect("the gateway exits");
    assert_eq!(status.code(), Some(2));
    assert_eq!(executed(&log), ["search", "fetch", "summarize", "crash"]);
}

#[test]
fn http_sessions_are_kept_apart_and_malformed_bodies_get_json_rpc_errors() {
    let Some(python) = python() else { return };
    let dir = temp_dir("http");
    let log = dir.join("executed.log");
    let (_gateway, url) = http_gateway(&[], &python, &log);
    scenario(&python, &["http", &url]);
    let executed = executed(&log);
    assert!(!executed.iter().any(|t| t == "delete_all"), "{executed:?}");
    assert_eq!(
        executed.iter().filter(|t| *t == "search").count(),
        2,
        "{executed:?}"
    );
}

#[test]
fn two_instances_share_a_session_through_redis() {
    let Some(python) = python() else { return };
    let redis = match Command::new("redis-server").arg("--version").output() {
        Ok(_) => free_port(),
        Err(_) => {
            assert!(!in_ci(), "CI=true but redis-server is missing");
            eprintln!("skipped: no redis-server");
            return;
        }
    };
    let _redis = Guard(
        Command::new("redis-server")
            .args([
                "--port",
                &redis.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server"),
    );
    wait_for_port(redis, Duration::from_secs(20), "redis-server");
    let dir = temp_dir("share");
    let redis_url = format!("redis://127.0.0.1:{redis}");
    let extra = ["--redis", redis_url.as_str(), "--namespace", "share-test"];
    let (_a, url_a) = http_gateway(&extra, &python, &dir.join("a.log"));
    let (_b, url_b) = http_gateway(&extra, &python, &dir.join("b.log"));
    scenario(&python, &["share", &url_a, &url_b]);
    // Each instance executed what was sent through it, nothing else.
    assert_eq!(executed(&dir.join("a.log")), ["search"]);
    assert_eq!(executed(&dir.join("b.log")), ["fetch"]);
}

/// `orch mcp` driven line by line, for what an SDK never sends.
struct RawGateway {
    child: Guard,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl RawGateway {
    fn start(upstream: &[&str]) -> Self {
        Self::start_with(&[], upstream)
    }

    fn start_with(options: &[&str], upstream: &[&str]) -> Self {
        let mut child = Command::new(ORCH)
            .args(["mcp", &example("research.json")])
            .args(options)
            .arg("--")
            .args(upstream)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start orch mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout: ChildStdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut all = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut all);
            let _ = etx.send(all);
        });
        RawGateway {
            child: Guard(child),
            stdin,
            lines,
            stderr: stderr_rx,
        }
    }

    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next message from the gateway.
    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the gateway answers");
        serde_json::from_str(&line).expect("a JSON line")
    }

    /// Sends a request and returns its response (skipping notifications).
    fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(msg.to_string().as_bytes());
        loop {
            let v = self.next();
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    fn initialize(&mut self) {
        let r = self.call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
        );
        assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{r}");
        assert_eq!(
            r["result"]["capabilities"]["tools"]["listChanged"], true,
            "{r}"
        );
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// Everything the gateway wrote to stderr (after it exited).
    fn stderr(&mut self) -> String {
        self.stderr
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_default()
    }
}

#[test]
fn malformed_json_rpc_over_stdio_is_answered_and_the_gateway_goes_on() {
    let Some(python) = python() else { return };
    let dir = temp_dir("malformed");
    let log = dir.join("executed.log");
    let mut gw = RawGateway::start(&[
        &python,
        &example("research_tools.py"),
        "--log",
        log.to_str().expect("utf-8"),
    ]);

    gw.send(b"{this is not json");
    let r = gw.next();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null, "{r}");

    gw.send(br#"{"jsonrpc":"2.0","id":5,"params":{}}"#);
    let r = gw.next();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["id"], 5, "{r}");

    gw.send(b"[1, 2, 3]");
    assert_eq!(gw.next()["error"]["code"], -32600);
    gw.send("\u{00e9}t\u{00e9} \u{fffd}".as_bytes());
    assert_eq!(gw.next()["error"]["code"], -32700);
    gw.send(&[0xff, 0xfe, b'{', b'}']);
    assert_eq!(gw.next()["error"]["code"], -32700);

    // A line over the 16 MiB bound is dropped with an error, without holding it.
    let mut huge = vec![b'"'; 17 * 1024 * 1024];
    huge.push(b'"');
    gw.send(&huge);
    let r = gw.next();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("longer than")),
        "{r}"
    );

    // Still serving: the handshake and a refused call.
    gw.initialize();
    let r = gw.call(2, "tools/list", json!({}));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["search"]);
    let r = gw.call(
        3,
        "tools/call",
        json!({"name": "note", "arguments": {"text": "x"}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    // A call whose params are not a tool call is a JSON-RPC error.
    let r = gw.call(4, "tools/call", json!({"arguments": 3}));
    assert!(r["error"]["code"].as_i64().is_some(), "{r}");
    drop(gw.stdin);
    let status =
        wait(&mut gw.child.0, Duration::from_secs(20)).expect("exits when the client hangs up");
    assert_eq!(status.code(), Some(0));
    assert!(executed(&log).is_empty());
}

/// `orch mcp FILE -- COMMAND...` with nothing on stdin: its status and stderr.
fn run_briefly(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(ORCH)
        .arg("mcp")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start orch mcp");
    let status = wait(&mut child, Duration::from_secs(30));
    let _ = child.kill();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.and_then(|s| s.code()), err)
}

#[test]
fn bad_templates_and_upstreams_fail_clearly() {
    let dir = temp_dir("bad");
    // Template errors: diagnostics and exit 1; the upstream is never started.
    let broken = dir.join("broken.json");
    std::fs::write(
        &broken,
        r#"{"tools": ["a"], "orchestration": {"defaultStep": "Nowhere", "steps": [{"name": "S", "sequence": ["b"]}]}}"#,
    )
    .expect("write");
    let marker = dir.join("started");
    let touch = format!("touch {}; sleep 5", marker.display());
    let (code, err) = run_briefly(&[broken.to_str().expect("utf-8"), "--", "sh", "-c", &touch]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("error[E"), "{err}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !marker.exists(),
        "the upstream was started for a broken template"
    );

    // An upstream that cannot be started, that exits at once, that never answers.
    let (code, err) = run_briefly(&[&example("research.json"), "--", "/nonexistent/mcp-server"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cannot start the upstream MCP server `/nonexistent/mcp-server`"),
        "{err}"
    );
    let (code, err) = run_briefly(&[&example("research.json"), "--", "false"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("failed the MCP handshake"), "{err}");
    let (code, err) = run_briefly(&[
        &example("research.json"),
        "--startup-timeout",
        "1",
        "--",
        "sleep",
        "20",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("did not complete the MCP handshake within 1 s"),
        "{err}"
    );
    // An upstream that speaks something else than JSON-RPC.
    let (code, err) = run_briefly(&[
        &example("research.json"),
        "--startup-timeout",
        "5",
        "--",
        "sh",
        "-c",
        "echo hello; echo '{\"jsonrpc\": 1}'; sleep 20",
    ]);
    assert_eq!(code, Some(2), "{err}");
    // No upstream at all.
    let (code, err) = run_briefly(&[&example("research.json")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("name the upstream MCP server"), "{err}");

    // Message conditions: a warning at start, before anything else.
    let chatty = dir.join("chatty.json");
    std::fs::write(
        &chatty,
        r#"{"tools": ["search"], "orchestration": {"defaultStep": "Chat", "steps": [
            {"name": "Chat"},
            {"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}], "sequence": ["search"]}]}}"#,
    )
    .expect("write");
    let (code, err) = run_briefly(&[
        chatty.to_str().expect("utf-8"),
        "--",
        "/nonexistent/mcp-server",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "step `Research` has 1 message condition(s), which never hold through `orch mcp`"
        ),
        "{err}"
    );
}
