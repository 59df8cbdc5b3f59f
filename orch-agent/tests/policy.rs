//! The framework-neutral policy on its own: what a model call offers, which calls are
//! admitted or refused (and why), and recording — the rules the agent loop, and any
//! adapter for another agent framework, apply.

use orch_agent::{Policy, ToolChoice};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::{Session, Step};

/// The cognitive reasoner's tools, as a host has them, plus one the template does not
/// declare.
fn policy() -> Policy {
    Policy::new([
        "search",
        "think",
        "reflect",
        "compare",
        "critique",
        "brainstorm",
        "debate",
        "weather",
    ])
}

#[test]
fn a_research_turn_through_the_policy() {
    let policy = policy();
    let mut s = Session::new();
    policy.prepare(&mut s);
    s.on_user_message("Research the impact of AI on jobs");
    assert_eq!(s.step(), Some(Step::ResearchMode));

    for (expected, next) in [("search", "think"), ("think", "reflect"), ("reflect", "")] {
        let plan = policy.plan(&s);
        assert_eq!(plan.offered, [expected]);
        assert_eq!(
            plan.tool_choice,
            ToolChoice::Tool(expected.to_owned()),
            "forced"
        );
        // Out of order: refused with what the sequence expects, nothing changes.
        if !next.is_empty() {
            let refused = policy.admit(&s, next).unwrap_err();
            assert_eq!(refused.tool, next);
            assert!(
                refused
                    .reason
                    .contains(&format!("expects `{expected}` at position")),
                "{}",
                refused.reason
            );
            assert!(
                refused
                    .reason
                    .contains(&format!("Allowed now: {expected}.")),
                "{}",
                refused.reason
            );
        }
        policy
            .admit(&s, expected)
            .expect("the expected tool is admitted");
        let outcome = policy.record(&mut s, expected);
        assert_eq!(
            outcome,
            if next.is_empty() {
                "completed"
            } else {
                "advanced"
            }
        );
    }
    // After the sequence: the step's tools, the model chooses.
    let plan = policy.plan(&s);
    assert_eq!(plan.offered, ["search", "think", "reflect"]);
    assert_eq!(plan.tool_choice, ToolChoice::Auto);
    assert_eq!(s.step().map(|s| s.name()), Some("ResearchMode"));
}

#[test]
fn denied_unknown_and_foreign_tools_are_refused_with_reasons() {
    let policy = policy();
    let mut s = Session::new();
    policy.prepare(&mut s);
    s.on_user_message("Research this");
    policy.record(&mut s, "search");
    policy.record(&mut s, "think");
    policy.record(&mut s, "reflect");
    // A tool the step does not allow.
    let refused = policy.admit(&s, "debate").unwrap_err();
    assert!(
        refused
            .reason
            .starts_with("error: `debate` was not run: not allowed in step `ResearchMode`"),
        "{}",
        refused.reason
    );
    assert!(
        refused
            .reason
            .contains("Allowed now: search, think, reflect."),
        "{}",
        refused.reason
    );
    // A tool the host does not have.
    let refused = policy.admit(&s, "delete_everything").unwrap_err();
    assert!(
        refused
            .reason
            .starts_with("error: there is no tool `delete_everything`."),
        "{}",
        refused.reason
    );
    // A host tool the template does not declare: judged by the step's patterns
    // (ResearchMode lists its tools, so not allowed).
    assert!(policy.admit(&s, "weather").is_err());
    // The default step allows everything the host has, declared or not.
    let mut fresh = Session::new();
    policy.prepare(&mut fresh);
    assert_eq!(policy.plan(&fresh).offered.len(), 8);
    assert!(policy.admit(&fresh, "weather").is_ok());
}

#[test]
fn a_host_without_the_expected_tool_offers_nothing() {
    let policy = Policy::new(["think", "reflect"]);
    let mut s = Session::new();
    policy.prepare(&mut s);
    s.on_user_message("Research this");
    let plan = policy.plan(&s);
    assert!(plan.offered.is_empty());
    assert_eq!(plan.tool_choice, ToolChoice::None);
    let refused = policy.admit(&s, "think").unwrap_err();
    assert!(
        refused.reason.contains("expects `search`"),
        "{}",
        refused.reason
    );
    assert!(
        refused.reason.contains("No tool is allowed now."),
        "{}",
        refused.reason
    );
}
