//! The project's own rules, enforced by the build (docs/architecture.md, "Rules the
//! build enforces"): what a reviewer would otherwise have to remember.

use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under the `src/` directory of each package of the workspace.
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root()).expect("the workspace").flatten() {
        let package = entry.path();
        if package.join("Cargo.toml").is_file() {
            walk(&package.join("src"), &mut out);
        }
    }
    walk(&root().join("src"), &mut out);
    out.sort();
    out
}

/// One idea per file: no source file is over 800 lines. Split a file that grows past it
/// along its seams (a family of files in a folder of its own), as `audit/`, `policy/`,
/// `state/` and `snapshot/` are.
#[test]
fn no_source_file_is_over_800_lines() {
    let files = sources();
    assert!(files.len() > 100, "only {} source files found", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            (lines > 800).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "over 800 lines: {long:#?}");
}

/// Every public item of every library is documented: each library's root denies
/// `missing_docs` (rustdoc's `-D warnings` in `.ci/run` then keeps the links true).
#[test]
fn every_library_denies_missing_docs() {
    let mut checked = 0;
    for entry in std::fs::read_dir(root()).expect("the workspace").flatten() {
        let lib = entry.path().join("src/lib.rs");
        let Ok(text) = std::fs::read_to_string(&lib) else {
            continue;
        };
        checked += 1;
        assert!(
            text.contains("#![deny(missing_docs)]"),
            "{} does not deny missing_docs",
            lib.display()
        );
    }
    assert!(checked >= 14, "only {checked} libraries found");
}

/// The `orch` crate's documentation names every feature its manifest declares, in its
/// feature table.
#[test]
fn the_facade_documents_every_feature() {
    let manifest =
        std::fs::read_to_string(root().join("orch/Cargo.toml")).expect("orch's manifest");
    let docs = std::fs::read_to_string(root().join("orch/src/lib.rs")).expect("orch's lib.rs");
    let features = manifest
        .split("[features]")
        .nth(1)
        .expect("a [features] table")
        .split("\n[")
        .next()
        .unwrap_or("");
    let mut named = 0;
    for line in features.lines() {
        let Some((name, _)) = line.split_once(" = ") else {
            continue;
        };
        if name == "default" || name.starts_with('#') {
            continue;
        }
        named += 1;
        assert!(
            docs.contains(&format!("//! | `{name}`")),
            "orch/src/lib.rs's feature table does not name `{name}`"
        );
    }
    assert!(named >= 12, "only {named} features read");
}
