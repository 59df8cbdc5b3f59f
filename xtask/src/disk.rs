//! The disk a test run takes: a warning before it when there is less room than a clean
//! run needs, the test executables freed on CI before the packages are built, and a
//! note after a failure when a disk is full.

use std::path::Path;
use std::process::Command;

/// What a run of every test from a clean clone takes on disk, with room to spare: its
/// peak was 8.3 GB (the target directory 7.1 GB of it — the workspace's debug and
/// release builds, trybuild's project, the wheel, the npm addon and WebAssembly module —
/// the rest the tools it installs and the tests' temporary directories, a
/// restate-server's data ~220 MB while its test runs). Measured 2026-11-27 on x86_64
/// Linux, rustc 1.95.0, sampling `df` every 20 s. On CI, with the test executables
/// removed before the packages are built ([`free_test_builds`], 3.9 GB), the clone's
/// peak was 6.9 GB, during the Rust tests, and 4.8 GB while the packages were built
/// (2026-11-28, `du` every 20 s).
pub(crate) const DISK_NEEDED_GB: u64 = 10;

/// Free space, in GB, on the file system holding `path` (`df -Pk`), if `df` can say.
pub(crate) fn free_gb(path: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    available_gb(&String::from_utf8(out.stdout).ok()?)
}

/// The "Available" column of `df -Pk`'s one file system, in whole GB.
pub(crate) fn available_gb(df: &str) -> Option<u64> {
    let kb: u64 = df.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kb / (1024 * 1024))
}

/// Says so before a run when the target directory's or the temporary directory's file
/// system has less room than a clean run takes: a full disk shows up as odd failures
/// (cargo's "No space left on device" on stderr, which trybuild does not read: it takes
/// a case cargo said nothing about as having compiled).
pub(crate) fn disk_check(root: &Path) {
    for (what, path) in [
        ("the target directory", root.join("target")),
        ("the temporary directory", std::env::temp_dir()),
    ] {
        let path = if path.exists() {
            path
        } else {
            root.to_path_buf()
        };
        if let Some(free) = free_gb(&path) {
            if free < DISK_NEEDED_GB {
                eprintln!(
                    "xtask: warning: {free} GB free for {what} ({}); a run of every test from a clean clone takes about {DISK_NEEDED_GB} GB",
                    path.display()
                );
            }
        }
    }
}

/// On CI only (`CI` set), once the Rust tests have run: removes what only they use — the
/// linked test and binary executables in `target/debug/deps` (about 2.7 GB from a clean
/// clone) and trybuild's project under `target/tests` (about 0.9 GB) — so the packages
/// built next (the wheel, the npm addon and its WebAssembly module) fit on a CI machine
/// with less room. Libraries, build scripts and the examples stay. A developer's own
/// `cargo xtask test` keeps them, so that the next run relinks nothing.
pub(crate) fn free_test_builds(root: &Path) {
    let mut freed = 0u64;
    let deps = root.join("target/debug/deps");
    if let Ok(entries) = std::fs::read_dir(&deps) {
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            // Linked executables have no extension; rlibs, rmeta, .d and .so files do.
            if meta.is_file()
                && path.extension().is_none()
                && is_executable(&meta)
                && std::fs::remove_file(&path).is_ok()
            {
                freed += meta.len();
            }
        }
    }
    let trybuild = root.join("target/tests");
    let size = dir_size(&trybuild);
    if std::fs::remove_dir_all(&trybuild).is_ok() {
        freed += size;
    }
    eprintln!(
        "xtask: CI: removed the Rust test executables and trybuild's project ({:.1} GB) before building the packages",
        freed as f64 / 1e9
    );
}

/// Whether a file has any execute bit set.
pub(crate) fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// The bytes of every file under `dir` (0 if it cannot be read).
pub(crate) fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// After a failure: if the disk is (nearly) full, says that this is the likely cause.
pub(crate) fn disk_full_note(root: &Path) {
    for path in [root.join("target"), std::env::temp_dir()] {
        if let Some(0) = free_gb(&path) {
            eprintln!(
                "xtask: the file system of {} has less than 1 GB free: the failures above may be a full disk (No space left on device), not the code",
                path.display()
            );
        }
    }
}
