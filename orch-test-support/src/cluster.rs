//! A real Redis Cluster for tests and benchmarks: six `redis-server` processes on free
//! loopback ports (three primaries, three replicas) joined by `redis-cli --cluster
//! create`, stopped by their process ids on drop.
//!
//! Nothing here can hang: every `redis-cli` run has a deadline (a node that stops
//! answering, or a `--cluster create` whose nodes never meet, is a panic that says so),
//! the ports (and their cluster bus ports, `+ 10000`) lie below the kernel's ephemeral
//! range so no outgoing connection takes one between the probe and the server's bind, and
//! one cluster runs at a time in a test process.

use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by the running cluster: the clusters of one test process run one after another.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A running cluster.
pub struct Cluster {
    nodes: Vec<Node>,
    dir: std::path::PathBuf,
    _turn: MutexGuard<'static, ()>,
}

/// One `redis-server` of the cluster.
pub struct Node {
    /// Its port.
    pub port: u16,
    child: Option<Child>,
}

impl Node {
    /// Its process id (while it runs).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// Runs `command`, its stdout captured, and kills it past `limit`: `None` then, or when
/// it fails.
fn run_within(mut command: Command, limit: Duration) -> Option<(bool, String)> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut out);
        out
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    status.map(|s| (s.success(), String::from_utf8_lossy(&out).into_owned()))
}

/// One `redis-cli` command against the node at `port`, answered within five seconds.
fn cli(port: u16, args: &[&str]) -> Option<String> {
    let mut command = Command::new("redis-cli");
    command.args(["-p", &port.to_string()]).args(args);
    match run_within(command, Duration::from_secs(5))? {
        (true, out) => Some(out),
        (false, _) => None,
    }
}

/// `n` ports `p` such that `p` and its cluster bus port `p + 10000` are free, all below
/// the ephemeral range (32768 and up on Linux), so that no outgoing connection is given
/// one of them before the server binds it.
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    let mut held = Vec::new();
    let mut next = {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        (std::process::id() ^ nanos) % 7_000
    };
    for _ in 0..7_000 {
        if ports.len() == n {
            break;
        }
        let port = 15_000 + next as u16;
        next = (next + 7) % 7_000;
        let (Ok(client), Ok(bus)) = (
            std::net::TcpListener::bind(("127.0.0.1", port)),
            std::net::TcpListener::bind(("127.0.0.1", port + 10_000)),
        ) else {
            continue;
        };
        ports.push(port);
        held.extend([client, bus]);
    }
    assert_eq!(ports.len(), n, "{n} free ports between 15000 and 22000");
    ports
}

impl Cluster {
    /// [`Cluster::start`], or `None` (with a note) when `redis-server` or `redis-cli` is
    /// not installed (for the benchmarks, which measure what they can).
    pub fn try_start() -> Option<Cluster> {
        let have = |bin: &str| Command::new(bin).arg("--version").output().is_ok();
        if !have("redis-server") || !have("redis-cli") {
            eprintln!("redis-server or redis-cli is not installed: the cluster is left out");
            return None;
        }
        Some(Cluster::start())
    }

    /// Starts the cluster and waits until every node says `cluster_state:ok`. The tests
    /// that need it are ignored under plain `cargo test`; run, they fail without
    /// `redis-server` and `redis-cli`.
    pub fn start() -> Cluster {
        let have = |bin: &str| Command::new(bin).arg("--version").output().is_ok();
        assert!(
            have("redis-server") && have("redis-cli"),
            "redis-server and redis-cli are not installed: `cargo xtask test` installs them"
        );
        let turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ports = free_ports(6);
        let dir =
            std::env::temp_dir().join(format!("orch-cluster-{}-{}", std::process::id(), ports[0]));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cluster = Cluster {
            nodes: Vec::new(),
            dir: dir.clone(),
            _turn: turn,
        };
        for &port in &ports {
            let child = spawn(&dir, port);
            cluster.nodes.push(Node {
                port,
                child: Some(child),
            });
        }
        for &port in &ports {
            wait_until(Duration::from_secs(10), || {
                cli(port, &["PING"]).is_some_and(|o| o.contains("PONG"))
            })
            .unwrap_or_else(|| panic!("redis-server on {port} did not start"));
        }
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]).args(&addrs).args([
            "--cluster-replicas",
            "1",
            "--cluster-yes",
        ]);
        match run_within(create, Duration::from_secs(60)) {
            Some((true, _)) => {}
            Some((false, out)) => panic!("redis-cli --cluster create failed: {out}"),
            None => panic!("redis-cli --cluster create did not finish within 60 s"),
        }
        cluster.wait_ok(Duration::from_secs(30));
        cluster.wait_replicas(Duration::from_secs(30));
        cluster
    }

    /// Seed URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The ports of the running nodes that are primaries now.
    pub fn primaries(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .filter(|n| cli(n.port, &["ROLE"]).is_some_and(|r| r.starts_with("master")))
            .map(|n| n.port)
            .collect()
    }

    /// Keys stored on the node at `port`.
    pub fn keys_on(&self, port: u16) -> u64 {
        cli(port, &["DBSIZE"])
            .and_then(|o| o.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Kills the node at `port` (SIGKILL, by its process id).
    pub fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of the cluster");
        if let Some(mut child) = node.child.take() {
            let _ = Command::new("kill")
                .args(["-9", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Starts the killed node at `port` again: it rejoins (its `nodes.conf` is kept) as a
    /// replica of the primary that replaced it.
    pub fn restart(&mut self, port: u16) {
        let dir = self.dir.clone();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of the cluster");
        if node.child.is_none() {
            node.child = Some(spawn(&dir, port));
        }
    }

    /// Waits until every running node reports `cluster_state:ok` and three primaries
    /// serve all slots.
    pub fn wait_ok(&self, limit: Duration) {
        wait_until(limit, || {
            self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                cli(n.port, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok"))
            }) && self.primaries().len() == 3
        })
        .unwrap_or_else(|| panic!("the cluster is not ok after {limit:?}"));
    }

    /// Waits until every primary has its replica linked and in sync (so `WAIT 1` can
    /// succeed).
    pub fn wait_replicas(&self, limit: Duration) {
        wait_until(limit, || {
            self.primaries().iter().all(|&p| {
                cli(p, &["INFO", "replication"])
                    .is_some_and(|i| i.contains("connected_slaves:1") && i.contains("state=online"))
            })
        })
        .unwrap_or_else(|| panic!("the replicas are not in sync after {limit:?}"));
    }
}

/// A cluster-enabled `redis-server` on `port`, its files (`nodes.conf`) in `dir/port`.
fn spawn(dir: &std::path::Path, port: u16) -> Child {
    let node_dir = dir.join(port.to_string());
    std::fs::create_dir_all(&node_dir).unwrap();
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ])
        .args([
            "--cluster-node-timeout",
            "1000",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&node_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts")
}

fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> Option<()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
