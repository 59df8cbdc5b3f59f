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

/// The same rules over a template loaded at run time (a `DynSession`, as `orch mcp`
/// uses): every plan, admission, refusal text and outcome equals the typed session's,
/// on a long deterministic mix of messages and tool calls, allowed or not.
#[test]
fn run_time_sessions_get_the_same_answers() {
    let source = include_str!("../../examples/agents/cognitive-reasoner/template.json");
    let compiled = orch_codegen::compile_json(source, None);
    let machine = compiled.to_machine().expect("the template compiles");
    let policy = policy();
    let mut typed = Session::new();
    let mut dynamic = orch_runtime::dynamic::DynSession::new(&machine);
    policy.prepare(&mut typed);
    policy.prepare(&mut dynamic);
    let messages = [
        "Research the impact of AI on jobs",
        "let us brainstorm",
        "compare these two",
        "debate it",
        "hello",
    ];
    let tools = policy.host_tools().to_vec();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..2_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        assert_eq!(policy.plan(&typed), policy.plan(&dynamic), "round {round}");
        if x.is_multiple_of(5) {
            let m = messages[(x / 5) as usize % messages.len()];
            typed.on_user_message(m);
            dynamic.on_user_message(m);
            continue;
        }
        let tool = &tools[(x >> 8) as usize % tools.len()];
        let (a, b) = (policy.admit(&typed, tool), policy.admit(&dynamic, tool));
        assert_eq!(a, b, "round {round}: {tool}");
        // Admitted calls run; a refused one runs one time in four (a host that does not
        // enforce), so recording sees out-of-order tools too.
        if a.is_ok() || (x >> 20).is_multiple_of(4) {
            assert_eq!(
                policy.record(&mut typed, tool),
                policy.record(&mut dynamic, tool),
                "round {round}: {tool}"
            );
        }
    }
}

/// A gated tool (semantics §13) is offered to the model but refused as `NeedsApproval`
/// until the loop can ask a human: it never runs through the policy (fail closed), for
/// typed and run-time sessions alike.
#[test]
fn gated_tools_are_offered_but_refused_until_approved() {
    let source = r#"{"agentId": "shop", "tools": ["browse", "pay"], "orchestration": {
        "approve": ["pay"],
        "steps": [{"name": "Shop", "isDefault": true}]}}"#;
    let compiled = orch_codegen::compile_json(source, None);
    let machine = compiled.to_machine().expect("the template compiles");
    let policy = Policy::new(["browse", "pay"]);
    let mut session = orch_runtime::dynamic::DynSession::new(&machine);
    policy.prepare(&mut session);
    let offered = policy.plan(&session).offered;
    assert!(offered.iter().any(|t| t == "pay"), "{offered:?}");
    let refusal = policy.admit(&session, "pay").unwrap_err();
    assert_eq!(refusal.kind, orch_agent::RefusalKind::NeedsApproval);
    assert_eq!(refusal.kind.as_str(), "needs_approval");
    assert!(
        refusal
            .reason
            .contains("needs a human's approval of this call in step `Shop`"),
        "{}",
        refusal.reason
    );
    assert!(policy.admit(&session, "browse").is_ok());
    // The typed session of the same template answers alike.
    let mut typed = shop::Session::new();
    policy.prepare(&mut typed);
    assert_eq!(policy.plan(&typed), policy.plan(&session));
    assert_eq!(policy.admit(&typed, "pay").unwrap_err(), refusal);
}

orch_macros::orchestration! {
    machine shop {
        tools: [browse, pay],
        approve: [pay];
        default step Shop;
    }
}

/// A shop whose `pay` needs a human's approval of each call, compiled at run time.
fn gated_shop() -> orch_runtime::dynamic::DynMachine {
    let source = r#"{"agentId": "shop", "tools": ["browse", "pay"], "orchestration": {
        "approve": ["pay"],
        "steps": [{"name": "Shop", "isDefault": true}]}}"#;
    orch_codegen::compile_json(source, None)
        .to_machine()
        .expect("the template compiles")
}

/// `admit_gated`, the one admission of hosts that ask humans themselves (`orch mcp`,
/// `orch policy`): a gated call is asked about (a question with an identity, held),
/// approved once, consumed; a rejection is held; an answer that applies to no question
/// held is refused as stale and asks nothing; a host that cannot ask refuses without
/// holding anything.
#[test]
fn admit_gated_asks_answers_and_consumes() {
    use orch_agent::protocol::Question;
    use orch_agent::{Gate, Gated, RefusalKind};
    use orch_runtime::CallDigest;
    use std::time::Duration;
    let machine = gated_shop();
    let policy = Policy::new(["browse", "pay"]);
    let mut session = orch_runtime::dynamic::DynSession::new(&machine);
    policy.prepare(&mut session);
    let pay = CallDigest::of_json("pay", &serde_json::json!({"amount": 5}));
    let ttl = Duration::from_secs(60);
    let ask = Gate::Ask { run: "r1", ttl };
    let answer = |question: &Question, approved: bool| Gate::Answer {
        run: "r1",
        ticket: question.ticket(),
        approved,
    };
    let stale = |gated: &Gated| {
        matches!(gated, Gated::Refused { refusal, question: None, changed: false }
            if refusal.kind == RefusalKind::StaleAnswer)
    };
    let asked = |gated: Gated| match gated {
        Gated::Refused {
            question: Some(q),
            changed: true,
            ..
        } => q,
        other => panic!("{other:?}"),
    };

    // Cannot ask: refused, nothing held.
    let refused = policy.admit_gated(&mut session, "pay", &judged(&pay), Gate::Refuse);
    let Gated::Refused {
        refusal,
        question,
        changed,
    } = refused
    else {
        panic!("{refused:?}")
    };
    assert_eq!(
        (refusal.kind, question, changed),
        (RefusalKind::NeedsApproval, None, false)
    );
    // Asked: held, with an identity.
    let q1 = asked(policy.admit_gated(&mut session, "pay", &judged(&pay), ask));
    assert_eq!(session.approval().map(|a| a.question), Some(q1.id()));
    assert_eq!((q1.run.as_str(), q1.tool.as_str()), ("r1", "pay"));
    // The answer in another run applies to nothing, and asks nothing.
    let foreign = Gate::Answer {
        run: "r2",
        ticket: q1.ticket(),
        approved: true,
    };
    assert!(stale(&policy.admit_gated(
        &mut session,
        "pay",
        &judged(&pay),
        foreign
    )));
    // Approved: admitted once, the approval consumed.
    assert_eq!(
        policy.admit_gated(&mut session, "pay", &judged(&pay), answer(&q1, true)),
        Gated::Admitted { changed: true }
    );
    // The same answer again: stale, refused, nothing asked.
    let replay = policy.admit_gated(&mut session, "pay", &judged(&pay), answer(&q1, true));
    assert!(stale(&replay), "{replay:?}");
    assert_eq!(session.approval(), None);
    // A new question about the very same call is not answered by the old answer.
    let q2 = asked(policy.admit_gated(&mut session, "pay", &judged(&pay), ask));
    assert_ne!(q2.id(), q1.id());
    assert!(stale(&policy.admit_gated(
        &mut session,
        "pay",
        &judged(&pay),
        answer(&q1, true)
    )));
    assert_eq!(
        policy.admit_gated(&mut session, "pay", &judged(&pay), answer(&q2, true)),
        Gated::Admitted { changed: true }
    );
    // An expired question is not answered either.
    let q3 = asked(policy.admit_gated(
        &mut session,
        "pay",
        &judged(&pay),
        Gate::Ask {
            run: "r1",
            ttl: Duration::ZERO,
        },
    ));
    assert!(stale(&policy.admit_gated(
        &mut session,
        "pay",
        &judged(&pay),
        answer(&q3, true)
    )));
    // Ungated tools pass without changing anything.
    let browse = CallDigest::of_json("browse", &serde_json::json!({}));
    assert_eq!(
        policy.admit_gated(&mut session, "browse", &judged(&browse), ask),
        Gated::Admitted { changed: false }
    );
    // Asked and rejected: the rejection is held, and the same call refused as rejected.
    let q4 = asked(policy.admit_gated(&mut session, "pay", &judged(&pay), ask));
    let rejected = policy.admit_gated(&mut session, "pay", &judged(&pay), answer(&q4, false));
    let Gated::Refused {
        refusal, changed, ..
    } = rejected
    else {
        panic!("{rejected:?}")
    };
    assert_eq!((refusal.kind, changed), (RefusalKind::Rejected, true));
    let again = policy.admit_gated(&mut session, "pay", &judged(&pay), ask);
    assert!(
        matches!(&again, Gated::Refused { refusal, question: None, changed: false } if refusal.kind == RefusalKind::Rejected),
        "{again:?}"
    );
}

/// `Policy::ask` / `Policy::answer` (the agent loop's and the rig hook's approvals): a
/// decision applies to the question it was given for, once — submitted twice, or after
/// the same call was asked about anew, it applies to nothing.
#[test]
fn an_answer_applies_once_and_only_to_its_own_question() {
    use orch_agent::{Decision, ToolCall};
    let machine = gated_shop();
    let policy = Policy::new(["browse", "pay"]);
    let mut session = orch_runtime::dynamic::DynSession::new(&machine);
    policy.prepare(&mut session);
    let call = ToolCall {
        id: "c1".into(),
        name: "pay".into(),
        arguments: r#"{"order": 7}"#.into(),
    };
    let first = policy.ask(&mut session, call.clone(), "needs approval".into());
    assert!(policy.answer(&mut session, &first, &Decision::Approve));
    assert!(
        !policy.answer(&mut session, &first, &Decision::Approve),
        "twice"
    );
    assert!(policy
        .admit_call(&mut session, "pay", &judged(&first.digest))
        .is_ok());
    // The same call, asked about again: the first decision does not answer it.
    let second = policy.ask(&mut session, call, "needs approval".into());
    assert_eq!(second.digest, first.digest);
    assert!(!policy.answer(&mut session, &first, &Decision::Approve));
    assert!(policy
        .admit_call(&mut session, "pay", &judged(&first.digest))
        .is_err());
    assert!(policy.answer(&mut session, &second, &Decision::Approve));
    assert!(policy
        .admit_call(&mut session, "pay", &judged(&second.digest))
        .is_ok());
}

/// The call as the policy judges it: these templates have no rules on arguments, so
/// the arguments are never read and the digest alone identifies the call.
fn judged(call: &orch_runtime::CallDigest) -> orch_runtime::Call<'static> {
    orch_runtime::Call::new(*call, "")
}
