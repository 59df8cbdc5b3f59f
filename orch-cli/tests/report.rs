//! `orch check --format sarif` and `--format github`.
//!
//! The SARIF log is validated against the official SARIF 2.1.0 schema and by the SARIF
//! SDK's own validator (`Sarif.Multitool validate`), both from the npm package
//! `@microsoft/sarif-multitool-linux`, which `.ci/run` installs into
//! `target/ci-tools/` (or set `ORCH_SARIF_MULTITOOL` to the package's directory).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn orch(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("orch runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A directory of templates: one with errors (a non-ASCII step name before the error on
/// its line), one with a warning, one clean, one that is not JSON; a file name with a
/// space, a comma and a colon.
fn templates() -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    let files = [
        (
            "agents/bad, really: yes.json",
            r#"{"agentId": "bad", "tools": ["search", "think"], "orchestration": {"steps": [
  {"name": "Idle", "isDefault": true},
  {"name": "Rëcherche", "conditions": [{"type": "message_contains", "value": "r"}], "sequence": ["serch", "think"]},
  {"name": "Odd", "conditions": [{"type": "tool_use", "value": "search"}]}
]}}"#,
        ),
        (
            "agents/warn.json",
            r#"{"agentId": "warn", "tools": ["search"], "orchestration": {"steps": [
  {"name": "Idle", "isDefault": true},
  {"name": "Lonely"}
]}}"#,
        ),
        (
            "agents/broken.json",
            "{\"agentId\": \"x\",\n  \"orchestration\": {\"steps\": [}\n}",
        ),
    ];
    for (name, body) in files {
        std::fs::write(dir.join(name), body).unwrap();
    }
    dir
}

/// The three templates by relative path, and the cognitive reasoner by absolute path.
fn files() -> Vec<String> {
    let cr = root().join("examples/agents/cognitive-reasoner/template.json");
    let mut v: Vec<String> = [
        "agents/bad, really: yes.json",
        "agents/warn.json",
        "agents/broken.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(cr.canonicalize().unwrap().display().to_string());
    v
}

/// The SARIF SDK's package directory. The test that needs it is ignored under plain
/// `cargo test`; run, it fails without it.
fn multitool_dir() -> PathBuf {
    let dir = std::env::var_os("ORCH_SARIF_MULTITOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            root().join("target/ci-tools/node_modules/@microsoft/sarif-multitool-linux")
        });
    assert!(
        dir.join("Sarif.Multitool").is_file(),
        "the SARIF SDK's validator is not installed at {}: `cargo xtask test` installs it \
         (`npm install --prefix target/ci-tools @microsoft/sarif-multitool-linux@5.7.0`)",
        dir.display()
    );
    dir
}

/// `orch check --format FORMAT` on every template of [`files`], in [`templates`]'s directory.
fn check_all(format: &str) -> (PathBuf, Output) {
    let dir = templates();
    let args: Vec<String> = ["check", "--format", format]
        .iter()
        .map(|s| s.to_string())
        .chain(files())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = orch(&args, &dir);
    (dir, o)
}

/// Line 3 of the bad template, up to `"serch"`.
const LINE3: &str = "  {\"name\": \"Rëcherche\", \"conditions\": [{\"type\": \"message_contains\", \"value\": \"r\"}], \"sequence\": [";

#[test]
#[ignore = "needs the SARIF SDK's validator: `cargo xtask test` installs it and runs this"]
fn sarif_is_valid_and_complete() {
    let (dir, o) = check_all("sarif");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let log: Value = serde_json::from_slice(&o.stdout).expect("SARIF is JSON");

    // Against the official schema.
    let tool = multitool_dir();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(tool.join("sarif-2.1.0.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the SARIF schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&log)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    // By the SARIF SDK's validator (schema and SARIF rules): no error, no warning.
    let path = dir.join("out.sarif");
    std::fs::write(&path, &o.stdout).unwrap();
    let report = dir.join("validation.sarif");
    let _ = std::fs::remove_file(&report);
    let v = Command::new(tool.join("Sarif.Multitool"))
        .args(["validate", "--output"])
        .arg(&report)
        .arg(&path)
        .env("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
        .output()
        .expect("Sarif.Multitool runs");
    assert!(
        v.status.success(),
        "{}\n{}",
        text(&v.stdout),
        text(&v.stderr)
    );
    let validation: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let problems: Vec<&Value> = validation["runs"][0]["results"]
        .as_array()
        // A result without `level` is a warning.
        .map(|r| {
            r.iter()
                .filter(|r| r["level"] != "note" && r["level"] != "none")
                .collect()
        })
        .unwrap_or_default();
    assert!(problems.is_empty(), "{problems:#?}");

    // The content: every code a rule with help; results point at lines and columns.
    let run = &log["runs"][0];
    assert_eq!(log["version"], "2.1.0");
    assert_eq!(run["tool"]["driver"]["name"], "orch");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules
        .iter()
        .any(|r| r["id"] == "E015" && r["help"]["text"].as_str().unwrap().contains("E015")));
    assert!(rules
        .iter()
        .any(|r| r["id"] == "W001" && r["defaultConfiguration"]["level"] == "warning"));
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    let results = run["results"].as_array().unwrap();
    let find = |id: &str| {
        results
            .iter()
            .find(|r| r["ruleId"] == id)
            .unwrap_or_else(|| panic!("{id} in {results:#?}"))
    };
    let e015 = find("E015");
    assert_eq!(e015["level"], "error");
    let loc = &e015["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "agents/bad%2C%20really%3A%20yes.json"
    );
    // Line 3, `"serch"` after a two-byte `ë`: columns count characters.
    let line3 = LINE3;
    assert_eq!(loc["region"]["startLine"], 3);
    assert_eq!(loc["region"]["startColumn"], line3.chars().count() + 1);
    assert_eq!(
        loc["region"]["endColumn"],
        line3.chars().count() + 1 + "\"serch\"".len()
    );
    assert!(e015["message"]["text"]
        .as_str()
        .unwrap()
        .contains("unknown tool `serch`"));
    assert_eq!(
        rules[e015["ruleIndex"].as_u64().unwrap() as usize]["id"],
        "E015"
    );
    assert_eq!(
        find("E009")["locations"][0]["physicalLocation"]["region"]["startLine"],
        4
    );
    assert_eq!(find("W001")["level"], "warning");
    assert_eq!(
        find("E001")["locations"][0]["physicalLocation"]["region"]["startLine"],
        2
    );
    let uris: Vec<&str> = results
        .iter()
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(
        uris.contains(&"agents/warn.json") && uris.contains(&"agents/broken.json"),
        "{uris:?}"
    );
}

#[test]
fn github_annotations() {
    let (dir, o) = check_all("github");
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        text(&o.stderr).contains("checked 4 files"),
        "{}",
        text(&o.stderr)
    );
    let shape = regex_lite(&lines);
    assert!(shape.is_empty(), "malformed: {shape:?}");
    let e015 = lines
        .iter()
        .find(|l| l.contains("title=E015"))
        .expect("E015");
    let col = LINE3.chars().count() + 1;
    let expected = format!(
        "::error file=agents/bad%2C really%3A yes.json,line=3,col={col},endLine=3,endColumn={},title=E015::unknown tool `serch`",
        col + 7
    );
    assert!(e015.starts_with(&expected), "{e015}\n{expected}");
    // The help is on a second line of the message, escaped.
    assert!(e015.contains("%0Ahelp: "), "{e015}");
    let w001 = lines
        .iter()
        .find(|l| l.contains("title=W001"))
        .expect("W001");
    assert!(
        w001.starts_with("::warning file=agents/warn.json,line=3,"),
        "{w001}"
    );
    // Every diagnostic is one line: nothing unescaped spills over.
    assert_eq!(
        lines.len(),
        lines.iter().filter(|l| l.starts_with("::")).count()
    );

    // A clean file: no annotations, exit 0.
    let cr = root().join("examples/agents/cognitive-reasoner/template.json");
    let o = orch(&["check", "--format", "github", cr.to_str().unwrap()], &dir);
    assert!(o.status.success());
    assert!(o.stdout.is_empty());
}

/// Lines that do not have the workflow-command shape (without a regex crate).
fn regex_lite<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .copied()
        .filter(|l| {
            let Some(rest) = l
                .strip_prefix("::error ")
                .or_else(|| l.strip_prefix("::warning "))
            else {
                return true;
            };
            let Some((props, message)) = rest.split_once("::") else {
                return true;
            };
            let keys: Vec<&str> = props
                .split(',')
                .map(|p| p.split('=').next().unwrap_or(""))
                .collect();
            let ok_keys = keys == ["file", "line", "col", "endLine", "endColumn", "title"]
                || keys == ["file", "title"];
            !ok_keys || message.is_empty() || message.contains('\n') || message.contains('\r')
        })
        .collect()
}
