//! The decisions: what each ExtMcp check does to a run's record.
//!
//! A run is one [`Record`] in the store (the lease format `orch mcp` uses: the workflow
//! snapshot and the call in flight), under `run:<name>`. A `tools/call` is *reserved*
//! (judged against the stored state and leased in the same compare-and-set: no second
//! call can be admitted against the state the first one was), then *finished* by its
//! response (recorded, lease dropped) or left to lapse.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | the engine's state, and the two checks the gateway makes |
//! | `reading.rs` | a call read from the bytes the gateway sends |
//! | `admission.rs` | the request phase: judged and leased in one compare-and-set, or refused |
//! | `finish.rs` | the response phase: recorded or released, the lease dropped |
//! | `listing.rs` | a `tools/list` response filtered to what the run allows |
//! | `runs.rs` | a run's record and the sessions kept between the phases |
//! | `results.rs` | a decision as the ExtMcp answer |

mod admission;
mod finish;
mod listing;
mod reading;
mod results;
mod runs;

use admission::*;
use reading::*;
use results::*;

use crate::rejection::{Invalid, Rejection};
use crate::wire::{
    mcp_request_result, mcp_response_result, McpRequest, McpRequestResult, McpResponse,
    McpResponseResult, Pass,
};
use crate::Options;
use orch_agent::audit::Auditor;
use orch_agent::elicitation::{self, Answer, INPUT_KEY};
use orch_agent::protocol::{self, Question, Ticket, ToolResult};
use orch_agent::{Gate, Policy, Refusal, RefusalKind};
use orch_run::{self as run, RunError};
use orch_runtime::dynamic::{DetachedSession, DynMachine, DynSession};
use orch_runtime::CallDigest;
use orch_store::lease::{Change, Record};
use orch_store::SessionStore;
use prost_types::value::Kind;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The key of the call token in `McpRequestResult.metadata`, and the `metadata_context`
/// key the gateway's configuration feeds it back under (`orch_call:
/// 'mcpGuardrails.orch_call'`).
pub const TOKEN_FIELD: &str = "orch_call";

/// The store key of the workflow run named `name`.
pub(crate) fn run_key(name: &str) -> String {
    format!("run:{name}")
}

/// The longest run name accepted, in bytes.
const MAX_RUN_NAME: usize = 512;

/// The longest pause between two looks at a run whose call is in flight.
const MAX_WAIT_PAUSE: Duration = Duration::from_millis(20);

/// The shared state of a policy server.
pub(crate) struct Engine<S> {
    machine: DynMachine,
    /// The rules for calls of the template's own tools, made once.
    declared: Policy,
    store: S,
    pub(crate) options: Options,
    permits: Arc<Semaphore>,
    /// The sessions of calls this instance admitted, by lease token, with the snapshot
    /// they were admitted at: the response phase attaches one instead of restoring the
    /// run again while the stored snapshot is still that one (at most
    /// [`MAX_KEPT_SESSIONS`]; a call whose entry is gone is restored as usual).
    admitted: Mutex<HashMap<u64, Kept>>,
    /// How many times a run was restored from its snapshot (the cost a kept session
    /// saves; read by the tests).
    restores: AtomicUsize,
}

/// A session kept for a call's response phase: the snapshot it was admitted at, and the
/// session.
type Kept = (Option<Vec<u8>>, DetachedSession);

/// The most admitted sessions an instance keeps for their response phase.
const MAX_KEPT_SESSIONS: usize = 4096;

impl<S: SessionStore + 'static> Engine<S> {
    pub(crate) fn new(machine: DynMachine, store: S, options: Options) -> Self {
        Engine {
            declared: Policy::new(machine.tools().to_vec()),
            machine,
            store,
            permits: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            options,
            admitted: Mutex::new(HashMap::new()),
            restores: AtomicUsize::new(0),
        }
    }

    /// `CheckRequest`.
    pub(crate) async fn check_request(
        &self,
        request: McpRequest,
        parent: &crate::telemetry::Parent,
    ) -> McpRequestResult {
        let Ok(_permit) = self.permits.try_acquire() else {
            return request_result(Err(self.overloaded()));
        };
        if request.method != "tools/call" {
            return request_result(Ok(Admitted::Pass));
        }
        // The call is read once: its tool and run name the span, then it is judged.
        let (span, decided) = match self.read_request(&request) {
            Ok((run, call)) => {
                let span = crate::telemetry::check(parent, &call.tool, &run);
                let decided = span.run(self.admit(&run, call)).await;
                (span, decided)
            }
            Err(rejection) => (crate::telemetry::check(parent, "", ""), Err(rejection)),
        };
        span.decided(match &decided {
            Ok(_) => "admitted",
            Err(rejection) => rejection
                .data()
                .and_then(|d| d.get("refusal"))
                .and_then(|r| r.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("failed"),
        });
        request_result(decided)
    }

    /// `CheckResponse`.
    pub(crate) async fn check_response(&self, response: McpResponse) -> McpResponseResult {
        let Ok(_permit) = self.permits.try_acquire() else {
            return response_result(Err(self.overloaded()));
        };
        let decided = match response.method.as_str() {
            "tools/call" => self.finish_call(&response).await.map(|()| None),
            "tools/list" => self.filter_list(&response).await,
            _ => Ok(None),
        };
        response_result(decided)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orch_store::MemoryStore;

    fn context(run: &str, token: Option<&str>) -> prost_types::Struct {
        let text = |s: &str| prost_types::Value {
            kind: Some(Kind::StringValue(s.to_owned())),
        };
        let mut fields = std::collections::BTreeMap::new();
        fields.insert("run".to_owned(), text(run));
        if let Some(token) = token {
            fields.insert(TOKEN_FIELD.to_owned(), text(token));
        }
        prost_types::Struct { fields }
    }

    async fn served_call(engine: &Engine<MemoryStore>, tool: &str) {
        let request = McpRequest {
            method: "tools/call".into(),
            metadata_context: Some(context("r", None)),
            mcp_request: Some(format!(r#"{{"name":"{tool}","arguments":{{}}}}"#).into_bytes()),
            ..McpRequest::default()
        };
        {
            let admitted = engine
                .check_request(request, &crate::telemetry::Parent::default())
                .await;
            let token = match admitted
                .metadata
                .as_ref()
                .and_then(|m| m.fields.get(TOKEN_FIELD))
            {
                Some(prost_types::Value {
                    kind: Some(Kind::StringValue(t)),
                }) => t.clone(),
                other => panic!("not admitted: {other:?} {admitted:?}"),
            };
            let response = McpResponse {
                method: "tools/call".into(),
                metadata_context: Some(context("r", Some(&token))),
                mcp_response: br#"{"content":[{"type":"text","text":"ok"}]}"#.to_vec(),
                ..McpResponse::default()
            };
            let answered = engine.check_response(response).await;
            assert!(
                !matches!(answered.result, Some(mcp_response_result::Result::Error(_))),
                "{answered:?}"
            );
        }
    }

    /// Both phases of a served call restore the run once: the response phase attaches
    /// the session the request phase admitted.
    #[tokio::test]
    async fn a_served_call_restores_the_run_once() {
        let compiled = orch_codegen::compile_json(
            r#"{"agentId": "s", "tools": ["a", "b"], "orchestration": {"defaultStep": "S",
                "steps": [{"name": "S", "sequence": ["a", "b"]}]}}"#,
            None,
        );
        let machine = compiled.to_machine().expect("a valid template");
        let engine = Engine::new(machine, MemoryStore::new(), Options::default());
        served_call(&engine, "a").await;
        assert_eq!(engine.restores.load(Ordering::Relaxed), 1);
        served_call(&engine, "b").await;
        assert_eq!(engine.restores.load(Ordering::Relaxed), 2);
        // Recorded both: a third call of `a` is a new sequence round, not refused.
        served_call(&engine, "a").await;
        assert_eq!(engine.restores.load(Ordering::Relaxed), 3);
    }
}
