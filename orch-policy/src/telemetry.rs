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
pub(crate) struct Parent(#[cfg(feature = "otel")] Option<(String, Option<String>)>);

/// The trace context `metadata` carries.
pub(crate) fn parent(metadata: &tonic::metadata::MetadataMap) -> Parent {
    #[cfg(feature = "otel")]
    {
        let text = |key: &str| {
            metadata
                .get(key)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Parent(text("traceparent").map(|parent| (parent, text("tracestate"))))
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = metadata;
        Parent()
    }
}

/// Opens the span of a `tools/call` check of `tool` in run `run`, its parent the
/// gateway's trace context.
pub(crate) fn check(parent: &Parent, tool: &str, run: &str, mode: orch_agent::Mode) -> CheckSpan {
    #[cfg(feature = "otel")]
    {
        let span = orch_agent::otel::tool_call_span(tool, run, None, mode);
        if let Some((traceparent, tracestate)) = &parent.0 {
            orch_agent::otel::set_remote_parent(&span, Some(traceparent), tracestate.as_deref());
        }
        CheckSpan(span)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (parent, tool, run, mode);
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
