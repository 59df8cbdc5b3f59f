//! OpenTelemetry for the agent loop (feature `otel`): the loop emits `tracing` spans
//! (`invoke_workflow`, `execute_tool {tool}`, with `gen_ai.*` and `orch.*` attributes, and
//! `orch.refusal` / `orch.transition` events); any subscriber with a
//! `tracing-opentelemetry` layer exports them. Each decision also counts in the
//! `orch.decisions` counter (attributes `orch.decision`, `orch.component`) of the global
//! meter provider. [`init_otlp`] is the short way: spans in batches and the counter
//! every 10 s over OTLP/HTTP (protobuf) to a collector.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;

pub use crate::telemetry::count_decision;
use tracing_subscriber::layer::SubscriberExt;

/// Keeps the exporter alive; flushes and shuts it down when dropped.
#[must_use = "spans are exported while the guard lives"]
pub struct OtelGuard {
    provider: SdkTracerProvider,
    meters: SdkMeterProvider,
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
        let _ = self.meters.force_flush();
        let _ = self.meters.shutdown();
    }
}

impl OtelGuard {
    /// The tracer provider (to add to another subscriber, or to flush by hand).
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }
}

/// Why [`init_otlp`] could not start exporting.
#[derive(Debug)]
#[non_exhaustive]
pub enum OtelError {
    /// The OTLP span exporter could not be built.
    SpanExporter(Box<dyn std::error::Error + Send + Sync>),
    /// The OTLP metric exporter could not be built.
    MetricExporter(Box<dyn std::error::Error + Send + Sync>),
    /// A global `tracing` subscriber is set already.
    SubscriberSet(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for OtelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OtelError::SpanExporter(e) => write!(f, "the OTLP span exporter: {e}"),
            OtelError::MetricExporter(e) => write!(f, "the OTLP metric exporter: {e}"),
            OtelError::SubscriberSet(e) => {
                write!(f, "a global tracing subscriber is set already: {e}")
            }
        }
    }
}

impl std::error::Error for OtelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OtelError::SpanExporter(e)
            | OtelError::MetricExporter(e)
            | OtelError::SubscriberSet(e) => Some(e.as_ref()),
        }
    }
}

/// Exports the spans and the decision counter over OTLP/HTTP to the collector at
/// `endpoint` (its base URL, e.g. `http://127.0.0.1:4318`: traces go to `/v1/traces`,
/// metrics to `/v1/metrics`) as service `service`; makes that the global `tracing`
/// subscriber and the global meter provider. Fails when a global subscriber is set
/// already (add `tracing_opentelemetry::layer()` to it instead) or an exporter cannot be
/// built.
pub fn init_otlp(endpoint: &str, service: &str) -> Result<OtelGuard, OtelError> {
    let base = endpoint.trim_end_matches('/');
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{base}/v1/traces"))
        .build()
        .map_err(|e| OtelError::SpanExporter(Box::new(e)))?;
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(format!("{base}/v1/metrics"))
        .build()
        .map_err(|e| OtelError::MetricExporter(Box::new(e)))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service.to_owned())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.clone())
        .build();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics).build())
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("orch");
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| OtelError::SubscriberSet(Box::new(e)))?;
    opentelemetry::global::set_meter_provider(meters.clone());
    Ok(OtelGuard { provider, meters })
}

/// The server span of a `tools/call` of `tool` in run `run` (`call_id`: the request's
/// id, when the protocol names one), with the OpenTelemetry MCP and GenAI attributes, the
/// gateway's mode (`orch.mode`: `enforce` or `observe`) and an `orch.decision` to
/// record; both gateways open their call spans here.
pub fn tool_call_span(
    tool: &str,
    run: &str,
    call_id: Option<&str>,
    mode: crate::Mode,
) -> tracing::Span {
    let span = tracing::info_span!(
        "tools/call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "server",
        "mcp.method.name" = "tools/call",
        "mcp.session.id" = run,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.call.id" = tracing::field::Empty,
        "orch.decision" = tracing::field::Empty,
        "orch.mode" = mode.as_str(),
    );
    if let Some(id) = call_id {
        span.record("gen_ai.tool.call.id", id);
    }
    span
}

/// Makes the W3C trace context a request carried (`traceparent`, and `tracestate` when
/// there is one) the parent of `span`, so a server's span joins its caller's trace; no
/// `traceparent`, nothing changes. The gateways take it from an MCP request's `_meta`
/// (`orch mcp`) or a gRPC request's metadata (`orch policy`).
pub fn set_remote_parent(
    span: &tracing::Span,
    traceparent: Option<&str>,
    tracestate: Option<&str>,
) {
    use opentelemetry::propagation::TextMapPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Some(traceparent) = traceparent else {
        return;
    };
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_owned(), traceparent.to_owned());
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_owned(), state.to_owned());
    }
    let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(parent);
}
