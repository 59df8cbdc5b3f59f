//! Orchestration inside a rig agent (`OrchHook`), against a local server speaking
//! OpenAI's chat completions: the misbehaving model scenarios — nothing disallowed
//! executes, the model is told why, the sequence completes in order within one user
//! turn — and what each model call offered and forced.

mod common;

use common::fake::{self, call, calls, text, Fake};
use orch_agent::{HookEvent, OrchHook, Policy, ToolChoice};
use rig_agent::AgentBuilder;
use rig_core::message::ToolName;
use rig_core::providers::openai::{OpenAIConfig, Route};
use rig_core::tool::{DynamicTool, ToolExecutionError, ToolOutput};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::Session;

/// The cognitive tools as rig tools; each logs its run and returns `name(input)`, or
/// fails when its input is `fail`.
fn rig_tools(log: &Arc<Mutex<Vec<String>>>) -> Vec<DynamicTool> {
    common::TOOLS
        .iter()
        .map(|name| {
            let log = Arc::clone(log);
            let name = *name;
            DynamicTool::new(
                ToolName::new(name).expect("a name"),
                format!("the {name} tool"),
                json!({"type": "object", "properties": {"input": {"type": "string"}}}),
                move |args: Value| {
                    let log = Arc::clone(&log);
                    Box::pin(async move {
                        if args["input"] == "fail" {
                            return Err(ToolExecutionError::network("the index is down"));
                        }
                        log.lock().expect("lock").push(name.to_owned());
                        Ok(ToolOutput::text(format!(
                            "{name}({})",
                            args["input"].as_str().unwrap_or("")
                        )))
                    })
                },
            )
        })
        .collect()
}

struct Run {
    executed: Vec<String>,
    events: Vec<HookEvent>,
    requests: Vec<Value>,
    answer: Result<String, String>,
    session: Session,
}

async fn run(fake: Fake, prompt: &str) -> Run {
    let base = fake.start().await;
    let model = OpenAIConfig::new("sk-test")
        .with_base_url(base)
        .with_route(Route::Chat)
        .client()
        .completion("fake-model");
    let log = Arc::new(Mutex::new(Vec::new()));
    let events = Arc::new(Mutex::new(Vec::new()));
    let session = Arc::new(Mutex::new(Session::new()));
    session.lock().expect("lock").on_user_message(prompt);
    let seen = Arc::clone(&events);
    let hook = OrchHook::new(Policy::new(common::TOOLS), Arc::clone(&session))
        .on_event(move |e| seen.lock().expect("lock").push(e.clone()));
    let agent = AgentBuilder::new(model)
        .preamble("You are the Cognitive Reasoner.")
        .dynamic_tools(rig_tools(&log))
        .add_hook(hook)
        .build();
    let answer = agent
        .prompt(prompt)
        .max_turns(12)
        .await
        .map(|r| r.output())
        .map_err(|e| e.to_string());
    let executed = log.lock().expect("lock").clone();
    let events = events.lock().expect("lock").clone();
    let session = *session.lock().expect("lock");
    Run {
        executed,
        events,
        requests: fake.requests(),
        answer,
        session,
    }
}

fn forced(body: &Value) -> Option<String> {
    body["tool_choice"]["function"]["name"]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test]
async fn a_misbehaving_model_cannot_break_the_sequence() {
    let fake = fake::misbehaving();
    let run = run(fake, "Research the impact of AI on jobs").await;
    assert_eq!(
        run.answer.as_deref(),
        Ok("AI changes jobs: see the analysis.")
    );
    assert_eq!(run.executed, ["search", "think", "reflect"]);
    assert_eq!(
        run.session.sequence_index(),
        3,
        "completed within one user turn"
    );
    // Only what ran is recorded: rig hands the hook refused calls as skipped results,
    // and they must not enter the session's history.
    let recorded: Vec<String> = run
        .session
        .history()
        .map(|h| match h {
            orch_runtime::HistoryEntry::Tool(t) => orch_runtime::ToolEnum::name(t).to_owned(),
            orch_runtime::HistoryEntry::Foreign => "(foreign)".to_owned(),
        })
        .collect();
    assert_eq!(recorded, ["search", "think", "reflect"]);

    // Every model call offered only the allowed tools and forced the expected one.
    assert_eq!(run.requests.len(), 9);
    let choices: Vec<Option<String>> = run.requests.iter().map(forced).collect();
    assert_eq!(
        choices,
        fake::MISBEHAVING_FORCED.map(|t| t.map(str::to_owned))
    );
    assert_eq!(fake::offered_openai(&run.requests[0]), ["search"]);
    assert_eq!(fake::offered_openai(&run.requests[5]), ["think"]);
    assert_eq!(
        fake::offered_openai(&run.requests[7]),
        ["search", "think", "reflect"]
    );
    assert_eq!(run.requests[7]["tool_choice"], "auto");

    // The model was told why.
    let results = fake::tool_results_openai(&run.requests[8]);
    assert!(
        results[0].contains("`think` was not run: the sequence of step `ResearchMode` expects `search` at position 0. Allowed now: search."),
        "{results:?}"
    );
    assert!(results[1].contains("`debate` was not run"), "{results:?}");
    assert!(
        results[2].contains("there is no tool `teleport`"),
        "{results:?}"
    );
    assert!(results[3].contains("search(AI jobs)"), "{results:?}");
    assert!(
        results[6].contains("`debate` was not run: not allowed in step `ResearchMode`."),
        "{results:?}"
    );
    assert!(
        run.requests[2]
            .to_string()
            .contains("requires calling `search` now"),
        "the text answer was met with the reminder: {}",
        run.requests[2]
    );

    // What the hook reported, in order.
    let refused: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match e {
            HookEvent::Refused { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(refused, ["think", "debate", "teleport", "debate"]);
    assert!(run.events.contains(&HookEvent::Reminded {
        tool: "search".into()
    }));
    let recorded: Vec<(&str, &str)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            HookEvent::Recorded { tool, outcome } => Some((tool.as_str(), *outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("search", "advanced"),
            ("think", "advanced"),
            ("reflect", "completed")
        ]
    );
    assert!(run.events.contains(&HookEvent::ModelCall {
        turn: 1,
        offered: vec!["search".into()],
        tool_choice: ToolChoice::Tool("search".into()),
    }));
}

/// rig validates a model turn's calls as a whole against the tools offered for it: a
/// turn with a call outside them runs none of its calls (rig answers the others "not
/// executed"; the hook gives the disallowed one its reason). The model then goes on
/// one call at a time and the sequence completes within the user turn.
#[tokio::test]
async fn several_calls_in_one_round_run_nothing_disallowed() {
    let fake = Fake::new([
        calls(&[("search", "{}"), ("think", "{}"), ("search", "{}")]),
        call("search", "{}"),
        call("think", "{}"),
        call("reflect", "{}"),
        text("done"),
    ]);
    let run = run(fake, "research it").await;
    assert_eq!(run.answer.as_deref(), Ok("done"));
    assert_eq!(run.executed, ["search", "think", "reflect"]);
    assert_eq!(run.session.sequence_index(), 3);
    let results = fake::tool_results_openai(&run.requests[1]);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[1]
            .contains("`think` was not run: the sequence of step `ResearchMode` expects `search`"),
        "{results:?}"
    );
    assert!(!results[0].contains("search("), "{results:?}");
}

#[tokio::test]
async fn invalid_arguments_are_not_executed() {
    let fake = Fake::new([
        call("search", "{not json"),
        call("search", r#"{"input": "again"}"#),
        call("think", "{}"),
        call("reflect", "{}"),
        text("sorry"),
    ]);
    let run = run(fake, "research it").await;
    assert_eq!(run.executed, ["search", "think", "reflect"]);
    let results = fake::tool_results_openai(&run.requests[1]);
    assert!(
        results[0].contains("`search` was not run: its arguments are not a JSON object"),
        "{results:?}"
    );
    assert_eq!(run.answer.as_deref(), Ok("sorry"));
}

/// A tool that fails did not run (the run protocol's rule, as MCP's `isError`): it is
/// not recorded, and the sequence still expects it.
#[tokio::test]
async fn a_tool_that_fails_is_not_recorded() {
    let fake = Fake::new([
        call("search", r#"{"input": "fail"}"#),
        call("think", "{}"),
        call("search", r#"{"input": "again"}"#),
        call("think", "{}"),
        text("done"),
    ]);
    let run = run(fake, "research it").await;
    assert_eq!(run.executed, ["search", "think"]);
    let recorded: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match e {
            HookEvent::Recorded { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, ["search", "think"]);
    let results = fake::tool_results_openai(&run.requests[2]);
    assert_eq!(results[0], "the index is down", "{results:?}");
    assert!(results[1].contains("expects `search`"), "{results:?}");
}
