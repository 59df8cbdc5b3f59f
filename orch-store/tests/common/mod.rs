//! Shared by the store tests: a machine, the concurrency check, and a real
//! `redis-server` started on a free loopback port.
#![allow(dead_code, unused_imports)]

pub mod cluster;

use orch_store::SessionStore;
use std::sync::Arc;

orch_macros::orchestration! {
    pub machine "store-test" {
        tools: [t00, t01, t02, t03, t04, t05, t06, t07, t08, t09, t10, t11, t12, t13, t14, t15, search, think];
        history: 50;
        default step Idle;
        step Research {
            when message_contains("research");
            sequence: [search, think];
            allow: [search, think];
        }
    }
}

pub use store_test::{Machine, Session, Tool};

pub const TASKS: usize = 16;
pub const RECORDS: usize = 500;

/// 16 tasks each record 500 tool uses and usage on one session through `update`, task
/// `i` through `stores[i % stores.len()]` (several instances stand for several servers,
/// which only the compare-and-set keeps apart); afterwards every count is exact.
pub async fn no_lost_updates<S: SessionStore + 'static>(stores: Vec<Arc<S>>, id: &str) {
    let store = stores[0].clone();
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let store = stores[task % stores.len()].clone();
        let id = id.to_owned();
        handles.push(tokio::spawn(async move {
            let tool = Tool::ALL[task];
            for _ in 0..RECORDS {
                store
                    .update::<Machine, _>(&id, |s| {
                        s.record(tool);
                        s.record_usage(1, 2);
                    })
                    .await
                    .expect("update");
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let loaded = store.get::<Machine>(id).await.unwrap().expect("stored");
    let s = loaded.session;
    let total = (TASKS * RECORDS) as u64;
    assert_eq!(s.usage().prompt, total, "every usage update landed");
    assert_eq!(s.usage().completion, 2 * total);
    assert_eq!(
        s.used().len(),
        TASKS,
        "every task's tool is in the used set"
    );
    assert_eq!(s.history().count(), 50, "the history is full (H = 50)");
}

/// The contract every store keeps: round trip by names, compare-and-set (exists,
/// stale, current), delete, and versions that are never reused. Leaves session `a`
/// stored.
pub async fn store_contract<S: SessionStore>(store: &S) {
    assert!(store.get::<Machine>("a").await.unwrap().is_none());
    let mut s = Session::new();
    s.on_user_message("research");
    s.record(Tool::Search);
    let v1 = store.put("a", &s).await.unwrap();
    let loaded = store.get::<Machine>("a").await.unwrap().unwrap();
    assert_eq!(loaded.session, s);
    assert_eq!(loaded.version, v1);
    assert!(loaded.report.is_exact());

    let v = store
        .compare_and_set("x", None, vec![1])
        .await
        .unwrap()
        .expect("created");
    assert_eq!(
        store.compare_and_set("x", None, vec![2]).await.unwrap(),
        None,
        "exists"
    );
    assert_eq!(
        store
            .compare_and_set("x", Some(v + 1), vec![2])
            .await
            .unwrap(),
        None,
        "stale"
    );
    assert!(store
        .compare_and_set("x", Some(v), vec![3])
        .await
        .unwrap()
        .is_some());
    assert_eq!(store.load("x").await.unwrap().unwrap().bytes, vec![3]);

    assert!(store.delete("a").await.unwrap());
    assert!(!store.delete("a").await.unwrap());
    assert!(store.get::<Machine>("a").await.unwrap().is_none());
    // Versions are never reused, even after a delete: a writer still holding the old
    // version cannot overwrite the re-created session.
    let v2 = store.put("a", &s).await.unwrap();
    assert_ne!(v2, v1);
    assert_eq!(
        store.compare_and_set("a", Some(v1), vec![9]).await.unwrap(),
        None,
        "an old writer after delete and re-create"
    );
}

/// A `redis-server` on a free loopback port, stopped on drop. `None` (with a note)
/// when the binary is missing — except under `CI=true`, where that is a failure.
pub struct RedisServer {
    child: std::process::Child,
    pub url: String,
    _dir: TempDir,
}

pub struct TempDir(pub std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
        let dir = std::env::temp_dir().join(format!("orch-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
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
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let server = RedisServer {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
            _dir: TempDir(dir),
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
