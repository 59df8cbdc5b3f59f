//! The policy server's spans (feature `otel`), exported through the OpenTelemetry SDK's
//! in-memory exporter: a `tools/call {tool}` server span per `tools/call` check, its
//! parent the W3C `traceparent` the gateway's gRPC request carries, with the MCP and
//! GenAI attributes and orch's decision — as `orch mcp` has them.

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use orch_policy::wire::ext_mcp_client::ExtMcpClient;
use orch_policy::wire::McpRequest;
use orch_policy::{Options, PolicyServer};
use orch_store::MemoryStore;
use orch_test_support::otel::attr;
use tracing_subscriber::layer::SubscriberExt;

const TEMPLATE: &str = r#"{"agentId": "traced", "tools": ["search", "wipe"],
  "orchestration": {"defaultStep": "Work", "steps": [
    {"name": "Work", "availableTools": {"allowed": ["search"]}}]}}"#;

/// A `tools/call` check of `tool` in `run`, with `traceparent` as gRPC metadata.
fn check(tool: &str, run: &str, traceparent: &str) -> tonic::Request<McpRequest> {
    let mut fields = std::collections::BTreeMap::new();
    fields.insert(
        "run".to_owned(),
        prost_types::Value {
            kind: Some(prost_types::value::Kind::StringValue(run.into())),
        },
    );
    let mut request = tonic::Request::new(McpRequest {
        method: "tools/call".into(),
        metadata_context: Some(prost_types::Struct { fields }),
        mcp_request: Some(format!(r#"{{"name":"{tool}","arguments":{{}}}}"#).into_bytes()),
        ..McpRequest::default()
    });
    request
        .metadata_mut()
        .insert("traceparent", traceparent.parse().unwrap());
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_are_server_spans_in_the_gateways_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let compiled = orch_codegen::compile_json(TEMPLATE, None);
    let server = PolicyServer::new(&compiled, MemoryStore::new(), Options::default())
        .expect("a valid template");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let mut client = ExtMcpClient::connect(url).await.expect("connected");

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace}-{parent}-01");
    // Two runs: the admitted `search` holds its run until its result is reported.
    client
        .check_request(check("search", "r1", &traceparent))
        .await
        .unwrap();
    client
        .check_request(check("wipe", "r2", &traceparent))
        .await
        .unwrap();
    let _ = provider.force_flush();

    let spans = exporter.get_finished_spans().unwrap();
    let span = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    };
    let search = span("tools/call search");
    assert_eq!(
        search.span_context.trace_id(),
        TraceId::from_hex(trace).unwrap()
    );
    assert_eq!(search.parent_span_id, SpanId::from_hex(parent).unwrap());
    assert_eq!(search.span_kind, opentelemetry::trace::SpanKind::Server);
    assert_eq!(
        attr(search, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        attr(search, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr(search, "gen_ai.tool.name").as_deref(), Some("search"));
    assert_eq!(attr(search, "mcp.session.id").as_deref(), Some("run:r1"));
    assert_eq!(attr(search, "orch.decision").as_deref(), Some("admitted"));
    assert_eq!(attr(search, "orch.mode").as_deref(), Some("enforce"));
    let wipe = span("tools/call wipe");
    assert_eq!(
        wipe.span_context.trace_id(),
        TraceId::from_hex(trace).unwrap()
    );
    assert_eq!(attr(wipe, "orch.decision").as_deref(), Some("not_allowed"));
}
