//! A real `redis-server` on a free loopback port, stopped (and its directory removed) on
//! drop.

/// A `redis-server` on a free loopback port, stopped on drop. `None` (with a note)
/// when the binary is missing — except under `CI=true`, where that is a failure.
pub struct RedisServer {
    child: std::process::Child,
    /// The server's `redis://` URL.
    pub url: String,
    _dir: crate::scratch::Scratch,
}

impl RedisServer {
    /// [`RedisServer::start`], or `None` (with a note) when `redis-server` is not
    /// installed (for the benchmarks, which measure what they can).
    pub fn try_start() -> Option<RedisServer> {
        if std::process::Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("redis-server is not installed: the Redis measurements are left out");
            return None;
        }
        Some(RedisServer::start())
    }

    /// A `redis-server` on a free loopback port. The tests that need it are ignored
    /// under plain `cargo test`; run, they fail without it.
    pub fn start() -> RedisServer {
        assert!(
            std::process::Command::new("redis-server")
                .arg("--version")
                .output()
                .is_ok(),
            "redis-server is not installed: `cargo xtask test` installs it"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let dir = crate::scratch::Scratch::new(&format!("redis-{port}"));
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let server = RedisServer {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
            _dir: dir,
        };
        // Wait (bounded) until it accepts connections.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("redis-server did not start on port {port}");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
