//! Reading the spans the OpenTelemetry SDK's in-memory exporter kept.

use opentelemetry::Value;
use opentelemetry_sdk::trace::SpanData;

/// The attribute `key` of `span` as text (strings as they are, other values printed).
pub fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| match &kv.value {
            Value::String(s) => s.as_str().to_owned(),
            other => other.to_string(),
        })
}
