//! orch's agent loop over genai (`GenaiModel`), against a local server speaking
//! OpenAI's chat completions and one speaking Anthropic's messages: the misbehaving
//! model scenarios — nothing disallowed executes, the model is told why, the sequence
//! completes in order within one user turn.

mod common;

use common::fake::{self, call, calls, text, Fake};
use genai::adapter::AdapterKind;
use orch_agent::{Agent, GenaiModel, StopReason};
use serde_json::Value;

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::{Machine, Session};

async fn agent(fake: &Fake, kind: AdapterKind) -> Agent<Machine, GenaiModel> {
    let base = fake.start().await;
    let model =
        GenaiModel::at(kind, &base, Some("sk-test".into()), "fake-model").expect("a client");
    let (tools, _) = common::tools(&[]);
    Agent::<Machine, _>::new(model, tools)
}

fn forced(body: &Value, kind: AdapterKind) -> Option<String> {
    match kind {
        AdapterKind::Anthropic => (body["tool_choice"]["type"] == "tool").then(|| {
            body["tool_choice"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        }),
        _ => body["tool_choice"]["function"]["name"]
            .as_str()
            .map(str::to_owned),
    }
}

fn offered(body: &Value, kind: AdapterKind) -> Vec<String> {
    match kind {
        AdapterKind::Anthropic => body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        _ => fake::offered_openai(body),
    }
}

/// The tool results the last request carried (OpenAI: `tool` messages; Anthropic:
/// `tool_result` blocks in user messages).
fn tool_results(body: &Value, kind: AdapterKind) -> Vec<String> {
    match kind {
        AdapterKind::Anthropic => body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["type"] == "tool_result")
            .map(|c| match &c["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                other => other.to_string(),
            })
            .collect(),
        _ => fake::tool_results_openai(body),
    }
}

async fn misbehaving_model(kind: AdapterKind) {
    let fake = fake::misbehaving();
    let base = fake.start().await;
    let model =
        GenaiModel::at(kind, &base, Some("sk-test".into()), "fake-model").expect("a client");
    let (tools, log) = common::tools(&[]);
    let mut agent = Agent::<Machine, _>::new(model, tools);
    let mut session = Session::new();
    let turn = agent
        .run_turn(
            &mut session,
            &mut Vec::new(),
            "Research the impact of AI on jobs",
        )
        .await
        .expect("the turn runs");
    assert_eq!(*log.lock().expect("lock"), ["search", "think", "reflect"]);
    assert_eq!(
        session.sequence_index(),
        3,
        "completed within one user turn"
    );
    assert_eq!(turn.stop, StopReason::Answered);
    assert_eq!(turn.final_text, "AI changes jobs: see the analysis.");

    let requests = fake.requests();
    assert_eq!(requests.len(), 9);
    let choices: Vec<Option<String>> = requests.iter().map(|r| forced(r, kind)).collect();
    assert_eq!(
        choices,
        fake::MISBEHAVING_FORCED.map(|t| t.map(str::to_owned))
    );
    assert_eq!(offered(&requests[0], kind), ["search"]);
    assert_eq!(offered(&requests[5], kind), ["think"]);
    assert_eq!(offered(&requests[7], kind), ["search", "think", "reflect"]);
    // The model was told why, in the tool results of the next requests.
    let results = tool_results(&requests[8], kind);
    assert_eq!(
        results[0],
        "error: `think` was not run: the sequence of step `ResearchMode` expects `search` at position 0. Allowed now: search."
    );
    assert!(
        results[1].contains("`debate` was not run"),
        "{}",
        results[1]
    );
    assert!(
        results[2].starts_with("error: there is no tool `teleport`."),
        "{}",
        results[2]
    );
    assert_eq!(results[3], "search(AI jobs)");
    assert!(
        results[6].starts_with("error: `debate` was not run: not allowed in step `ResearchMode`."),
        "{}",
        results[6]
    );
    // The text answered while `search` was forced got the reminder.
    let reminded = requests[2]
        .to_string()
        .contains("requires calling `search` now");
    assert!(reminded, "{}", requests[2]);
    // Usage as the server reported it, both protocols: 100 + n and 10 + n.
    assert_eq!(
        (session.usage().prompt, session.usage().completion),
        (
            (1..=9).map(|n| 100 + n).sum(),
            (1..=9).map(|n| 10 + n).sum()
        )
    );
}

#[tokio::test]
async fn misbehaving_model_over_openai_chat_completions() {
    misbehaving_model(AdapterKind::OpenAI).await;
}

#[tokio::test]
async fn misbehaving_model_over_anthropic_messages() {
    misbehaving_model(AdapterKind::Anthropic).await;
}

#[tokio::test]
async fn several_calls_in_one_round_are_checked_one_after_the_other() {
    for kind in [AdapterKind::OpenAI, AdapterKind::Anthropic] {
        let fake = Fake::new([
            calls(&[("search", "{}"), ("think", "{}"), ("search", "{}")]),
            call("reflect", "{}"),
            text("done"),
        ]);
        let mut agent = agent(&fake, kind).await;
        let mut session = Session::new();
        let turn = agent
            .run_turn(&mut session, &mut Vec::new(), "research it")
            .await
            .expect("the turn runs");
        let c = &turn.rounds[0].calls;
        assert!(c[0].executed && c[1].executed && !c[2].executed, "{kind:?}");
        assert!(c[2].result.contains("expects `reflect`"), "{}", c[2].result);
        assert_eq!(session.sequence_index(), 3, "{kind:?}");
        assert_eq!(turn.stop, StopReason::Answered);
    }
}

#[tokio::test]
async fn invalid_arguments_are_not_executed() {
    let fake = Fake::new([call("search", "{not json"), text("sorry")]);
    let mut agent = agent(&fake, AdapterKind::OpenAI).await.max_rounds(2);
    let mut session = Session::new();
    let turn = agent
        .run_turn(&mut session, &mut Vec::new(), "research it")
        .await
        .expect("the turn runs");
    let c = &turn.rounds[0].calls[0];
    assert!(!c.executed);
    assert!(c.result.contains("not valid JSON"), "{}", c.result);
    assert_eq!(session.sequence_index(), 0);
    let results = fake::tool_results_openai(&fake.requests()[1]);
    assert!(results[0].contains("not valid JSON"), "{results:?}");
}

mod approvals {
    //! The agent loop over genai pauses on a gated call (semantics §13) and resumes with
    //! the human's answer, over both wire formats.
    use super::common::fake::{call, text, Fake};
    use genai::adapter::AdapterKind;
    use orch_agent::{Agent, Decision, GenaiModel, StopReason, ToolRegistry};
    use std::sync::{Arc, Mutex};

    orch_macros::orchestration!(file = "../examples/agents/refund-desk/template.json");
    use refund_desk::{Machine, Session};

    fn tools(log: &Arc<Mutex<Vec<String>>>) -> ToolRegistry {
        let mut reg = ToolRegistry::new();
        for name in ["lookup_order", "issue_refund", "send_email"] {
            let l = Arc::clone(log);
            let schema = serde_json::json!({"type": "object"});
            reg.register(name, name, schema, move |_| {
                let l = Arc::clone(&l);
                async move {
                    l.lock().unwrap().push(name.to_owned());
                    Ok(format!("{name} done"))
                }
            });
        }
        reg
    }

    async fn pause_and_approve(kind: AdapterKind) {
        let fake = Fake::new([
            call("lookup_order", r#"{"order": "A-1"}"#),
            call("issue_refund", r#"{"order": "A-1", "amount": 10}"#),
            call("send_email", "{}"),
            text("Refunded."),
        ]);
        let base = fake.start().await;
        let model =
            GenaiModel::at(kind, &base, Some("sk-test".into()), "fake-model").expect("a client");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut agent = Agent::<Machine, _>::new(model, tools(&log));
        let mut session = Session::new();
        let mut conversation = Vec::new();
        let turn = agent
            .run_turn(&mut session, &mut conversation, "refund A-1")
            .await
            .unwrap();
        assert_eq!(turn.stop, StopReason::NeedsApproval, "{kind:?}");
        assert_eq!(*log.lock().unwrap(), ["lookup_order"], "{kind:?}");
        let pending = turn.pending.unwrap();
        let turn = agent
            .resume_turn(&mut session, &mut conversation, pending, Decision::Approve)
            .await
            .unwrap();
        assert_eq!(turn.stop, StopReason::Answered, "{kind:?}");
        assert_eq!(turn.final_text, "Refunded.");
        assert_eq!(
            *log.lock().unwrap(),
            ["lookup_order", "issue_refund", "send_email"],
            "{kind:?}"
        );
    }

    #[tokio::test]
    async fn a_gated_call_pauses_and_resumes_over_openai_and_anthropic() {
        pause_and_approve(AdapterKind::OpenAI).await;
        pause_and_approve(AdapterKind::Anthropic).await;
    }
}
