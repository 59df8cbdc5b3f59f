//! What `orch check` and `orch verify` cost, end to end (the binary, as a user runs it:
//! process start, reading the file, the compiler pipeline, the report), on the
//! repository's example templates and on the largest generated template of the
//! benchmarks (500 steps over 200 tools, the JSON of `orch-codegen`'s `expand` bench).
//!
//! ```sh
//! cargo bench -p orch-cli --bench commands
//! ```
//!
//! `ORCH_BENCH_BIN=/path/to/orch` measures another build of the binary instead (to
//! compare before and after a change with the same benchmark).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The repository's templates, relative to the workspace root.
const TEMPLATES: [&str; 5] = [
    "examples/agents/cognitive-reasoner/template.json",
    "examples/agents/refund-desk/template.json",
    "examples/agents/researcher/template.json",
    "examples/agents/support-triage/template.json",
    "tests/fixtures/agentdock/clinic-assistant.json",
];

fn binary() -> PathBuf {
    std::env::var_os("ORCH_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_orch")))
}

/// Runs `orch ARGS` and checks that it ended with one of the codes a finished run of
/// the command gives (0: clean, 1: findings) — never a usage or I/O error.
fn run(bin: &Path, args: &[&str]) {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("the orch binary runs");
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "orch {args:?} ended with {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn bench(c: &mut Criterion) {
    let bin = binary();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-commands");
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let large = dir.join("large-500-steps-200-tools.json");
    std::fs::write(&large, orch_test_support::templates::large_json())
        .expect("the large template is written");
    let mut files: Vec<(String, PathBuf)> = TEMPLATES
        .iter()
        .map(|t| {
            let path = root.join(t);
            let name = Path::new(t)
                .parent()
                .and_then(Path::file_name)
                .filter(|d| *d != "agentdock")
                .or_else(|| Path::new(t).file_stem())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, path)
        })
        .collect();
    files.push(("large-500-steps".to_owned(), large));
    for command in ["check", "verify"] {
        let mut g = c.benchmark_group(format!("orch_{command}"));
        for (name, path) in &files {
            let path = path.to_string_lossy().into_owned();
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| run(&bin, &[command, &path]))
            });
        }
        g.finish();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);
