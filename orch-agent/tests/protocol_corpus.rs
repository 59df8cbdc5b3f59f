//! The run protocol's corpus for the bindings: random templates (steps, sequences,
//! message conditions, gates, rules on arguments: ranges, sets, values from results and
//! conditional approvals) and random streams of session events — messages, calls with
//! results of every kind (a success's values recorded with it), questions, answers
//! (replayed and late ones too), approvals, rejections, resets — each with what the Rust
//! reference (`Policy` over a `DynSession`)
//! decides and where the session stands after it. The corpus is written to
//! `orch-py/tests/fixtures/protocol.json`; the Python package (`test_protocol.py`) and the
//! npm package (`protocol.test.mjs`, native and WebAssembly) replay it and must decide
//! every step alike. This test keeps the file true: a change of the protocol's decisions
//! fails it until the corpus is written afresh (`ORCH_BLESS=1`), so every binding is then
//! checked against the new decisions.

use orch_agent::protocol;
use orch_agent::Policy;
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, CallDigest, QuestionId, Verdict};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

#[path = "common/corpus_templates.rs"]
mod corpus_templates;

use corpus_templates::{compiling, keep_true, TOOLS};
const CASES: usize = 60;

fn op() -> impl Strategy<Value = Value> {
    let result = prop_oneof![
        3 => Just(json!({"content": [{"type": "text", "text": "done"}]})),
        2 => (0..4u8, 0..4u8).prop_map(|(x, y)| json!({
            "content": [{"type": "text", "text": json!({"v": [x, y]}).to_string()}],
            "structuredContent": {"v": [x, y]}})),
        1 => Just(json!({"content": [], "isError": true})),
        1 => Just(json!({"resultType": "input_required", "inputRequests": {}})),
        1 => Just(json!({"resultType": "task", "task": {"taskId": "t"}})),
        1 => Just(json!({"foo": 1})),
    ];
    let tool = (0..4usize).prop_map(|t| TOOLS[t]);
    let args = prop_oneof![
        Just(r#"{"n": 1}"#),
        Just(r#"{"n":1}"#),
        Just(r#"{"n": 12345678901234567890123}"#),
        Just(r#"{"n": 12345678901234567890124}"#),
        Just(r#"{"n": 0}"#),
        Just(r#"{"n": 2.0}"#),
        Just(r#"{"n": 3}"#),
        Just(r#"{"n": 1, "n": 2}"#),
    ];
    prop_oneof![
        2 => prop_oneof![Just("please refund it"), Just("hello")]
            .prop_map(|text| json!({"op": "message", "text": text})),
        6 => (tool.clone(), args.clone(), result)
            .prop_map(|(tool, args, result)| {
                let mut op = json!({"op": "call", "tool": tool, "args": args});
                // What a host records with a success: the result's values.
                if let Some(value) = protocol::result_values(&result) {
                    op["value"] = json!(value);
                }
                op["result"] = json!(orch_runtime::approval::canonical_json(&result.to_string()).expect("json"));
                op
            }),
        2 => (tool.clone(), args.clone()).prop_map(|(tool, args)| json!({"op": "ask", "tool": tool, "args": args})),
        3 => (prop_oneof![Just("latest"), Just("first")], any::<bool>())
            .prop_map(|(which, approved)| json!({"op": "answer", "which": which, "approved": approved})),
        1 => (tool.clone(), args.clone()).prop_map(|(tool, args)| json!({"op": "approve", "tool": tool, "args": args})),
        1 => (tool, args).prop_map(|(tool, args)| json!({"op": "reject", "tool": tool, "args": args})),
        1 => Just(json!({"op": "reset"})),
    ]
}

/// A refusal's decision: its kind, and for a broken rule the rule and the words the model
/// reads.
fn refused(refusal: &orch_agent::Refusal) -> String {
    match &refusal.rule {
        Some(rule) => format!(
            "refused:{}:{rule}: {}",
            refusal.kind.as_str(),
            refusal.reason
        ),
        None => format!("refused:{}", refusal.kind.as_str()),
    }
}

/// The reference, replaying one case.
struct Reference<'m> {
    policy: Policy,
    session: DynSession<'m>,
    /// Questions asked, in order: the call and the identity.
    questions: Vec<(String, String, QuestionId)>,
}

impl Reference<'_> {
    fn apply(&mut self, op: &Value) -> Value {
        let text = |key: &str| op[key].as_str().unwrap_or_default().to_owned();
        let decision = match op["op"].as_str().unwrap_or_default() {
            "message" => {
                self.policy.message(&mut self.session, &text("text"));
                json!("ok")
            }
            "call" => {
                let (tool, args) = (text("tool"), text("args"));
                let digest = Call::of_text(&tool, &args);
                match self.policy.admit_call(&mut self.session, &tool, &digest) {
                    Err(refusal) => json!(refused(&refusal)),
                    Ok(()) => match protocol::result_kind(&text("result")) {
                        "ran" => {
                            // The host records a success with its values (`value`).
                            match op["value"].as_str() {
                                Some(value) => {
                                    self.policy.record_result(&mut self.session, &tool, value)
                                }
                                None => self.policy.record(&mut self.session, &tool),
                            };
                            json!("ran")
                        }
                        why => json!(format!("not_run:{why}")),
                    },
                }
            }
            "ask" => {
                let (tool, args) = (text("tool"), text("args"));
                let question = QuestionId::random();
                let digest = Call::of_text(&tool, &args);
                self.policy
                    .ask_call(&mut self.session, &tool, digest.digest, question);
                self.questions.push((tool, args, question));
                json!("asked")
            }
            "answer" => {
                let which = match text("which").as_str() {
                    "first" => self.questions.first(),
                    _ => self.questions.last(),
                };
                match which.cloned() {
                    None => json!("no_question"),
                    Some((tool, args, question)) => {
                        let digest = CallDigest::of_text(&tool, &args);
                        let approved = op["approved"].as_bool().unwrap_or(false);
                        let applied = self.policy.answer_call(
                            &mut self.session,
                            &tool,
                            digest,
                            question,
                            approved,
                            None,
                        );
                        json!(if applied { "applied" } else { "stale" })
                    }
                }
            }
            "approve" => {
                self.session
                    .approve(CallDigest::of_text(&text("tool"), &text("args")));
                json!("held")
            }
            "reject" => {
                self.session
                    .reject(CallDigest::of_text(&text("tool"), &text("args")));
                json!("held")
            }
            "reset" => {
                self.policy.reset(&mut self.session);
                json!("ok")
            }
            other => panic!("unknown op {other}"),
        };
        let mut allowed = self.policy.offered(&self.session);
        allowed.sort();
        let forced = Policy::forced_among(&self.session, &self.policy.offered(&self.session))
            .map(str::to_owned);
        let verdict = self.session.approval().map(|a| match a.verdict {
            Verdict::Pending => "pending",
            Verdict::Approved => "approved",
            Verdict::Rejected => "rejected",
        });
        json!({
            "decision": decision,
            "allowed": allowed,
            "forced": forced,
            "step": self.session.step(),
            "index": self.session.sequence_index(),
            "verdict": verdict,
        })
    }
}

/// `ops` replayed through the reference on a fresh session of `machine`: each op with
/// what the reference decided and where the session stood after it (`expect`).
fn expected(machine: &DynMachine, ops: &[Value]) -> Vec<Value> {
    let policy = Policy::new(TOOLS);
    let mut session = DynSession::new(machine);
    policy.prepare(&mut session);
    let mut reference = Reference {
        policy,
        session,
        questions: Vec::new(),
    };
    ops.iter()
        .map(|op| {
            let mut step = op.clone();
            step["expect"] = reference.apply(op);
            step
        })
        .collect()
}

/// One fixed case of rules on arguments, so that every form is in the corpus whatever the
/// random cases reach: values from results (none yet, a failed result's, a success's),
/// arguments that cannot be read, a conditional approval asked and answered, and a
/// reset forgetting the values.
fn rules_case() -> Value {
    let template = json!({"agentId": "corpus", "tools": TOOLS, "orchestration": {
        "approve": [{"name": "large", "tool": "c", "when": {"path": "/n", "range": {"min": 2}}}],
        "rules": [{"name": "known", "tool": "b", "require": {"path": "/n", "inResult": {"tool": "a", "path": "/v/*"}}}],
        "steps": [{"name": "Start", "isDefault": true}]}});
    let text = orch_runtime::approval::canonical_json(&template.to_string()).expect("json");
    let machine = orch_codegen::compile_json(&text, None)
        .to_machine()
        .expect("the rules case compiles");
    let success = |v: Value| {
        let result =
            json!({"content": [{"type": "text", "text": v.to_string()}], "structuredContent": v});
        (
            orch_runtime::approval::canonical_json(&result.to_string()).expect("json"),
            v.to_string(),
        )
    };
    let (ok, values) = success(json!({"v": [1, 2.50]}));
    let call = |tool: &str, args: &str| json!({"op": "call", "tool": tool, "args": args, "result": ok, "value": values});
    let ops = vec![
        call("b", r#"{"n": 1}"#),
        json!({"op": "call", "tool": "a", "args": "{}", "result": r#"{"content":[{"text":"{\"v\": [1]}","type":"text"}],"isError":true}"#, "value": r#"{"v": [1]}"#}),
        call("b", r#"{"n": 1}"#),
        call("a", "{}"),
        call("b", r#"{"n": 1.0}"#),
        call("b", r#"{"n": 2.5}"#),
        call("b", r#"{"n": 3}"#),
        call("b", r#"{"n": 1, "n": 1}"#),
        call("b", "not json"),
        call("c", r#"{"n": 1}"#),
        call("c", r#"{"n": 2}"#),
        json!({"op": "ask", "tool": "c", "args": r#"{"n": 2}"#}),
        json!({"op": "answer", "which": "latest", "approved": true}),
        call("c", r#"{"n": 2}"#),
        call("c", r#"{"n": 2}"#),
        json!({"op": "reset"}),
        call("b", r#"{"n": 1}"#),
    ];
    let steps = expected(&machine, &ops);
    let decisions: Vec<String> = steps
        .iter()
        .map(|s| {
            let d = s["expect"]["decision"].as_str().unwrap_or_default();
            d.split(": ").next().unwrap_or(d).to_owned()
        })
        .collect();
    assert_eq!(
        decisions,
        [
            "refused:broken_rule:known",
            "not_run:error",
            "refused:broken_rule:known",
            "ran",
            "ran",
            "ran",
            "refused:broken_rule:known",
            "refused:broken_rule:known",
            "refused:broken_rule:known",
            "ran",
            "refused:needs_approval",
            "asked",
            "applied",
            "ran",
            "refused:needs_approval",
            "ok",
            "refused:broken_rule:known",
        ],
        "the rules case decides as written"
    );
    json!({"template": text, "steps": steps})
}

fn corpus() -> Value {
    let mut runner = TestRunner::deterministic();
    let mut cases = Vec::new();
    while cases.len() < CASES {
        let (text, machine) = compiling(&mut runner);
        let ops = proptest::collection::vec(op(), 4..24)
            .new_tree(&mut runner)
            .expect("a stream")
            .current();
        let steps = expected(&machine, &ops);
        cases.push(json!({"template": text, "steps": steps}));
    }
    cases.push(rules_case());
    json!({
        "about": "Written by orch-agent/tests/protocol_corpus.rs (ORCH_BLESS=1): what the Rust reference decides; the bindings' tests replay it.",
        "tools": TOOLS,
        "cases": cases,
    })
}

#[test]
fn the_bindings_corpus_is_what_the_reference_decides() {
    let fresh = keep_true(
        "../orch-py/tests/fixtures/protocol.json",
        &corpus(),
        "the protocol's decisions changed: write the corpus afresh with ORCH_BLESS=1 (the bindings' tests replay it)",
    );
    // The corpus exercises every kind of decision.
    for needed in [
        "\"ran\"",
        "\"not_run:error\"",
        "\"not_run:input_required\"",
        "\"not_run:task\"",
        "\"not_run:malformed\"",
        "\"refused:needs_approval\"",
        "\"refused:rejected\"",
        "\"refused:out_of_sequence\"",
        "\"refused:broken_rule:small: ",
        "\"applied\"",
        "\"stale\"",
    ] {
        assert!(fresh.contains(needed), "the corpus never decides {needed}");
    }
}
