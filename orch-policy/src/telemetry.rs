//! OpenTelemetry for the policy server (feature `otel`), as `orch mcp` has it: each
//! `tools/call` check is a server span, `tools/call {tool}`, with `mcp.method.name`,
//! `gen_ai.operation.name` (`execute_tool`), `gen_ai.tool.name`, the run
//! (`mcp.session.id`) and orch's decision (`orch.decision`), counted by the decision
//! counter (`orch.decisions`, `host` = `policy`). The W3C trace context of the gateway's
//! gRPC request (`traceparent`, `tracestate` metadata) makes it the span's parent, so the
//! check joins the gateway's trace. Without the feature everything here compiles to
//! nothing.

/// The span of one check, or nothing without the feature.
pub(crate) struct CheckSpan(#[cfg(feature = "otel")] tracing::Span);

/// The W3C trace context of a gateway's request (its `traceparent` and `tracestate`
/// gRPC metadata), or nothing without the feature.
#[derive(Default)]
pub(crate) struct Parent(#[cfg(feature = "otel")] std::collections::HashMap<String, String>);

/// The trace context `metadata` carries.
pub(crate) fn parent(metadata: &tonic::metadata::MetadataMap) -> Parent {
    #[cfg(feature = "otel")]
    {
        let mut carrier = std::collections::HashMap::new();
        for key in ["traceparent", "tracestate"] {
            if let Some(value) = metadata.get(key).and_then(|v| v.to_str().ok()) {
                carrier.insert(key.to_owned(), value.to_owned());
            }
        }
        Parent(carrier)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = metadata;
        Parent()
    }
}

/// Opens the span of a `tools/call` check of `tool` in run `run`, its parent the
/// gateway's trace context.
pub(crate) fn check(parent: &Parent, tool: &str, run: &str) -> CheckSpan {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let span = tracing::info_span!(
            "tools/call",
            otel.name = format!("tools/call {tool}"),
            otel.kind = "server",
            "mcp.method.name" = "tools/call",
            "mcp.session.id" = run,
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = tool,
            "orch.decision" = tracing::field::Empty,
        );
        if !parent.0.is_empty() {
            let context =
                opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&parent.0);
            let _ = span.set_parent(context);
        }
        CheckSpan(span)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (parent, tool, run);
        CheckSpan()
    }
}

impl CheckSpan {
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

    /// What was decided: `admitted`, a refusal's reason (`not_allowed`,
    /// `out_of_sequence`, `needs_approval`, …) or `failed`.
    pub(crate) fn decided(&self, decision: &str) {
        #[cfg(feature = "otel")]
        {
            self.0.record("orch.decision", decision);
            orch_agent::otel::count_decision(decision, "policy");
        }
        #[cfg(not(feature = "otel"))]
        let _ = decision;
    }
}
