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
//! | `state.rs` | the engine's state |
//! | `checks.rs` | the two checks the gateway makes |
//! | `reading.rs` | a call read from the bytes the gateway sends |
//! | `admission.rs` | the request phase: judged and leased in one compare-and-set, or refused |
//! | `approvals.rs` | questions posted for approvers elsewhere, and the approvals API's side |
//! | `finish.rs` | the response phase: recorded or released, the lease dropped |
//! | `listing.rs` | a `tools/list` response filtered to what the run allows |
//! | `runs.rs` | a run's record and the sessions kept between the phases and the calls |
//! | `results.rs` | a decision as the ExtMcp answer |

mod admission;
mod approvals;
mod checks;
mod finish;
mod listing;
mod prelude;
mod reading;
mod results;
mod runs;
mod state;

pub use state::TOKEN_FIELD;
pub(crate) use state::{run_key, Engine};

#[cfg(test)]
mod tests {
    use super::prelude::*;
    use super::state::*;
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

    fn sequence_engine() -> Engine<MemoryStore> {
        let compiled = orch_codegen::compile_json(
            r#"{"agentId": "s", "tools": ["a", "b"], "orchestration": {"defaultStep": "S",
                "steps": [{"name": "S", "sequence": ["a", "b"]}]}}"#,
            None,
        );
        let machine = compiled.to_machine().expect("a valid template");
        Engine::new(machine, MemoryStore::new(), Options::default())
    }

    /// A run is restored once, by its first call: the response phase attaches the
    /// session the request phase admitted, and the next call's request phase the one
    /// the last call was recorded into.
    #[tokio::test]
    async fn a_run_is_restored_by_its_first_call_only() {
        let engine = sequence_engine();
        served_call(&engine, "a").await;
        assert_eq!(engine.restores.load(Ordering::Relaxed), 1);
        served_call(&engine, "b").await;
        assert_eq!(engine.restores.load(Ordering::Relaxed), 1);
        // Recorded both: a third call of `a` is a new sequence round, not refused.
        served_call(&engine, "a").await;
        assert_eq!(engine.restores.load(Ordering::Relaxed), 1);
    }

    /// A session kept from the run's last call is not used once the stored run has
    /// changed (another instance recorded a call): the run is restored from the store.
    #[tokio::test]
    async fn a_run_changed_elsewhere_is_restored() {
        let here = sequence_engine();
        let elsewhere = sequence_engine();
        served_call(&here, "a").await;
        // Elsewhere the run went on to `b`: the sequence is done, `a` may start it
        // again. Judged by the session kept here (after `a`), `a` would be refused.
        served_call(&elsewhere, "a").await;
        served_call(&elsewhere, "b").await;
        let stored = elsewhere
            .store
            .load("run:r")
            .await
            .expect("the store answers")
            .expect("the run is stored");
        here.store
            .store("run:r", stored.bytes)
            .await
            .expect("the store answers");
        served_call(&here, "a").await;
        assert_eq!(here.restores.load(Ordering::Relaxed), 2);
    }

    /// A session kept from the run's last call is prepared for the next call as a
    /// restored one is: the same decisions and the same decision log (a tool the
    /// template does not declare is the host's for its own call only), with one restore
    /// instead of one a call.
    #[tokio::test]
    async fn a_kept_session_decides_and_logs_as_a_restored_one() {
        use orch_agent::audit::{Auditor, DecisionRecord};
        let engine = |log: &Arc<Mutex<Vec<DecisionRecord>>>| {
            let compiled = orch_codegen::compile_json(
                r#"{"agentId": "k", "tools": ["a"], "orchestration": {"defaultStep": "S",
                    "steps": [{"name": "S", "availableTools": {"allowed": ["a", "kb_*"]}}]}}"#,
                None,
            );
            let machine = compiled.to_machine().expect("a valid template");
            let sink = Arc::clone(log);
            let write = move |r: &DecisionRecord| sink.lock().expect("the log").push(r.clone());
            let options = Options {
                audit: Some(Arc::new(Auditor::new(write, "k"))),
                ..Options::default()
            };
            Engine::new(machine, MemoryStore::new(), options)
        };
        let (kept_log, restored_log) = (Arc::default(), Arc::default());
        let (kept, restored) = (engine(&kept_log), engine(&restored_log));
        for tool in ["kb_one", "kb_two", "a", "kb_one"] {
            served_call(&kept, tool).await;
            // This engine forgets the session each call leaves: every call restores.
            restored.settled.lock().expect("the kept sessions").clear();
            served_call(&restored, tool).await;
        }
        assert_eq!(kept.restores.load(Ordering::Relaxed), 1);
        assert_eq!(restored.restores.load(Ordering::Relaxed), 4);
        let records = |log: &Arc<Mutex<Vec<DecisionRecord>>>| -> Vec<Value> {
            let log = log.lock().expect("the log");
            log.iter()
                .map(|r| {
                    let mut record = serde_json::to_value(r).expect("a record as JSON");
                    // The clock's readings differ between the two engines.
                    record["time"] = Value::Null;
                    if let Some(at) = record["event"].get_mut("at") {
                        *at = Value::Null;
                    }
                    record
                })
                .collect()
        };
        let kept_records = records(&kept_log);
        assert!(kept_records.len() >= 8, "{kept_records:?}");
        assert_eq!(kept_records, records(&restored_log));
    }
}
