//! OpenTelemetry spans of the agent loop (feature `otel`), exported through the
//! OpenTelemetry SDK's in-memory exporter: `invoke_workflow` per turn, `execute_tool
//! {tool}` per call as its child, the GenAI attributes, orch's decision and rule, and the
//! refusal and transition events.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use orch_agent::{Agent, Decision, Planned, ScriptedModel, StopReason, ToolRegistry};
use orch_test_support::otel::attr;
use tracing_subscriber::layer::SubscriberExt;

orch_macros::orchestration!(file = "../tests/fixtures/machines/approvals.json");
use approvals::{Machine, Session};

fn tools() -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    for name in ["browse", "add_to_cart", "confirm", "pay", "refund"] {
        reg.register(
            name,
            name,
            serde_json::json!({"type": "object"}),
            move |_| async move { Ok(format!("{name} done")) },
        );
    }
    reg
}

#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
#[tokio::test]
async fn turns_and_tool_calls_are_spans_with_their_decisions() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _default = tracing::subscriber::set_default(subscriber);
    let metrics = InMemoryMetricExporter::default();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());

    let model = ScriptedModel::new([
        Planned::call("add_to_cart", r#"{"item": "book"}"#),
        Planned::call("pay", r#"{"amount": 5}"#),
        Planned::call("confirm", "{}"),
        Planned::call("pay", r#"{"amount": 5}"#),
        Planned::text("Paid."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools());
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "I'd like a book")
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::NeedsApproval);
    let turn = agent
        .resume_turn(
            &mut session,
            &mut conversation,
            turn.pending.unwrap(),
            Decision::Approve,
        )
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::Answered);
    let _ = provider.force_flush();

    let spans = exporter.get_finished_spans().unwrap();
    let workflows: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "invoke_workflow approvals")
        .collect();
    assert_eq!(workflows.len(), 2, "a turn and its resumption");
    for w in &workflows {
        assert_eq!(
            attr(w, "gen_ai.operation.name").as_deref(),
            Some("invoke_workflow")
        );
        assert_eq!(attr(w, "gen_ai.agent.name").as_deref(), Some("approvals"));
        assert_eq!(attr(w, "orch.step").as_deref(), Some("Checkout"));
    }
    let tools: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .collect();
    let seen: Vec<(String, String)> = tools
        .iter()
        .map(|s| {
            (
                attr(s, "gen_ai.tool.name").unwrap(),
                attr(s, "orch.decision").unwrap(),
            )
        })
        .collect();
    let expected = [
        ("add_to_cart", "admitted"),
        ("pay", "out_of_sequence"),
        ("confirm", "admitted"),
        ("pay", "needs_approval"),
        ("pay", "admitted"),
    ];
    assert_eq!(
        seen,
        expected.map(|(t, d)| (t.to_owned(), d.to_owned())),
        "{spans:#?}"
    );
    // Every tool span is a child of its turn's workflow span, in the same trace.
    let ids: Vec<_> = workflows.iter().map(|w| w.span_context.span_id()).collect();
    for t in &tools {
        assert!(ids.contains(&t.parent_span_id), "{t:#?}");
        assert_eq!(
            attr(t, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert!(attr(t, "gen_ai.tool.call.id").is_some_and(|id| !id.is_empty()));
    }
    assert_eq!(tools[0].name, "execute_tool add_to_cart");
    // The rule, as JSON; the refusal and the transition as events.
    let rule = attr(tools[1], "orch.rule").unwrap();
    assert!(
        rule.contains(r#""rule":"sequence""#) && rule.contains("confirm"),
        "{rule}"
    );
    assert_eq!(
        attr(tools[3], "orch.rule").as_deref(),
        Some(r#"{"rule":"gate","step":"Checkout"}"#)
    );
    let event = |s: &SpanData, name: &str| s.events.iter().find(|e| e.name == name).cloned();
    let refusal = event(tools[1], "orch.refusal").expect("a refusal event");
    assert!(refusal
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "orch.reason"
            && kv.value.as_str().contains("expects `confirm`")));
    let transition = event(tools[0], "orch.transition").expect("add_to_cart moved the session");
    let to = transition
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "orch.step.to")
        .map(|kv| kv.value.as_str().into_owned());
    assert_eq!(to.as_deref(), Some("Checkout"));
    assert!(event(tools[2], "orch.transition").is_none());
    assert_eq!(attr(tools[2], "orch.sequence.index").as_deref(), Some("0"));

    // The decision counter: one per call, by decision.
    meters.force_flush().unwrap();
    let mut counted: Vec<(String, u64)> = Vec::new();
    for rm in metrics.get_finished_metrics().unwrap() {
        for sm in rm.scope_metrics() {
            for m in sm.metrics().filter(|m| m.name() == "orch.decisions") {
                if let AggregatedMetrics::U64(MetricData::Sum(sum)) = m.data() {
                    for p in sum.data_points() {
                        let decision = p
                            .attributes()
                            .find(|kv| kv.key.as_str() == "orch.decision")
                            .map(|kv| kv.value.as_str().into_owned())
                            .unwrap_or_default();
                        counted.retain(|(d, _)| *d != decision);
                        counted.push((decision, p.value()));
                    }
                }
            }
        }
    }
    counted.sort();
    assert_eq!(
        counted,
        [
            ("admitted".to_owned(), 3),
            ("needs_approval".to_owned(), 1),
            ("out_of_sequence".to_owned(), 1)
        ]
    );
}
