//! What the tests and the examples that need a real `restate-server` share: the server
//! (started on free ports, with its data in a directory of its own), registering a
//! deployment, free ports, and a round-robin TCP balancer.

#![allow(dead_code)]

use serde_json::json;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long anything waited for may take before it counts as failed.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// Registers the deployment at `uri` with the server whose admin API is at `admin`
/// (again: `force`), waiting for the cluster to be ready.
pub async fn register(http: &reqwest::Client, admin: &str, uri: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = http
            .post(format!("{admin}/deployments"))
            .json(&json!({"uri": uri, "force": true}))
            .send()
            .await;
        match answer {
            Ok(a) if a.status().is_success() => return,
            other => {
                // The admin API answers before the cluster is provisioned.
                assert!(Instant::now() < deadline, "registering {uri}: {other:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Where restate-server is: `ORCH_RESTATE_SERVER`, else where `cargo xtask test` puts it.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ORCH_RESTATE_SERVER") {
        return PathBuf::from(path);
    }
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64",
        ("linux", "aarch64") => "linux-arm64",
        ("macos", "x86_64") => "darwin-x64",
        ("macos", "aarch64") => "darwin-arm64",
        (os, arch) => panic!(
            "the npm package of restate-server has no build for {os}/{arch}: set ORCH_RESTATE_SERVER to a restate-server 1.7 binary"
        ),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = root.join(format!(
        "restate/node_modules/@restatedev/restate-server-{platform}/bin/restate-server"
    ));
    assert!(
        path.exists(),
        "restate-server is missing ({}): `cargo xtask test` installs it (npm ci in restate/), or set ORCH_RESTATE_SERVER",
        path.display()
    );
    path
}

/// A restate-server with its data in a directory of its own.
pub struct Server {
    child: Option<Child>,
    /// More environment for the server (its configuration).
    env: Vec<(String, String)>,
    base: PathBuf,
    node: u16,
    ingress: u16,
    admin: u16,
}

impl Server {
    pub fn start(base: &Path) -> Server {
        Server::start_env(base, Vec::new())
    }

    /// [`Server::start`] with more environment: the server's configuration
    /// (`RESTATE_…`).
    pub fn start_env(base: &Path, env: Vec<(String, String)>) -> Server {
        let mut server = Server {
            child: None,
            env,
            base: base.to_owned(),
            node: free_port(),
            ingress: free_port(),
            admin: free_port(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.base.join("server.log"))
            .expect("the server's log");
        // The server's invoker makes a directory under the temporary directory for each
        // partition and leaves it: under the test's own, it goes with the test's.
        let tmp = self.base.join("tmp");
        std::fs::create_dir_all(&tmp).expect("the server's temporary directory");
        let child = Command::new(server_binary())
            .args(["--base-dir"])
            .arg(self.base.join("data"))
            .env("TMPDIR", &tmp)
            .arg("--no-logo")
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_BIND_IP", "127.0.0.1")
            .env("RESTATE_BIND_PORT", self.node.to_string())
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.ingress),
            )
            .env(
                "RESTATE_ADMIN__BIND_ADDRESS",
                format!("127.0.0.1:{}", self.admin),
            )
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            // A small server: the tests run several at once.
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", "4")
            .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256 MiB")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("restate-server starts");
        self.child = Some(child);
        wait_for_port(self.admin, "restate-server's admin API");
        wait_for_port(self.ingress, "restate-server's ingress");
    }

    /// SIGKILL, and started again on the same data and ports.
    pub fn restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn();
    }

    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin)
    }

    pub fn ingress_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ingress)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} never listened on {port}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A round-robin TCP balancer in front of `to`: a connection goes to the next target
/// that accepts it.
pub fn balancer(to: Vec<u16>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the balancer");
    let port = listener.local_addr().expect("its address").port();
    let next = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let first = next.fetch_add(1, Ordering::Relaxed);
            let server = (0..to.len())
                .find_map(|i| TcpStream::connect(("127.0.0.1", to[(first + i) % to.len()])).ok());
            let Some(server) = server else { continue };
            for (mut from, mut into) in [
                (client.try_clone(), server.try_clone()),
                (server.try_clone(), client.try_clone()),
            ]
            .into_iter()
            .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
            {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if into.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    port
}
