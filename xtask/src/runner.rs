//! The Rust test executables, built by one `cargo test --no-run` and then run side by
//! side, a few at a time: most of them spend their time waiting on the servers, clients
//! and timeouts they test, not on the two cores, so running them one after another (as
//! `cargo test` does) left the machine idle for most of the run.
//!
//! Each executable runs as `cargo test` would run it — in its package's directory, with
//! the package's `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME` and `CARGO_PKG_VERSION` — and
//! its output is kept whole: a passing executable is reported by its summary line, a
//! failing one by everything it printed, never interleaved with another's.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The executables that take longest, started first so that the run does not end
/// waiting on one of them alone (measured on a clean clone, two cores, in seconds when
/// run alone: `orch-cli`'s `mcp_hostile` ~160, `mcp_load` ~130, `conformance` ~115, the
/// trybuild cases ~95). The rest start in the order cargo built them.
const SLOWEST: [&str; 4] = [
    "orch-cli mcp_hostile",
    "orch-cli mcp_load",
    "orch-cli conformance",
    "orch-ui-tests ui",
];

/// One test executable and where it belongs.
pub(crate) struct TestBinary {
    /// `package target`, e.g. `orch-cli mcp_hostile`.
    pub(crate) name: String,
    executable: PathBuf,
    manifest: PathBuf,
    package: String,
    version: String,
}

/// Builds the test executables with `cargo test --no-run` and the given arguments,
/// and lists them. `Err` says why they could not be built.
pub(crate) fn build(
    cargo: &str,
    root: &Path,
    args: &[&str],
    limit: Duration,
) -> Result<Vec<TestBinary>, String> {
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(args)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped());
    let out = run_within(command, limit)?;
    if !out.success {
        return Err("the tests did not build (cargo's messages are above)".into());
    }
    let mut binaries: Vec<TestBinary> = out.stdout.lines().filter_map(test_binary).collect();
    binaries.sort_by_key(|b| {
        SLOWEST
            .iter()
            .position(|s| *s == b.name)
            .unwrap_or(SLOWEST.len())
    });
    Ok(binaries)
}

/// A `compiler-artifact` message of a test harness, as a [`TestBinary`].
fn test_binary(line: &str) -> Option<TestBinary> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let manifest = PathBuf::from(message["manifest_path"].as_str()?);
    let (package, version) = package_of(message["package_id"].as_str()?, &manifest)?;
    let target = message["target"]["name"].as_str()?;
    Some(TestBinary {
        name: format!("{package} {target}"),
        executable,
        manifest,
        package,
        version,
    })
}

/// A package's name and version from its id: `path+file:///dir#name@1.2.3`, or
/// `path+file:///dir/name#1.2.3` when the name is the directory's.
fn package_of(id: &str, manifest: &Path) -> Option<(String, String)> {
    let (_, fragment) = id.rsplit_once('#')?;
    match fragment.split_once('@') {
        Some((name, version)) => Some((name.to_owned(), version.to_owned())),
        None => {
            let dir = manifest.parent()?.file_name()?.to_str()?;
            Some((dir.to_owned(), fragment.to_owned()))
        }
    }
}

/// What one executable did.
struct Ran {
    name: String,
    passed: bool,
    took: Duration,
}

/// Runs every executable, `jobs` at a time, each with `args` (libtest's); past `limit`
/// what still runs is stopped. Whether every one passed; `Err` when the time ran out.
pub(crate) fn run_all(
    binaries: Vec<TestBinary>,
    args: &[String],
    jobs: usize,
    limit: Duration,
) -> Result<bool, String> {
    let start = Instant::now();
    let queue = Mutex::new(VecDeque::from(binaries));
    let done = Mutex::new(Vec::new());
    let stopped = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let next = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                let Some(binary) = next else { break };
                let left = limit.saturating_sub(start.elapsed());
                match run_one(&binary, args, left) {
                    Ok(ran) => {
                        if let Ok(mut done) = done.lock() {
                            done.push(ran);
                        }
                    }
                    Err(e) => {
                        if let Ok(mut stopped) = stopped.lock() {
                            *stopped = Some(e);
                        }
                        if let Ok(mut queue) = queue.lock() {
                            queue.clear();
                        }
                    }
                }
            });
        }
    });
    let mut done = done.into_inner().map_err(|_| "a runner thread panicked")?;
    done.sort_by_key(|r| std::cmp::Reverse(r.took));
    let slowest: Vec<String> = done
        .iter()
        .take(8)
        .map(|r| format!("{} {:.0} s", r.name, r.took.as_secs_f64()))
        .collect();
    eprintln!(
        "xtask: {} test executables, {jobs} at a time; the slowest: {}",
        done.len(),
        slowest.join(", ")
    );
    let failed: Vec<&str> = done
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.name.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("xtask: failed: {}", failed.join(", "));
    }
    if let Some(e) = stopped.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(failed.is_empty())
}

/// Runs one executable, its output kept and then shown: the summary when it passed,
/// all of it when it failed or was stopped.
fn run_one(binary: &TestBinary, args: &[String], limit: Duration) -> Result<Ran, String> {
    let dir = binary.manifest.parent().unwrap_or(Path::new("."));
    let mut command = Command::new(&binary.executable);
    command
        .current_dir(dir)
        .args(args)
        .env("CARGO_MANIFEST_DIR", dir)
        .env("CARGO_MANIFEST_PATH", &binary.manifest)
        .env("CARGO_PKG_NAME", &binary.package)
        .env("CARGO_PKG_VERSION", &binary.version)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let out = run_within(command, limit);
    let took = start.elapsed();
    let report = |text: &str| {
        eprintln!(
            "xtask: {} ({:.0} s):\n{text}",
            binary.name,
            took.as_secs_f64()
        );
    };
    match out {
        Ok(out) if out.success => {
            let summary: Vec<&str> = out
                .stdout
                .lines()
                .filter(|l| l.starts_with("test result:"))
                .collect();
            report(&summary.join("\n"));
            Ok(Ran {
                name: binary.name.clone(),
                passed: true,
                took,
            })
        }
        Ok(out) => {
            report(&format!("{}{}", out.stdout, out.stderr));
            Ok(Ran {
                name: binary.name.clone(),
                passed: false,
                took,
            })
        }
        Err(e) => {
            report(&e);
            Err(e)
        }
    }
}

/// A finished command: whether it succeeded and what it printed (empty where its
/// output was not piped).
pub(crate) struct Output {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `command`; past `limit` it and every process under it (the test binaries and the
/// servers they started) are killed. Its piped stdout and stderr are read as it runs (a
/// full pipe would stall it). `Ok` with how it ended, or why it could not run or was
/// stopped — with what it printed until then.
pub(crate) fn run_within(mut command: Command, limit: Duration) -> Result<Output, String> {
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let pids: Vec<String> =
                    descendants(child.id()).iter().map(u32::to_string).collect();
                let _ = Command::new("kill").arg("-KILL").args(&pids).status();
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Err(e) => return Err(format!("cannot wait for {:?}: {e}", command.get_program())),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            success: status.success(),
            stdout,
            stderr,
        }),
        None => Err(format!(
            "{stdout}{stderr}\nstopped: the tests ran past their time limit ({} minutes; \
             ORCH_TEST_MINUTES sets it); a test that hangs is named above as \
             \"has been running for over 60 seconds\"",
            super::time_limit().as_secs() / 60
        )),
    }
}

/// Every process under `root` (children, their children, ...), read from `/proc`.
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test harness's artifact message names its package, target and executable; a
    /// library's or a plain binary's is not a test.
    #[test]
    fn test_executables_are_read_from_cargo_messages() {
        let harness = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/orch-cli#0.1.0","manifest_path":"/w/orch-cli/Cargo.toml","target":{"kind":["test"],"name":"mcp_load"},"profile":{"test":true},"executable":"/w/target/debug/deps/mcp_load-1"}"#;
        let b = test_binary(harness).expect("a test executable");
        assert_eq!(b.name, "orch-cli mcp_load");
        assert_eq!(b.version, "0.1.0");
        assert_eq!(b.executable, Path::new("/w/target/debug/deps/mcp_load-1"));
        let named = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/examples#orch-examples@0.2.0","manifest_path":"/w/examples/Cargo.toml","target":{"kind":["lib"],"name":"orch_examples"},"profile":{"test":true},"executable":"/w/x"}"#;
        let b = test_binary(named).expect("a test executable");
        assert_eq!(
            (b.package.as_str(), b.version.as_str()),
            ("orch-examples", "0.2.0")
        );
        let binary = harness.replace(r#""test":true"#, r#""test":false"#);
        assert!(test_binary(&binary).is_none());
        assert!(test_binary(r#"{"reason":"build-finished","success":true}"#).is_none());
        assert!(test_binary("not json").is_none());
    }
}
