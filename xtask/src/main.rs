//! `cargo xtask test [CARGO TEST ARGS...]`: runs every test of the workspace against its
//! real component. `cargo xtask install` installs what they need and nothing else.
//!
//! Some tests need programs outside Rust: `redis-server` and `redis-cli` (the Redis and
//! Redis Cluster stores, gateways sharing sessions), `tmux` (the interactive simulator),
//! the official MCP Python SDK (the `orch mcp` gateway's client and upstream) and the
//! SARIF SDK's validator, Node.js 22 with the official MCP conformance suite and the
//! official TypeScript SDK (`conformance/`). Plain `cargo test` reports those tests as
//! *ignored*, with what they need. This command installs what is missing where it can — `apt-get` when it
//! runs as root, a venv under `target/ci-tools/venv` for the Python SDK, `npm` for the
//! SARIF validator — and otherwise stops with one line per missing piece and how to get
//! it. Then it runs `cargo build --workspace --examples` (tests run some examples as
//! programs), the test executables of `cargo test --workspace --lib --bins --tests`,
//! built once and run three at a time (`ORCH_TEST_JOBS`), each with `--include-ignored`
//! (every test, those included; run, a test whose component is missing fails: nothing is
//! reported as passed that did not run) and `cargo test --workspace --doc` (the doc
//! examples; the ones marked `ignore` are illustrations that cannot compile on their
//! own); then the engine's instruction budget (`orch-probe` built in release and run
//! under valgrind's callgrind: a turn or a message over its budget of instructions fails
//! the run — an exact count, never a time); then the Python package: its wheel built once with maturin (the dev profile, the
//! same target directory), installed into `target/ci-tools/py`, pytest run on the
//! installed package and mypy's stubtest on its stubs; then the npm package: its dev dependencies from the lockfile
//! (`npm ci`), and `orch-node/scripts/ci.mjs`, which builds the native addon and the
//! WebAssembly module once each (napi-rs, the same target directory), packs the packages
//! (`npm pack`), installs the tarballs into a fresh directory and runs `node --test`
//! there on the native addon and on WebAssembly.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

mod disk;
mod runner;

use disk::*;

/// The MCP Python SDK the gateway tests are written against.
const MCP_SDK: &str = "mcp==2.3.0";
/// The LLM SDKs whose own message types build the transcripts `orch check-trace` is
/// tested on (offline: only their types are used).
const LLM_SDKS: [&str; 2] = ["openai==3.54.0", "anthropic==2.12.0"];
/// The versions of the MCP conformance suite the conformance test runs (pinned in
/// `conformance/package.json` as `conformance-<version>`).
const CONFORMANCE_SUITES: [&str; 2] = ["0.1.16", "0.2.0-alpha.11"];

/// The SARIF SDK's validator (a self-contained binary in an npm package).
const SARIF_PACKAGE: &str = "@microsoft/sarif-multitool-linux@5.7.0";
/// What builds and tests the Python package (`orch-py`), in a venv of its own, and the
/// agent frameworks its adapters are tested against.
const PY_TOOLS: [&str; 7] = [
    "maturin==1.16.0",
    "pytest==9.2.0",
    "mypy==2.4.1",
    "openai-agents==0.24.0",
    "pydantic-ai-slim[openai]==2.68.0",
    "langgraph==1.2.22",
    "langchain-openai==1.7.4",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("install") if args.len() == 1 => {
            if installed(&root()) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        _ => {
            eprintln!("usage: cargo xtask test [CARGO TEST ARGS...]");
            eprintln!(
                "  installs what the tests need (or says what is missing), then runs every test"
            );
            eprintln!("       cargo xtask install");
            eprintln!("  installs what the tests need (or says what is missing), and nothing else");
            ExitCode::from(2)
        }
    }
}

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Says how long a phase of the run took (so a slow phase shows in CI's log).
fn took(what: &str, since: std::time::Instant) {
    eprintln!("xtask: {what} took {:.0} s", since.elapsed().as_secs_f64());
}

/// Does `program args...` run and succeed?
fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a command, its output shown; whether it succeeded.
fn run(program: &str, args: &[&str]) -> bool {
    eprintln!("xtask: {program} {}", args.join(" "));
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// One thing the tests need.
struct Component {
    /// What it is, for the message.
    name: &'static str,
    /// Is it there?
    present: fn(&Path) -> bool,
    /// Tries to install it; whether it tried.
    install: fn(&Path) -> bool,
    /// How a person gets it, when this command cannot.
    how: &'static str,
}

fn apt(packages: &[&str]) -> bool {
    if !is_root() || !runs("apt-get", &["--version"]) {
        return false;
    }
    let mut args = vec!["install", "-y", "-q"];
    args.extend_from_slice(packages);
    run("apt-get", &args) || (run("apt-get", &["update", "-q"]) && run("apt-get", &args))
}

/// Installs `packages` with pip into the venv at `venv`, made first (with Debian's
/// `python3-venv` when `venv` is missing) if it is not there. Whether it worked.
fn pip_install(venv: &Path, packages: &[&str]) -> bool {
    let venv_s = venv.to_string_lossy().into_owned();
    let made = venv.join("bin/python").exists()
        || run("python3", &["-m", "venv", &venv_s])
        || (apt(&["python3-venv"]) && run("python3", &["-m", "venv", &venv_s]));
    if !made {
        return false;
    }
    let python = venv.join("bin/python").to_string_lossy().into_owned();
    let mut args = vec![
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ];
    args.extend_from_slice(packages);
    run(&python, &args)
}

/// The venv the Python package is built, installed and tested in.
fn py_venv(root: &Path) -> PathBuf {
    root.join("target/ci-tools/py")
}

/// Builds the Python package's wheel once (maturin, the dev profile, the workspace's
/// target directory), installs it into its venv and runs pytest on the installed package
/// from outside the source tree. Whether every step succeeded.
fn python_package(root: &Path, limit: std::time::Duration) -> Result<bool, String> {
    let venv = py_venv(root);
    let python = venv.join("bin/python");
    let wheels = root.join("target/wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    let mut build = Command::new(&python);
    build
        .current_dir(root.join("orch-py"))
        .env("CARGO_TARGET_DIR", root.join("target"))
        .args(["-m", "maturin", "build", "--profile", "dev", "--out"])
        .arg(&wheels);
    eprintln!("xtask: maturin build --profile dev --out target/wheels (orch-py)");
    if !run_within(build, limit)? {
        return Ok(false);
    }
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("no wheel in {}: {e}", wheels.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("maturin wrote no wheel to {}", wheels.display()))?;
    let mut install = Command::new(&python);
    install
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--force-reinstall", "--no-deps"])
        .arg(&wheel);
    eprintln!("xtask: pip install {}", wheel.display());
    if !run_within(install, limit)? {
        return Ok(false);
    }
    // From a directory outside the source tree, so `import orch` is the installed wheel.
    let mut pytest = Command::new(&python);
    pytest
        .current_dir(venv)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("orch-py/tests"));
    eprintln!("xtask: pytest orch-py/tests (the installed wheel)");
    if !run_within(pytest, limit)? {
        return Ok(false);
    }
    // The stubs say what the native module really has: every name, signature and kind.
    let mut stubtest = Command::new(&python);
    stubtest
        .current_dir(py_venv(root))
        .args(["-m", "mypy.stubtest", "orch._orch"]);
    eprintln!("xtask: mypy.stubtest orch._orch (the installed wheel's stubs)");
    run_within(stubtest, limit)
}

/// The Rust target the npm package's WebAssembly build is compiled for.
const WASM_TARGET: &str = "wasm32-wasip1-threads";

/// Is Node.js at least 20 (what the npm package supports) on the PATH?
fn node_20() -> bool {
    let Ok(out) = Command::new("node").arg("--version").output() else {
        return false;
    };
    let version = String::from_utf8_lossy(&out.stdout);
    let major = version.trim().trim_start_matches('v').split('.').next();
    out.status.success()
        && major
            .and_then(|m| m.parse::<u32>().ok())
            .is_some_and(|m| m >= 20)
}

/// The restate-server binary the tests use: `ORCH_RESTATE_SERVER`, else the one npm put
/// in `restate/` for this platform (`None`: no package for it).
fn restate_server(root: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ORCH_RESTATE_SERVER") {
        return Some(PathBuf::from(path));
    }
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64",
        ("linux", "aarch64") => "linux-arm64",
        ("macos", "x86_64") => "darwin-x64",
        ("macos", "aarch64") => "darwin-arm64",
        _ => return None,
    };
    Some(root.join(format!(
        "restate/node_modules/@restatedev/restate-server-{platform}/bin/restate-server"
    )))
}

/// Are Node.js 22, the conformance suites and the official TypeScript SDK (the test's
/// server and stdio bridge are written on it) installed under `conformance/`?
fn conformance_ready(root: &Path) -> bool {
    let dir = root.join("conformance");
    let node = dir.join("node_modules/node/bin/node");
    let node_22 = Command::new(&node)
        .arg("--version")
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("v22.")
        });
    node_22
        && dir
            .join("node_modules/@modelcontextprotocol/sdk/package.json")
            .is_file()
        && CONFORMANCE_SUITES.iter().all(|r| {
            dir.join(format!("node_modules/conformance-{r}/dist/index.js"))
                .is_file()
        })
}

/// Builds, packs and tests the npm package (`orch-node`): `npm ci`, then
/// `node scripts/ci.mjs`. Whether every step succeeded.
fn node_package(root: &Path, limit: std::time::Duration) -> Result<bool, String> {
    let start = std::time::Instant::now();
    let dir = root.join("orch-node");
    let mut ci = Command::new("npm");
    ci.current_dir(&dir)
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]);
    eprintln!("xtask: npm ci (orch-node)");
    if !run_within(ci, limit)? {
        return Ok(false);
    }
    let mut script = Command::new("node");
    script
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .arg("scripts/ci.mjs");
    eprintln!("xtask: node scripts/ci.mjs (orch-node: build, npm pack, install, node --test)");
    run_within(script, limit.saturating_sub(start.elapsed()))
}

fn venv_python(root: &Path) -> PathBuf {
    match std::env::var_os("ORCH_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => root.join("target/ci-tools/venv/bin/python"),
    }
}

fn sarif_tool(root: &Path) -> PathBuf {
    root.join("target/ci-tools/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool")
}

/// What the tests need, the system's packages first.
fn components() -> Vec<Component> {
    let mut all = system_components();
    all.extend(language_components());
    all
}

/// The system's packages the tests need (apt-get installs them).
fn system_components() -> Vec<Component> {
    vec![
        Component {
            name: "redis-server and redis-cli",
            present: |_| runs("redis-server", &["--version"]) && runs("redis-cli", &["--version"]),
            install: |_| apt(&["redis-server", "redis-tools"]),
            how: "install Redis (Debian/Ubuntu: `sudo apt-get install redis-server redis-tools`; macOS: `brew install redis`)",
        },
        Component {
            name: "valgrind (the engine's instruction budget)",
            present: |_| runs("valgrind", &["--version"]),
            install: |_| apt(&["valgrind"]),
            how: "install valgrind (`sudo apt-get install valgrind`)",
        },
        Component {
            name: "Chromium and ChromeDriver (the console's browser test)",
            present: |_| runs("chromium", &["--version"]) && runs("chromedriver", &["--version"]),
            install: |_| apt(&["chromium", "chromium-driver"]),
            how: "install Debian's Chromium and ChromeDriver (`sudo apt-get install chromium chromium-driver`)",
        },
        Component {
            name: "tmux",
            present: |_| runs("tmux", &["-V"]),
            install: |_| apt(&["tmux"]),
            how: "install tmux (`sudo apt-get install tmux`, `brew install tmux`)",
        },
    ]
}

/// The language toolchains and packages the tests need (pip, npm, rustup).
fn language_components() -> Vec<Component> {
    vec![
        Component {
            name: "the MCP Python SDK",
            present: |root| {
                let python = venv_python(root);
                runs(&python.to_string_lossy(), &["-c", "import mcp, httpx2"])
            },
            install: |root| pip_install(&root.join("target/ci-tools/venv"), &[MCP_SDK]),
            how: "Python 3.10+ with venv: `python3 -m venv target/ci-tools/venv && target/ci-tools/venv/bin/pip install mcp==2.3.0` (or point ORCH_TEST_PYTHON at a Python that has `mcp`)",
        },
        Component {
            name: "the OpenAI and Anthropic Python SDKs",
            present: |root| {
                let python = venv_python(root);
                runs(&python.to_string_lossy(), &["-c", "import openai, anthropic"])
            },
            install: |root| pip_install(&root.join("target/ci-tools/venv"), &LLM_SDKS),
            how: "the venv of the MCP Python SDK, then `target/ci-tools/venv/bin/pip install openai==3.54.0 anthropic==2.12.0`",
        },
        Component {
            name: "maturin, pytest and the agent frameworks (the Python package)",
            present: |root| {
                let python = py_venv(root).join("bin/python");
                let python = python.to_string_lossy();
                runs(&python, &["-m", "maturin", "--version"])
                    && runs(&python, &["-m", "pytest", "--version"])
                    && runs(&python, &["-m", "mypy", "--version"])
                    && runs(
                        &python,
                        &["-c", "import agents, pydantic_ai, langgraph, langchain_openai"],
                    )
            },
            install: |root| pip_install(&py_venv(root), &PY_TOOLS),
            how: "Python 3.10+ with venv: `python3 -m venv target/ci-tools/py && target/ci-tools/py/bin/pip install maturin==1.16.0 pytest==9.2.0 mypy==2.4.1 openai-agents==0.24.0 'pydantic-ai-slim[openai]==2.68.0' langgraph==1.2.22 langchain-openai==1.7.4`",
        },
        Component {
            name: "Node.js 20+ with npm (the npm package)",
            present: |_| node_20() && runs("npm", &["--version"]),
            install: |_| false,
            how: "install Node.js 20 or later with npm (https://nodejs.org, or your distribution's `nodejs` and `npm` packages if they are 20+)",
        },
        Component {
            name: "Node.js 22, the MCP conformance suite and the official TypeScript SDK (conformance/)",
            present: conformance_ready,
            install: |root| {
                let dir = root.join("conformance");
                eprintln!("xtask: npm ci ({})", dir.display());
                Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund", "--silent"])
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            },
            how: "npm (any Node.js), then `npm ci` in conformance/ (it installs Node.js 22 as the npm package `node`, the suites and the official TypeScript SDK)",
        },
        Component {
            name: "restate-server (restate/: orch-restate's tests)",
            present: |root| restate_server(root).is_some_and(|b| runs(&b.to_string_lossy(), &["--version"])),
            install: |root| {
                eprintln!("xtask: npm ci (restate/)");
                Command::new("npm")
                    .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--silent"])
                    .current_dir(root.join("restate"))
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            },
            how: "npm, then `npm ci --ignore-scripts` in restate/ (the npm package @restatedev/restate-server ships the server for Linux and macOS on x64 and arm64), or set ORCH_RESTATE_SERVER to a restate-server 1.7 binary",
        },
        Component {
            name: "the wasm32-wasip1-threads Rust target (the npm package's WebAssembly build)",
            present: |_| {
                Command::new("rustup")
                    .args(["target", "list", "--installed"])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == WASM_TARGET))
            },
            install: |_| run("rustup", &["target", "add", WASM_TARGET]),
            how: "`rustup target add wasm32-wasip1-threads`",
        },
        Component {
            name: "the SARIF SDK's validator",
            present: |root| sarif_tool(root).is_file(),
            install: |root| {
                let prefix = root.join("target/ci-tools").to_string_lossy().into_owned();
                let installed = runs("npm", &["--version"])
                    && run(
                        "npm",
                        &["install", "--silent", "--no-audit", "--no-fund", "--prefix", &prefix, SARIF_PACKAGE],
                    );
                installed
                    && run("chmod", &["+x", &sarif_tool(root).to_string_lossy()])
            },
            how: "Node.js with npm, then `npm install --prefix target/ci-tools @microsoft/sarif-multitool-linux@5.7.0`",
        },
    ]
}

/// Installs what the tests need and is missing; `false` (with one line per missing piece
/// and how to get it) when something could not be installed.
fn installed(root: &Path) -> bool {
    let mut missing = Vec::new();
    for c in components() {
        if (c.present)(root) {
            continue;
        }
        eprintln!("xtask: missing: {}; installing", c.name);
        if !((c.install)(root) && (c.present)(root)) {
            missing.push(c);
        }
    }
    if !missing.is_empty() {
        eprintln!("xtask: cannot run every test; missing:");
        for c in &missing {
            eprintln!("  - {}: {}", c.name, c.how);
        }
        eprintln!("(`cargo test --workspace` runs the other tests and reports these as ignored)");
    }
    missing.is_empty()
}

fn test(cargo_args: &[String]) -> ExitCode {
    let root = root();
    if !installed(&root) {
        return ExitCode::FAILURE;
    }
    disk_check(&root);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let (before, after) = match cargo_args.iter().position(|a| a == "--") {
        Some(i) => (&cargo_args[..i], &cargo_args[i + 1..]),
        None => (cargo_args, &[][..]),
    };
    // The Python package is built once, by maturin, and the npm package once per target,
    // by napi-rs, after the Rust tests. Packages picked with `-p` are tested alone: their
    // Rust tests, nothing after them.
    let picked = picks_packages(before);
    let packages: &[&str] = if picked {
        &[]
    } else {
        &[
            "--workspace",
            "--exclude",
            "orch-py",
            "--exclude",
            "orch-node",
        ]
    };
    let mut examples = vec!["build"];
    examples.extend(packages);
    examples.push("--examples");
    examples.extend(before.iter().map(String::as_str));
    let mut tests = vec!["test"];
    tests.extend(packages);
    tests.extend(["--lib", "--bins", "--tests"]);
    tests.extend(before.iter().map(String::as_str));
    let mut libtest = vec!["--include-ignored".to_owned()];
    libtest.extend(after.iter().cloned());
    let mut docs = vec!["test"];
    docs.extend(packages);
    docs.push("--doc");
    docs.extend(before.iter().map(String::as_str));
    if !after.is_empty() {
        docs.push("--");
        docs.extend(after.iter().map(String::as_str));
    }
    let limit = time_limit();
    let start = std::time::Instant::now();
    // The test executables are built here and run side by side (`rust_tests`); the
    // examples' build and the doc tests are cargo's own runs.
    for (args, executables) in [(examples, false), (tests, true), (docs, false)] {
        eprintln!("xtask: cargo {}", args.join(" "));
        let left = limit.saturating_sub(start.elapsed());
        let phase = std::time::Instant::now();
        let ran = if executables {
            rust_tests(&cargo, &root, &args, &libtest, left)
        } else {
            let mut command = Command::new(&cargo);
            command.current_dir(&root).args(&args);
            run_within(command, left)
        };
        took(&format!("cargo {}", args[0]), phase);
        match ran {
            Ok(true) => {}
            Ok(false) => {
                disk_full_note(&root);
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("xtask: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if picked {
        took("every test of the packages picked", start);
        return ExitCode::SUCCESS;
    }
    if std::env::var_os("CI").is_some() {
        free_test_builds(&root);
    }
    // The engine's instruction budget: a regression of the hot path fails the build.
    let phase = std::time::Instant::now();
    let budget = instruction_budget(&root, &cargo, limit.saturating_sub(start.elapsed()));
    took("the instruction budget", phase);
    if let Err(e) = budget {
        eprintln!("xtask: {e}");
        return ExitCode::FAILURE;
    }
    // Both packages are tested even when one fails, so that one run reports both.
    let mut passed = true;
    for (name, package) in [
        ("the Python package", python_package as fn(&Path, _) -> _),
        ("the npm package", node_package),
    ] {
        let phase = std::time::Instant::now();
        let built = package(&root, limit.saturating_sub(start.elapsed()));
        took(name, phase);
        match built {
            Ok(true) => {}
            Ok(false) => {
                eprintln!("xtask: {name} failed");
                passed = false;
            }
            Err(e) => {
                eprintln!("xtask: {name}: {e}");
                passed = false;
            }
        }
    }
    took("every test", start);
    if passed {
        ExitCode::SUCCESS
    } else {
        disk_full_note(&root);
        ExitCode::FAILURE
    }
}

/// Whether cargo's arguments pick packages (`-p NAME`, `-pNAME`, `--package NAME`,
/// `--package=NAME`).
fn picks_packages(args: &[String]) -> bool {
    args.iter()
        .any(|a| a.starts_with("-p") || a == "--package" || a.starts_with("--package="))
}

/// The Rust tests: built by one `cargo test --no-run` ([`runner::build`]), then run
/// `ORCH_TEST_JOBS` executables at a time (3 unless set; [`runner::run_all`]), each with
/// libtest's arguments `libtest`. Every executable runs even when one fails.
fn rust_tests(
    cargo: &str,
    root: &Path,
    args: &[&str],
    libtest: &[String],
    limit: std::time::Duration,
) -> Result<bool, String> {
    let start = std::time::Instant::now();
    let binaries = runner::build(cargo, root, args, limit)?;
    let jobs = std::env::var("ORCH_TEST_JOBS")
        .ok()
        .and_then(|j| j.parse::<usize>().ok())
        .unwrap_or(3);
    runner::run_all(
        binaries,
        libtest,
        jobs,
        limit.saturating_sub(start.elapsed()),
    )
}

/// The engine's hot path, in instructions per call of the probe's functions
/// (`orch-probe`, a release build, counted by callgrind: exact, whatever the machine's
/// load): `(function, calls, budget per call)`. Measured 2026-11-27 with rustc 1.95.0:
/// a turn (`allowed()` and `record()` on the sequence-driven shape, the call included)
/// 55.3 (141.1 before the transition table, 69.0 before the typed session read the
/// table's outcome directly), a 200-byte message against 40 conditions 8,979 (10,292
/// before the ASCII path of the case-folding pass), the research turn on the cognitive
/// reasoner (a message and three allowed/check/record calls) 2,172 (2,410 before the
/// table). The budgets leave about 3–5% for another compiler's code; lower them with
/// the code they measure.
const INSTRUCTION_BUDGETS: [(&str, u64, u64); 3] = [
    ("turn", 7_000, 58),
    ("message", 100, 9_250),
    ("research", 600, 2_250),
];

/// Builds `orch-probe` (release) and counts each probed function's instructions under
/// callgrind; `Err` names what is over its budget, or what could not run.
fn instruction_budget(root: &Path, cargo: &str, limit: std::time::Duration) -> Result<(), String> {
    let args = ["build", "--release", "-p", "orch-probe"];
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut build = Command::new(cargo);
    build.current_dir(root).args(args);
    if !run_within(build, limit)? {
        return Err("the instruction probe did not build".into());
    }
    let probe = root.join("target/release/orch-probe");
    let mut over = Vec::new();
    for (function, calls, budget) in INSTRUCTION_BUDGETS {
        let out = root.join(format!("target/release/callgrind.{function}.out"));
        let output = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(format!("--toggle-collect=*orch_probe::{function}*"))
            .arg(&probe)
            .output()
            .map_err(|e| format!("cannot run valgrind: {e}"))?;
        let report = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(format!("valgrind failed on the probe:\n{report}"));
        }
        let total = collected(&report)
            .ok_or_else(|| format!("no instruction count in valgrind's report:\n{report}"))?;
        let per_call = total as f64 / calls as f64;
        eprintln!(
            "xtask: instructions per {function}: {per_call:.1} (budget {budget}; {total} in {calls} calls)"
        );
        if total > budget * calls {
            over.push(format!(
                "{function}: {per_call:.1} instructions per call, budget {budget}"
            ));
        }
    }
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the engine's hot path is over its instruction budget ({}): see INSTRUCTION_BUDGETS in xtask/src/main.rs and `callgrind_annotate` on target/release/callgrind.*.out",
            over.join("; ")
        ))
    }
}

/// The instructions callgrind collected (its `Collected : N` line).
fn collected(report: &str) -> Option<u64> {
    report.lines().find_map(|line| {
        let (_, count) = line.split_once("Collected :")?;
        count.trim().replace(',', "").parse().ok()
    })
}

/// How long the builds and tests may take in all: `ORCH_TEST_MINUTES` (60 unless set).
/// Past it the run is stopped and fails, so that a test that hangs is reported as such
/// (libtest names it: "has been running for over 60 seconds") instead of running into
/// CI's own limit with nothing said.
fn time_limit() -> std::time::Duration {
    let minutes = std::env::var("ORCH_TEST_MINUTES")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .unwrap_or(60);
    std::time::Duration::from_secs(minutes * 60)
}

/// Runs `command` with its output shown; past `limit` it and every process under it
/// are stopped ([`runner::run_within`]). `Ok(success)`, or why it could not run or was
/// stopped.
fn run_within(command: Command, limit: std::time::Duration) -> Result<bool, String> {
    runner::run_within(command, limit).map(|out| out.success)
}

#[cfg(test)]
mod tests {
    /// `-p` and `--package`, in each of cargo's spellings, pick packages.
    #[test]
    fn packages_picked_with_p_are_seen() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(super::picks_packages(&args(&["-p", "orch-store"])));
        assert!(super::picks_packages(&args(&["-porch-store"])));
        assert!(super::picks_packages(&args(&[
            "--release",
            "--package",
            "orch"
        ])));
        assert!(super::picks_packages(&args(&["--package=orch"])));
        assert!(!super::picks_packages(&args(&[
            "--release",
            "--features",
            "otel"
        ])));
        assert!(!super::picks_packages(&args(&[])));
    }

    /// Callgrind's count is read from its report, with or without digit grouping.
    #[test]
    fn the_collected_count_is_read() {
        let report = "==1== Callgrind, a call-graph generating cache profiler\n==1== \n==1== Events    : Ir\n==1== Collected : 988000\n==1== \n==1== I   refs:      988,000\n";
        assert_eq!(super::collected(report), Some(988_000));
        assert_eq!(
            super::collected("==1== Collected : 1,029,200"),
            Some(1_029_200)
        );
        assert_eq!(super::collected("no count here"), None);
    }

    /// The free space is `df -Pk`'s fourth column, in KB, rounded down to GB.
    #[test]
    fn the_free_space_is_read() {
        let df = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n/dev/vda        263174212 45802520 48174180      49% /\n";
        assert_eq!(super::available_gb(df), Some(45));
        let full = "Filesystem 1024-blocks Used Available Capacity Mounted on\ntmpfs 1146880 1146880 0 100% /mnt\n";
        assert_eq!(super::available_gb(full), Some(0));
        assert_eq!(
            super::available_gb("df: /nowhere: No such file or directory\n"),
            None
        );
        // The real command on this machine answers.
        assert!(super::free_gb(std::path::Path::new(".")).is_some());
    }
}
