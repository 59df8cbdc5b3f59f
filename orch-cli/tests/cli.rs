//! Runs the built `orch` binary on every subcommand: output, exit codes and bad input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn orch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("orch runs")
}

fn orch_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("orch runs");
    // orch may stop reading early (a bad or overlong line): a broken pipe is expected.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tmp(name: &str, content: &[u8]) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

const CR: &str = "examples/agents/cognitive-reasoner/template.json";
const BAD: &str = r#"{"agentId": "bad", "tools": ["search", "think"], "orchestration": {"steps": [
  {"name": "Idle", "isDefault": true},
  {"name": "Research", "conditions": [{"type": "message_contains", "value": "r"}], "sequence": ["serch", "think"]}
]}}"#;
const WARN: &str = r#"{"agentId": "warn", "tools": ["search"], "orchestration": {"steps": [
  {"name": "Idle", "isDefault": true},
  {"name": "Lonely"}
]}}"#;

#[test]
fn every_subcommand_has_help() {
    for sub in [
        "check", "explain", "graph", "simulate", "verify", "gen", "schema", "lsp",
    ] {
        let o = orch(&[sub, "--help"]);
        assert!(o.status.success(), "{sub}");
        assert!(text(&o.stdout).contains("Usage: orch"), "{sub}");
    }
    let o = orch(&["--help"]);
    assert!(text(&o.stdout).contains("check") && text(&o.stdout).contains("simulate"));
    assert_eq!(orch(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(orch(&[]).status.code(), Some(2));
}

#[test]
fn check_clean_errors_and_warnings() {
    let o = orch(&["check", CR]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("checked 1 file: 0 errors, 0 warnings"));

    let bad = tmp("bad.json", BAD.as_bytes());
    let o = orch(&["check", "--color", "never", &bad]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    assert!(out.contains("error[E015]: unknown tool `serch`"), "{out}");
    assert!(out.contains("bad.json:3:"), "{out}");
    assert!(out.contains("^^^^^^^"), "underlined: {out}");
    assert!(out.contains("help: did you mean `search`?"), "{out}");

    let warn = tmp("warn.json", WARN.as_bytes());
    assert_eq!(orch(&["check", &warn]).status.code(), Some(0));
    let o = orch(&["check", "--deny-warnings", &warn]);
    assert_eq!(o.status.code(), Some(1));
    let o = orch(&["check", CR, &bad, &warn]);
    assert!(
        text(&o.stdout).contains("checked 3 files: 1 error, 1 warning"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn check_json_format() {
    let bad = tmp("bad2.json", BAD.as_bytes());
    let o = orch(&["check", "--format", "json", &bad]);
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    let d = &lines[0];
    assert_eq!(d["code"], "E015");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["line"], 3);
    assert_eq!(d["file"], bad.as_str());
    assert!(d["column"].as_u64().unwrap() > 1);
    assert!(text(&o.stderr).contains("checked 1 file: 1 error"));
}

#[test]
fn bad_files_are_clear_errors_with_exit_2() {
    let cases: Vec<(String, &str)> = vec![
        ("does/not/exist.json".into(), "no such file"),
        ("examples".into(), "is a directory"),
        (tmp("bin.json", &[0x7b, 0x00, 0x01, 0x02]), "binary file"),
        (
            tmp("latin1.json", b"{\"agentId\": \"caf\xe9\"}"),
            "not UTF-8",
        ),
    ];
    for (path, expect) in cases {
        let o = orch(&["check", &path]);
        assert_eq!(o.status.code(), Some(2), "{path}");
        let err = text(&o.stderr);
        assert!(err.contains(expect), "{path}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // 50 MB
    let big = tmp("big.json", &vec![b' '; 50 * 1024 * 1024]);
    let o = orch(&["check", &big]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("limited to 16 MB"),
        "{}",
        text(&o.stderr)
    );
    let _ = std::fs::remove_file(big);
    // Truncated JSON is a template error with a location.
    let trunc = tmp(
        "trunc.json",
        &std::fs::read(root().join(CR)).unwrap()[..300],
    );
    let o = orch(&["check", "--color", "never", &trunc]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stdout).contains("error[E001]: invalid JSON"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn explain_codes() {
    let o = orch(&["explain", "E014"]);
    assert!(o.status.success());
    let t = text(&o.stdout);
    assert!(
        t.contains("sequence_tool_not_permitted") && t.contains("Wrong") && t.contains("Fixed"),
        "{t}"
    );
    assert!(orch(&["explain", "unreachable_step"]).status.success());
    assert!(orch(&["explain", "w006"]).status.success());
    let o = orch(&["explain", "E999"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("E015  unknown_tool"));
}

#[test]
fn graph_mermaid_and_dot() {
    let o = orch(&["graph", CR]);
    assert!(o.status.success());
    let m = text(&o.stdout);
    assert!(m.starts_with("stateDiagram-v2"));
    assert!(m.contains("[*] --> s6"), "default step is the start: {m}");
    assert!(m.contains("state \"1. search\" as s0_0"), "{m}");
    assert!(
        m.contains("any --> s1 : /(?i)critique|evaluate|assess|review|analy[sz]e|opinion/"),
        "{m}"
    );
    let warn = tmp("warn2.json", WARN.as_bytes());
    let m = text(&orch(&["graph", &warn]).stdout);
    assert!(
        m.contains("Lonely ⚠ unreachable") && m.contains("class s1 warn"),
        "{m}"
    );
    let o = orch(&["graph", "--format", "dot", CR]);
    let d = text(&o.stdout);
    assert!(d.starts_with("digraph \"cognitive-reasoner\""), "{d}");
    assert!(
        d.contains("subgraph cluster_s0") && d.contains("start -> s6;"),
        "{d}"
    );
    let bad = tmp("bad3.json", BAD.as_bytes());
    let o = orch(&["graph", &bad]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("E015"));
}

/// A template with one step for each mark: unreachable (no conditions), shadowed (an
/// earlier step matches whenever it does), and a sequence that never completes
/// (recording its first tool activates an earlier step). Step names are chosen so that
/// matching on message text would mark the wrong steps (`step `A`` is a prefix of
/// `step `A B``), which a mark read from the diagnostics' subjects does not.
const MARKS: &str = r#"{"agentId": "marks", "tools": ["search", "think", "audit"], "orchestration": {"steps": [
  {"name": "Idle", "isDefault": true},
  {"name": "A", "conditions": [{"type": "tool_used", "value": "audit"}]},
  {"name": "A B", "conditions": [{"type": "tool_used", "value": "audit"}, {"type": "message_contains", "value": "x"}]},
  {"name": "Lonely"},
  {"name": "Plan", "conditions": [{"type": "message_contains", "value": "plan"}], "sequence": ["audit", "think"]},
  {"name": "Fine", "conditions": [{"type": "message_contains", "value": "fine"}], "sequence": ["search", "think"]}
]}}"#;

#[test]
fn graph_marks_every_kind_of_finding_by_subject() {
    let file = tmp("marks.json", MARKS.as_bytes());
    let o = orch(&["graph", &file]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let m = text(&o.stdout);
    for line in [
        "state \"Idle (default)\" as s0",
        "state \"A\" as s1",
        "state \"A B ⚠ shadowed\" as s2",
        "state \"Lonely ⚠ unreachable\" as s3",
        "state \"Plan ⚠ sequence never completes\" as s4",
        "state \"Fine\" as s5",
    ] {
        assert!(m.contains(line), "{line:?} missing in:\n{m}");
    }
    let classes: Vec<&str> = m
        .lines()
        .filter(|l| l.trim_start().starts_with("class "))
        .collect();
    assert_eq!(
        classes,
        [
            "    class s2 warn",
            "    class s3 warn",
            "    class s4 warn"
        ],
        "{m}"
    );

    let d = text(&orch(&["graph", "--format", "dot", &file]).stdout);
    for label in [
        "label=\"A B\\n⚠ shadowed\"",
        "label=\"Lonely\\n⚠ unreachable\"",
        "label=\"Plan\\n⚠ sequence never completes\"",
    ] {
        assert!(d.contains(label), "{label:?} missing in:\n{d}");
    }
    assert_eq!(d.matches('⚠').count(), 3, "{d}");

    // The same subjects are in `orch check --format json`.
    let o = orch(&["check", "--format", "json", &file]);
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let subjects: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["code"].as_str().unwrap(),
                l["step"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        subjects,
        [("W002", "A B"), ("W001", "Lonely"), ("W006", "Plan")],
        "{lines:?}"
    );
    assert_eq!(lines[2]["tool"], "audit");
    assert_eq!(lines[2]["position"], 0);
}

#[test]
fn gen_prints_the_module() {
    let o = orch(&["gen", CR]);
    assert!(o.status.success());
    let code = text(&o.stdout);
    assert!(code.contains("pub mod cognitive_reasoner {"));
    assert!(code.contains("pub type Session = ::orch::Session<Machine>;"));
    let o = orch(&["gen", CR, "--runtime-path", "::orch_runtime"]);
    assert!(text(&o.stdout).contains("pub type Session = ::orch_runtime::Session<Machine>;"));
    let o = orch(&["gen", CR, "--runtime-path", "not a path"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is not a Rust path"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn simulate_trace_contract() {
    let events = tmp(
        "ev.jsonl",
        br#"{"message": "Research the impact of AI on jobs"}
{"tool": "think"}
{"tool": "search"}
{"usage": {"prompt": 10, "completion": 5}}
{"available": ["think", "reflect", "weather"]}
{"tool": "think"}
{"reset": true}
"#,
    );
    let o = orch(&["simulate", CR, &events]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8, "the initial state, then one line per event");
    assert_eq!(lines[0]["step"], "DefaultMode");
    assert_eq!(
        lines[0]["allowed"],
        serde_json::json!([
            "brainstorm",
            "compare",
            "critique",
            "debate",
            "reflect",
            "search",
            "think"
        ])
    );
    assert_eq!(lines[1]["step"], "ResearchMode");
    assert_eq!(lines[1]["allowed"], serde_json::json!(["search"]));
    assert_eq!(lines[2]["outcome"], "out_of_sequence");
    assert_eq!(lines[2]["expected"], serde_json::json!(["search"]));
    assert_eq!(lines[3]["outcome"], "advanced");
    assert_eq!(lines[3]["sequenceIndex"], 1);
    assert!(lines[4].get("outcome").is_none());
    assert_eq!(lines[6]["outcome"], "advanced");
    assert_eq!(lines[6]["allowed"], serde_json::json!(["reflect"]));
    assert_eq!(lines[7]["step"], "DefaultMode");
    // The host without `search`: blocked, never widened.
    let o = orch_stdin(
        &["simulate", CR, "-"],
        "{\"available\": [\"think\"]}\n{\"message\": \"research it\"}\n",
    );
    let last: serde_json::Value =
        serde_json::from_str(text(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(last["allowed"], serde_json::json!([]));
    assert_eq!(last["blockedOn"], serde_json::json!(["search"]));
    // Without EVENTS and without a terminal, events come from stdin.
    let o = orch_stdin(&["simulate", CR], "{\"reset\": true}\n");
    assert_eq!(text(&o.stdout).lines().count(), 2);
}

#[test]
fn simulate_bad_events_name_the_line() {
    let events = tmp(
        "bad-ev.jsonl",
        b"{\"message\": \"hi\"}\n{\"teleport\": \"mars\"}\n",
    );
    let o = orch(&["simulate", CR, &events]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("bad-ev.jsonl:2: unknown event kind `teleport`"),
        "{err}"
    );
    // The trace streams: the initial state and the first event were written before
    // the bad line was read.
    assert_eq!(text(&o.stdout).lines().count(), 2, "{}", text(&o.stdout));
    let o = orch(&["simulate", CR, "missing.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("missing.jsonl: no such file"));

    for (events, says) in [
        (
            "{\"tool\": \"search\", \"tool\": \"think\"}\n",
            "<stdin>:1: not a JSON object: the key `tool` appears twice",
        ),
        (
            "{\"usage\": {\"prompt\": 18446744073709551616, \"completion\": 1}}\n",
            "<stdin>:1: `usage.prompt` is too large (at most 18446744073709551615)",
        ),
        (
            "{\"usage\": {\"prompt\": -1, \"completion\": 1}}\n",
            "<stdin>:1: `usage.prompt` must be a non-negative integer, found -1",
        ),
        (
            "{\"reset\": true}\n\u{fffd}",
            "<stdin>:2: not a JSON object",
        ),
    ] {
        let o = orch_stdin(&["simulate", CR, "-"], events);
        assert_eq!(o.status.code(), Some(2), "{events}");
        assert!(
            text(&o.stderr).contains(says),
            "{events}: {}",
            text(&o.stderr)
        );
    }
    // Bytes that are not UTF-8, and a line longer than the bound.
    let bad = tmp(
        "not-utf8.jsonl",
        b"{\"reset\": true}\n{\"message\": \"\xff\"}\n",
    );
    let o = orch(&["simulate", CR, &bad]);
    assert!(
        text(&o.stderr).contains("not-utf8.jsonl:2: not UTF-8 text"),
        "{}",
        text(&o.stderr)
    );
    let mut long = b"{\"message\": \"".to_vec();
    long.resize(17 * 1024 * 1024, b'a');
    let o = orch_stdin(&["simulate", CR, "-"], std::str::from_utf8(&long).unwrap());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("<stdin>:1: the line is longer than 16777216 bytes"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn simulate_streams_the_trace_while_events_arrive() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(["simulate", CR, "-"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("orch runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.contains("DefaultMode"),
        "the initial state comes first: {line}"
    );
    // One event in, its line out — while standard input is still open.
    stdin
        .write_all(b"{\"message\": \"Research the impact of AI on jobs\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("ResearchMode"), "{line}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// Text from a template or an events file reaches the terminal escaped: a tool name
/// holding `ESC[2K` or a carriage return cannot erase or rewrite `orch check`'s,
/// `orch verify`'s or `orch simulate`'s report.
#[test]
fn human_reports_escape_control_characters_from_inputs() {
    let hostile = "{\"name\":\"t\",\"tools\":[\"ok\",\"a\\u001b[2K\\rb\"],\"orchestration\":{\"steps\":[{\"name\":\"S\\u001b[1A\",\"isDefault\":true,\"availableTools\":{\"allowed\":[\"zz\\u001b[1Ax\"]}}]}}";
    let template = tmp("hostile-escape.json", hostile.as_bytes());
    for args in [
        vec!["check", template.as_str()],
        vec!["verify", template.as_str()],
    ] {
        let o = orch(&args);
        let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(
            !out.contains('\u{1b}') && !out.contains('\r'),
            "{args:?}: raw control characters: {out:?}"
        );
    }
    let events = tmp(
        "hostile-events.jsonl",
        // The second names an unknown event kind holding ESC [1A: the error quotes it.
        b"{\"tool\": \"x\\u001b[2Kallowed\"}\n{\"\\u001b[1Abogus\": 1}\n",
    );
    let clean = tmp(
        "hostile-clean.json",
        b"{\"name\":\"t\",\"tools\":[\"a\\u001b[2Kb\"],\"orchestration\":{\"steps\":[{\"name\":\"S\",\"isDefault\":true}]}}",
    );
    let o = orch(&["simulate", &clean, &events]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!err.is_empty(), "the second event is bad: {out}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(err.contains("\\u{1b}[1Abogus"), "{err:?}");
}
