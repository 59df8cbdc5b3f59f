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

/// A crate's modules, by path (`["handler", "admission"]`), each with its file.
fn modules(root_file: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let decl = regex::Regex::new(
        r#"(?m)^[ \t]*(?:#\[path\s*=\s*"([^"]+)"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"#,
    )
    .unwrap();
    let mut out = Vec::new();
    let mut stack = vec![(Vec::new(), root_file.to_path_buf())];
    while let Some((path, file)) = stack.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let dir = file.parent().unwrap().to_path_buf();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        // A `mod.rs`, `lib.rs` or `main.rs` holds its children beside it; `a.rs` in `a/`.
        let children = if ["mod.rs", "lib.rs", "main.rs"].contains(&name.as_str()) {
            dir.clone()
        } else {
            dir.join(name.trim_end_matches(".rs"))
        };
        for m in decl.captures_iter(without_tests(&text)) {
            let child = &m[2];
            let file = match m.get(1) {
                Some(p) => dir.join(p.as_str()),
                None if children.join(format!("{child}.rs")).is_file() => {
                    children.join(format!("{child}.rs"))
                }
                None => children.join(child).join("mod.rs"),
            };
            if file.is_file() {
                let mut p = path.clone();
                p.push(child.to_owned());
                stack.push((p, file));
            }
        }
        out.push((path, file));
    }
    out
}

/// The text before a file's unit tests (which may use anything).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i])
}

/// The modules each module refers to by path (`crate::a::b`, `super::b`, `use b::…` of
/// its own child), an item re-exported by a module counted where it comes from.
fn module_edges(mods: &[(Vec<String>, PathBuf)]) -> Vec<(usize, usize)> {
    let index = |p: &[String]| mods.iter().position(|(q, _)| q == p);
    let comment = regex::Regex::new(r"//[^\n]*").unwrap();
    let reference = regex::Regex::new(r"\b(crate|super|self)((?:::\w+)+)").unwrap();
    let use_child = regex::Regex::new(r"\buse\s+(\w+)((?:::\w+)*)").unwrap();
    let reexport =
        regex::Regex::new(r"pub(?:\([^)]*\))?\s+use\s+([\w:]+?)::(\{[^}]*\}|\w+)\s*;").unwrap();
    let texts: Vec<String> = mods
        .iter()
        .map(|(_, f)| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            comment.replace_all(without_tests(&text), "").into_owned()
        })
        .collect();
    let resolve = |from: &[String], kind: &str, rest: &[String]| -> Vec<String> {
        let mut base: Vec<String> = match kind {
            "crate" => Vec::new(),
            "super" => from[..from.len().saturating_sub(1)].to_vec(),
            _ => from.to_vec(),
        };
        let mut rest = rest;
        while rest.first().is_some_and(|r| r == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        base
    };
    // (module, item) → the module the item is re-exported from.
    let mut reexports: std::collections::HashMap<(usize, String), usize> = Default::default();
    for (i, (path, _)) in mods.iter().enumerate() {
        for m in reexport.captures_iter(&texts[i]) {
            let parts: Vec<String> = m[1].split("::").map(str::to_owned).collect();
            let target = match parts[0].as_str() {
                "crate" | "super" | "self" => resolve(path, &parts[0], &parts[1..]),
                _ => resolve(path, "self", &parts),
            };
            let Some(t) = index(&target) else { continue };
            for name in m[2].split([',', '{', '}', ' ', '\n']) {
                let name = name.rsplit(" as ").next().unwrap_or(name).trim();
                if !name.is_empty() && name != "self" {
                    reexports.insert((i, name.to_owned()), t);
                }
            }
        }
    }
    let mut edges = Vec::new();
    for (i, (path, _)) in mods.iter().enumerate() {
        let mut refs: Vec<Vec<String>> = Vec::new();
        for m in reference.captures_iter(&texts[i]) {
            let rest: Vec<String> = m[2].split("::").skip(1).map(str::to_owned).collect();
            refs.push(resolve(path, &m[1], &rest));
        }
        for m in use_child.captures_iter(&texts[i]) {
            let mut child = path.clone();
            child.push(m[1].to_owned());
            if index(&child).is_some() {
                child.extend(m[2].split("::").skip(1).map(str::to_owned));
                refs.push(child);
            }
        }
        for r in refs {
            let Some(mut t) = (0..=r.len()).rev().find_map(|k| index(&r[..k])) else {
                continue;
            };
            for _ in 0..5 {
                let depth = mods[t].0.len();
                match r
                    .get(depth)
                    .and_then(|item| reexports.get(&(t, item.clone())))
                {
                    Some(&from) if from != i => t = from,
                    _ => break,
                }
            }
            let (a, b) = (&mods[i].0, &mods[t].0);
            // A module and its own ancestors or descendants share a folder: not counted.
            let related = a.starts_with(b) || b.starts_with(a);
            if !related && !edges.contains(&(i, t)) {
                edges.push((i, t));
            }
        }
    }
    edges
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    struct Walk<'e> {
        edges: &'e [(usize, usize)],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(w: &mut Walk<'_>, v: usize) {
        w.index[v] = Some(w.next);
        w.low[v] = w.next;
        w.next += 1;
        w.stack.push(v);
        w.on[v] = true;
        let targets: Vec<usize> = w.edges.iter().filter(|e| e.0 == v).map(|e| e.1).collect();
        for t in targets {
            match w.index[t] {
                None => {
                    visit(w, t);
                    w.low[v] = w.low[v].min(w.low[t]);
                }
                Some(it) if w.on[t] => w.low[v] = w.low[v].min(it),
                Some(_) => {}
            }
        }
        if Some(w.low[v]) == w.index[v] {
            let mut comp = Vec::new();
            while let Some(t) = w.stack.pop() {
                w.on[t] = false;
                comp.push(t);
                if t == v {
                    break;
                }
            }
            if comp.len() > 1 {
                w.out.push(comp);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if w.index[v].is_none() {
            visit(&mut w, v);
        }
    }
    w.out
}

/// Layers, not circles: within each crate, no two modules refer to each other, directly
/// or around a loop (a module and the modules in its own folder excepted: a family of
/// files shares its folder's prelude). A circle is opened by moving what both sides need
/// into a leaf, or the code that needs both into the module above them.
#[test]
fn no_module_imports_go_in_a_circle() {
    let mut found = Vec::new();
    let mut crates = 0;
    for entry in std::fs::read_dir(root()).expect("the workspace").flatten() {
        for root_file in ["src/lib.rs", "src/main.rs"] {
            let file = entry.path().join(root_file);
            if !file.is_file() {
                continue;
            }
            crates += 1;
            let mods = modules(&file);
            for circle in circles(mods.len(), &module_edges(&mods)) {
                let mut names: Vec<String> = circle.iter().map(|&m| mods[m].0.join("::")).collect();
                names.sort();
                found.push(format!(
                    "{}: {}",
                    entry.file_name().to_string_lossy(),
                    names.join(", ")
                ));
            }
        }
    }
    assert!(crates > 10, "only {crates} crate roots found");
    assert!(
        found.is_empty(),
        "modules that import each other in a circle:\n{}",
        found.join("\n")
    );
}

/// The circle finder finds a circle: two sibling modules that refer to each other.
#[test]
fn the_circle_finder_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("orch-circles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct B(super::a::A);\n").unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::a::A;\n").unwrap();
    let mods = modules(&dir.join("lib.rs"));
    let found = circles(mods.len(), &module_edges(&mods));
    std::fs::remove_dir_all(&dir).unwrap();
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|c| {
            let mut n: Vec<String> = c.iter().map(|&m| mods[m].0.join("::")).collect();
            n.sort();
            n
        })
        .collect();
    assert_eq!(names, vec![vec!["a".to_owned(), "b".to_owned()]]);
}

/// The `orchestration!` macro's UI cases (`ui-tests/`, trybuild): every diagnostic code
/// the macro can give has a compile-fail case and its reviewed output.
#[test]
fn every_code_has_a_compile_fail_case() {
    let cases: Vec<String> = std::fs::read_dir(root().join("ui-tests/tests/ui/fail"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for code in orch_codegen::Code::ALL {
        // E024 and W009 depend on the surface a template runs on (an MCP gateway); the
        // macro compiles for the agent's own process, where they never arise (their
        // cases are in orch-codegen's tests/diagnostics.rs, compiled for each surface).
        if orch_codegen::explain::explain(*code).surface != orch_codegen::Surface::Agent {
            continue;
        }
        let prefix = code.as_str().to_lowercase();
        assert!(
            cases
                .iter()
                .any(|c| c.starts_with(&prefix) && c.ends_with(".rs")),
            "no ui case for {code}"
        );
        assert!(
            cases
                .iter()
                .any(|c| c.starts_with(&prefix) && c.ends_with(".stderr")),
            "no .stderr for {code}"
        );
    }
}
