//! The documentation says what the code does: every diagnostic code range ("E001–E027")
//! written anywhere ends at the last code there is, the diagnostics page lists exactly the
//! codes the compiler has, with their names, and every `--flag` a page shows on an `orch`
//! command line is a flag that command takes.

use orch_codegen::{Code, Severity};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file a user or a maintainer reads: the README and docs pages, each crate's README
/// and the Rust sources (module docs carry ranges too). The CHANGELOG is history: a
/// release's range was true when it was written.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut out = vec![root.join("README.md")];
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skip = name.starts_with('.')
                    || [
                        "target",
                        "node_modules",
                        "npm",
                        "dist",
                        "fixtures",
                        "snapshots",
                    ]
                    .contains(&name.as_str());
                if !skip {
                    stack.push(path);
                }
            } else if (name.ends_with(".md")
                && name != "CHANGELOG.md"
                && path != root.join("README.md"))
                || name.ends_with(".rs")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The last code of a severity, as written ("E026").
fn last(severity: Severity) -> &'static str {
    Code::ALL
        .iter()
        .filter(|c| c.severity() == severity)
        .map(|c| c.as_str())
        .max()
        .expect("the compiler has codes of each severity")
}

/// Ranges that name a part of the codes on purpose, each with the file that raises every
/// code of the part (the parser's shape errors, the warnings that read the template).
const PARTS: &[(&str, &str)] = &[
    ("E001–E003", "orch-codegen/src/parse/json.rs"),
    ("W001–W006", "orch-codegen/src/check/lints.rs"),
];

#[test]
fn every_part_of_the_codes_is_what_its_file_raises() {
    for (range, file) in PARTS {
        let (from, to) = range.split_once('–').unwrap();
        let source = std::fs::read_to_string(root().join(file)).unwrap();
        for code in Code::ALL
            .iter()
            .filter(|c| (from..=to).contains(&c.as_str()))
        {
            let variant = format!("Code::{code:?}");
            assert!(
                source.contains(&variant),
                "{range} says {file} raises {}, it does not",
                code.as_str()
            );
        }
    }
}

#[test]
fn every_code_range_ends_at_the_last_code() {
    let range = regex::Regex::new(r"\b([EW])001\s*(?:–|-|to|\.\.=?)\s*([EW]\d{3})\b").unwrap();
    let (last_e, last_w) = (last(Severity::Error), last(Severity::Warning));
    let mut stale = Vec::new();
    let mut seen = 0;
    for path in pages() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for m in range.captures_iter(line) {
                seen += 1;
                let want = if &m[1] == "E" { last_e } else { last_w };
                let part = PARTS
                    .iter()
                    .any(|(r, _)| r.replace('–', "") == format!("{}001{}", &m[1], &m[2]));
                if &m[2] != want && !part {
                    stale.push(format!(
                        "{}:{}: `{}` (the last is {want})",
                        relative(&path),
                        n + 1,
                        &m[0]
                    ));
                }
            }
        }
    }
    assert!(
        seen > 0,
        "no code range found at all: the pattern no longer matches how ranges are written"
    );
    assert!(
        stale.is_empty(),
        "code ranges that end before the last code:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_diagnostics_page_lists_every_code_with_its_name() {
    let page = std::fs::read_to_string(root().join("docs/diagnostics.md")).unwrap();
    let row = regex::Regex::new(r"^\| ([EW]\d{3}) \| ([a-z_]+) \|").unwrap();
    let written: BTreeMap<String, String> = page
        .lines()
        .filter_map(|l| row.captures(l))
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    let actual: BTreeMap<String, String> = Code::ALL
        .iter()
        .map(|c| (c.as_str().to_owned(), c.name().to_owned()))
        .collect();
    let missing: Vec<_> = actual
        .iter()
        .filter(|(k, v)| written.get(*k) != Some(*v))
        .collect();
    let extra: Vec<_> = written
        .keys()
        .filter(|k| !actual.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/diagnostics.md disagrees with the compiler:\n  missing or misnamed: {missing:?}\n  no such code: {extra:?}"
    );
}

/// The subcommands (and `audit`'s and `approvals`' own subcommands) whose flags a page
/// may show.
fn help(words: &[&str]) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(words)
        .arg("--help")
        .output()
        .expect("orch runs");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `--flags` a command's help names.
fn flags_of(help: &str) -> BTreeSet<String> {
    let flag = regex::Regex::new(r"--[a-z][a-z0-9-]*").unwrap();
    flag.find_iter(help)
        .map(|m| m.as_str().to_owned())
        .collect()
}

/// The command lines a page shows: inline code spans and the lines of fenced blocks.
fn command_lines(text: &str) -> Vec<(usize, String)> {
    let span = regex::Regex::new(r"`([^`\n]+)`").unwrap();
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push((n + 1, line.trim().trim_start_matches("$ ").to_owned()));
        } else {
            out.extend(span.captures_iter(line).map(|c| (n + 1, c[1].to_owned())));
        }
    }
    out
}

#[test]
fn every_flag_a_page_shows_is_one_its_command_takes() {
    let Some(top) = help(&[]) else {
        panic!("`orch --help` failed")
    };
    let command = regex::Regex::new(r"(?m)^  ([a-z][a-z-]*)\s").unwrap();
    let subcommands: BTreeSet<String> = command
        .captures_iter(&top)
        .map(|c| c[1].to_owned())
        .filter(|c| c != "help")
        .collect();
    assert!(
        subcommands.contains("mcp") && subcommands.contains("check"),
        "{subcommands:?}"
    );
    let invocation =
        regex::Regex::new(r"(?:^|[\s(|;&])orch ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?").unwrap();
    let flag = regex::Regex::new(r"(?:^|\s)(--[a-z][a-z0-9-]*)").unwrap();
    let mut helps: BTreeMap<Vec<String>, Option<BTreeSet<String>>> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut checked = 0;
    let docs = std::fs::read_dir(root().join("docs")).unwrap();
    let mut paths: Vec<PathBuf> = docs.flatten().map(|e| e.path()).collect();
    paths.push(root().join("README.md"));
    paths.retain(|p| p.extension().is_some_and(|e| e == "md"));
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in command_lines(&text) {
            let Some(m) = invocation.captures(&line) else {
                continue;
            };
            if !subcommands.contains(&m[1]) {
                continue;
            }
            // The command's own words: `audit verify`, or `mcp` alone; what follows a
            // bare `--` is another program's command line.
            let mut words = vec![m[1].to_owned()];
            let rest_from = m.get(0).unwrap().end();
            if let Some(sub) = m.get(2) {
                if &m[1] == "audit" || &m[1] == "approvals" {
                    words.push(sub.as_str().to_owned());
                }
            }
            let rest = &line[rest_from..];
            let rest = rest.split(" -- ").next().unwrap_or(rest);
            let rest = rest.split(['|', ';']).next().unwrap_or(rest);
            let known = helps.entry(words.clone()).or_insert_with(|| {
                let w: Vec<&str> = words.iter().map(String::as_str).collect();
                help(&w).map(|h| flags_of(&h))
            });
            let Some(known) = known else {
                wrong.push(format!(
                    "{}:{n}: `orch {}` has no help",
                    relative(&path),
                    words.join(" ")
                ));
                continue;
            };
            for f in flag.captures_iter(rest) {
                checked += 1;
                if !known.contains(&f[1]) {
                    wrong.push(format!(
                        "{}:{n}: `orch {}` takes no `{}`",
                        relative(&path),
                        words.join(" "),
                        &f[1]
                    ));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} flags found in the docs: the scan no longer reads them"
    );
    assert!(
        wrong.is_empty(),
        "flags the docs show that the commands do not take:\n{}",
        wrong.join("\n")
    );
}
