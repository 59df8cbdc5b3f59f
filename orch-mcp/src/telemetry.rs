//! OpenTelemetry for the gateway (feature `otel`): each `tools/call` is an MCP server
//! span, `tools/call {tool}`, with `mcp.method.name`, `gen_ai.operation.name`
//! (`execute_tool`), `gen_ai.tool.name`, `gen_ai.tool.call.id` (the JSON-RPC id), the run
//! (`mcp.session.id`) and orch's decision (`orch.decision`). A W3C `traceparent` (and
//! `tracestate`) in the request's `_meta` makes it the span's parent, and the forwarded
//! call carries the span's own in its `_meta`, so the upstream's spans join the trace.
//! Without the feature everything here compiles to nothing.

use rmcp::model::{CallToolResponse, MetaObject, RequestMetaObject};

/// The span of one call, or nothing without the feature.
pub(crate) struct CallSpan(#[cfg(feature = "otel")] tracing::Span);

/// Opens the span of a `tools/call` of `tool` in run `run`, its parent the caller's
/// trace context from `_meta`, when it has one.
pub(crate) fn call(
    tool: &str,
    run: &str,
    request_id: &str,
    meta: &MetaObject,
    mode: orch_agent::Mode,
) -> CallSpan {
    #[cfg(feature = "otel")]
    {
        let span = orch_agent::otel::tool_call_span(tool, run, Some(request_id), mode);
        orch_agent::otel::set_remote_parent(&span, meta.get_traceparent(), meta.get_tracestate());
        CallSpan(span)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (tool, run, request_id, meta, mode);
        CallSpan()
    }
}

impl CallSpan {
    /// Runs `f` inside the span.
    pub(crate) async fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        #[cfg(feature = "otel")]
        {
            use tracing::Instrument;
            f.instrument(self.0.clone()).await
        }
        #[cfg(not(feature = "otel"))]
        {
            f.await
        }
    }

    /// What the gateway answered: `admitted` (forwarded), a refusal's reason, or
    /// `needs_approval` (a question to the client's human).
    pub(crate) fn answered(&self, response: &CallToolResponse) {
        #[cfg(feature = "otel")]
        {
            let decision = match response {
                CallToolResponse::InputRequired(_) => "needs_approval".to_owned(),
                // A refusal's facts are always in `_meta` (a tool with an output schema
                // gets no `structuredContent` refusal).
                CallToolResponse::Complete(r) => match r
                    .meta
                    .as_ref()
                    .and_then(|m| m.get(crate::handler::REFUSAL_META_KEY))
                    .and_then(|r| r.get("reason"))
                    .and_then(|r| r.as_str())
                {
                    Some(reason) => reason.to_owned(),
                    None => "admitted".to_owned(),
                },
                _ => "admitted".to_owned(),
            };
            self.0.record("orch.decision", decision.as_str());
            orch_agent::otel::count_decision(&decision, "mcp");
        }
        #[cfg(not(feature = "otel"))]
        let _ = response;
    }
}

/// The current span's trace context, into the `_meta` of a request going upstream.
pub(crate) fn propagate(meta: &mut Option<RequestMetaObject>) {
    #[cfg(feature = "otel")]
    {
        let meta = meta.get_or_insert_default();
        use opentelemetry::propagation::TextMapPropagator;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = tracing::Span::current().context();
        let mut carrier = std::collections::HashMap::new();
        opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .inject_context(&context, &mut carrier);
        if let Some(traceparent) = carrier.remove("traceparent") {
            meta.set_traceparent(traceparent);
        }
        if let Some(state) = carrier.remove("tracestate").filter(|s| !s.is_empty()) {
            meta.set_tracestate(state);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = meta;
}
