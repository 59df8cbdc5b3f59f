//! The decisions: what each ExtMcp check does to a run's record.
//!
//! A run is one [`Record`] in the store (the lease format `orch mcp` uses: the workflow
//! snapshot and the call in flight), under `run:<name>`. A `tools/call` is *reserved*
//! (judged against the stored state and leased in the same compare-and-set: no second
//! call can be admitted against the state the first one was), then *finished* by its
//! response (recorded, lease dropped) or left to lapse.

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
use orch_runtime::dynamic::{DetachedSession, DynMachine, DynSession};
use orch_runtime::CallDigest;
use orch_store::lease::{token, Change, Record};
use orch_store::run::{self, RunError};
use orch_store::SessionStore;
use prost_types::value::Kind;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
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

/// What one look at a run decided for a call.
enum Admission {
    /// Admitted: the lease with this token was written, with this snapshot; the session
    /// as admitted.
    Reserved(u64, Option<Vec<u8>>, DetachedSession),
    /// Refused by the workflow.
    Refused(Rejection),
    /// Another call of the run is in flight: its tool.
    Busy(String),
}

/// A `tools/call`'s params, read.
struct Call {
    tool: String,
    /// The arguments' text as the call carries it (`{}` when it has none).
    arguments: String,
    /// The call's identity, over the arguments as written (numbers exactly).
    digest: CallDigest,
    /// The params without orch's own approval answer, when they carried one (what goes
    /// upstream instead: every other byte of every value as sent).
    stripped: Option<Vec<u8>>,
    /// The human's answer the retry carries, with the ticket of its question.
    answer: Option<(Ticket, Answer)>,
}

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

    fn overloaded(&self) -> Rejection {
        Rejection::Overloaded {
            limit: self.options.max_in_flight,
        }
    }

    /// The store key of the run the gateway names in `metadata_context`.
    fn run_of(&self, context: Option<&prost_types::Struct>) -> Result<String, Rejection> {
        let key = &self.options.run_key;
        let missing = || Rejection::NoRun { key: key.clone() };
        let value = context
            .and_then(|c| c.fields.get(key))
            .and_then(|v| v.kind.as_ref())
            .ok_or_else(missing)?;
        let name = match value {
            Kind::StringValue(s) => s.clone(),
            Kind::NumberValue(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => format!("{n:.0}"),
            Kind::NullValue(_) => return Err(missing()),
            _ => return Err(Rejection::RunNotString { key: key.clone() }),
        };
        if name.is_empty() || name.len() > MAX_RUN_NAME {
            return Err(Rejection::RunNameLength {
                key: key.clone(),
                max: MAX_RUN_NAME,
            });
        }
        Ok(run_key(&name))
    }

    /// The rules for a call of `tool`: the template's tools and the one called are the
    /// host's (a tool the template does not declare is judged by the step's patterns),
    /// with a buffered auditor when the server keeps a decision log. A declared tool
    /// without a log borrows the rules made once.
    fn policy_for(&self, run: &str, tool: &str) -> Cow<'_, Policy> {
        let declared = self.machine.tools().iter().any(|t| t == tool);
        let policy = match (declared, &self.options.audit) {
            (true, None) => return Cow::Borrowed(&self.declared),
            (true, Some(_)) => self.declared.clone(),
            (false, _) => {
                let mut host = self.machine.tools().to_vec();
                host.push(tool.to_owned());
                Policy::new(host)
            }
        };
        Cow::Owned(match &self.options.audit {
            Some(_) => policy.audited(Arc::new(Auditor::buffered(run))),
            None => policy,
        })
    }

    /// Keeps the session a call was admitted with for its response phase.
    fn keep_admitted(&self, token: u64, snapshot: Option<Vec<u8>>, session: DetachedSession) {
        let mut kept = self.admitted.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= MAX_KEPT_SESSIONS {
            // Calls whose response never came: drop one (it is restored if it comes).
            if let Some(&old) = kept.keys().next() {
                kept.remove(&old);
            }
        }
        kept.insert(token, (snapshot, session));
    }

    /// The session kept for the call with lease `token`, if any.
    fn take_admitted(&self, token: u64) -> Option<Kept> {
        self.admitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&token)
    }

    fn log_attempt(&self, policy: &Policy) {
        if let (Some(audit), Some(buffered)) = (&self.options.audit, policy.auditor()) {
            audit.relay(buffered.take_buffered());
        }
    }

    /// The session of a run's record ([`run::restore`]), counted.
    fn restore(
        &self,
        snapshot: Option<&[u8]>,
        policy: &Policy,
    ) -> Result<DynSession<'_>, RunError> {
        self.restores.fetch_add(1, Ordering::Relaxed);
        run::restore(&self.machine, policy, snapshot)
    }

    /// Applies `f` to the record of `run` with compare-and-set, reading again after a
    /// conflict (`f` may run more than once; it sees `None` when nothing is stored).
    async fn modify<R>(
        &self,
        run: &str,
        f: impl FnMut(Option<Record>) -> Result<Change<R>, RunError> + Send,
    ) -> Result<R, Rejection> {
        // The value this instance last saw is tried first (a store that caches, as the
        // Redis store does, saves a read per check when no other instance wrote since;
        // a stale one costs a conflict and a read).
        let known = self
            .store
            .cached(run)
            .and_then(|v| Record::decode(&v.bytes).ok().map(|r| (v.version, r)));
        let (value, _) = run::modify(&self.store, run, known, f)
            .await
            .map_err(|e| failed(run, e))?;
        Ok(value)
    }

    /// The request phase of a `tools/call`.
    /// The run a `tools/call` check names and the call it carries.
    fn read_request(&self, request: &McpRequest) -> Result<(String, Call), Rejection> {
        let run = self.run_of(request.metadata_context.as_ref())?;
        let params = request
            .mcp_request
            .as_deref()
            .ok_or_else(|| Rejection::from(Invalid::NoParams))?;
        Ok((run, read_call(params, self.options.max_params_bytes)?))
    }

    async fn admit(&self, run: &str, call: Call) -> Result<Admitted, Rejection> {
        let policy = self.policy_for(run, &call.tool);
        let ask = Gate::Ask {
            run,
            ttl: self.options.question_ttl,
        };
        let Some(gate) = elicitation::gate(run, call.answer, ask) else {
            return Err(Rejection::Dismissed {
                tool: call.tool.clone(),
            });
        };
        // An answer that applies to no question the run holds is refused as it is: the
        // host never asks again on it (the next copy of the same answer would answer
        // that new question, and run the call a second time).
        match self.reserve(run, &policy, &call, gate).await? {
            Admission::Reserved(token, snapshot, session) => {
                self.keep_admitted(token, snapshot, session);
                Ok(Admitted::Call {
                    token,
                    mutated: call.stripped,
                })
            }
            Admission::Refused(rejection) => Err(rejection),
            Admission::Busy(_) => unreachable_busy(&call.tool),
        }
    }

    /// Reserves `run` for `call`, waiting (at most [`Options::busy_wait`]) while another
    /// call of the run is in flight, then looking again: the second call is judged
    /// against the state the first one left.
    async fn reserve(
        &self,
        run: &str,
        policy: &Policy,
        call: &Call,
        gate: Gate<'_>,
    ) -> Result<Admission, Rejection> {
        let deadline = Instant::now() + self.options.busy_wait;
        let mut pause = Duration::from_micros(500);
        loop {
            let admission = self.try_reserve(run, policy, call, gate).await?;
            let Admission::Busy(other) = admission else {
                return Ok(admission);
            };
            if Instant::now() >= deadline {
                let reason = format!(
                    "error: `{}` was not run: a call of `{other}` in the same workflow run has been in flight for more than {} s; try again when it has finished.",
                    call.tool,
                    self.options.busy_wait.as_secs_f64()
                );
                let data = policy.refusal_data::<DynSession<'_>>(
                    &call.tool,
                    RefusalKind::Busy.as_str(),
                    &reason,
                    None,
                );
                return Err(Rejection::Busy { reason, data });
            }
            // A little randomness, so that waiters on several instances do not look at
            // the run in lockstep.
            let jitter = Duration::from_micros(token() % 500);
            tokio::time::sleep(pause + jitter).await;
            pause = (pause * 2).min(MAX_WAIT_PAUSE);
        }
    }

    /// One look at `run` for `call`: refuse it, find the run busy, or admit it and write
    /// its lease in the same compare-and-set.
    async fn try_reserve(
        &self,
        run: &str,
        policy: &Policy,
        call: &Call,
        gate: Gate<'_>,
    ) -> Result<Admission, Rejection> {
        let tried = self
            .modify(run, |record| {
                if let Some(auditor) = policy.auditor() {
                    auditor.take_buffered();
                }
                let mut record = record.unwrap_or_default();
                let (admission, write) = run::admit(
                    &mut record,
                    &self.machine,
                    policy,
                    |snapshot| self.restore(snapshot, policy),
                    &call.tool,
                    &orch_runtime::Call::new(call.digest, &call.arguments),
                    gate,
                    self.options.lease,
                )?;
                let admission = match admission {
                    run::Admission::Admitted { token, session } => {
                        Admission::Reserved(token, record.snapshot.clone(), session.detach())
                    }
                    run::Admission::Busy(tool) => Admission::Busy(tool),
                    run::Admission::Refused {
                        refusal,
                        question,
                        session,
                    } => {
                        let asked = question.as_ref().map(|q| (call, q));
                        Admission::Refused(refused(policy, &session, refusal, asked))
                    }
                };
                Ok(match write {
                    true => Change::Write(record, admission),
                    false => Change::Keep(admission),
                })
            })
            .await;
        if tried.is_ok() {
            self.log_attempt(policy);
        }
        tried
    }

    /// The response phase of a `tools/call`: records the call when its result says it
    /// ran ([`protocol::classify`]: a complete, well-formed, successful result), and drops
    /// its lease either way. A result that is not a tool result is also refused.
    async fn finish_call(&self, response: &McpResponse) -> Result<(), Rejection> {
        let run = self.run_of(response.metadata_context.as_ref())?;
        let result: Value = serde_json::from_slice(&response.mcp_response)
            .map_err(|e| Invalid::ResultNotJson(e.to_string()))?;
        let ran = protocol::classify(&result);
        let token = call_token(response.metadata_context.as_ref())?;
        let outcome = match ran {
            ToolResult::Ran => run::Outcome::Ran,
            ToolResult::NotRun(_) => run::Outcome::NotRun,
        };
        // The decision records of the attempt that is written.
        let mut records = Vec::new();
        let settled = self
            .modify(&run, |record| {
                records.clear();
                let Some(mut record) = record else {
                    let gone = if token.is_some() {
                        run::Settled::Lapsed
                    } else {
                        run::Settled::NoCall
                    };
                    return Ok(Change::Keep(gone));
                };
                let held_tool = record.lease.as_ref().map(|l| l.tool.clone());
                let policy = self.policy_for(&run, held_tool.as_deref().unwrap_or(""));
                // The session as this instance admitted it, while the stored snapshot is
                // still the one it was admitted at: no second restore.
                let kept = token.and_then(|t| self.take_admitted(t));
                let restore = |snapshot: Option<&[u8]>| {
                    let attached = kept
                        .filter(|(at, _)| at.as_deref() == snapshot)
                        .and_then(|(_, session)| session.attach(&self.machine));
                    match attached {
                        Some(session) => Ok(session),
                        None => self.restore(snapshot, &policy),
                    }
                };
                // What rules on arguments read of the result, for a tool they read.
                let values = held_tool
                    .as_deref()
                    .filter(|tool| self.machine.reads_results_of(tool))
                    .and_then(|_| protocol::result_values(&result));
                let (settled, write) = run::settle(
                    &mut record,
                    &self.machine,
                    &policy,
                    restore,
                    token,
                    outcome,
                    values.as_deref(),
                    false,
                )?;
                if let Some(auditor) = policy.auditor() {
                    records = auditor.take_buffered();
                }
                Ok(match write {
                    true => Change::Write(record, settled),
                    false => Change::Keep(settled),
                })
            })
            .await?;
        if let Some(audit) = &self.options.audit {
            audit.relay(records);
        }
        if let ToolResult::NotRun(protocol::NotRun::Malformed(why)) = &ran {
            // Not recorded, and the client is not handed something that is not a result.
            return Err(Invalid::NotAToolResult(why.to_string()).into());
        }
        match settled {
            run::Settled::Recorded { .. } | run::Settled::Released | run::Settled::Held => Ok(()),
            // A result that says the tool did not run needs no account: pass it.
            _ if ran != ToolResult::Ran => Ok(()),
            run::Settled::Lapsed => Err(Rejection::Lapsed {
                lease_secs: self.options.lease.as_secs_f64(),
            }),
            run::Settled::NoCall => Err(Rejection::NoCall),
        }
    }

    /// The response phase of `tools/list`: the list filtered to what the run allows now
    /// (`None` when nothing is removed).
    async fn filter_list(&self, response: &McpResponse) -> Result<Option<Vec<u8>>, Rejection> {
        let run = self.run_of(response.metadata_context.as_ref())?;
        let mut result: Value = serde_json::from_slice(&response.mcp_response)
            .map_err(|e| Invalid::ListNotJson(e.to_string()))?;
        let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
            return Err(Invalid::ListNoTools.into());
        };
        let mut names = Vec::with_capacity(tools.len());
        for tool in tools.iter() {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                return Err(Invalid::ListToolNoName.into());
            };
            names.push(self.judged_name(name, &response.service_names).to_owned());
        }
        let policy = Policy::new(names.clone());
        let record = match self.store.load(&run).await {
            Err(e) => return Err(failed(&run, RunError::Store(e))),
            Ok(None) => Record::default(),
            Ok(Some(v)) => Record::decode(&v.bytes)
                .map_err(|why| failed(&run, RunError::Corrupt(why.to_string())))?,
        };
        let session = self
            .restore(record.snapshot.as_deref(), &policy)
            .map_err(|e| failed(&run, e))?;
        let allowed = policy.offered(&session);
        let before = tools.len();
        let mut keep = names.iter().map(|n| allowed.contains(n));
        tools.retain(|_| keep.next().unwrap_or(false));
        if tools.len() == before {
            return Ok(None);
        }
        Ok(Some(result.to_string().into_bytes()))
    }

    /// The name a listed tool is judged by: agentgateway prefixes each tool with its
    /// target (`<target>_<tool>`) when it multiplexes several, and strips the prefix
    /// before a call reaches the request phase; a template names tools without it.
    fn judged_name<'n>(&self, name: &'n str, services: &[String]) -> &'n str {
        if services.len() < 2 || self.machine.tools().iter().any(|t| t == name) {
            return name;
        }
        services
            .iter()
            .find_map(|s| name.strip_prefix(s.as_str())?.strip_prefix('_'))
            .unwrap_or(name)
    }
}

/// What the request phase of a call decided when it lets it go.
enum Admitted {
    /// Not judged (not a `tools/call`).
    Pass,
    /// Admitted under a lease; `mutated`: the params to send instead (orch's approval
    /// answer taken out).
    Call {
        token: u64,
        mutated: Option<Vec<u8>>,
    },
}

fn request_result(decided: Result<Admitted, Rejection>) -> McpRequestResult {
    use mcp_request_result::Result as R;
    let (result, metadata) = match decided {
        Ok(Admitted::Pass) => (R::Pass(Pass {}), None),
        Ok(Admitted::Call { token, mutated }) => {
            let mut fields = std::collections::BTreeMap::new();
            fields.insert(
                TOKEN_FIELD.to_owned(),
                prost_types::Value {
                    kind: Some(Kind::StringValue(format!("{token:016x}"))),
                },
            );
            let result = match mutated {
                Some(bytes) => R::Mutated(bytes),
                None => R::Pass(Pass {}),
            };
            (result, Some(prost_types::Struct { fields }))
        }
        Err(rejection) => (R::Error(rejection.into_error()), None),
    };
    McpRequestResult {
        result: Some(result),
        header_mutation: None,
        metadata,
    }
}

fn response_result(decided: Result<Option<Vec<u8>>, Rejection>) -> McpResponseResult {
    use mcp_response_result::Result as R;
    let result = match decided {
        Ok(None) => R::Pass(Pass {}),
        Ok(Some(bytes)) => R::Mutated(bytes),
        Err(rejection) => R::Error(rejection.into_error()),
    };
    McpResponseResult {
        result: Some(result),
    }
}

/// Reads a `tools/call`'s params: an object with a string `name` and, if any, an object
/// of `arguments`, at most `max` bytes, no key written twice (the upstream might read
/// the other copy than orch judged).
fn read_call(params: &[u8], max: usize) -> Result<Call, Rejection> {
    if params.len() > max {
        return Err(Invalid::ParamsTooLarge {
            len: params.len(),
            max,
        }
        .into());
    }
    let text = std::str::from_utf8(params).map_err(|e| Invalid::ParamsNotJson(e.to_string()))?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| Invalid::ParamsNotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(Invalid::ParamsNotObject.into());
    }
    let entries = object_entries(text)?;
    let get = |key: &str| entries.iter().find(|(k, _)| k == key).map(|(_, v)| &**v);
    let tool = match value.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        Some(Value::String(_)) => return Err(Invalid::NameEmpty.into()),
        Some(_) => return Err(Invalid::NameNotString.into()),
        None => return Err(Invalid::NoName.into()),
    };
    let arguments = match (value.get("arguments"), get("arguments")) {
        (None | Some(Value::Null), _) => "{}".to_owned(),
        (Some(Value::Object(_)), Some(raw)) => raw.get().to_owned(),
        _ => return Err(Invalid::ArgumentsNotObject.into()),
    };
    if orch_runtime::approval::canonical_json(&arguments).is_none() {
        return Err(Invalid::ArgumentsDuplicateKey.into());
    }
    let digest = CallDigest::of_text(&tool, &arguments);
    let state = match value.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(Invalid::RequestStateNotString.into()),
    };
    let response = value.get("inputResponses").and_then(|r| r.get(INPUT_KEY));
    let answer = elicitation::answer_in_retry(state.as_deref(), response, &digest)
        .map_err(Invalid::Answer)?;
    let stripped = if elicitation::is_ours(state.as_deref()) {
        // The answer is orch's: the upstream gets the call as the model made it, every
        // other value exactly as sent.
        let mut out = String::with_capacity(text.len());
        out.push('{');
        for (key, raw) in &entries {
            let kept = match key.as_str() {
                "requestState" => None,
                "inputResponses" => without_orch_answer(raw)?,
                _ => Some(raw.get().to_owned()),
            };
            if let Some(kept) = kept {
                if out.len() > 1 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).unwrap_or_default());
                out.push(':');
                out.push_str(&kept);
            }
        }
        out.push('}');
        Some(out.into_bytes())
    } else {
        None
    };
    Ok(Call {
        tool,
        arguments,
        digest,
        stripped,
        answer,
    })
}

/// An object's entries as written (values untouched); a key written twice is INVALID.
fn object_entries(text: &str) -> Result<Vec<(String, Box<RawValue>)>, Rejection> {
    let entries =
        protocol::object_entries(text).map_err(|e| Invalid::ParamsNotJson(e.to_string()))?;
    let mut keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(Invalid::DuplicateKey(w[0].to_owned()).into());
    }
    Ok(entries)
}

/// `inputResponses` without orch's own answer: `None` when nothing else is left.
fn without_orch_answer(raw: &RawValue) -> Result<Option<String>, Rejection> {
    let entries = object_entries(raw.get())?;
    let rest: Vec<String> = entries
        .iter()
        .filter(|(k, _)| k != INPUT_KEY)
        .map(|(k, v)| {
            format!(
                "{}:{}",
                serde_json::to_string(k).unwrap_or_default(),
                v.get()
            )
        })
        .collect();
    Ok((!rest.is_empty()).then(|| format!("{{{}}}", rest.join(","))))
}

/// A call that found its run busy is refused by [`Engine::reserve`] before it returns.
fn unreachable_busy(tool: &str) -> Result<Admitted, Rejection> {
    Err(Rejection::BusyAfterWait {
        tool: tool.to_owned(),
    })
}

/// The call token the gateway fed back in `metadata_context`, if any.
fn call_token(context: Option<&prost_types::Struct>) -> Result<Option<u64>, Rejection> {
    let Some(value) = context
        .and_then(|c| c.fields.get(TOKEN_FIELD))
        .and_then(|v| v.kind.as_ref())
    else {
        return Ok(None);
    };
    match value {
        Kind::StringValue(s) if s.len() == 16 => u64::from_str_radix(s, 16)
            .map(Some)
            .map_err(|_| bad_token()),
        Kind::NullValue(_) => Ok(None),
        _ => Err(bad_token()),
    }
}

fn bad_token() -> Rejection {
    Invalid::BadToken.into()
}

/// The refusal of a call, as the gateway sends it to the client: orch's wording as the
/// reason, and the same facts as the JSON-RPC error's data (what `orch mcp` puts in a
/// refused call's `structuredContent`), with the question for the human when the call
/// waits for an approval.
fn refused(
    policy: &Policy,
    session: &DynSession<'_>,
    refusal: Refusal,
    asked: Option<(&Call, &Question)>,
) -> Rejection {
    let mut data = policy.workflow_refusal_data(&refusal, Some(session));
    let reason = refusal.reason;
    if let Some((call, question)) = asked {
        let state = elicitation::request_state(question);
        data["approval"] = json!({
            "tool": call.tool,
            "step": question.step,
            "digest": call.digest.to_string(),
            "pending": true,
            "requestState": state,
            "expiresMs": question.expires_ms,
            "inputRequests": {
                INPUT_KEY: {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": elicitation::question_text(&call.tool, &call.arguments, question.step.as_deref()),
                        "requestedSchema": elicitation::form_schema(),
                    }
                }
            },
        });
    }
    Rejection::Refused { reason, data }
}

/// A failure of the run protocol, as the gateway gets it: the check fails closed.
fn failed(run: &str, error: RunError) -> Rejection {
    Rejection::Fault {
        run: run.to_owned(),
        error,
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
