//! The rollout tools through the built binary: `orch learn` (a template that compiles,
//! passes `orch verify` and admits every call it learned from, on every example's
//! traffic), `orch replay LOG --template NEW.json` (the what-if: call by call, totals,
//! JSON lines, SARIF, exit codes, transcripts, bad input), and the committed fixtures of
//! docs/rollout.md.

mod support;

use serde_json::Value;
use support::{orch_at_root as orch, repo_root as root};

const RECORDING: &str = "examples/rollout/recording.json";
const LAST_WEEK: &str = "examples/rollout/last-week.jsonl";
const THIS_WEEK: &str = "examples/rollout/this-week.jsonl";
const LEARNED: &str = "examples/rollout/learned.json";

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The committed fixtures are what the tools make of each other: the recorded week
/// replays exactly under the template it was recorded with (observe mode, records
/// saying so), and the learned template is what `orch learn` writes from last week.
#[test]
fn the_fixtures_of_the_guide_are_what_the_tools_make() {
    let bare = std::fs::read_to_string(root().join(RECORDING)).expect("recording.json");
    let bare: Value = serde_json::from_str(&bare).expect("JSON");
    let ours: Value =
        serde_json::from_str(orch_test_support::traffic::REFUND_DESK_BARE).expect("JSON");
    assert_eq!(bare, ours, "recording.json is the generator's template");
    for log in [LAST_WEEK, THIS_WEEK] {
        let o = orch(&["replay", RECORDING, log]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{out}{err}");
        assert!(out.contains("re-derived exactly"), "{out}");
        let week = std::fs::read_to_string(root().join(log)).expect("the log");
        assert!(week.lines().all(|l| l.contains(r#""mode":"observe""#)));
        // Observe mode keeps every call's arguments.
        for line in week.lines().filter(|l| l.contains(r#""kind":"call""#)) {
            assert!(line.contains(r#""arguments":"#), "{line}");
        }
    }
    let o = orch(&["learn", LAST_WEEK, "--name", "refund-desk"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let committed = std::fs::read_to_string(root().join(LEARNED)).expect("learned.json");
    assert_eq!(out, committed, "examples/rollout/learned.json is stale");
    assert!(err.contains("every one of them is admitted"), "{err}");
}

/// What `orch learn` generalised from last week, and why, is in the template: the two
/// orders that always held, the addresses' shared domain, the single currency, and the
/// side effects proposed for approval — not written, since the traffic ran without one.
#[test]
fn learn_says_what_it_generalised() {
    let learned: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(LEARNED)).expect("read"))
            .expect("JSON");
    let notes = learned["orchestration"]["description"].to_string();
    for said in [
        "`issue_refund` only after `lookup_order`",
        "`send_email` only after `lookup_order`",
        "was always an address at `customers.example`",
        "Seen, not made a rule: `/amount` of `issue_refund` ranged",
        "Proposed, not written: `issue_refund`, `send_email`",
    ] {
        assert!(notes.contains(said), "{said} not in {notes}");
    }
    assert!(learned["orchestration"].get("approve").is_none());
    let steps = &learned["orchestration"]["steps"];
    assert_eq!(
        steps[0]["availableTools"]["allowed"],
        serde_json::json!(["lookup_order"])
    );
    // With --approve-side-effects they are written, and the check of admitting every
    // call is the human's: they are asked.
    let o = orch(&["learn", LAST_WEEK, "--approve-side-effects"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let written: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        written["orchestration"]["approve"],
        serde_json::json!(["issue_refund", "send_email"])
    );
}

/// On every example agent's traffic (runs that call only what its template allows, in
/// observe mode): the learned template compiles, `orch verify` finds nothing wrong, and
/// a what-if of the same traffic under it changes no call.
#[test]
fn learned_templates_admit_every_call_they_learned_from_on_every_example() {
    let dir = support::temp_dir("learn");
    let agents = root().join("examples/agents");
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&agents)
        .expect("examples/agents")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let template = entry.path().join("template.json");
        let Ok(source) = std::fs::read_to_string(&template) else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let log = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(
            &log,
            orch_test_support::traffic::simulate(&source, 40, 6, 7),
        )
        .expect("write the traffic");
        let learned = dir.path().join(format!("{name}.learned.json"));
        let (log, learned) = (log.display().to_string(), learned.display().to_string());
        let o = orch(&["learn", &log, "--name", &name, "-o", &learned]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        for check in ["check", "verify"] {
            let o = orch(&[check, &learned]);
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(0), "{name}: orch {check}: {out}{err}");
        }
        let o = orch(&["replay", &log, "--template", &learned, "--format", "json"]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {out}{err}");
        let summary: Value =
            serde_json::from_str(out.lines().last().expect("a summary")).expect("JSON");
        let summary = &summary["summary"];
        assert!(
            summary["calls"].as_u64().unwrap_or(0) > 40,
            "{name}: {summary}"
        );
        assert_eq!(summary["unchanged"], summary["calls"], "{name}: {summary}");
        seen += 1;
    }
    assert!(seen >= 6, "only {seen} examples");
}

/// The what-if of this week under the learned template: each incident's calls are
/// named with their line, the totals say by which rule, and the exit code fails CI.
#[test]
fn what_if_names_every_call_decided_otherwise() {
    let o = orch(&["replay", THIS_WEEK, "--template", LEARNED]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let last = out.lines().last().expect("the totals");
    assert!(
        last.starts_with("`refund-desk` would refuse 11 of 138 calls: 8 by `step Start`, 3 by `argument send_email-to`"),
        "{last}"
    );
    assert_eq!(out.lines().filter(|l| l.starts_with("line ")).count(), 11);
    assert!(out.contains("`send_email` in step After lookup_order: admitted → refused (broken_rule, argument send_email-to)"), "{out}");

    let o = orch(&[
        "replay",
        THIS_WEEK,
        "--template",
        LEARNED,
        "--format",
        "json",
    ]);
    let (out, _) = text(&o);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let summary = &lines.last().expect("summary")["summary"];
    assert_eq!(summary["would_refuse"]["total"], 11);
    assert_eq!(
        summary["would_refuse"]["by_rule"]["argument send_email-to"],
        3
    );
    assert_eq!(summary["unchanged"], 127);
    let evil = &lines[0];
    assert_eq!(evil["tool"], "send_email");
    assert_eq!(evil["after"]["rule"], "argument send_email-to");
    assert!(
        evil["message"]
            .as_str()
            .unwrap_or("")
            .contains("evil.example"),
        "{evil}"
    );

    let o = orch(&[
        "replay",
        THIS_WEEK,
        "--template",
        LEARNED,
        "--format",
        "sarif",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let sarif: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 11);
    assert_eq!(results[0]["ruleId"], "would-refuse");
    assert!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"].as_u64() > Some(0)
    );
    assert_eq!(sarif["runs"][0]["properties"]["summary"]["calls"], 138);

    // Under the template it was recorded with, nothing changes.
    let o = orch(&["replay", THIS_WEEK, "--template", RECORDING]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("would refuse 0 of 138 calls"), "{out}");
}

/// A hand-written template that gates refunds: the refunds that ran would be asked
/// about ("more would be asked"), and the what-if of a log recorded in enforce mode
/// (refused calls did not run) compares with what was decided then.
#[test]
fn what_if_counts_questions_and_calls_allowed_anew() {
    let refunds = "examples/agents/refund-desk/template.json";
    let o = orch(&[
        "replay",
        LAST_WEEK,
        "--template",
        refunds,
        "--format",
        "json",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let summary: Value = serde_json::from_str(out.lines().last().expect("summary")).expect("JSON");
    let asked = summary["summary"]["would_ask"]["total"]
        .as_u64()
        .unwrap_or(0);
    assert!(asked > 0, "{summary}");
    // As docs/rollout.md shows it.
    let o = orch(&["replay", LAST_WEEK, "--template", refunds]);
    let (out, _) = text(&o);
    assert_eq!(
        out.lines().last(),
        Some("`refund-desk` would refuse 0 of 95 calls; 15 more would be asked: 15 by `gate Refund` (40 runs, 80 unchanged)")
    );
    assert!(
        out.lines().any(|l| l
            == "line 5: run `conv-1-0`, `issue_refund` in step Refund: admitted → asked (gate Refund)"),
        "{out}"
    );

    // An enforcing log: the learned template refused this week's incidents.
    let dir = support::temp_dir("what-if-enforce");
    let enforced = dir.path().join("enforced.jsonl");
    let o = orch(&[
        "replay",
        THIS_WEEK,
        "--template",
        LEARNED,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let log = orch_test_support::traffic::enforce_log(
        &std::fs::read_to_string(root().join(LEARNED)).expect("learned"),
        &std::fs::read_to_string(root().join(THIS_WEEK)).expect("this week"),
    );
    std::fs::write(&enforced, log).expect("write");
    let enforced = enforced.display().to_string();
    // Under the recording template every refused call would have run.
    let o = orch(&[
        "replay",
        &enforced,
        "--template",
        RECORDING,
        "--format",
        "json",
    ]);
    let (out, err) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "nothing that ran is stopped: {out}{err}"
    );
    let summary: Value = serde_json::from_str(out.lines().last().expect("summary")).expect("JSON");
    assert_eq!(summary["summary"]["would_allow"], 11, "{summary}");
}

/// Transcripts (as `orch check-trace` reads them) are one run each.
#[test]
fn what_if_reads_transcripts() {
    let dir = support::temp_dir("what-if-transcript");
    let transcript = dir.path().join("openai.json");
    let messages = serde_json::json!([
        {"role": "user", "content": "please refund order A1"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "issue_refund", "arguments": "{\"order_id\":\"A1\",\"amount\":5,\"currency\":\"EUR\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "send_email", "arguments": "{\"to\":\"x@customers.example\"}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "sent"}
    ]);
    std::fs::write(&transcript, messages.to_string()).expect("write");
    let path = transcript.display().to_string();
    let o = orch(&["replay", &path, "--template", LEARNED, "--format", "json"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let first: Value = serde_json::from_str(out.lines().next().expect("a change")).expect("JSON");
    assert_eq!(first["tool"], "issue_refund");
    assert_eq!(first["after"]["refusal"], "not_allowed");
}

/// Bad input: an exit 2 that says what and where, never a panic.
#[test]
fn what_if_refuses_bad_input_clearly() {
    let dir = support::temp_dir("what-if-bad");
    let week = std::fs::read_to_string(root().join(THIS_WEEK)).expect("read");
    let mut lines: Vec<&str> = week.lines().collect();
    lines.insert(5, "{\"v\":1,\"seq\":");
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, lines.join("\n")).expect("write");
    let broken = broken.display().to_string();
    for (args, said) in [
        (
            vec!["replay", broken.as_str(), "--template", LEARNED],
            "line 6: not a decision record",
        ),
        (
            vec!["replay", "no-such.jsonl", "--template", LEARNED],
            "cannot read",
        ),
        (vec!["replay", THIS_WEEK], "give the template and the log"),
        (
            vec!["replay", LEARNED, THIS_WEEK, "--format", "sarif"],
            "--format sarif is for a what-if",
        ),
        (
            vec!["replay", LEARNED, THIS_WEEK, "--template", LEARNED],
            "give the log alone",
        ),
        (vec!["learn", "no-such.jsonl"], "cannot read"),
        (vec!["learn", LEARNED], "a trace"),
    ] {
        let o = orch(&args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}{err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    let o = orch(&["policy", RECORDING, "--mode", "watch"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("expected `enforce` or `observe`"), "{err}");
}

/// `orch mcp --mode observe` as a process, in front of the MCP Python SDK's server: the
/// client is shown every tool, a call the step does not allow goes upstream and runs,
/// and the decision log says it would have been refused, in observe mode.
#[test]
#[ignore = "needs the MCP Python SDK: `cargo xtask test` installs it and runs this"]
fn orch_mcp_in_observe_mode_forwards_and_logs_what_it_would_refuse() {
    let python = support::python();
    let dir = support::temp_dir("mcp-observe");
    let (upstream_log, decisions) = (dir.join("executed.log"), dir.join("decisions.jsonl"));
    let decisions_arg = decisions.display().to_string();
    let gw = support::shop_gateway(
        &python,
        &upstream_log,
        &["--mode", "observe", "--audit-log", &decisions_arg],
        &[],
    );
    let client = support::http::Client::connect(&gw.addr, None).expect("a session");
    let mut shown = client.tools();
    shown.sort();
    assert_eq!(shown, ["browse", "change_tools", "pay", "receipt", "slow"]);
    // `receipt` only after paying: refused in enforce mode, forwarded here.
    let answered = client.call("receipt", serde_json::json!({"run": "r1"}));
    assert!(support::http::succeeded(&answered), "{answered}");
    let ran: Vec<String> = support::log_lines(&upstream_log)
        .iter()
        .filter_map(|l| l["tool"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ran, ["receipt"]);
    let records = support::log_lines(&decisions);
    let call = records
        .iter()
        .find(|r| r["event"]["kind"] == "call")
        .expect("the call's record");
    assert_eq!(call["decision"], "refused", "{call}");
    assert_eq!(call["mode"], "observe", "{call}");
    assert_eq!(call["rule"]["step"], "Shop", "{call}");
    assert!(records.iter().all(|r| r["mode"] == "observe"));
}
