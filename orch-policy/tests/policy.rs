//! The policy server driven over gRPC as agentgateway drives it, runs in memory: the
//! workflow's decisions in both phases, the misbehaving-model scenarios, malformed
//! requests, lost responses, approvals and `tools/list` filtering.

use orch_policy::wire::authorization_error::Code;
use orch_policy::{Options, PolicyServer};
use orch_store::MemoryStore;
use orch_test_support::ext_mcp::*;
use serde_json::json;
use std::time::Duration;

async fn refund_line(options: Options) -> Gateway {
    let url = start(REFUND_LINE, MemoryStore::new(), options).await;
    Gateway::connect(&url, "alice").await
}

#[tokio::test]
async fn a_serial_workflow_passes_in_order_and_is_refused_out_of_order() {
    let mut gw = refund_line(Options::default()).await;
    // Help: the refund is not allowed yet, and the model is told what is.
    let refused = gw.call("issue_refund", json!({"order": 7})).await;
    assert_eq!(refused.code(), Code::PermissionDenied);
    let reason = &refused.error().reason;
    assert!(
        reason.starts_with("error: `issue_refund` was not run:"),
        "{reason}"
    );
    assert!(
        reason.contains("lookup_order"),
        "says what is allowed now: {reason}"
    );
    let data = refused.data();
    assert_eq!(data["refusal"]["tool"], "issue_refund");
    assert_eq!(data["refusal"]["step"], "Help");
    assert_eq!(data["refusal"]["allowed"], json!(["lookup_order"]));
    assert_eq!(data["refusal"]["message"], json!(reason));

    gw.run_tool("lookup_order").await.unwrap();
    // Refund: the sequence expects the refund before the email.
    let early = gw.call("send_email", json!({})).await;
    assert_eq!(early.code(), Code::PermissionDenied);
    assert_eq!(early.data()["refusal"]["expected"], json!(["issue_refund"]));
    assert_eq!(early.data()["refusal"]["reason"], "out_of_sequence");
    gw.run_tool("issue_refund").await.unwrap();
    gw.run_tool("send_email").await.unwrap();
    gw.run_tool("close_ticket").await.unwrap();

    // Another run is untouched by Alice's.
    let mut bob = gw.for_run("bob");
    assert_eq!(
        bob.call("send_email", json!({})).await.code(),
        Code::PermissionDenied
    );
}

#[tokio::test]
async fn misbehaving_models_never_get_a_disallowed_call_through() {
    let mut gw = refund_line(Options::default()).await;
    // A tool the template does not declare and no pattern allows.
    let unknown = gw.call("format_disk", json!({})).await;
    assert_eq!(unknown.code(), Code::PermissionDenied);
    assert!(unknown.error().reason.contains("format_disk"));
    // A foreign tool the step's patterns allow, and one they deny.
    gw.run_tool("kb_search").await.unwrap();
    let denied = gw.call("kb_admin_wipe", json!({})).await;
    assert_eq!(denied.code(), Code::PermissionDenied);
    // A declared tool of another step.
    assert_eq!(
        gw.call("send_email", json!({})).await.code(),
        Code::PermissionDenied
    );
    // Arguments that are not a JSON object, params that are not JSON: INVALID, not passed.
    let bad_args = gw.call("lookup_order", json!("order 7")).await;
    assert_eq!(bad_args.code(), Code::Invalid);
    assert!(bad_args
        .error()
        .reason
        .contains("`arguments` is not a JSON object"));
    let not_json = gw
        .request_raw(
            "tools/call",
            Some(b"{\"name\": \"lookup_order\", ".to_vec()),
        )
        .await;
    assert_eq!(not_json.code(), Code::Invalid);
    assert!(
        not_json.error().reason.contains("not JSON"),
        "{:?}",
        not_json.error()
    );
    // None of that changed the run: the refund is still out of order, the lookup allowed.
    assert!(!gw.call("issue_refund", json!({})).await.is_admitted());
    gw.run_tool("lookup_order").await.unwrap();
}

#[tokio::test]
async fn malformed_requests_are_invalid_with_a_clear_reason() {
    let mut gw = refund_line(Options {
        max_params_bytes: 1024,
        ..Options::default()
    })
    .await;
    let cases: Vec<(Option<Vec<u8>>, &str)> = vec![
        (None, "without params"),
        (Some(b"[1, 2]".to_vec()), "not a JSON object"),
        (Some(br#"{"arguments": {}}"#.to_vec()), "have no `name`"),
        (Some(br#"{"name": 42}"#.to_vec()), "`name` is not a string"),
        (Some(br#"{"name": ""}"#.to_vec()), "`name` is empty"),
        (Some(b"\xff\xfe".to_vec()), "not JSON"),
        (
            Some(
                json!({"name": "lookup_order", "arguments": {"blob": "x".repeat(2000)}})
                    .to_string()
                    .into_bytes(),
            ),
            "exceed orch policy's limit of 1024 bytes",
        ),
        (
            Some(
                json!({"name": "lookup_order", "requestState": 7})
                    .to_string()
                    .into_bytes(),
            ),
            "`requestState` is not a string",
        ),
        // Deeper than serde_json's recursion limit: an error, not a stack overflow.
        (
            Some(format!("{}{}", "[".repeat(300), "]".repeat(300)).into_bytes()),
            "not JSON",
        ),
    ];
    for (params, says) in cases {
        let checked = gw.request_raw("tools/call", params.clone()).await;
        assert_eq!(checked.code(), Code::Invalid, "{params:?}");
        assert!(
            checked.error().reason.contains(says),
            "{:?} should say {says:?}",
            checked.error().reason
        );
    }
    // Results the upstream sends back malformed are INVALID too.
    for (result, says) in [
        (json!([]), "not a JSON object"),
        (
            json!({"content": [], "isError": "yes"}),
            "`isError` is not a boolean",
        ),
        (json!({}), "no `content`"),
        (json!({"foo": 1}), "no `content`"),
    ] {
        match gw.respond(None, result).await {
            Answered::Rejected(Code::Invalid, reason) => assert!(reason.contains(says), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
    match gw.response("tools/list", None, json!({"items": []})).await {
        Answered::Rejected(Code::Invalid, reason) => assert!(reason.contains("no `tools` array")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn other_methods_pass_in_both_phases() {
    let mut gw = refund_line(Options::default()).await;
    for method in ["prompts/get", "resources/read", "initialize", "tools/list"] {
        let checked = gw
            .request_raw(method, Some(b"{\"name\": \"x\"}".to_vec()))
            .await;
        assert!(
            matches!(checked, Checked::Admitted(None, None)),
            "{method}: {checked:?}"
        );
    }
    let answered = gw
        .response("prompts/get", None, json!({"messages": []}))
        .await;
    assert_eq!(answered, Answered::Pass);
}

#[tokio::test]
async fn a_request_without_a_run_is_refused_and_the_run_key_is_configurable() {
    let url = start(REFUND_LINE, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "alice").await;
    gw.run = None;
    let refused = gw.call("lookup_order", json!({})).await;
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        refused
            .error()
            .reason
            .contains("`metadata_context` has no `run`"),
        "{:?}",
        refused.error()
    );
    // A run name that is not a string is refused too.
    gw.run = Some(String::new());
    let empty = gw.call("lookup_order", json!({})).await;
    assert!(
        empty.error().reason.contains("1 to 512 bytes"),
        "{:?}",
        empty.error()
    );
}

#[tokio::test]
async fn a_list_without_a_run_is_refused() {
    let url = start(REFUND_LINE, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "alice").await;
    gw.run = None;
    let answered = gw.response("tools/list", None, json!({"tools": []})).await;
    assert!(
        matches!(answered, Answered::Rejected(Code::PermissionDenied, _)),
        "{answered:?}"
    );
}

#[tokio::test]
async fn the_run_key_can_be_another_metadata_key() {
    let url = start(
        REFUND_LINE,
        MemoryStore::new(),
        Options {
            run_key: "tenant_user".into(),
            ..Options::default()
        },
    )
    .await;
    let mut gw = Gateway::connect(&url, "alice").await;
    let refused = gw.call("lookup_order", json!({})).await;
    assert!(
        refused.error().reason.contains("no `tenant_user`"),
        "{:?}",
        refused.error()
    );
    gw.run_key = "tenant_user".into();
    gw.run_tool("lookup_order").await.unwrap();
}

#[tokio::test]
async fn an_error_result_records_nothing_and_frees_the_run() {
    let mut gw = refund_line(Options::default()).await;
    let token = gw.call("lookup_order", json!({})).await.token();
    assert_eq!(
        gw.respond(token.as_deref(), error_result()).await,
        Answered::Pass
    );
    // Still in Help: the lookup did not count, and the run is free at once.
    assert!(!gw.call("issue_refund", json!({})).await.is_admitted());
    gw.run_tool("lookup_order").await.unwrap();
    gw.run_tool("issue_refund").await.unwrap();
}

#[tokio::test]
async fn without_a_token_the_response_falls_back_to_the_runs_one_call_in_flight() {
    let mut gw = refund_line(Options::default()).await;
    assert!(gw.call("lookup_order", json!({})).await.is_admitted());
    assert_eq!(gw.respond(None, ok_result()).await, Answered::Pass);
    gw.run_tool("issue_refund").await.unwrap();
    // A result with no call in flight is withheld (the request phase was not asked).
    match gw.respond(None, ok_result()).await {
        Answered::Rejected(Code::PermissionDenied, reason) => {
            assert!(
                reason.contains("no call of this workflow run is in flight"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A token that is not one orch issued is INVALID.
    match gw.respond(Some("not-a-token"), ok_result()).await {
        Answered::Rejected(Code::Invalid, _) => {}
        other => panic!("{other:?}"),
    }
}

/// [`REFUND_LINE`] with what its lost results mean (`lostResults`, semantics §15).
fn refund_line_losing(lost: &str) -> String {
    REFUND_LINE.replace(
        r#""orchestration": {"#,
        &format!(r#""orchestration": {{ "lostResults": {lost},"#),
    )
}

async fn losing<S: orch_store::SessionStore + 'static>(lost: &str, store: S) -> Gateway {
    let options = Options {
        lease: Duration::from_millis(300),
        busy_wait: Duration::from_millis(50),
        ..Options::default()
    };
    let url = start(&refund_line_losing(lost), store, options).await;
    Gateway::connect(&url, "alice").await
}

#[tokio::test]
async fn a_lost_result_of_a_retry_tool_counts_as_not_run() {
    let mut gw = losing(r#"{"retry": ["*"]}"#, MemoryStore::new()).await;
    let lost = gw.call("lookup_order", json!({})).await.token();
    // While it holds, another call of the run waits, then is refused as busy.
    let busy = gw.call("lookup_order", json!({})).await;
    assert_eq!(busy.code(), Code::ResourceExhausted);
    assert!(
        busy.error().reason.contains("in flight"),
        "{:?}",
        busy.error()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Lapsed: the lookup never counted, so the refund is still refused...
    assert!(!gw.call("issue_refund", json!({})).await.is_admitted());
    // ... and the lost call's late result, settled already, is withheld.
    match gw.respond(lost.as_deref(), ok_result()).await {
        Answered::Rejected(Code::PermissionDenied, reason) => {
            assert!(reason.contains("lapsed"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    gw.run_tool("lookup_order").await.unwrap();
    gw.run_tool("issue_refund").await.unwrap();
}

#[tokio::test]
async fn a_lost_result_of_a_ran_tool_counts_as_run() {
    let mut gw = losing(r#"{"ran": ["lookup_order"]}"#, MemoryStore::new()).await;
    let lost = gw.call("lookup_order", json!({})).await.token();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Lapsed: the lookup counts as run, so the refund is admitted.
    gw.run_tool("issue_refund").await.unwrap();
    match gw.respond(lost.as_deref(), ok_result()).await {
        Answered::Rejected(Code::PermissionDenied, reason) => {
            assert!(reason.contains("lapsed"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_lost_result_holds_the_run_until_its_own_result_comes() {
    // No list names issue_refund: held, the safe default.
    let mut gw = losing(r#"{"retry": ["lookup_order"]}"#, MemoryStore::new()).await;
    gw.run_tool("lookup_order").await.unwrap();
    let lost = gw.call("issue_refund", json!({"order": 7})).await.token();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Every call of the run is refused while nobody knows whether the refund ran.
    for tool in ["issue_refund", "send_email", "lookup_order"] {
        let held = gw.call(tool, json!({})).await;
        assert_eq!(held.code(), Code::PermissionDenied, "{tool}");
        assert_eq!(held.data()["refusal"]["reason"], "outcome_unknown");
        assert!(
            held.error()
                .reason
                .contains("`issue_refund` must not run twice"),
            "{:?}",
            held.error()
        );
    }
    // Its own result, late, resolves it: the refund ran, and the sequence goes on.
    assert_eq!(
        gw.respond(lost.as_deref(), ok_result()).await,
        Answered::Pass
    );
    assert!(!gw.call("issue_refund", json!({})).await.is_admitted());
    gw.run_tool("send_email").await.unwrap();
}

#[tokio::test]
async fn an_operator_resolves_a_held_run() {
    let store = Shared::default();
    let mut gw = losing("{}", store.clone()).await;
    gw.run_tool("lookup_order").await.unwrap();
    let _lost = gw.call("issue_refund", json!({"order": 7})).await.token();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!gw.call("send_email", json!({})).await.is_admitted());
    // The operator says the refund did not run: the run goes on from before it.
    let machine = orch_codegen::compile_json(&refund_line_losing("{}"), None)
        .to_machine()
        .unwrap();
    let resolved = orch_policy::resolve(&store, &machine, "alice", orch_run::Resolution::NotRun)
        .await
        .unwrap();
    assert_eq!(resolved.as_deref(), Some("issue_refund"));
    // Nothing held any more: a second resolution changes nothing.
    let again = orch_policy::resolve(&store, &machine, "alice", orch_run::Resolution::Ran)
        .await
        .unwrap();
    assert_eq!(again, None);
    assert!(!gw.call("send_email", json!({})).await.is_admitted());
    gw.run_tool("issue_refund").await.unwrap();
    gw.run_tool("send_email").await.unwrap();
}

#[tokio::test]
async fn several_calls_in_one_turn_are_judged_one_after_another() {
    let mut gw = refund_line(Options::default()).await;
    gw.run_tool("lookup_order").await.unwrap();
    // The model asks for the email and the refund at once, twice; the gateway checks
    // all four concurrently. Calls of one run are admitted one at a time, each against
    // the state the previous one left, so the tools admitted, in the order they were
    // admitted, are a serial order the workflow allows.
    let log = std::sync::Arc::new(std::sync::Mutex::new(vec!["lookup_order".to_owned()]));
    let mut tasks = Vec::new();
    for tool in ["send_email", "issue_refund", "send_email", "issue_refund"] {
        let mut gw = gw.clone();
        let log = std::sync::Arc::clone(&log);
        tasks.push(tokio::spawn(async move {
            if let Checked::Admitted(token, _) = gw.call(tool, json!({})).await {
                // Logged before the result is reported: the next call of the run is
                // admitted only after that.
                log.lock().unwrap().push(tool.to_owned());
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert_eq!(
                    gw.respond(token.as_deref(), ok_result()).await,
                    Answered::Pass
                );
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    allowed_serially(REFUND_LINE, &log).unwrap();
    assert!(
        log.contains(&"issue_refund".to_owned()),
        "the refund is always allowed first: {log:?}"
    );
    assert!(log.len() >= 3, "{log:?}");
}

#[tokio::test]
async fn tools_list_is_filtered_to_what_the_run_allows_now() {
    let mut gw = refund_line(Options::default()).await;
    let upstream = [
        "lookup_order",
        "issue_refund",
        "send_email",
        "close_ticket",
        "kb_search",
        "kb_admin_wipe",
        "weather",
    ];
    assert_eq!(gw.list(&upstream).await, ["lookup_order", "kb_search"]);
    gw.run_tool("lookup_order").await.unwrap();
    assert_eq!(gw.list(&upstream).await, ["issue_refund"]);
    gw.run_tool("issue_refund").await.unwrap();
    gw.run_tool("send_email").await.unwrap();
    // Refund allows every knowledge-base tool (Help denied the admin ones).
    assert_eq!(
        gw.list(&upstream).await,
        [
            "issue_refund",
            "send_email",
            "close_ticket",
            "kb_search",
            "kb_admin_wipe"
        ]
    );
    // Other fields of the result are kept.
    let answered = gw
        .response(
            "tools/list",
            None,
            json!({"tools": [{"name": "weather"}], "nextCursor": "c2"}),
        )
        .await;
    assert_eq!(
        answered,
        Answered::Mutated(json!({"tools": [], "nextCursor": "c2"}))
    );
}

#[tokio::test]
async fn a_multiplexed_list_is_judged_without_the_target_prefix() {
    let mut gw = refund_line(Options::default()).await;
    gw.services = vec!["orders".into(), "kb".into()];
    let listed = gw
        .list(&[
            "orders_lookup_order",
            "orders_issue_refund",
            "kb_kb_search",
            "kb_weather",
        ])
        .await;
    assert_eq!(listed, ["orders_lookup_order", "kb_kb_search"]);
}

#[tokio::test]
async fn a_gated_call_is_rejected_with_the_question_and_runs_once_on_approval() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "alice").await;
    gw.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": 7, "amount": 20});
    let asked = gw.call("issue_refund", args.clone()).await;
    assert_eq!(asked.code(), Code::PermissionDenied);
    let data = asked.data();
    assert_eq!(data["refusal"]["reason"], "needs_approval");
    let approval = &data["approval"];
    assert_eq!(approval["tool"], "issue_refund");
    assert_eq!(approval["step"], "Refund");
    assert_eq!(approval["pending"], true);
    let state = approval["requestState"].as_str().unwrap().to_owned();
    assert!(state.starts_with("orch-q1:"), "{state}");
    let question = &approval["inputRequests"]["orch_approval"];
    assert_eq!(question["method"], "elicitation/create");
    assert!(question["params"]["message"]
        .as_str()
        .unwrap()
        .contains("\"amount\":20"));

    // The retry carries the human's answer: admitted, and the upstream gets the call
    // as the model made it (orch's answer taken out).
    let answer = |approve: bool| {
        json!({
            "name": "issue_refund", "arguments": args, "requestState": state,
            "inputResponses": {"orch_approval": {"action": "accept", "content": {"approve": approve}}}
        })
    };
    let approved = gw
        .request_raw("tools/call", Some(answer(true).to_string().into_bytes()))
        .await;
    let Checked::Admitted(token, Some(sent)) = approved else {
        panic!("{approved:?}")
    };
    assert_eq!(sent, json!({"name": "issue_refund", "arguments": args}));
    assert_eq!(
        gw.respond(token.as_deref(), ok_result()).await,
        Answered::Pass
    );
    // The approval was consumed: replaying the answer runs nothing.
    let replayed = gw
        .request_raw("tools/call", Some(answer(true).to_string().into_bytes()))
        .await;
    assert!(!replayed.is_admitted(), "{replayed:?}");
    // A forged state, or one moved to other arguments, is INVALID.
    let mut moved = answer(true);
    moved["arguments"]["amount"] = json!(2000);
    assert_eq!(
        gw.request_raw("tools/call", Some(moved.to_string().into_bytes()))
            .await
            .code(),
        Code::Invalid
    );
}

#[tokio::test]
async fn a_rejected_call_is_held_and_the_model_is_told() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "bob").await;
    gw.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": 9});
    let state = gw.call("issue_refund", args.clone()).await.data()["approval"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let declined = json!({
        "name": "issue_refund", "arguments": args, "requestState": state,
        "inputResponses": {"orch_approval": {"action": "decline"}}
    });
    let rejected = gw
        .request_raw("tools/call", Some(declined.to_string().into_bytes()))
        .await;
    assert_eq!(rejected.code(), Code::PermissionDenied);
    assert_eq!(rejected.data()["refusal"]["reason"], "rejected");
    assert!(
        rejected.error().reason.contains("human rejected"),
        "{:?}",
        rejected.error()
    );
    // Held: the same call again is refused as rejected, not asked again.
    assert_eq!(
        gw.call("issue_refund", args).await.data()["refusal"]["reason"],
        "rejected"
    );
}

#[test]
fn a_template_that_reads_messages_is_refused_at_start() {
    let compiled = orch_codegen::compile_json(
        r#"{"name": "chatty", "tools": ["a", "b"],
            "steps": [{"name": "S", "isDefault": true},
                      {"name": "T", "conditions": [{"type": "message_contains", "value": "refund"},
                                                   {"type": "message_regex", "value": "^pay\\b"}]}]}"#,
        None,
    );
    let refused = PolicyServer::new(&compiled, MemoryStore::new(), Options::default())
        .err()
        .expect("refused");
    let text = refused.to_string();
    assert!(
        text.contains(r#"step `T`: message_contains "refund""#),
        "{text}"
    );
    assert!(
        text.contains(r#"step `T`: message_regex "^pay\\b""#),
        "{text}"
    );
    let broken = orch_codegen::compile_json(r#"{"name": "x", "steps": 3}"#, None);
    assert!(PolicyServer::new(&broken, MemoryStore::new(), Options::default()).is_err());
}

#[tokio::test]
async fn checks_beyond_the_limit_are_refused_at_once() {
    // One permit, held by a call waiting on a busy run: the next check is refused at
    // once as RESOURCE_EXHAUSTED, whatever its method.
    let url = start(
        REFUND_LINE,
        MemoryStore::new(),
        Options {
            max_in_flight: 1,
            busy_wait: Duration::from_millis(800),
            ..Options::default()
        },
    )
    .await;
    let mut gw = Gateway::connect(&url, "alice").await;
    let _holding = gw.call("lookup_order", json!({})).await.token();
    let mut waiter = gw.clone();
    let waiting = tokio::spawn(async move { waiter.call("lookup_order", json!({})).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = gw.for_run("carol").call("lookup_order", json!({})).await;
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.error().reason.contains("maximum of 1 checks"),
        "{:?}",
        refused.error()
    );
    assert_eq!(waiting.await.unwrap().code(), Code::ResourceExhausted);
}

#[tokio::test]
async fn a_dismissed_question_runs_nothing_and_holds_nothing() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "gus").await;
    gw.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": 3});
    let state = gw.call("issue_refund", args.clone()).await.data()["approval"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancelled = json!({
        "name": "issue_refund", "arguments": args, "requestState": state,
        "inputResponses": {"orch_approval": {"action": "cancel"}}
    });
    let dismissed = gw
        .request_raw("tools/call", Some(cancelled.to_string().into_bytes()))
        .await;
    assert_eq!(dismissed.code(), Code::PermissionDenied);
    assert!(
        dismissed.error().reason.contains("dismissed"),
        "{:?}",
        dismissed.error()
    );
    // Nothing held: the same call is asked about again (not refused as rejected).
    let again = gw.call("issue_refund", args).await;
    assert_eq!(again.data()["refusal"]["reason"], "needs_approval");
    // An answer that is not one orch can read is INVALID.
    let garbled = json!({
        "name": "issue_refund", "arguments": {"order": 3}, "requestState": state,
        "inputResponses": {"orch_approval": {"action": "maybe"}}
    });
    let invalid = gw
        .request_raw("tools/call", Some(garbled.to_string().into_bytes()))
        .await;
    assert_eq!(invalid.code(), Code::Invalid);
}

/// The retry that answers the question `asked` (a refusal carrying it) about `tool`.
fn answered(tool: &str, args: &serde_json::Value, asked: &Checked, approve: bool) -> Vec<u8> {
    let state = asked.data()["approval"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    json!({
        "name": tool, "arguments": args, "requestState": state,
        "inputResponses": {"orch_approval": {"action": "accept", "content": {"approve": approve}}}
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn one_approval_runs_the_call_once_however_often_the_answer_is_sent() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "erin").await;
    gw.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": 7, "amount": 20});
    let asked = gw.call("issue_refund", args.clone()).await;
    let answer = answered("issue_refund", &args, &asked, true);
    // Five copies in a row: the first runs; each later one is refused as a stale answer,
    // and none puts a new question the next copy could answer.
    let mut ran = 0;
    for copy in 0..5 {
        match gw.request_raw("tools/call", Some(answer.clone())).await {
            Checked::Admitted(token, _) => {
                ran += 1;
                // The refund ran but its result is not back yet (the run is busy), or it
                // came back: both orders are tried.
                if copy == 0 {
                    assert_eq!(
                        gw.respond(token.as_deref(), ok_result()).await,
                        Answered::Pass
                    );
                }
            }
            refused => {
                assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
                assert_eq!(refused.data()["refusal"]["reason"], "stale_answer");
                assert!(refused.data().get("approval").is_none(), "asked again");
            }
        }
    }
    assert_eq!(ran, 1);
}

#[tokio::test]
async fn concurrent_copies_of_one_approval_run_the_call_once() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "fay").await;
    gw.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": 8});
    let asked = gw.call("issue_refund", args.clone()).await;
    let answer = answered("issue_refund", &args, &asked, true);
    let copies: Vec<_> = (0..8)
        .map(|_| {
            let (mut gw, answer) = (gw.clone(), answer.clone());
            tokio::spawn(async move {
                let checked = gw.request_raw("tools/call", Some(answer)).await;
                if let Checked::Admitted(token, _) = &checked {
                    gw.respond(token.as_deref(), ok_result()).await;
                }
                checked
            })
        })
        .collect();
    let mut ran = 0;
    for copy in copies {
        let checked = copy.await.unwrap();
        if checked.is_admitted() {
            ran += 1;
        } else {
            assert!(checked.data().get("approval").is_none(), "asked again");
        }
    }
    assert_eq!(ran, 1);
    // And the sequence moved on exactly once: the email is next, the refund is not.
    assert_eq!(
        gw.call("issue_refund", args).await.data()["refusal"]["reason"],
        "out_of_sequence"
    );
}

#[tokio::test]
async fn an_answer_given_in_one_run_applies_to_nothing_in_another() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut alice = Gateway::connect(&url, "alice").await;
    let mut mallory = alice.for_run("mallory");
    alice.run_tool("lookup_order").await.unwrap();
    mallory.run_tool("lookup_order").await.unwrap();
    let args = json!({"order": 1});
    let asked = alice.call("issue_refund", args.clone()).await;
    // Mallory's run asked the same question about the same call.
    let _ = mallory.call("issue_refund", args.clone()).await;
    let answer = answered("issue_refund", &args, &asked, true);
    let foreign = mallory
        .request_raw("tools/call", Some(answer.clone()))
        .await;
    assert_eq!(foreign.data()["refusal"]["reason"], "stale_answer");
    assert!(foreign.data().get("approval").is_none(), "asked");
    // Nor is Mallory's question answered by it afterwards.
    let again = mallory
        .request_raw("tools/call", Some(answer.clone()))
        .await;
    assert!(!again.is_admitted(), "{again:?}");
    // In Alice's run it is her answer.
    assert!(alice
        .request_raw("tools/call", Some(answer))
        .await
        .is_admitted());
}

#[tokio::test]
async fn a_result_that_does_not_say_the_tool_ran_records_nothing() {
    for result in [
        json!({"resultType": "input_required", "inputRequests": {}, "requestState": "s"}),
        json!({"resultType": "task", "task": {"taskId": "t1", "status": "working"}}),
        json!({"task": {"taskId": "t1", "status": "working"}}),
        json!({"content": [], "isError": true}),
        json!({}),
        json!({"foo": 1}),
    ] {
        let mut gw = refund_line(Options::default()).await;
        gw.run_tool("lookup_order").await.unwrap();
        let token = gw.call("issue_refund", json!({"order": 2})).await.token();
        let answered = gw.respond(token.as_deref(), result.clone()).await;
        assert!(
            matches!(
                answered,
                Answered::Pass | Answered::Rejected(Code::Invalid, _)
            ),
            "{result}: {answered:?}"
        );
        // Not recorded: the sequence still expects the refund, and the email is refused.
        let early = gw.call("send_email", json!({})).await;
        assert_eq!(
            early.data()["refusal"]["reason"],
            "out_of_sequence",
            "{result}"
        );
        // And the run is free again: the refund can be called once more.
        assert!(gw
            .call("issue_refund", json!({"order": 2}))
            .await
            .is_admitted());
    }
}

#[tokio::test]
async fn a_late_result_is_said_to_have_lapsed() {
    let options = Options {
        lease: Duration::from_millis(200),
        ..Options::default()
    };
    let url = start(
        &refund_line_losing(r#"{"retry": ["*"]}"#),
        MemoryStore::new(),
        options,
    )
    .await;
    let mut gw = Gateway::connect(&url, "alice").await;
    let first = gw.call("lookup_order", json!({})).await.token();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The lease lapsed; another call is admitted and finishes.
    gw.run_tool("lookup_order").await.unwrap();
    match gw.respond(first.as_deref(), ok_result()).await {
        Answered::Rejected(Code::PermissionDenied, reason) => {
            assert!(reason.contains("lapsed"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn arguments_are_judged_and_forwarded_exactly() {
    let url = start(GATED_REFUND, MemoryStore::new(), Options::default()).await;
    let mut gw = Gateway::connect(&url, "hal").await;
    gw.run_tool("lookup_order").await.unwrap();
    let raw = |order: &str, state: Option<&str>| {
        let answer = match state {
            Some(state) => format!(
                r#","requestState":"{state}","inputResponses":{{"orch_approval":{{"action":"accept","content":{{"approve":true}}}},"other":{{"x":1.50}}}}"#
            ),
            None => String::new(),
        };
        format!(r#"{{"name":"issue_refund","arguments":{{"order":{order},"note":2.50}}{answer}}}"#)
            .into_bytes()
    };
    let asked = gw
        .request_raw("tools/call", Some(raw("12345678901234567890123", None)))
        .await;
    let data = asked.data();
    let message = data["approval"]["inputRequests"]["orch_approval"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("12345678901234567890123"), "{message}");
    let state = data["approval"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    // The approval of order …123 does not admit order …124.
    let other = gw
        .request_raw(
            "tools/call",
            Some(raw("12345678901234567890124", Some(&state))),
        )
        .await;
    assert!(!other.is_admitted(), "{other:?}");
    let sent = gw
        .mutated_raw(raw("12345678901234567890123", Some(&state)))
        .await
        .expect("admitted, orch's answer taken out");
    // Forwarded byte for byte, less orch's answer: every number as the model wrote it.
    assert_eq!(
        String::from_utf8(sent).unwrap(),
        r#"{"name":"issue_refund","arguments":{"order":12345678901234567890123,"note":2.50},"inputResponses":{"other":{"x":1.50}}}"#
    );
    // A key written twice is refused: orch would judge one copy, the tool might read the other.
    let twice = br#"{"name":"lookup_order","name":"issue_refund","arguments":{}}"#.to_vec();
    assert_eq!(
        gw.request_raw("tools/call", Some(twice)).await.code(),
        Code::Invalid
    );
    let twice = br#"{"name":"lookup_order","arguments":{"a":1,"a":2}}"#.to_vec();
    assert_eq!(
        gw.request_raw("tools/call", Some(twice)).await.code(),
        Code::Invalid
    );
}

/// Reads `stream` until the server closes it (end of file or a reset); a guard of a
/// minute against a hang, not a measurement.
async fn closed_by_server(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    let wait = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .is_ok()
}

#[tokio::test]
async fn silent_and_surplus_connections_are_closed_and_a_gateway_is_still_served() {
    let url = start(
        REFUND_LINE,
        MemoryStore::new(),
        Options {
            max_connections: 3,
            handshake_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            ..Options::default()
        },
    )
    .await;
    let addr = url.trim_start_matches("http://").to_owned();
    // Two connections that never say anything, and one that sends only the HTTP/2
    // preface: they hold every connection the server allows.
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let mut preface = tokio::net::TcpStream::connect(&addr).await.unwrap();
    {
        use tokio::io::AsyncWriteExt;
        preface
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
    }
    // One more is closed at once, while they hold them.
    let mut surplus = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_by_server(&mut surplus).await,
        "the surplus connection stays open"
    );
    // The silent ones are closed (after the handshake timeout), the preface-only one
    // after it has been idle for the idle timeout.
    for s in &mut silent {
        assert!(closed_by_server(s).await, "a silent connection stays open");
    }
    assert!(
        closed_by_server(&mut preface).await,
        "a preface-only connection stays open"
    );
    // Their places are free again: a gateway's check is served.
    let mut gw = Gateway::connect(&url, "alice").await;
    assert!(gw.call("lookup_order", json!({})).await.is_admitted());
}

/// The handshake deadline is the peer's: the server's own SETTINGS frame, written as soon
/// as a connection is accepted, must not turn it into the (much longer) idle deadline.
#[tokio::test]
async fn a_silent_connection_is_closed_at_the_handshake_timeout_not_the_idle_one() {
    let url = start(
        REFUND_LINE,
        MemoryStore::new(),
        Options {
            handshake_timeout: Duration::from_secs(1),
            // Far past the guard of `closed_by_server`: were the idle deadline the one
            // running, the connection would outlive the guard.
            idle_timeout: Duration::from_secs(3600),
            ..Options::default()
        },
    )
    .await;
    let addr = url.trim_start_matches("http://").to_owned();
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_by_server(&mut silent).await,
        "a connection that never spoke outlived the handshake timeout"
    );
    // A connection that did speak is held to the idle deadline instead: a gateway's check
    // is still served on one opened at the same time.
    let mut gw = Gateway::connect(&url, "alice").await;
    assert!(gw.call("lookup_order", json!({})).await.is_admitted());
}
