//! What the `orch mcp` tests share: finding the real components (a Python with the
//! official MCP SDK, `redis-server`), starting gateways and servers that are killed
//! however a test ends, and a raw HTTP/1.1 client for what an SDK would never send.

#![allow(dead_code)]

pub mod balance;
pub mod http;
pub mod load;
pub mod webdriver;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const ORCH: &str = env!("CARGO_BIN_EXE_orch");

/// The repository's root (where the examples' templates are).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `orch ARGS` in the repository's root and waits for it.
pub fn orch_at_root(args: &[&str]) -> std::process::Output {
    Command::new(ORCH)
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("orch runs")
}

/// A file of the tests' own (`orch-cli/tests/mcp/`).
pub fn here(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

/// A Python with the MCP SDK (`target/ci-tools/venv`, or `ORCH_TEST_PYTHON`). The tests
/// that need it are ignored under plain `cargo test`; run, they fail without it. Checked
/// once per test executable (importing the SDK takes about a second of CPU).
pub fn python() -> String {
    static CHECKED: std::sync::OnceLock<(String, bool)> = std::sync::OnceLock::new();
    let (candidate, works) = CHECKED.get_or_init(|| {
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
        (candidate, works)
    });
    assert!(
        *works,
        "{candidate} cannot import the MCP Python SDK: `cargo xtask test` installs it (or set ORCH_TEST_PYTHON)"
    );
    candidate.clone()
}

/// A child process killed when the test ends, however it ends.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` to exit, at most `limit`.
pub fn wait(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Waits until something listens on `port` (at most `limit`).
pub fn wait_for_port(port: u16, limit: Duration, what: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < limit, "{what} never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `f` every 20 ms until it holds (at most `limit`; a guard against a hang, not
/// a measurement).
pub fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A test's own empty directory, removed when the returned handle is dropped (kept,
/// with its path printed, when the test fails).
pub fn temp_dir(name: &str) -> orch_test_support::scratch::Scratch {
    orch_test_support::scratch::Scratch::new(&format!("mcp-{name}"))
}

/// A free loopback port (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A `redis-server` on a free loopback port, and its URL. The tests that need it are
/// ignored under plain `cargo test`; run, they fail without it.
pub fn redis() -> (Guard, String) {
    assert!(
        Command::new("redis-server")
            .arg("--version")
            .output()
            .is_ok(),
        "redis-server is not installed: `cargo xtask test` installs it"
    );
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("start redis-server");
    let guard = Guard(child);
    wait_for_port(port, Duration::from_secs(20), "redis-server");
    (guard, format!("redis://127.0.0.1:{port}"))
}

/// Runs the Python client `script` (in tests/mcp/) with `args`, within two minutes, and
/// returns the JSON object it printed last; a failure shows its stdout and stderr.
pub fn python_report(python: &str, script: &str, args: &[&str]) -> Value {
    let mut child = Command::new(python)
        .arg(here(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let status = wait(&mut child, Duration::from_secs(120));
    let _ = child.kill();
    let output = child.wait_with_output().expect("its output");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        status.is_some_and(|s| s.success()),
        "{script} {args:?} failed ({status:?})\n--- stdout\n{out}\n--- stderr\n{err}"
    );
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The JSON lines of an upstream's log (the test servers append one per tool they run).
pub fn log_lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a log line"))
        .collect()
}

/// The shop upstream (`tests/mcp/shop_tools.py`) logging to `log`, as a command line.
pub fn shop_upstream(python: &str, log: &Path) -> Vec<String> {
    vec![
        python.to_owned(),
        here("shop_tools.py"),
        "--log".to_owned(),
        log.to_string_lossy().into_owned(),
    ]
}

/// `orch mcp` on the shop workflow (`tests/mcp/shop.json`) over HTTP, with `extra`
/// options and `env` set, its upstream logging to `log`.
pub fn shop_gateway(python: &str, log: &Path, extra: &[&str], env: &[(&str, &str)]) -> Gateway {
    let upstream = shop_upstream(python, log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    Gateway::http(&here("shop.json"), extra, env, &upstream)
}

/// An `orch mcp --listen` process.
pub struct Gateway {
    pub child: Guard,
    /// `http://ADDR/mcp`.
    pub url: String,
    /// `ADDR`.
    pub addr: String,
    /// Everything it wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// Everything it wrote to stdout so far.
    pub stdout: Arc<Mutex<String>>,
}

impl Gateway {
    /// `orch mcp TEMPLATE --listen 127.0.0.1:0 EXTRA... -- UPSTREAM...` with `env` set.
    pub fn http(template: &str, extra: &[&str], env: &[(&str, &str)], upstream: &[&str]) -> Self {
        let mut child = Command::new(ORCH)
            .args(["mcp", template, "--listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .arg("--")
            .args(upstream)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start orch mcp");
        let stdout = child.stdout.take().expect("stdout");
        let printed = Arc::new(Mutex::new(String::new()));
        let kept = Arc::clone(&printed);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let seen = Arc::new(Mutex::new(String::new()));
        let all = Arc::clone(&seen);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(i) = line.find("http://") {
                    let url = line[i..].split_whitespace().next().unwrap_or("").to_owned();
                    let _ = tx.send(url);
                }
                let mut all = all.lock().unwrap_or_else(|p| p.into_inner());
                all.push_str(&line);
                all.push('\n');
            }
        });
        let child = Guard(child);
        let url = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => panic!(
                "orch mcp never said where it serves; stderr:\n{}",
                seen.lock().unwrap_or_else(|p| p.into_inner())
            ),
        };
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Gateway {
            child,
            url,
            addr,
            stderr: seen,
            stdout: printed,
        }
    }

    /// Its stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Its resident memory in KiB (Linux `/proc`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.0.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// `orch mcp ARGS...` expected to stop by itself (a bad template, an upstream that
/// cannot start, an option refused), stdin left open: its exit status (`None` when it
/// still ran after a minute) and stderr. `ORCH_MCP_TOKEN` is unset, then `env` set.
pub fn run_briefly(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = Command::new(ORCH)
        .arg("mcp")
        .args(args)
        .env_remove("ORCH_MCP_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start orch mcp");
    let status = wait(&mut child, Duration::from_secs(60));
    let _ = child.kill();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.and_then(|s| s.code()), err)
}

/// `orch mcp` over stdio, driven line by line, for what an SDK never sends.
pub struct RawGateway {
    pub child: Guard,
    pub stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl RawGateway {
    /// `orch mcp TEMPLATE OPTIONS... -- UPSTREAM...`.
    pub fn start(template: &str, options: &[&str], upstream: &[&str]) -> Self {
        let mut child = Command::new(ORCH)
            .args(["mcp", template])
            .args(options)
            .arg("--")
            .args(upstream)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start orch mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
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

    pub fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next message from the gateway.
    pub fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the gateway answers");
        serde_json::from_str(&line).expect("a JSON line")
    }

    /// Sends a request and returns its response (skipping notifications).
    pub fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(msg.to_string().as_bytes());
        loop {
            let v = self.next();
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    pub fn initialize(&mut self) {
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
    pub fn stderr(&mut self) -> String {
        self.stderr
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_default()
    }
}

/// A token from the stand-in identity provider (`tests/mcp/jwt_issuer.py`) whose keys
/// are in `dir`, signed with the key `kid`, carrying `claims`.
pub fn jwt(python: &str, dir: &Path, kid: &str, claims: Value, extra: &[&str]) -> String {
    let out = Command::new(python)
        .arg(here("jwt_issuer.py"))
        .arg("token")
        .arg(dir)
        .args(["--kid", kid, "--claims", &claims.to_string()])
        .args(extra)
        .output()
        .expect("run jwt_issuer.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The stand-in identity provider's keys (`rsa1`, `ec1`) made in `dir`.
pub fn jwt_keys(python: &str, dir: &Path) {
    let made = Command::new(python)
        .arg(here("jwt_issuer.py"))
        .arg("keys")
        .arg(dir)
        .status()
        .expect("make keys");
    assert!(made.success());
}
