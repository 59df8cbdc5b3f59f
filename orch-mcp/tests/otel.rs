//! The gateway's spans (feature `otel`), exported through the OpenTelemetry SDK's
//! in-memory exporter: a `tools/call {tool}` server span per call whose parent is the
//! caller's `traceparent` (from `_meta`), with the MCP and GenAI attributes and orch's
//! decision; the forwarded call carries the gateway span's own `traceparent` upstream.

// Not every helper of the shared module is used here.
#[allow(dead_code)]
mod common;

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use orch_test_support::otel::attr;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    MetaObject, PaginatedRequestParams, RequestMetaObject,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleServer, ServerHandler};
use std::sync::{Arc, Mutex};
use tracing_subscriber::layer::SubscriberExt;

const TEMPLATE: &str = r#"{"agentId": "traced", "tools": ["search", "wipe"],
  "orchestration": {"defaultStep": "Work", "steps": [
    {"name": "Work", "availableTools": {"allowed": ["search"]}}]}}"#;

/// Each call's tool and the `traceparent` it carried.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Records the `traceparent` of every call it runs.
#[derive(Clone, Default)]
struct Upstream {
    seen: Seen,
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> rmcp::model::InitializeResult {
        orch_test_support::mcp_load::tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // `wipe` declares an output schema: its refusal carries no `structuredContent`,
        // and the span still names the refusal.
        let mut list = orch_test_support::mcp_load::tool_list(&["search", "wipe"]);
        let schema =
            serde_json::json!({"type": "object", "properties": {"wiped": {"type": "boolean"}}});
        if let serde_json::Value::Object(schema) = schema {
            list.tools[1].output_schema = Some(Arc::new(schema));
        }
        Ok(list)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let traceparent = context.meta.get_traceparent().map(str::to_owned);
        self.seen
            .lock()
            .unwrap()
            .push((request.name.to_string(), traceparent));
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]).into())
    }
}

#[derive(Clone, Default)]
struct Client;
impl ClientHandler for Client {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_server_spans_in_the_callers_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let upstream = Upstream::default();
    let seen = Arc::clone(&upstream.seen);
    let (client_end, _served) = common::gateway_over_pipes(TEMPLATE, upstream).await;
    let client = rmcp::serve_client(Client, client_end)
        .await
        .expect("handshake");

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    for tool in ["search", "wipe"] {
        let mut params = CallToolRequestParams::new(tool);
        let mut meta = MetaObject::new();
        meta.set_traceparent(format!("00-{trace}-{parent}-01"));
        params.meta = Some(RequestMetaObject::from(meta));
        client.peer().call_tool(params).await.expect("tools/call");
    }
    let _ = provider.force_flush();

    let spans = exporter.get_finished_spans().unwrap();
    let call = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    };
    let search = call("tools/call search");
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
    assert_eq!(attr(search, "orch.decision").as_deref(), Some("admitted"));
    assert_eq!(attr(search, "orch.mode").as_deref(), Some("enforce"));
    assert!(attr(search, "gen_ai.tool.call.id").is_some());
    let wipe = call("tools/call wipe");
    assert_eq!(attr(wipe, "orch.decision").as_deref(), Some("not_allowed"));
    assert_eq!(
        wipe.span_context.trace_id(),
        TraceId::from_hex(trace).unwrap()
    );

    // Upstream: only `search` ran, carrying the gateway span's own context.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let expected = format!("00-{trace}-{}-01", search.span_context.span_id());
    assert_eq!(seen[0], ("search".to_owned(), Some(expected)));
}
