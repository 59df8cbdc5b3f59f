//! Spans of the agent loop, per the OpenTelemetry GenAI semantic conventions, as
//! [`tracing`](https://docs.rs/tracing) spans (feature `otel`; without it everything here
//! compiles to nothing): `invoke_workflow` around a turn, `execute_tool {tool}` around
//! each tool call, with `gen_ai.*` attributes and orch's own (`orch.step`,
//! `orch.decision`, `orch.rule`, `orch.sequence.index`, `orch.mode`), and events for refusals and step
//! transitions. Any `tracing-opentelemetry` subscriber exports them;
//! [`crate::otel::init_otlp`] sets one up over OTLP.

#[cfg(feature = "otel")]
use crate::audit::Rule;

/// A span, or nothing without the feature.
#[derive(Clone, Debug)]
pub(crate) struct Span(#[cfg(feature = "otel")] tracing::Span);

/// The span of one turn of the workflow `name`.
pub(crate) fn workflow(name: &str) -> Span {
    #[cfg(feature = "otel")]
    {
        Span(tracing::info_span!(
            "invoke_workflow",
            otel.name = format!("invoke_workflow {name}"),
            "gen_ai.operation.name" = "invoke_workflow",
            "gen_ai.agent.name" = name,
            "orch.step" = tracing::field::Empty,
        ))
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = name;
        Span()
    }
}

/// The span of one tool call.
pub(crate) fn tool(
    name: &str,
    call_id: &str,
    step: Option<&str>,
    index: usize,
    mode: crate::Mode,
) -> Span {
    #[cfg(feature = "otel")]
    {
        Span(tracing::info_span!(
            "execute_tool",
            otel.name = format!("execute_tool {name}"),
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = name,
            "gen_ai.tool.call.id" = call_id,
            "orch.step" = step.unwrap_or(""),
            "orch.sequence.index" = index as i64,
            "orch.decision" = tracing::field::Empty,
            "orch.rule" = tracing::field::Empty,
            "orch.mode" = mode.as_str(),
        ))
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (name, call_id, step, index, mode);
        Span()
    }
}

impl Span {
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

    /// The active step when the turn ended.
    pub(crate) fn step_after(&self, step: Option<&str>) {
        #[cfg(feature = "otel")]
        self.0.record("orch.step", step.unwrap_or(""));
        #[cfg(not(feature = "otel"))]
        let _ = step;
    }

    /// What was decided about the call, by which rule; a refusal is an event with
    /// orch's reason.
    #[cfg(feature = "otel")]
    pub(crate) fn decided(&self, decision: &str, rule: Option<&Rule>, refusal: Option<&str>) {
        self.0.record("orch.decision", decision);
        count_decision(decision, "agent");
        if let Some(rule) = rule {
            self.0
                .record("orch.rule", serde_json::to_string(rule).unwrap_or_default());
        }
        if let Some(reason) = refusal {
            let _entered = self.0.enter();
            tracing::event!(
                name: "orch.refusal",
                tracing::Level::INFO,
                "orch.decision" = decision,
                "orch.reason" = reason
            );
        }
    }

    /// The call moved the session from one step to another.
    #[cfg(feature = "otel")]
    pub(crate) fn transition(&self, from: Option<&str>, to: Option<&str>, index: usize) {
        if from != to {
            let _entered = self.0.enter();
            tracing::event!(
                name: "orch.transition",
                tracing::Level::INFO,
                "orch.step.from" = from.unwrap_or(""),
                "orch.step.to" = to.unwrap_or(""),
                "orch.sequence.index" = index as i64
            );
        }
    }
}

/// Counts one decision in the `orch.decisions` counter of the global meter provider,
/// by decision and by who took it (`agent`, `mcp`).
#[cfg(feature = "otel")]
pub fn count_decision(decision: &str, by: &'static str) {
    opentelemetry::global::meter("orch")
        .u64_counter("orch.decisions")
        .with_description("Decisions orch took about tool calls, by decision")
        .build()
        .add(
            1,
            &[
                opentelemetry::KeyValue::new("orch.decision", decision.to_owned()),
                opentelemetry::KeyValue::new("orch.component", by),
            ],
        );
}

/// Counts one decision a policy in observe mode would have enforced — a call it would
/// have refused or asked about, which ran — in the `orch.would_refuse` counter of the
/// global meter provider, by rule (`orch.rule`: [`Rule::label`]) and by refusal kind
/// (`orch.refusal`). Without feature `otel`, nothing.
pub(crate) fn count_would_refuse(rule: &crate::audit::Rule, kind: &str) {
    #[cfg(feature = "otel")]
    opentelemetry::global::meter("orch")
        .u64_counter("orch.would_refuse")
        .with_description(
            "Calls a policy in observe mode would have refused or asked about, by rule",
        )
        .build()
        .add(
            1,
            &[
                opentelemetry::KeyValue::new("orch.rule", rule.label()),
                opentelemetry::KeyValue::new("orch.refusal", kind.to_owned()),
                opentelemetry::KeyValue::new("orch.mode", "observe"),
            ],
        );
    #[cfg(not(feature = "otel"))]
    let _ = (rule, kind);
}
