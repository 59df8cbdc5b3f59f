//! `orch check-trace` through the built binary, on transcripts built by the OpenAI and
//! Anthropic Python SDKs' own message types (tests/trace/make_transcripts.py, offline)
//! and on orch's own decision records: what the workflow would have refused, what ran
//! anyway, the steps visited, the properties violated, and the exit codes.

mod support;

use orch_agent::audit::Auditor;
use orch_agent::Policy;
use orch_runtime::Call;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

const REASONER: &str = "examples/agents/cognitive-reasoner/template.json";
const REFUNDS: &str = "examples/agents/refund-desk/template.json";

use support::{orch_at_root as orch, repo_root as root};

/// `orch check-trace TEMPLATE TRACE --format json`: the exit code and the report.
fn grade(template: &str, trace: &Path) -> (Option<i32>, Value) {
    let o = orch(&[
        "check-trace",
        template,
        &trace.display().to_string(),
        "--format",
        "json",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    let report = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{e}: {out} {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), report)
}

#[test]
#[ignore = "needs the OpenAI and Anthropic Python SDKs: `cargo xtask test` installs them and runs this"]
fn transcripts_built_by_the_sdks_are_graded() {
    let dir = support::temp_dir("check-trace");
    let made = Command::new(support::python())
        .arg(root().join("orch-cli/tests/trace/make_transcripts.py"))
        .arg(&dir)
        .output()
        .expect("python runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );

    let (code, r) = grade(REASONER, &dir.join("openai_follows.json"));
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["format"], "openai");
    assert_eq!(r["ok"], true);
    assert_eq!(
        r["steps"],
        serde_json::json!(["DefaultMode", "ResearchMode"])
    );
    assert_eq!(r["calls"].as_array().unwrap().len(), 3);

    let (code, r) = grade(REASONER, &dir.join("openai_out_of_order.json"));
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["calls"][0]["verdict"], "out_of_sequence");
    assert_eq!(
        r["calls"][0]["message"],
        "the sequence of step `ResearchMode` expects `search` at position 0"
    );
    assert_eq!(r["violations"][0]["call"], 1);

    let (code, r) = grade(REFUNDS, &dir.join("anthropic_refund.json"));
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["format"], "anthropic");
    let verdicts: Vec<(&str, bool)> = r["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["verdict"].as_str().unwrap(), c["ran"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("out_of_sequence", true),
            ("allowed", true),
            ("needs_approval", false)
        ]
    );
    // The refund the application never ran is not a violation; the first one is, and
    // it breaks both properties there.
    assert_eq!(r["violations"].as_array().unwrap().len(), 1);
    let props: Vec<(&str, Option<u64>)> = r["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["call"].as_u64()))
        .collect();
    assert_eq!(
        props,
        [
            ("refunds-are-approved", Some(1)),
            ("refund-after-lookup", Some(1))
        ]
    );
    // The human rendering says the same.
    let o = orch(&[
        "check-trace",
        REFUNDS,
        &dir.join("anthropic_refund.json").display().to_string(),
    ]);
    let human = String::from_utf8_lossy(&o.stdout);
    assert!(
        human.contains("error: property `refund-after-lookup` is violated at call 1"),
        "{human}"
    );
    assert!(human.contains("steps visited: Help → Refund"), "{human}");
}

#[test]
fn orch_decision_records_are_graded_with_their_approvals() {
    let dir = support::temp_dir("check-trace-orch");
    let path = dir.join("records.jsonl");
    let records = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&records);
    let auditor = Auditor::new(
        move |r: &orch_agent::audit::DecisionRecord| {
            let mut s = sink.lock().unwrap();
            s.push_str(&r.to_json());
            s.push('\n');
        },
        "run-1",
    );
    let src = std::fs::read_to_string(root().join(REFUNDS)).unwrap();
    let machine = orch_codegen::compile_json(&src, None).to_machine().unwrap();
    let policy =
        Policy::new(["lookup_order", "issue_refund", "send_email"]).audited(Arc::new(auditor));
    let mut s = machine.session();
    policy.prepare(&mut s);
    policy.message(&mut s, "refund A-1");
    let lookup = Call::of_text("lookup_order", "{}");
    policy.admit_call(&mut s, "lookup_order", &lookup).unwrap();
    policy.record(&mut s, "lookup_order");
    let refund = Call::of_text("issue_refund", r#"{"amount": 1}"#);
    assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_err());
    let question = orch_runtime::QuestionId::new(0x51);
    policy.ask_call(&mut s, "issue_refund", refund.digest, question);
    assert!(policy.answer_call(&mut s, "issue_refund", refund.digest, question, true, None));
    policy.admit_call(&mut s, "issue_refund", &refund).unwrap();
    policy.record(&mut s, "issue_refund");
    std::fs::write(&path, records.lock().unwrap().as_str()).unwrap();

    let (code, r) = grade(REFUNDS, &path);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["format"], "orch");
    let calls: Vec<(&str, bool)> = r["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["verdict"].as_str().unwrap(), c["ran"].as_bool().unwrap()))
        .collect();
    // The first refund presented waited for the human; the approved one ran.
    assert_eq!(
        calls,
        [
            ("allowed", true),
            ("needs_approval", false),
            ("allowed", true)
        ]
    );
    assert!(
        r["properties"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["holds"] == true),
        "{r}"
    );
}

#[test]
fn malformed_traces_are_usage_errors() {
    let dir = support::temp_dir("check-trace-bad");
    for (name, text) in [
        ("not-json.json", "{oops"),
        ("no-messages.json", r#"{"model": "x"}"#),
        ("no-role.json", r#"[{"content": "hi"}]"#),
        ("bad-role.json", r#"[{"role": "robot", "content": "hi"}]"#),
        ("no-id.json", r#"[{"role": "tool", "content": "x"}]"#),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let o = orch(&["check-trace", REASONER, &p.display().to_string()]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(!o.stderr.is_empty(), "{name}");
    }
    assert_eq!(
        orch(&["check-trace", REASONER, "/nonexistent.json"])
            .status
            .code(),
        Some(2)
    );
}

/// A transcript whose tool name carries `ESC[1A ESC[2K CR` cannot rewrite the report on
/// a terminal: the human report escapes it (the refusal stays visible), the JSON report
/// keeps the name exact.
#[test]
fn a_hostile_tool_name_is_escaped_in_the_human_report() {
    let dir = support::temp_dir("check-trace-hostile");
    let name = "issue_refund\u{1b}[1A\u{1b}[2K\rcall 1 `lookup_order` in step Lookup: allowed, ran";
    let transcript = serde_json::json!([
        {"role": "user", "content": "refund please"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"}
    ]);
    let path = dir.join("hostile.json");
    std::fs::write(&path, transcript.to_string()).unwrap();
    let o = orch(&["check-trace", REFUNDS, &path.display().to_string()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains('\u{1b}') && !out.contains('\r'),
        "raw control characters reached the report: {out:?}"
    );
    assert!(out.contains("issue_refund\\u{1b}[1A"), "{out}");
    let (_, report) = grade(REFUNDS, &path);
    assert_eq!(report["calls"][0]["tool"], name, "{report}");
}
