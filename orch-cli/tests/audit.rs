//! `orch audit verify` and `orch replay` through the built binary, on a chained decision
//! log written by an audited policy: exit codes, the line named, both formats.

mod support;

use orch_agent::audit::{Auditor, JsonLines};
use orch_agent::Policy;
use orch_runtime::Call;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

const TEMPLATE: &str = "examples/agents/refund-desk/template.json";

use support::{orch_at_root as orch, repo_root as root};

fn dir() -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit-cli");
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
        let refund = Call::of_text("issue_refund", r#"{"amount": 1}"#);
        assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_err());
        let lookup = Call::of_text("lookup_order", "{}");
        assert!(policy.admit_call(&mut s, "lookup_order", &lookup).is_ok());
        policy.record(&mut s, "lookup_order");
        assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_err());
        let question = orch_runtime::QuestionId::new(0x51);
        policy.ask_call(&mut s, "issue_refund", refund.digest, question);
        assert!(policy.answer_call(&mut s, "issue_refund", refund.digest, question, true, None));
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

/// Records cut off the end are the cheapest tampering: no hash needs recomputing. The
/// verifier prints the head and count to anchor, and a log cut by 1, 3 or all of its
/// records — an empty file included — fails against them, at the line after its last.
#[test]
fn a_cut_tail_fails_against_the_anchored_head_and_count() {
    let path = dir().join("anchored.jsonl");
    write_log(&path);
    let log = path.display().to_string();
    let o = orch(&["audit", "verify", &log, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let head = v["head"].as_str().expect("a head").to_owned();
    assert_eq!(head.len(), 64);
    let human = stdout(&orch(&["audit", "verify", &log]));
    assert!(human.contains(&format!("head: {head}")), "{human}");
    // The whole log holds what was anchored.
    let o = orch(&[
        "audit",
        "verify",
        &log,
        "--expect-head",
        &head,
        "--expect-count",
        "20",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for cut in [1, 3, 20] {
        let kept = &lines[..lines.len() - cut];
        let cut_path = dir().join(format!("cut-{cut}.jsonl"));
        std::fs::write(
            &cut_path,
            kept.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        let cut_log = cut_path.display().to_string();
        // Alone, what is left is a chain that holds.
        assert_eq!(orch(&["audit", "verify", &cut_log]).status.code(), Some(0));
        for anchor in [
            vec!["--expect-head", head.as_str()],
            vec!["--expect-count", "20"],
            vec!["--expect-head", head.as_str(), "--expect-count", "20"],
        ] {
            let mut args = vec!["audit", "verify", cut_log.as_str(), "--format", "json"];
            args.extend(&anchor);
            let o = orch(&args);
            assert_eq!(
                o.status.code(),
                Some(1),
                "cut {cut}, {anchor:?}: {}",
                stdout(&o)
            );
            let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
            assert_eq!(v["line"].as_u64(), Some((20 - cut + 1) as u64), "{v}");
        }
    }
    // A log that diverges before the anchored record fails at that record.
    let mut edited: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let mut record: serde_json::Value = serde_json::from_str(&edited[19]).unwrap();
    record["time"] = "2000-01-01T00:00:00.000Z".into();
    record["hash"] = serde_json::Value::Null;
    let mut unhashed: orch_agent::audit::DecisionRecord = serde_json::from_value(record).unwrap();
    unhashed.hash = Some(unhashed.digest());
    edited[19] = unhashed.to_json();
    let edited_path = dir().join("rewritten-last.jsonl");
    std::fs::write(&edited_path, edited.join("\n")).unwrap();
    let edited_log = edited_path.display().to_string();
    assert_eq!(
        orch(&["audit", "verify", &edited_log]).status.code(),
        Some(0)
    );
    let o = orch(&[
        "audit",
        "verify",
        &edited_log,
        "--expect-head",
        &head,
        "--expect-count",
        "20",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["line"].as_u64(), Some(20), "{v}");
}

/// Record numbers at the end of their range: a record numbered u64::MAX followed by
/// one numbered 0 is a break (it used to wrap in release builds and panic in debug).
#[test]
fn record_numbers_that_overflow_break_the_chain() {
    let path = dir().join("good-for-overflow.jsonl");
    write_log(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut records: Vec<orch_agent::audit::DecisionRecord> = text
        .lines()
        .take(2)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    records[0].seq = u64::MAX;
    records[1].seq = 0;
    let mut prev = None;
    let mut out = String::new();
    for r in &mut records {
        r.prev = prev.take();
        r.hash = None;
        r.hash = Some(r.digest());
        prev = r.hash.clone();
        out.push_str(&r.to_json());
        out.push('\n');
    }
    let overflow = dir().join("overflow.jsonl");
    std::fs::write(&overflow, out).unwrap();
    let o = orch(&["audit", "verify", &overflow.display().to_string()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("line 2:"), "{}", stdout(&o));
}

/// Text from a log reaches a terminal escaped: an error that quotes a record's content
/// cannot move the cursor or erase what was printed.
#[test]
fn human_reports_escape_control_characters() {
    let path = dir().join("hostile.jsonl");
    std::fs::write(
        &path,
        // A valid JSON line whose unknown event kind holds ESC [1A ESC [2K CR: the
        // parser's error quotes it.
        "{\"v\":1,\"seq\":1,\"event\":{\"kind\":\"x\\u001b[1A\\u001b[2K\\rallowed\"}}\n",
    )
    .unwrap();
    let o = orch(&["audit", "verify", &path.display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(!out.contains('\u{1b}') && !out.contains('\r'), "{out:?}");
    assert!(out.contains("\\u{1b}"), "{out:?}");
}
