//! Observe mode's telemetry (feature `otel`), in a process of its own (the meter provider
//! is global): every call span carries `orch.mode`, and each call the template would
//! have refused or asked about — which runs — counts in `orch.would_refuse`, by rule.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use orch_agent::{Agent, Mode, Planned, ScriptedModel, StopReason, ToolRegistry};
use orch_test_support::otel::attr;
use std::sync::{Arc, Mutex};
use tracing_subscriber::layer::SubscriberExt;

orch_macros::orchestration!(file = "../tests/fixtures/machines/approvals.json");
use approvals::{Machine, Session};

#[tokio::test]
async fn observed_calls_run_and_count_as_would_refuse_by_rule() {
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

    let ran = Arc::new(Mutex::new(Vec::new()));
    let mut reg = ToolRegistry::new();
    for name in ["browse", "add_to_cart", "confirm", "pay", "refund"] {
        let ran = Arc::clone(&ran);
        reg.register(
            name,
            name,
            serde_json::json!({"type": "object"}),
            move |_| {
                ran.lock().unwrap().push(name);
                async move { Ok(format!("{name} done")) }
            },
        );
    }
    // Out of step, out of sequence, and gated without an approval: all run.
    let model = ScriptedModel::new([
        Planned::call("pay", r#"{"amount": 5}"#),
        Planned::call("add_to_cart", r#"{"item": "book"}"#),
        Planned::call("pay", r#"{"amount": 5}"#),
        Planned::call("confirm", "{}"),
        Planned::call("pay", r#"{"amount": 5}"#),
        Planned::text("Done."),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, reg).in_mode(Mode::Observe);
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let turn = agent
        .run_turn(&mut session, &mut conversation, "a book, please")
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::Answered);
    assert_eq!(
        *ran.lock().unwrap(),
        ["pay", "add_to_cart", "pay", "confirm", "pay"]
    );
    let _ = provider.force_flush();
    let spans = exporter.get_finished_spans().unwrap();
    let tools: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .collect();
    assert_eq!(tools.len(), 5);
    for s in &tools {
        assert_eq!(attr(s, "orch.mode").as_deref(), Some("observe"));
    }

    meters.force_flush().unwrap();
    let mut counted: Vec<(String, String, u64)> = Vec::new();
    for rm in metrics.get_finished_metrics().unwrap() {
        for sm in rm.scope_metrics() {
            for m in sm.metrics().filter(|m| m.name() == "orch.would_refuse") {
                if let AggregatedMetrics::U64(MetricData::Sum(sum)) = m.data() {
                    for p in sum.data_points() {
                        let get = |key: &str| {
                            p.attributes()
                                .find(|kv| kv.key.as_str() == key)
                                .map(|kv| kv.value.as_str().into_owned())
                                .unwrap_or_default()
                        };
                        let (rule, kind) = (get("orch.rule"), get("orch.refusal"));
                        counted.retain(|(r, k, _)| (r, k) != (&rule, &kind));
                        counted.push((rule, kind, p.value()));
                    }
                }
            }
        }
    }
    counted.sort();
    assert_eq!(
        counted,
        [
            ("gate Checkout".to_owned(), "needs_approval".to_owned(), 1),
            (
                "sequence Checkout".to_owned(),
                "out_of_sequence".to_owned(),
                1
            ),
            ("step Browse".to_owned(), "not_allowed".to_owned(), 1),
        ]
    );
}
