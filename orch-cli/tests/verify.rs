//! `orch verify` through the built binary: the JSON contract, exit codes, and every
//! witness replayed through `orch simulate` to the claimed state.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn orch(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("orch runs");
    let input = stdin.unwrap_or("");
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

fn tmp(name: &str, content: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("verify");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

const DEAD: &str = r#"{"agentId": "dead", "tools": ["search", "audit", "answer"],
  "orchestration": {"steps": [
    {"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["search", "answer"]}},
    {"name": "Audit Desk", "conditions": [{"type": "message_regex", "value": "^a"}, {"type": "message_regex", "value": "^b"}],
     "availableTools": {"allowed": ["audit"]}},
    {"name": "Review", "conditions": [{"type": "tool_used", "value": "audit"}]},
    {"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}],
     "sequence": ["search", "answer"], "availableTools": {"allowed": ["search", "answer"]}}
  ]}}"#;

fn lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// `orch simulate` on these event lines: its trace, one JSON object per line.
fn trace(file: &str, events: &[&str]) -> Vec<serde_json::Value> {
    let out = orch(&["simulate", file, "-"], Some(&events.join("\n")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out)
}

/// Replays a witness with `orch simulate`; returns the last trace line.
fn simulate(file: &str, witness: &serde_json::Value) -> serde_json::Value {
    let events: String = witness
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{e}\n"))
        .collect();
    let out = orch(&["simulate", file, "-"], Some(&events));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = lines(&out);
    trace.last().cloned().unwrap()
}

#[test]
fn json_contract_exit_codes_and_witnesses() {
    let file = tmp("dead.json", DEAD);
    let out = orch(&["verify", "--format", "json", &file], None);
    assert_eq!(out.status.code(), Some(1), "findings: exit 1");
    let found = lines(&out);
    let step = |name: &str| {
        found
            .iter()
            .find(|l| l["kind"] == "step" && l["step"] == name)
            .unwrap_or_else(|| panic!("a line for {name}"))
            .clone()
    };
    assert_eq!(step("Audit Desk")["reachable"], false);
    assert_eq!(step("Review")["reachable"], false);
    assert_eq!(step("Chat")["reachable"], true);
    assert_eq!(step("Research")["reachable"], true);
    for l in &found {
        if l["kind"] == "step" && l["reachable"] == true {
            let last = simulate(&file, &l["witness"]);
            assert_eq!(last["step"], l["step"], "witness {}", l["witness"]);
        }
        if l["kind"] == "sequence" {
            assert_eq!(l["completes"], true);
            let last = simulate(&file, &l["witness"]);
            assert_eq!(last["outcome"], "completed", "witness {}", l["witness"]);
        }
    }
    // Permissive: `audit` can run anywhere, so `Review` is reachable.
    let out = orch(&["verify", "--format", "json", "--permissive", &file], None);
    let found = lines(&out);
    let review = found
        .iter()
        .find(|l| l["step"] == "Review" && l["kind"] == "step")
        .unwrap();
    assert_eq!(review["reachable"], true);
    // Without `answer`, Research's sequence never completes.
    let out = orch(
        &[
            "verify",
            "--format",
            "json",
            "--available",
            "search,audit",
            &file,
        ],
        None,
    );
    let found = lines(&out);
    let seq = found.iter().find(|l| l["kind"] == "sequence").unwrap();
    assert_eq!(seq["completes"], false);
    assert!(found.iter().any(|l| l["kind"] == "blocked"));
    // A state limit too small: undecided, never "unreachable".
    let out = orch(
        &["verify", "--format", "json", "--max-states", "2", &file],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let found = lines(&out);
    assert!(found
        .iter()
        .filter(|l| l["kind"] == "step")
        .all(|l| l["reachable"] != false));
    assert!(found
        .iter()
        .any(|l| l["kind"] == "summary" && l["complete"] == false));
}

#[test]
fn clean_templates_exit_0_and_human_output_points_at_the_step() {
    let out = orch(
        &["verify", "examples/agents/cognitive-reasoner/template.json"],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let file = tmp("dead2.json", DEAD);
    let out = orch(&["verify", &file], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("warning: step `Audit Desk` can never become active"),
        "{text}"
    );
    assert!(text.contains(&format!("{file}:4:14")), "{text}");
    // Usage and I/O errors: exit 2.
    assert_eq!(
        orch(&["verify", "/nonexistent.json"], None).status.code(),
        Some(2)
    );
    assert_eq!(
        orch(&["verify", "--max-states", "x", &file], None)
            .status
            .code(),
        Some(2)
    );
}

/// A shop with approval gates (semantics §13) and properties (§14): `pay` is gated in
/// `Checkout`, `refund` everywhere; `pay` may run again once the sequence is done.
const GATED: &str = r#"{"agentId": "shop", "tools": ["browse", "add_to_cart", "confirm", "pay", "refund"],
  "orchestration": {
    "approve": ["refund"],
    "steps": [
      {"name": "Browse", "isDefault": true, "availableTools": {"allowed": ["browse", "add_to_cart"]}},
      {"name": "Checkout", "conditions": [{"type": "tool_used", "value": "add_to_cart"}],
       "sequence": ["confirm", "pay"],
       "availableTools": {"allowed": ["confirm", "pay", "refund", "support_*"], "approve": ["pay"]}}
    ],
    "properties": [
      {"name": "pay-after-confirm", "tool": "pay", "after": "confirm"},
      {"name": "pay-approved", "tool": "pay", "approved": true},
      {"name": "refund-approved", "tool": "refund", "approved": true},
      {"name": "pay-once", "tool": "pay", "atMost": 1},
      {"name": "no-support-calls", "tool": "support_*", "never": true}
    ]}}"#;

#[test]
fn properties_are_one_json_line_each_and_witnesses_replay_to_the_violation() {
    let file = tmp("gated.json", GATED);
    let out = orch(&["verify", "--format", "json", &file], None);
    assert_eq!(out.status.code(), Some(1), "a property fails: exit 1");
    let props: Vec<serde_json::Value> = lines(&out)
        .into_iter()
        .filter(|l| l["kind"] == "property")
        .collect();
    let holds: Vec<(&str, &serde_json::Value)> = props
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), &p["holds"]))
        .collect();
    assert_eq!(
        holds,
        [
            ("pay-after-confirm", &serde_json::Value::Bool(true)),
            ("pay-approved", &serde_json::Value::Bool(true)),
            ("refund-approved", &serde_json::Value::Bool(true)),
            ("pay-once", &serde_json::Value::Bool(false)),
            ("no-support-calls", &serde_json::Value::Bool(false)),
        ]
    );
    // `pay` twice: both calls approved; the second is the violating event.
    let pay_once = &props[3];
    assert_eq!(
        pay_once["witness"],
        serde_json::json!([
            {"tool": "add_to_cart"}, {"tool": "confirm"},
            {"approve": "pay"}, {"tool": "pay"}, {"approve": "pay"}, {"tool": "pay"}
        ])
    );
    let last = simulate(&file, &pay_once["witness"]);
    assert_eq!(last["outcome"], "free", "the second `pay` runs: {last}");
    // A foreign tool the step admits matches `support_*`.
    let support = &props[4];
    assert_eq!(support["message"], "`support_foreign` can run");
    let last = simulate(&file, &support["witness"]);
    assert_eq!(last["step"], "Checkout");
    assert_eq!(last["outcome"], "free");

    // Human output: the violated properties at their names, exit 1.
    let out = orch(&["verify", &file], None);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error: property `pay-once` is violated: `pay` can run 2 times"),
        "{text}"
    );
    assert!(
        text.contains("gated.json:14:16"),
        "at the property's name: {text}"
    );
    assert!(text.contains("property `pay-approved` holds"), "{text}");

    // `orch check` reports them as errors (E023), with the same witness.
    let out = orch(&["check", &file], None);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error[E023]: property `pay-once` is violated"),
        "{text}"
    );
}

#[test]
fn simulate_takes_approvals_and_rejections() {
    let file = tmp("gated-sim.json", GATED);
    let trace = trace(
        &file,
        &[
            r#"{"tool": "add_to_cart"}"#,
            r#"{"tool": "confirm"}"#,
            r#"{"tool": "pay"}"#,
            r#"{"reject": "pay"}"#,
            r#"{"approve": "pay"}"#,
            r#"{"message": "hello"}"#,
            r#"{"tool": "pay"}"#,
            r#"{"approve": "pay"}"#,
            r#"{"tool": "pay"}"#,
        ],
    );
    // Without an approval the gated call does not run; a rejection is traced; an
    // approval holds for the next event only (a message in between voids it).
    assert_eq!(trace[3]["outcome"], "needs_approval");
    assert_eq!(trace[3]["sequenceIndex"], 1);
    assert_eq!(trace[4]["rejected"], "pay");
    assert_eq!(trace[5]["approved"], "pay");
    assert_eq!(trace[7]["outcome"], "needs_approval");
    assert_eq!(trace[8]["approved"], "pay");
    assert_eq!(trace[9]["outcome"], "completed");
}

/// Rules on arguments in `orch verify` (semantics §14, §16): a property's `when`, proven
/// or refuted with each test as the model's choice; `range` tests of one path decided
/// together.
const PAYMENTS: &str = r#"{"agentId": "payments", "tools": ["get_contacts", "send_money", "get_webpage"],
  "orchestration": {
    "approve": [{"name": "large-transfer", "tool": "send_money", "when": {"path": "/amount", "range": {"min": 500}}}],
    "rules": [
      {"name": "our-sites", "tool": "get_webpage", "require": {"path": "/url", "hostIn": ["bank.example"]}}
    ],
    "steps": [
      {"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["get_contacts", "get_webpage"]}},
      {"name": "Paying", "conditions": [{"type": "tool_used", "value": "get_contacts"}]}
    ],
    "properties": [
      {"name": "big-transfers-approved", "tool": "send_money", "approved": true, "when": {"path": "/amount", "range": {"min": 1000}}},
      {"name": "transfers-over-100-approved", "tool": "send_money", "approved": true, "when": {"path": "/amount", "range": {"min": 100}}},
      {"name": "no-outside-pages", "tool": "get_webpage", "never": true, "when": {"not": {"path": "/url", "hostIn": ["bank.example"]}}},
      {"name": "no-pages", "tool": "get_webpage", "never": true}
    ]
  }}"#;

#[test]
fn properties_over_arguments_are_proven_and_refuted_with_witnesses() {
    let file = tmp("payments.json", PAYMENTS);
    let out = orch(&["verify", "--format", "json", &file], None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let props: Vec<serde_json::Value> = lines(&out)
        .into_iter()
        .filter(|l| l["kind"] == "property")
        .collect();
    let holds: Vec<(&str, bool)> = props
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["holds"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        holds,
        [
            // ≥ 1000 implies ≥ 500: the conditional approval always asks.
            ("big-transfers-approved", true),
            // 100 ≤ amount < 500 runs without a human.
            ("transfers-over-100-approved", false),
            // The required rule and the property test the same thing.
            ("no-outside-pages", true),
            ("no-pages", false),
        ]
    );
    let over_100 = &props[1];
    assert_eq!(
        over_100["message"],
        "`send_money` can run without a human's approval, with arguments for which `/amount` must be a number of at least 100 (assuming `/amount` is 100)"
    );
    // The witness replays: the last event is the call, which `orch simulate` runs.
    assert_eq!(
        over_100["witness"],
        serde_json::json!([{"tool": "get_contacts"}, {"tool": "send_money"}])
    );
    let last = simulate(&file, &over_100["witness"]);
    assert_eq!(last["step"], "Paying");
    assert_eq!(last["outcome"], "free");
    // `when` goes with `never` and `approved` only.
    let bad = PAYMENTS.replace(
        r#""approved": true, "when": {"path": "/amount", "range": {"min": 100}}"#,
        r#""atMost": 1, "when": {"path": "/amount", "exists": true}"#,
    );
    let out = orch(&["check", &tmp("bad-when.json", &bad)], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error[E022]: `when` does not go with `atMost`"),
        "{text}"
    );
}

/// The tests of one path are decided together: a payment the rules require an amount
/// of cannot be one without an amount, and a recipient pinned to a list cannot fail a
/// glob every entry of the list matches. A refutation says what it assumed.
#[test]
fn tests_of_one_path_are_decided_together() {
    let template = r#"{"agentId": "joint", "tools": ["send_money"],
      "orchestration": {
        "rules": [
          {"name": "some-amount", "tool": "send_money", "require": {"path": "/amount", "range": {"min": 0.01}}},
          {"name": "known", "tool": "send_money", "require": {"path": "/to", "oneOf": ["ana@corp.example", "bo@corp.example"]}}
        ],
        "steps": [{"name": "Pay", "isDefault": true}],
        "properties": [
          {"name": "no-payment-without-amount", "tool": "send_money", "never": true, "when": {"not": {"path": "/amount", "exists": true}}},
          {"name": "no-amount-as-text", "tool": "send_money", "never": true, "when": {"path": "/amount", "glob": "*"}},
          {"name": "corp-only", "tool": "send_money", "never": true, "when": {"not": {"path": "/to", "glob": "*@corp.example"}}},
          {"name": "never-to-bo", "tool": "send_money", "never": true, "when": {"path": "/to", "glob": "bo@*"}}
        ]
      }}"#;
    let file = tmp("joint.json", template);
    let out = orch(&["verify", "--format", "json", &file], None);
    let props: Vec<serde_json::Value> = lines(&out)
        .into_iter()
        .filter(|l| l["kind"] == "property")
        .collect();
    let holds: Vec<(&str, bool)> = props
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["holds"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        holds,
        [
            ("no-payment-without-amount", true),
            ("no-amount-as-text", true),
            ("corp-only", true),
            ("never-to-bo", false),
        ]
    );
    let message = props[3]["message"].as_str().unwrap();
    assert!(
        message.starts_with("`send_money` can run, with arguments for which `/to` must be a string matching `bo@*` (assuming "),
        "{message}"
    );
    assert!(
        message.contains("`/to` must be one of \"ana@corp.example\", \"bo@corp.example\": holds"),
        "{message}"
    );
}

/// A provenance property: "no payment to a recipient the user did not write and no
/// trusted tool returned runs without a human" holds with a `from` rule, and without it
/// is refuted with a witness whose message says which origins it assumed the value
/// was not seen at.
#[test]
fn a_provenance_property_is_proven_or_refuted_with_a_witness() {
    let template = |rules: &str| {
        format!(
            r#"{{"agentId": "prov", "tools": ["read_file", "get_contacts", "send_money"],
      "orchestration": {{
        "trust": {{"trusted": ["get_contacts"], "untrusted": ["read_file"]}},
        "rules": [{rules}],
        "steps": [{{"name": "Assist", "isDefault": true}}],
        "properties": [
          {{"name": "no-untrusted-payee", "tool": "send_money", "approved": true,
            "when": {{"not": {{"path": "/recipient", "from": ["user", "trusted"]}}}}}}
        ]
      }}}}"#
        )
    };
    let prop = proven_then_refuted(
        "prov",
        &template(
            r#"{"name": "known-recipient", "tool": "send_money", "require": {"path": "/recipient", "from": ["user", "trusted"]}}"#,
        ),
        &template(""),
    );
    let message = prop["message"].as_str().unwrap();
    assert!(
        message.contains("`/recipient` must be a value the user wrote in a message: does not hold")
            && message.contains("`/recipient` must be a value the trusted tool `get_contacts` returned: does not hold"),
        "{message}"
    );
    assert!(
        prop["witness"].is_array() || prop["witness"].is_object(),
        "{prop}"
    );
}

/// `orch verify` proves the property of the template `guarded` and refutes that of
/// `open` (files named after `name`): the refuted property's finding.
fn proven_then_refuted(name: &str, guarded: &str, open: &str) -> serde_json::Value {
    let guarded = tmp(&format!("{name}-guarded.json"), guarded);
    let out = orch(&["verify", "--format", "json", &guarded], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let open = tmp(&format!("{name}-open.json"), open);
    let out = orch(&["verify", "--format", "json", &open], None);
    assert!(!out.status.success());
    let prop = lines(&out)
        .into_iter()
        .find(|l| l["kind"] == "property")
        .expect("the property's finding");
    assert_eq!(prop["holds"], false);
    prop
}

/// A property about calls past a budget's threshold (semantics §17): "a day's payments
/// past 5,000 are always approved" holds with a conditional approval on the budget, and
/// is refuted without it, the witness saying which budget test it assumed.
#[test]
fn a_budget_property_is_proven_or_refuted_with_a_witness() {
    let template = |approve: &str| {
        format!(
            r#"{{"agentId": "spend", "tools": ["get_balance", "send_money"],
      "orchestration": {{
        "budgets": [{{"name": "daily-spend", "tool": "send_money", "sum": "/amount", "within": "24h"}}],
        "approve": [{approve}],
        "rules": [{{"name": "daily-limit", "tool": "send_money", "require": {{"budget": "daily-spend", "range": {{"max": 10000}}}}}}],
        "steps": [{{"name": "Assist", "isDefault": true}}],
        "properties": [
          {{"name": "big-days-approved", "tool": "send_money", "approved": true,
            "when": {{"budget": "daily-spend", "range": {{"min": 5000}}}}}}
        ]
      }}}}"#
        )
    };
    let prop = proven_then_refuted(
        "budget",
        &template(
            r#"{"name": "big-day", "tool": "send_money", "when": {"budget": "daily-spend", "range": {"min": 5000}}}"#,
        ),
        &template(""),
    );
    let message = prop["message"].as_str().unwrap();
    assert!(
        message.contains("budget `daily-spend` with this call must be at least 5000: holds"),
        "{message}"
    );
}

/// Counters are exact in the model (semantics §17): a count of a tool's calls without
/// `where` or `within` is part of every state, so "`refund` runs at most 3 times" holds
/// under a rule that allows three and is refuted, with four refunds, under one that
/// allows four; a step a spent budget activates is reachable by a witness that `orch
/// simulate` replays; a step that reads a windowed sum is undecided, saying why.
#[test]
fn counters_are_exact_and_windows_are_said_to_be_abstracted() {
    let template = |max: u32| {
        format!(
            r#"{{"agentId": "refunds", "tools": ["refund", "escalate"],
      "orchestration": {{
        "budgets": [{{"name": "refunds", "tool": "refund"}},
                    {{"name": "refunded-today", "tool": "refund", "sum": "/amount", "within": "24h"}}],
        "rules": [{{"name": "few-refunds", "tool": "refund", "require": {{"budget": "refunds", "range": {{"max": {max}}}}}}}],
        "steps": [{{"name": "Work", "isDefault": true}},
                  {{"name": "Review", "conditions": [{{"type": "budget", "value": "refunds", "range": {{"min": 3}}}}]}},
                  {{"name": "BigDay", "conditions": [{{"type": "budget", "value": "refunded-today", "range": {{"min": 500}}}}]}}],
        "properties": [{{"name": "three-refunds", "tool": "refund", "atMost": 3}}]
      }}}}"#
        )
    };
    let prop = proven_then_refuted("counters", &template(3), &template(4));
    assert_eq!(prop["witness"].as_array().map(Vec::len), Some(4), "{prop}");
    let file = tmp("counters-steps.json", &template(3));
    let found = lines(&orch(&["verify", "--format", "json", &file], None));
    let step = |name: &str| {
        found
            .iter()
            .find(|l| l["kind"] == "step" && l["step"] == name)
            .cloned()
            .expect("the step's finding")
    };
    let review = step("Review");
    assert_eq!(review["reachable"], true);
    assert_eq!(simulate(&file, &review["witness"])["step"], "Review");
    let big_day = step("BigDay");
    assert_eq!(big_day["reachable"], serde_json::Value::Null);
    assert!(
        big_day["reason"]
            .as_str()
            .is_some_and(|r| r.contains("a window") && r.contains("undecided")),
        "{big_day}"
    );
}

/// A tool event with `arguments` and `at` is a call: judged by the rules on arguments
/// (a refusal says which rule and why, and the call does not run) and charged to the
/// budgets at that time.
#[test]
fn simulate_judges_calls_with_arguments_at_their_time() {
    let file = tmp(
        "simulate-budgets.json",
        r#"{"agentId": "spend", "tools": ["pay"],
      "orchestration": {
        "budgets": [{"name": "daily", "tool": "pay", "sum": "/amount", "within": "24h"}],
        "rules": [{"name": "daily-limit", "tool": "pay", "require": {"budget": "daily", "range": {"max": 100}}}],
        "steps": [{"name": "Pay", "isDefault": true},
                  {"name": "Spent", "conditions": [{"type": "budget", "value": "daily", "range": {"min": 100}}]}]
      }}"#,
    );
    let trace = trace(
        &file,
        &[
            r#"{"tool": "pay", "arguments": {"amount": 60}, "at": 1000}"#,
            r#"{"tool": "pay", "arguments": {"amount": 50}, "at": 2000}"#,
            r#"{"tool": "pay", "arguments": {"amount": 40}, "at": 3000}"#,
            r#"{"tool": "pay", "arguments": {"amount": 40}, "at": 90000000}"#,
        ],
    );
    assert_eq!(trace[1]["outcome"], "free");
    assert_eq!(trace[2]["outcome"], "refused");
    assert_eq!(trace[2]["rule"], "daily-limit");
    assert!(trace[2]["reason"]
        .as_str()
        .unwrap()
        .contains("would be 110"));
    assert_eq!(trace[3]["step"], "Spent");
    // A day later the window holds only the newest payment.
    assert_eq!(trace[4]["outcome"], "free");
    let bad = orch(
        &["simulate", &file, "-"],
        Some(r#"{"tool": "pay", "arguments": [1]}"#),
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`arguments` must be a JSON object"));
}

/// A `range` without bounds is any number: the words of a witness say so (this once
/// indexed a bound that is not there).
#[test]
fn a_range_without_bounds_is_any_number() {
    let file = tmp(
        "empty-range.json",
        r#"{"agentId": "pay", "tools": ["pay"],
      "orchestration": {
        "budgets": [{"name": "payments", "tool": "pay"}],
        "steps": [{"name": "Pay", "isDefault": true}],
        "properties": [{"name": "no-numbers", "tool": "pay", "never": true,
                        "when": {"path": "/amount", "range": {}}}]
      }}"#,
    );
    let out = orch(&["verify", "--format", "json", &file], None);
    let prop = lines(&out)
        .into_iter()
        .find(|l| l["kind"] == "property")
        .expect("the property's finding");
    assert_eq!(prop["holds"], false);
    assert!(
        prop["message"]
            .as_str()
            .is_some_and(|m| m.contains("`/amount` is a number")),
        "{prop}"
    );
}

/// A count the state knows decides a rule however many other tests the rule's tool has:
/// with twenty windowed sums beside it (more tests than the model enumerates), the count
/// of three still proves "`pay` runs at most 3 times".
#[test]
fn a_known_count_decides_past_the_enumeration_limit() {
    let mut budgets = vec![r#"{"name": "payments", "tool": "pay"}"#.to_owned()];
    let mut rules =
        vec![r#"{"name": "three", "tool": "pay", "require": {"budget": "payments", "range": {"max": 3}}}"#.to_owned()];
    for i in 0..20 {
        budgets.push(format!(
            r#"{{"name": "s{i}", "tool": "pay", "sum": "/amount", "within": "1h"}}"#
        ));
        rules.push(format!(
            r#"{{"name": "r{i}", "tool": "pay", "require": {{"budget": "s{i}", "range": {{"max": {}}}}}}}"#,
            100 + i
        ));
    }
    let template = |at_most: u32| {
        format!(
            r#"{{"agentId": "many", "tools": ["pay"], "orchestration": {{
              "budgets": [{}], "rules": [{}],
              "steps": [{{"name": "Pay", "isDefault": true}}],
              "properties": [{{"name": "at-most", "tool": "pay", "atMost": {at_most}}}]}}}}"#,
            budgets.join(", "),
            rules.join(", ")
        )
    };
    let prop = proven_then_refuted("many-rules", &template(3), &template(2));
    assert_eq!(prop["witness"].as_array().map(Vec::len), Some(3), "{prop}");
}

/// With a window, time is the model's choice: it stands still, or passes every window.
/// A step that holds only once an hour has passed since a password reset is reached by
/// a witness whose later call carries its time, and `orch simulate` replays it.
#[test]
fn a_window_is_passed_by_a_witness_with_a_time() {
    let file = tmp(
        "window-witness.json",
        r#"{"agentId": "resets", "tools": ["reset_password", "look"],
      "orchestration": {
        "budgets": [{"name": "hourly", "tool": "reset_password", "within": "1h"}],
        "steps": [{"name": "Work", "isDefault": true},
                  {"name": "Calm", "conditions": [{"type": "tool_used", "value": "reset_password"},
                                                   {"type": "budget", "value": "hourly", "range": {"max": 0}}]}]
      }}"#,
    );
    let found = lines(&orch(&["verify", "--format", "json", &file], None));
    let calm = found
        .iter()
        .find(|l| l["kind"] == "step" && l["step"] == "Calm")
        .expect("the step's finding");
    assert_eq!(calm["reachable"], true, "{calm}");
    let witness = calm["witness"].as_array().expect("a witness");
    assert!(
        witness.iter().any(|e| e["at"].as_u64() == Some(3_600_001)),
        "{calm}"
    );
    assert_eq!(simulate(&file, &calm["witness"])["step"], "Calm");
}
