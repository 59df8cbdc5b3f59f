//! `orch audit verify` and `orch replay` through the built binary, on a chained decision
//! log written by an audited policy: exit codes, the line named, both formats.

mod support;

use orch_agent::audit::{Auditor, JsonLines};
use orch_agent::Policy;
use orch_runtime::CallDigest;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

const TEMPLATE: &str = "examples/agents/refund-desk/template.json";

use support::{orch_at_root as orch, repo_root as root};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("orch-audit-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A chained log of two runs of the refund desk: refused, admitted, gated and approved.
fn write_log(path: &Path) {
    let _ = std::fs::remove_file(path);
    let src = std::fs::read_to_string(root().join(TEMPLATE)).unwrap();
    let machine = orch_codegen::compile_json(&src, None).to_machine().unwrap();
    let tools = ["lookup_order", "issue_refund", "send_email"];
    for run in ["r1", "r2"] {
        let auditor = Auditor::new(JsonLines::append(path).unwrap(), run).chained();
        let auditor = match std::fs::read_to_string(path).ok().and_then(|log| {
            log.lines()
                .last()
                .and_then(|l| serde_json::from_str(l).ok())
        }) {
            Some(last) => auditor.continuing(&last),
            None => auditor,
        };
        let policy = Policy::new(tools).audited(Arc::new(auditor));
        let mut s = machine.session();
        policy.prepare(&mut s);
        policy.message(&mut s, "refund please");
        let refund = CallDigest::of_text("issue_refund", r#"{"amount": 1}"#);
        assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_err());
        let lookup = CallDigest::of_text("lookup_order", "{}");
        assert!(policy.admit_call(&mut s, "lookup_order", &lookup).is_ok());
        policy.record(&mut s, "lookup_order");
        assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_err());
        let question = orch_runtime::QuestionId::new(0x51);
        policy.ask_call(&mut s, "issue_refund", refund, question);
        assert!(policy.answer_call(&mut s, "issue_refund", refund, question, true, None));
        assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_ok());
        policy.record(&mut s, "issue_refund");
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_chained_log_verifies_and_replays() {
    let log = dir().join("good.jsonl");
    write_log(&log);
    let log = log.display().to_string();
    let o = orch(&["audit", "verify", &log]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout(&o).contains("20 records, the chain holds"),
        "{}",
        stdout(&o)
    );
    let o = orch(&["replay", TEMPLATE, &log, "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["follows"], true);
    assert_eq!(
        (v["records"].as_u64(), v["runs"].as_u64()),
        (Some(20), Some(2))
    );
}

#[test]
fn a_tampered_log_is_named_at_its_line() {
    let path = dir().join("tampered.jsonl");
    write_log(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    // The first refusal of run r2 (line 13) now says "admitted".
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[12] = lines[12].replacen("\"refused\"", "\"admitted\"", 1);
    std::fs::write(&path, lines.join("\n")).unwrap();
    let log = path.display().to_string();
    let o = orch(&["audit", "verify", &log, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (v["intact"].as_bool(), v["line"].as_u64()),
        (Some(false), Some(13))
    );
    let o = orch(&["replay", TEMPLATE, &log]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o)
            .contains("line 13 (record 13): `decision` is admitted, the template derives refused"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn another_template_and_missing_files_are_reported() {
    let log = dir().join("other.jsonl");
    write_log(&log);
    let log = log.display().to_string();
    let other = "examples/agents/cognitive-reasoner/template.json";
    let o = orch(&["replay", other, &log]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("`fingerprint`"), "{}", stdout(&o));
    assert_eq!(
        orch(&["audit", "verify", "/nonexistent.jsonl"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        orch(&["replay", TEMPLATE, "/nonexistent.jsonl"])
            .status
            .code(),
        Some(2)
    );
}
