//! OpenTelemetry for the agent loop (feature `otel`): the loop emits `tracing` spans
//! (`invoke_workflow`, `execute_tool {tool}`, with `gen_ai.*` and `orch.*` attributes, and
//! `orch.refusal` / `orch.transition` events); any subscriber with a
//! `tracing-opentelemetry` layer exports them. [`init_otlp`] is the short way: spans in
//! batches over OTLP/HTTP (protobuf) to a collector.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;

/// Keeps the exporter alive; flushes and shuts it down when dropped.
#[must_use = "spans are exported while the guard lives"]
pub struct OtelGuard {
    provider: SdkTracerProvider,
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
    }
}

impl OtelGuard {
    /// The tracer provider (to add to another subscriber, or to flush by hand).
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }
}

/// Exports the agent loop's spans over OTLP/HTTP to `endpoint` (a collector's traces
/// URL, e.g. `http://127.0.0.1:4318/v1/traces`) as service `service`, and makes that the
/// global `tracing` subscriber. Fails when a global subscriber is set already (add
/// `tracing_opentelemetry::layer()` to it instead) or the exporter cannot be built.
pub fn init_otlp(endpoint: &str, service: &str) -> Result<OtelGuard, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| format!("the OTLP exporter: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service.to_owned())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("orch");
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| format!("a global tracing subscriber is set already: {e}"))?;
    Ok(OtelGuard { provider })
}
