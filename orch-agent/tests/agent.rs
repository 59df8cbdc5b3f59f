//! The agent loop with a scripted model that misbehaves: out-of-order, denied and
//! unknown tool calls, and a text answer when one tool is required. Nothing disallowed
//! executes, the model is told why, the sequence completes in order within one user
//! turn, and token usage adds up exactly.

use orch_agent::{Agent, ChatMessage, Planned, ScriptedModel, StopReason, ToolChoice};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::{Machine, Session, Step};

mod common;
use common::tools;

fn tool_results(conversation: &[ChatMessage]) -> Vec<String> {
    conversation
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
#[tokio::test]
async fn a_misbehaving_model_cannot_break_the_sequence() {
    let (registry, counts) = tools(&[]);
    let model = ScriptedModel::new([
        Planned::call("think", r#"{"input": "too early"}"#).usage(100, 10),
        Planned::text("I think the answer is obvious.").usage(110, 12),
        Planned::call("debate", "{}").usage(120, 5),
        Planned::call("teleport", "{}").usage(130, 5),
        Planned::call("search", r#"{"input": "AI jobs"}"#).usage(140, 8),
        Planned::call("think", r#"{"input": "analysis"}"#).usage(150, 9),
        Planned::call("reflect", r#"{"input": "summary"}"#).usage(160, 7),
        Planned::text("AI changes jobs: see the analysis.").usage(170, 40),
    ]);
    let probe = model.clone();
    let steps_seen = Arc::new(Mutex::new(Vec::new()));
    let seen = steps_seen.clone();
    let turns = Arc::new(Mutex::new(0));
    let t = turns.clone();
    let mut agent = Agent::<Machine, _>::new(model, registry)
        .instructions("You are the Cognitive Reasoner.")
        .max_rounds(cognitive_reasoner::MAX_ROUNDS.unwrap_or(10) as usize)
        .on_round_finish(move |report, session| {
            seen.lock()
                .unwrap()
                .push((report.number, session.step(), session.sequence_index()));
        })
        .on_turn_finish(move |_, _| *t.lock().unwrap() += 1);
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(
            &mut session,
            &mut conversation,
            "Research the impact of AI on jobs",
        )
        .await
        .unwrap();

    // Nothing disallowed executed; the allowed ones exactly once, in order.
    let counts = common::counts(&counts);
    assert_eq!(counts.get("debate"), None);
    assert_eq!(
        (counts["search"], counts["think"], counts["reflect"]),
        (1, 1, 1)
    );
    let executed: Vec<&str> = turn
        .rounds
        .iter()
        .flat_map(|s| &s.calls)
        .filter(|c| c.executed)
        .map(|c| c.call.name.as_str())
        .collect();
    assert_eq!(executed, ["search", "think", "reflect"]);
    assert_eq!(session.step(), Some(Step::ResearchMode));
    assert_eq!(
        session.sequence_index(),
        3,
        "the sequence completed within one user turn"
    );
    assert_eq!(turn.stop, StopReason::Answered);
    assert_eq!(turn.final_text, "AI changes jobs: see the analysis.");

    // The model was told why.
    let results = tool_results(&conversation);
    assert_eq!(results[0], "error: `think` was not run: the sequence of step `ResearchMode` expects `search` at position 0. Allowed now: search.");
    assert!(
        results[1]
            .contains("`debate` was not run: the sequence of step `ResearchMode` expects `search`"),
        "{}",
        results[1]
    );
    assert!(
        results[2].starts_with("error: there is no tool `teleport`. Allowed now: search."),
        "{}",
        results[2]
    );
    assert_eq!(results[3], "search(AI jobs)");
    assert!(conversation.iter().any(|m| matches!(m, ChatMessage::System { content } if content.contains("requires calling `search` now"))));

    // Offered tools and forced choices, per round (model call).
    let requests = probe.requests();
    let choices: Vec<ToolChoice> = requests.iter().map(|r| r.tool_choice.clone()).collect();
    let forced = |t: &str| ToolChoice::Tool(t.to_owned());
    assert_eq!(
        choices,
        [
            forced("search"),
            forced("search"),
            forced("search"),
            forced("search"),
            forced("search"),
            forced("think"),
            forced("reflect"),
            ToolChoice::Auto
        ]
    );
    let offered: Vec<Vec<String>> = requests
        .iter()
        .map(|r| r.tools.iter().map(|t| t.name.clone()).collect())
        .collect();
    assert_eq!(offered[5], ["think"]);
    assert_eq!(offered[7], ["search", "think", "reflect"]);
    // The system prompt shows the state after the latest transition.
    let system = |i: usize| match &requests[i].messages[0] {
        ChatMessage::System { content } => content.clone(),
        other => panic!("{other:?}"),
    };
    assert!(system(0).starts_with("You are the Cognitive Reasoner.\n\n## Orchestration\nActive step: ResearchMode — Research-based cognitive flow"), "{}", system(0));
    assert!(
        system(0)
            .contains("Sequence: search → think → reflect\nPosition: 1 of 3; next tool: search"),
        "{}",
        system(0)
    );
    assert!(
        system(5).contains("Position: 2 of 3; next tool: think"),
        "{}",
        system(5)
    );
    assert!(
        system(7).contains("the sequence is complete"),
        "{}",
        system(7)
    );

    // Token usage adds up exactly.
    let prompt: u64 = (0..8).map(|i| 100 + 10 * i).sum();
    let completion = 10 + 12 + 5 + 5 + 8 + 9 + 7 + 40;
    assert_eq!(
        (turn.usage.prompt, turn.usage.completion),
        (prompt, completion)
    );
    assert_eq!(
        (session.usage().prompt, session.usage().completion),
        (prompt, completion)
    );
    assert_eq!(
        turn.rounds.iter().map(|s| s.usage.total()).sum::<u64>(),
        prompt + completion
    );

    // Callbacks saw the state after each step.
    let seen = steps_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 8);
    assert_eq!(seen[4], (5, Some(Step::ResearchMode), 1));
    assert_eq!(*turns.lock().unwrap(), 1);
}

#[tokio::test]
async fn several_calls_in_one_step_are_checked_one_after_the_other() {
    let (registry, counts) = tools(&[]);
    let model = ScriptedModel::new([
        // search then think in one step: think is checked after search was recorded.
        Planned::call("search", "{}")
            .and_call("think", "{}")
            .and_call("search", "{}"),
        Planned::text("done"),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, registry);
    let mut session = Session::new();
    let mut conv = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conv, "research it")
        .await
        .unwrap();
    let calls = &turn.rounds[0].calls;
    assert!(calls[0].executed && calls[1].executed && !calls[2].executed);
    assert_eq!(calls[1].outcome, Some("advanced"));
    assert!(
        calls[2].result.contains("expects `reflect`"),
        "{}",
        calls[2].result
    );
    assert_eq!(common::counts(&counts)["search"], 1);
}

#[tokio::test]
async fn the_step_cap_ends_a_turn() {
    let (registry, _) = tools(&[]);
    let model = ScriptedModel::new(std::iter::repeat_n(Planned::call("debate", "{}"), 20));
    let mut agent = Agent::<Machine, _>::new(model, registry).max_rounds(4);
    let mut session = Session::new();
    let turn = agent
        .run_turn(&mut session, &mut Vec::new(), "research it")
        .await
        .unwrap();
    assert_eq!(turn.rounds.len(), 4);
    assert_eq!(turn.stop, StopReason::MaxRounds);
    assert!(turn
        .rounds
        .iter()
        .all(|s| s.calls.iter().all(|c| !c.executed)));
}

#[tokio::test]
async fn bad_arguments_are_not_executed() {
    let (registry, counts) = tools(&[]);
    let model = ScriptedModel::new([Planned::call("search", "{not json"), Planned::text("sorry")]);
    let mut agent = Agent::<Machine, _>::new(model, registry).max_rounds(2);
    let mut session = Session::new();
    let turn = agent
        .run_turn(&mut session, &mut Vec::new(), "research it")
        .await
        .unwrap();
    assert!(turn.rounds[0].calls[0].result.contains("not valid JSON"));
    assert!(common::counts(&counts).is_empty());
    assert_eq!(session.sequence_index(), 0);
}

#[tokio::test]
async fn a_missing_tool_blocks_the_sequence_and_the_prompt_says_so() {
    // The host has no `think`: after `search` the sequence waits for it.
    let (registry, _) = tools(&["think"]);
    let model = ScriptedModel::new([
        Planned::call("search", "{}"),
        Planned::text("I cannot continue."),
    ]);
    let probe = model.clone();
    let mut agent = Agent::<Machine, _>::new(model, registry);
    let mut session = Session::new();
    agent
        .run_turn(&mut session, &mut Vec::new(), "research it")
        .await
        .unwrap();
    let second = &probe.requests()[1];
    assert!(second.tools.is_empty());
    assert_eq!(second.tool_choice, ToolChoice::None);
    assert_eq!(
        session.blocked_on().map(|b| b.names().collect::<Vec<_>>()),
        Some(vec!["think"])
    );
    match &second.messages[0] {
        ChatMessage::System { content } => assert!(
            content.contains("waiting for `think`, which is not available"),
            "{content}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_templates_max_steps_is_the_default_cap() {
    // The cognitive reasoner template says `"options": {"maxSteps": 10}`.
    assert_eq!(cognitive_reasoner::MAX_ROUNDS, Some(10));
    let (registry, _) = tools(&[]);
    let model = ScriptedModel::new(std::iter::repeat_n(Planned::call("debate", "{}"), 30));
    let mut agent = Agent::<Machine, _>::new(model, registry);
    let turn = agent
        .run_turn(&mut Session::new(), &mut Vec::new(), "research it")
        .await
        .unwrap();
    assert_eq!(turn.rounds.len(), 10);
    assert_eq!(turn.stop, StopReason::MaxRounds);
}

/// A tool that returns an error did not run (the run protocol's rule, as MCP's
/// `isError`): nothing is recorded, and the sequence still expects it.
#[tokio::test]
async fn a_tool_that_fails_is_not_recorded() {
    let (mut registry, _) = tools(&["search"]);
    let params = serde_json::json!({"type": "object"});
    let attempts = Arc::new(Mutex::new(0));
    let seen = attempts.clone();
    registry.register("search", "fails once", params, move |_| {
        let seen = seen.clone();
        async move {
            let mut n = seen.lock().unwrap();
            *n += 1;
            match *n {
                1 => Err("the index is down".to_owned()),
                _ => Ok("results".to_owned()),
            }
        }
    });
    let model = ScriptedModel::new([
        Planned::call("search", "{}"),
        Planned::call("think", "{}"),
        Planned::call("search", "{}"),
        Planned::text("done"),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, registry);
    let mut session = Session::new();
    let turn = agent
        .run_turn(&mut session, &mut Vec::new(), "research it")
        .await
        .unwrap();
    let failed = &turn.rounds[0].calls[0];
    assert!(failed.executed && failed.outcome.is_none(), "{failed:?}");
    assert!(failed.result.contains("the index is down"));
    // Still expecting search: think is out of sequence.
    assert!(!turn.rounds[1].calls[0].executed);
    let retried = &turn.rounds[2].calls[0];
    assert_eq!(retried.outcome, Some("advanced"), "{retried:?}");
    assert_eq!(*attempts.lock().unwrap(), 2);
}

/// Two calls of one model response under one id: neither runs (an approval or a result
/// given for one could be taken for the other), and the model is told why.
#[tokio::test]
async fn calls_that_share_an_id_are_refused() {
    let (registry, log) = tools(&[]);
    let model = ScriptedModel::new([
        Planned::call("search", r#"{"input": "a"}"#)
            .with_id("dup")
            .and_call("search", r#"{"input": "b"}"#)
            .with_id("dup")
            .and_call("search", "{}"),
        Planned::text("done"),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, registry);
    let mut session = Session::new();
    let turn = agent
        .run_turn(&mut session, &mut Vec::new(), "research it")
        .await
        .unwrap();
    let calls = &turn.rounds[0].calls;
    for refused in &calls[..2] {
        assert!(!refused.executed, "{refused:?}");
        assert!(
            refused.result.contains("two tool calls the same id `dup`"),
            "{}",
            refused.result
        );
    }
    assert!(calls[2].executed, "a call with an id of its own runs");
    assert_eq!(common::counts(&log)["search"], 1);
}
