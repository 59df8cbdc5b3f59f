//! The cross-surface differential test of the run protocol (docs/protocol.md): random
//! templates (steps, sequences, gates, properties) and random streams of calls — results
//! of every kind (success, `isError`, `input_required`, malformed), approvals, rejections,
//! dismissals, answers replayed and answers given for questions the run no longer
//! holds — go through every surface that takes them, and every surface must decide each
//! one as the reference does:
//!
//! - the **reference**: `orch_agent::Policy` over a `DynSession`, in memory (what the agent
//!   loop, the rig hook and the bindings' sessions call);
//! - **`orch policy`**: both ExtMcp phases over gRPC, as agentgateway drives them, by two
//!   instances sharing the run's store (every other call is settled by the instance that
//!   did not admit it), with faults: a call's result delivered a second time (it must
//!   change nothing), a call's request delivered again to the other instance while the
//!   call is in flight (refused as `busy`, never run), and a question's answer sent in
//!   another run (it applies to nothing there, and changes neither run);
//! - **`orch mcp`** on the 2026-07-28 revision family (answers come back on the retried
//!   call) and on the handshake family (the gateway asks in-band with
//!   `elicitation/create`), in front of an rmcp tool server that answers what the script
//!   says, with an rmcp client.
//!
//! Templates may carry rules on arguments (semantics §16): a required rule (a range, a
//! set, or a value an earlier result held) and a conditional approval; the upstream's
//! results hold values for `inResult` to read, and a broken rule's decision carries the
//! rule's name and words.
//!
//! A decision is what happened to a call — refused (with its kind), asked, or run and
//! recorded or not — and after every step, the tools a client is shown. A surface that
//! decides one call otherwise fails the test, with the smallest template and stream
//! proptest finds. (Tried: making `orch policy` record an `input_required` result, or
//! `orch mcp` ask again on a stale answer, fails it.)

use orch_agent::audit::{AuditEvent, Auditor, DecisionRecord};
use orch_agent::protocol::{self, Question, ToolResult};
use orch_agent::{Gate, Gated, Mode, Policy};
use orch_mcp::Gateway as McpGateway;
use orch_policy::Options;
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::Call;
use orch_store::SessionStore;
use orch_test_support::events::ArgumentRules;
use orch_test_support::ext_mcp::{self as support, Answered, Checked, Shared};
use proptest::prelude::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    InputResponses, ListToolsResult, PaginatedRequestParams, ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The tools every generated template declares.
const TOOLS: [&str; 4] = ["a", "b", "c", "d"];

/// What the upstream answers a forwarded call with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Ok,
    IsError,
    InputRequired,
    Malformed,
}

/// What the human says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Approve,
    Reject,
    Dismiss,
}

/// One step of a stream.
#[derive(Clone, Debug)]
enum Op {
    /// The model calls `tool` with `{"n": arg}`; if it goes upstream, the upstream answers
    /// `reply` (a success holds `{"n": [tool, tool + 1 mod 4]}`).
    Call { tool: usize, arg: u8, reply: Reply },
    /// The human answers the latest question (its call retried with the answer).
    Answer { said: Said, reply: Reply },
    /// The first answer ever sent, sent again (a replay, a late copy).
    Replay { reply: Reply },
    /// The last call's result delivered again (a gateway retrying its response phase,
    /// on either instance): it must change nothing. Only `orch policy` has such a
    /// phase; elsewhere it is nothing to do.
    ResultAgain,
    /// The latest question's answer sent in another run (`r2`): it applies to nothing
    /// there, runs nothing, and changes neither run. `orch mcp` over its one stdio
    /// connection serves one run: there it is nothing to do.
    ForeignAnswer { said: Said },
    /// The call delivered twice at once (a gateway retrying its request phase while the
    /// first copy is in flight): the copy is refused as `busy` and never runs; the first
    /// is decided as [`Op::Call`]. Over `orch mcp` a JSON-RPC request is one delivery:
    /// there it is [`Op::Call`].
    Twice { tool: usize, arg: u8, reply: Reply },
}

/// What became of one step.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    /// Refused, with the refusal's kind (for a broken rule, also the rule and the words
    /// the model reads).
    Refused(String),
    /// Put to a human.
    Asked,
    /// Sent upstream: recorded, or not.
    Ran { recorded: bool },
    /// Nothing to do (no question yet, nothing to replay).
    Skipped,
    /// Decided in another run (`r2`): the decision there, and where that run stands.
    Elsewhere(Box<Decision>, Position),
    /// The first copy's decision; the second copy was refused as `busy`.
    Twin(Box<Decision>),
}

/// One surface's view of one step: the decision, the tools shown after it, and where the
/// run stands in its store (step, sequence index, the tools recorded).
type Seen = (Decision, Vec<String>, Position);

/// Where a run stands: its step, sequence index and history (what was recorded).
type Position = (Option<String>, usize, Vec<Option<String>>);

fn position(session: &DynSession<'_>) -> Position {
    (
        session.step().map(str::to_owned),
        session.sequence_index(),
        session
            .history()
            .into_iter()
            .map(|t| t.map(str::to_owned))
            .collect(),
    )
}

/// The position of the run stored under `key` (a fresh run when nothing is stored).
async fn stored(store: &Shared, key: &str, machine: &DynMachine) -> Position {
    let Some(value) = store.load(key).await.expect("the store answers") else {
        return position(&DynSession::new(machine));
    };
    let record = orch_store::lease::Record::decode(&value.bytes).expect("a run record");
    match record.snapshot {
        None => position(&DynSession::new(machine)),
        Some(bytes) => {
            let snapshot = orch_runtime::Snapshot::from_bytes(&bytes).expect("a snapshot");
            position(&DynSession::restore(machine, &snapshot).expect("restores").0)
        }
    }
}

/// A generated step: allowed, denied and gated tools, and a sequence if any.
type StepParts = (
    Vec<&'static str>,
    Vec<&'static str>,
    Vec<&'static str>,
    Option<Vec<&'static str>>,
);

fn template() -> impl Strategy<Value = Value> {
    let subset = |most: usize| proptest::sample::subsequence(TOOLS.to_vec(), 0..=most);
    let allowed = prop_oneof![
        Just(Vec::new()),
        proptest::sample::subsequence(TOOLS.to_vec(), 2..=4)
    ];
    let sequence = proptest::option::of(proptest::sample::subsequence(TOOLS.to_vec(), 2..=3));
    let step = (allowed, subset(1), subset(2), sequence);
    (
        step.clone(),
        proptest::option::of((0..4usize, step)),
        subset(2),
        proptest::option::of((0..4usize, 1..3u8)),
        ArgumentRules::strategy(0.75),
    )
        .prop_map(|(first, second, gated, property, rules)| {
            let step_json = |name: &str, (allowed, denied, approve, sequence): StepParts| {
                let mut step = json!({"name": name, "availableTools": {"allowed": allowed, "denied": denied, "approve": approve}});
                if let Some(sequence) = sequence {
                    step["sequence"] = json!(sequence);
                }
                step
            };
            let mut steps = vec![step_json("S0", first)];
            steps[0]["isDefault"] = json!(true);
            if let Some((trigger, second)) = second {
                let mut s1 = step_json("S1", second);
                s1["conditions"] = json!([{"type": "tool_used", "value": TOOLS[trigger]}]);
                steps.push(s1);
            }
            let mut orchestration = json!({"steps": steps, "approve": gated});
            rules.apply(&mut orchestration, &TOOLS, "/n/*");
            if let Some((tool, most)) = property {
                orchestration["properties"] =
                    json!([{"name": "bounded", "tool": TOOLS[tool], "atMost": most}]);
            }
            json!({"agentId": "differential", "tools": TOOLS, "orchestration": orchestration})
        })
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        4 => Just(Reply::Ok),
        1 => Just(Reply::IsError),
        1 => Just(Reply::InputRequired),
        1 => Just(Reply::Malformed),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let said = prop_oneof![
        3 => Just(Said::Approve),
        1 => Just(Said::Reject),
        1 => Just(Said::Dismiss)
    ];
    prop_oneof![
        5 => (0..4usize, 0..4u8, reply()).prop_map(|(tool, arg, reply)| Op::Call { tool, arg, reply }),
        3 => (said, reply()).prop_map(|(said, reply)| Op::Answer { said, reply }),
        1 => reply().prop_map(|reply| Op::Replay { reply }),
        1 => Just(Op::ResultAgain),
        1 => prop_oneof![Just(Said::Approve), Just(Said::Reject)]
            .prop_map(|said| Op::ForeignAnswer { said }),
        1 => (0..4usize, 0..4u8, reply()).prop_map(|(tool, arg, reply)| Op::Twice { tool, arg, reply }),
    ]
}

fn args(arg: u8) -> Value {
    json!({"n": arg})
}

/// What a successful call of `tool` returns: `{"n": [tool, tool + 1 mod 4]}`.
fn values(tool: usize) -> Value {
    json!({"n": [tool, (tool + 1) % 4]})
}

/// The upstream's JSON result for `reply` to a call of `tool` (a success holds
/// [`values`], as structured content and as its text).
fn result_json(reply: Reply, tool: usize) -> Value {
    match reply {
        Reply::Ok => json!({
            "content": [{"type": "text", "text": values(tool).to_string()}],
            "structuredContent": values(tool),
        }),
        Reply::IsError => json!({"content": [{"type": "text", "text": "failed"}], "isError": true}),
        Reply::InputRequired => {
            json!({"resultType": "input_required", "inputRequests": {}, "requestState": "upstream"})
        }
        Reply::Malformed => json!({"foo": 1}),
    }
}

/// A question a surface put, and how its answer is sent back.
#[derive(Clone, Debug)]
struct Asked {
    tool: usize,
    arg: u8,
    /// The `requestState` the surface issued (the reference keeps the question itself).
    state: String,
}

/// The reference: the run protocol in memory.
struct Reference<'m> {
    policy: Policy,
    session: DynSession<'m>,
    /// Run `r2`, where answers of `r`'s questions are sent ([`Op::ForeignAnswer`]).
    other: DynSession<'m>,
    question: Option<(Asked, Question)>,
    first_answer: Option<(Asked, Question, Said)>,
}

impl<'m> Reference<'m> {
    fn new(machine: &'m DynMachine) -> Self {
        Self::with(machine, Policy::new(TOOLS))
    }

    /// The reference deciding with `policy` (a mode, a decision log).
    fn with(machine: &'m DynMachine, policy: Policy) -> Self {
        let mut session = DynSession::new(machine);
        policy.prepare(&mut session);
        let mut other = DynSession::new(machine);
        policy.prepare(&mut other);
        Reference {
            policy,
            session,
            other,
            question: None,
            first_answer: None,
        }
    }

    fn gate_call(&mut self, tool: usize, arg: u8, gate: Gate<'_>, reply: Reply) -> Decision {
        let text = args(arg).to_string();
        let digest = Call::of_text(TOOLS[tool], &text);
        match self
            .policy
            .admit_gated(&mut self.session, TOOLS[tool], &digest, gate)
        {
            Gated::Admitted { .. } => {
                let result = result_json(reply, tool);
                let recorded = protocol::classify(&result) == ToolResult::Ran;
                if recorded {
                    match protocol::result_values(&result) {
                        Some(values) => {
                            self.policy
                                .record_result(&mut self.session, TOOLS[tool], &values)
                        }
                        None => self.policy.record(&mut self.session, TOOLS[tool]),
                    };
                }
                Decision::Ran { recorded }
            }
            Gated::Refused {
                question: Some(q), ..
            } => {
                let asked = Asked {
                    tool,
                    arg,
                    state: q.ticket().to_string(),
                };
                self.question = Some((asked, q));
                Decision::Asked
            }
            Gated::Refused { refusal, .. } => Decision::Refused(match &refusal.rule {
                Some(rule) => format!("{}:{rule}: {}", refusal.kind.as_str(), refusal.reason),
                None => refusal.kind.as_str().to_owned(),
            }),
        }
    }

    fn answer(&mut self, asked: &Asked, question: &Question, said: Said, reply: Reply) -> Decision {
        let approved = match said {
            Said::Dismiss => return Decision::Refused("needs_approval".into()),
            Said::Approve => true,
            Said::Reject => false,
        };
        let gate = Gate::Answer {
            run: "r",
            ticket: question.ticket(),
            approved,
        };
        self.gate_call(asked.tool, asked.arg, gate, reply)
    }

    fn apply(&mut self, op: &Op) -> Seen {
        let ask = Gate::Ask {
            run: "r",
            ttl: Duration::from_secs(3600),
        };
        let decision = match *op {
            Op::Call { tool, arg, reply } => self.gate_call(tool, arg, ask, reply),
            Op::Answer { said, reply } => match self.question.clone() {
                None => Decision::Skipped,
                Some((asked, question)) => {
                    if self.first_answer.is_none() {
                        self.first_answer = Some((asked.clone(), question.clone(), said));
                    }
                    self.answer(&asked, &question, said, reply)
                }
            },
            Op::Replay { reply } => match self.first_answer.clone() {
                None => Decision::Skipped,
                Some((asked, question, said)) => self.answer(&asked, &question, said, reply),
            },
            Op::ResultAgain => Decision::Skipped,
            Op::ForeignAnswer { said } => match self.question.clone() {
                None => Decision::Skipped,
                Some((asked, question)) => {
                    // `r`'s question answered in `r2`: judged there, against `r2`'s state.
                    std::mem::swap(&mut self.session, &mut self.other);
                    let gate = Gate::Answer {
                        run: "r2",
                        ticket: question.ticket(),
                        approved: said == Said::Approve,
                    };
                    let decision = self.gate_call(asked.tool, asked.arg, gate, Reply::Ok);
                    std::mem::swap(&mut self.session, &mut self.other);
                    Decision::Elsewhere(Box::new(decision), position(&self.other))
                }
            },
            Op::Twice { tool, arg, reply } => {
                Decision::Twin(Box::new(self.gate_call(tool, arg, ask, reply)))
            }
        };
        let mut shown = self.policy.offered(&self.session);
        shown.sort();
        (decision, shown, position(&self.session))
    }
}

/// Builds the retry of `asked` carrying `said`, as params JSON.
fn retry_params(asked: &Asked, said: Said) -> Value {
    let response = match said {
        Said::Approve => json!({"action": "accept", "content": {"approve": true}}),
        Said::Reject => json!({"action": "accept", "content": {"approve": false}}),
        Said::Dismiss => json!({"action": "cancel"}),
    };
    json!({
        "name": TOOLS[asked.tool], "arguments": args(asked.arg),
        "requestState": asked.state, "inputResponses": {"orch_approval": response},
    })
}

/// `orch policy`, driven as agentgateway drives it, by two instances sharing the run's
/// store: every other call's response phase (and every repeated result) goes to the
/// instance that did not admit it.
struct PolicySurface<'m> {
    gw: support::Gateway,
    other: support::Gateway,
    calls: usize,
    /// The last admitted call's token and result, for [`Op::ResultAgain`].
    last: Option<(Option<String>, Value)>,
    store: Shared,
    machine: &'m DynMachine,
    question: Option<Asked>,
    first_answer: Option<(Asked, Said)>,
}

impl<'m> PolicySurface<'m> {
    /// Two instances of `orch policy` with `options`, sharing one store.
    async fn start(text: &str, machine: &'m DynMachine, options: Options) -> PolicySurface<'m> {
        let store = Shared::default();
        // A copy of a call in flight waits this long before it is refused as busy.
        let options = Options {
            busy_wait: Duration::from_millis(20),
            ..options
        };
        let url = support::start(text, store.clone(), options.clone()).await;
        let second = support::start(text, store.clone(), options).await;
        PolicySurface {
            gw: support::Gateway::connect(&url, "r").await,
            other: support::Gateway::connect(&second, "r").await,
            calls: 0,
            last: None,
            store,
            machine,
            question: None,
            first_answer: None,
        }
    }

    /// The instance the next response phase goes to: each in turn.
    fn settling(&mut self) -> &mut support::Gateway {
        self.calls += 1;
        match self.calls % 2 {
            0 => &mut self.other,
            _ => &mut self.gw,
        }
    }

    /// One call in `run` (`r`, or `r2` for another run's answer). `twin`: while it is in
    /// flight the same request phase comes again, and must be refused as `busy`.
    async fn send(&mut self, run: &str, params: Value, reply: Reply, twin: bool) -> Decision {
        let key = format!("run:{run}");
        let mut gw = self.gw.for_run(run);
        let checked = gw
            .request_raw("tools/call", Some(params.to_string().into_bytes()))
            .await;
        match checked {
            Checked::Admitted(token, _) => {
                let tool = TOOLS
                    .iter()
                    .position(|t| params["name"] == *t)
                    .expect("a template tool");
                if twin {
                    // The copy, on the other instance, while the first holds the run.
                    let copy = self
                        .other
                        .for_run(run)
                        .request_raw("tools/call", Some(params.to_string().into_bytes()))
                        .await;
                    let kind = match &copy {
                        Checked::Rejected(_) => copy.data()["refusal"]["reason"]
                            .as_str()
                            .unwrap_or("none")
                            .to_owned(),
                        Checked::Admitted(..) => "admitted".to_owned(),
                    };
                    if kind != "busy" {
                        return Decision::Refused(format!("the copy in flight was {kind}"));
                    }
                }
                let before = stored(&self.store, &key, self.machine).await;
                let result = result_json(reply, tool);
                let answered = self
                    .settling()
                    .for_run(run)
                    .respond(token.as_deref(), result.clone())
                    .await;
                self.last = Some((token.clone(), result));
                match (&answered, reply) {
                    (Answered::Pass, Reply::Ok | Reply::IsError | Reply::InputRequired) => {}
                    (Answered::Rejected(..), Reply::Malformed) => {}
                    _ => panic!("orch policy answered {answered:?} to a {reply:?} result"),
                }
                // Recorded: the run's history changed (streams are too short for a full
                // history to come out the same).
                let after = stored(&self.store, &key, self.machine).await;
                Decision::Ran {
                    recorded: after.2 != before.2,
                }
            }
            Checked::Rejected(e) if e.mcp_error.is_none() => {
                // A dismissed question: refused, with no refusal data.
                assert!(e.reason.contains("dismissed"), "{e:?}");
                Decision::Refused("needs_approval".into())
            }
            Checked::Rejected(_) => {
                let data = checked.data();
                if let Some(state) = data["approval"]["requestState"].as_str() {
                    let tool = TOOLS
                        .iter()
                        .position(|t| params["name"] == *t)
                        .expect("a template tool");
                    let arg = params["arguments"]["n"].as_u64().unwrap_or(0) as u8;
                    if run == "r" {
                        self.question = Some(Asked {
                            tool,
                            arg,
                            state: state.to_owned(),
                        });
                    }
                    return Decision::Asked;
                }
                Decision::Refused(refused(&data))
            }
        }
    }

    async fn apply(&mut self, op: &Op) -> Seen {
        let decision = match *op {
            Op::Call { tool, arg, reply } => {
                let params = json!({"name": TOOLS[tool], "arguments": args(arg)});
                self.send("r", params, reply, false).await
            }
            Op::Twice { tool, arg, reply } => {
                let params = json!({"name": TOOLS[tool], "arguments": args(arg)});
                Decision::Twin(Box::new(self.send("r", params, reply, true).await))
            }
            Op::Answer { said, reply } => match self.question.clone() {
                None => Decision::Skipped,
                Some(asked) => {
                    if self.first_answer.is_none() {
                        self.first_answer = Some((asked.clone(), said));
                    }
                    self.send("r", retry_params(&asked, said), reply, false)
                        .await
                }
            },
            Op::Replay { reply } => match self.first_answer.clone() {
                None => Decision::Skipped,
                Some((asked, said)) => {
                    self.send("r", retry_params(&asked, said), reply, false)
                        .await
                }
            },
            Op::ForeignAnswer { said } => match self.question.clone() {
                None => Decision::Skipped,
                Some(asked) => {
                    let decision = self
                        .send("r2", retry_params(&asked, said), Reply::Ok, false)
                        .await;
                    let there = stored(&self.store, "run:r2", self.machine).await;
                    Decision::Elsewhere(Box::new(decision), there)
                }
            },
            Op::ResultAgain => match self.last.clone() {
                None => Decision::Skipped,
                Some((token, result)) => {
                    let before = stored(&self.store, "run:r", self.machine).await;
                    let _ = self.settling().respond(token.as_deref(), result).await;
                    let after = stored(&self.store, "run:r", self.machine).await;
                    match after == before {
                        true => Decision::Skipped,
                        false => Decision::Ran { recorded: true },
                    }
                }
            },
        };
        let mut shown = self.gw.list(&TOOLS).await;
        shown.sort();
        let at = stored(&self.store, "run:r", self.machine).await;
        (decision, shown, at)
    }
}

/// A refusal's decision from a gateway's refusal data: its kind, and for a broken rule
/// the rule and the words the model reads.
fn refused(data: &Value) -> String {
    let kind = data["refusal"]["reason"].as_str().unwrap_or("none");
    match data["refusal"]["rule"].as_str() {
        Some(rule) => format!(
            "{kind}:{rule}: {}",
            data["refusal"]["message"].as_str().unwrap_or_default()
        ),
        None => kind.to_owned(),
    }
}

/// The upstream behind `orch mcp`: answers each call as the script says next.
#[derive(Clone, Default)]
struct Upstream {
    replies: Arc<Mutex<VecDeque<Reply>>>,
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> rmcp::model::InitializeResult {
        orch_test_support::mcp_load::tool_server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(serde_json::Map::from_iter([(
            "type".to_owned(),
            Value::from("object"),
        )]));
        let tools = TOOLS
            .iter()
            .map(|name| rmcp::model::Tool::new(*name, "a tool", Arc::clone(&schema)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let reply = self.replies.lock().expect("lock").pop_front();
        let tool = TOOLS.iter().position(|t| *t == request.name).unwrap_or(0);
        match reply.unwrap_or(Reply::Ok) {
            Reply::Ok => Ok(CallToolResult::structured(values(tool)).into()),
            Reply::IsError => Ok(CallToolResult::error(vec![ContentBlock::text("failed")]).into()),
            Reply::InputRequired => Ok(CallToolResponse::InputRequired(
                rmcp::model::InputRequiredResult::new(None, Some("upstream".into())),
            )),
            // The SDK cannot send a malformed result; a JSON-RPC error is the nearest
            // thing that says nothing about the tool having run.
            Reply::Malformed => Err(ErrorData::internal_error("no result", None)),
        }
    }
}

/// The client of `orch mcp`: answers in-band questions (handshake revisions) as the
/// script says next.
#[derive(Clone, Default)]
struct Client {
    answers: Arc<Mutex<VecDeque<Said>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities.elicitation = Some(ElicitationCapability::default());
        info
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let said = self.answers.lock().expect("lock").pop_front();
        Ok(match said.unwrap_or(Said::Dismiss) {
            Said::Approve => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
            }
            Said::Reject => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": false}))
            }
            Said::Dismiss => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

/// `orch mcp` in-process over pipes, one run (the stdio connection's).
struct McpSurface<'m> {
    client: RunningService<RoleClient, Client>,
    store: Shared,
    machine: &'m DynMachine,
    upstream: Upstream,
    answers: Arc<Mutex<VecDeque<Said>>>,
    modern: bool,
    question: Option<Asked>,
    first_answer: Option<(Asked, Said)>,
}

impl<'m> McpSurface<'m> {
    async fn start(template: &str, machine: &'m DynMachine, modern: bool) -> McpSurface<'m> {
        Self::start_with(template, machine, modern, &orch_mcp::Options::default()).await
    }

    async fn start_with(
        template: &str,
        machine: &'m DynMachine,
        modern: bool,
        options: &orch_mcp::Options,
    ) -> McpSurface<'m> {
        let compiled = orch_codegen::compile_json(template, None)
            .to_machine()
            .expect("the template compiles");
        let store = Shared::default();
        let upstream = Upstream::default();
        let (to_upstream, upstream_end) = tokio::io::duplex(1 << 16);
        let served = upstream.clone();
        tokio::spawn(async move {
            if let Ok(running) = rmcp::serve_server(served, upstream_end).await {
                let _ = running.waiting().await;
            }
        });
        let gateway = McpGateway::start_on(
            compiled,
            to_upstream,
            "the scripted server",
            store.clone(),
            options,
        )
        .await
        .expect("the gateway starts");
        let (client_end, gateway_end) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(gateway_end);
        tokio::spawn(gateway.serve_io(read, write));
        let handler = Client::default();
        let answers = Arc::clone(&handler.answers);
        let client = rmcp::serve_client(handler, client_end)
            .await
            .expect("handshake");
        McpSurface {
            client,
            store,
            machine,
            upstream,
            answers,
            modern,
            question: None,
            first_answer: None,
        }
    }

    /// One `tools/call`, as the script's next upstream reply.
    async fn send(&mut self, mut params: CallToolRequestParams, reply: Reply) -> Decision {
        self.upstream.replies.lock().expect("lock").push_back(reply);
        if self.modern {
            let mut meta = RequestMetaObject::default();
            meta.set_protocol_version(ProtocolVersion::V_2026_07_28);
            let mut capabilities = ClientCapabilities::default();
            capabilities.elicitation = Some(ElicitationCapability::default());
            meta.set_client_capabilities(capabilities);
            params.meta = Some(meta);
        }
        let tool = TOOLS
            .iter()
            .position(|t| *t == params.name)
            .expect("a template tool");
        let arg = params
            .arguments
            .as_ref()
            .and_then(|a| a.get("n"))
            .and_then(Value::as_u64)
            .unwrap_or(0) as u8;
        let before = self.at().await;
        let answered = self.client.peer().call_tool_once(params).await;
        // A call that never went upstream leaves its reply unused.
        let unused = self.upstream.replies.lock().expect("lock").pop_back();
        let went_upstream = unused.is_none();
        // Recorded: the run's history changed.
        let recorded = self.at().await.2 != before.2;
        match answered {
            Err(e) => {
                assert!(went_upstream, "an error before the upstream was asked: {e}");
                Decision::Ran { recorded }
            }
            Ok(CallToolResponse::InputRequired(result)) if !went_upstream => {
                let state = result.request_state.clone().expect("a requestState");
                self.question = Some(Asked { tool, arg, state });
                Decision::Asked
            }
            Ok(CallToolResponse::Complete(result)) if !went_upstream => {
                let data = result.structured_content.unwrap_or_default();
                assert_eq!(result.is_error, Some(true), "{data}");
                Decision::Refused(refused(&data))
            }
            Ok(CallToolResponse::Complete(_)) => Decision::Ran { recorded },
            Ok(other) => {
                assert!(went_upstream, "{other:?}");
                Decision::Ran { recorded }
            }
        }
    }

    fn call_params(tool: usize, arg: u8) -> CallToolRequestParams {
        let mut params = CallToolRequestParams::new(TOOLS[tool]);
        params.arguments = args(arg).as_object().cloned();
        params
    }

    fn retry(asked: &Asked, said: Said) -> CallToolRequestParams {
        let mut params = Self::call_params(asked.tool, asked.arg);
        let response = match said {
            Said::Approve => json!({"action": "accept", "content": {"approve": true}}),
            Said::Reject => json!({"action": "accept", "content": {"approve": false}}),
            Said::Dismiss => json!({"action": "cancel"}),
        };
        let mut responses = InputResponses::new();
        responses.insert("orch_approval".into(), response);
        params.input_responses = Some(responses);
        params.request_state = Some(asked.state.clone());
        params
    }

    async fn apply(&mut self, op: &Op) -> Seen {
        let decision = match (op.clone(), self.modern) {
            (Op::Call { tool, arg, reply }, true) => {
                self.send(Self::call_params(tool, arg), reply).await
            }
            (Op::Answer { said, reply }, true) => match self.question.clone() {
                None => Decision::Skipped,
                Some(asked) => {
                    if self.first_answer.is_none() {
                        self.first_answer = Some((asked.clone(), said));
                    }
                    self.send(Self::retry(&asked, said), reply).await
                }
            },
            (Op::Replay { reply }, true) => match self.first_answer.clone() {
                None => Decision::Skipped,
                Some((asked, said)) => self.send(Self::retry(&asked, said), reply).await,
            },
            // The upstream's result comes once, on the call's own exchange.
            (Op::ResultAgain, true) => Decision::Skipped,
            // One JSON-RPC request is one delivery (rmcp refuses a second request under
            // an id in flight).
            (Op::Twice { tool, arg, reply }, true) => Decision::Twin(Box::new(
                self.send(Self::call_params(tool, arg), reply).await,
            )),
            // One stdio connection, one run: there is no other run to answer in.
            (Op::ForeignAnswer { .. }, true) => Decision::Skipped,
            // On a handshake revision the question is answered in-band, within the call
            // (`handshake_stream`).
            (_, false) => unreachable!("handshake streams are replayed by `handshake_stream`"),
        };
        (decision, self.shown().await, self.at().await)
    }

    /// Where the stdio connection's run stands in the store.
    async fn at(&self) -> Position {
        let key = format!("stdio-{}", std::process::id());
        stored(&self.store, &key, self.machine).await
    }

    async fn shown(&self) -> Vec<String> {
        let mut shown: Vec<String> = self
            .client
            .peer()
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        shown.sort();
        shown
    }
}

/// How many calls the streams had refused for a broken rule (the generator must reach
/// them).
static BROKEN_RULES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many answers the streams sent in another run while a question was open, and how
/// many calls were delivered twice while in flight (the generator must reach both).
static FOREIGN_ANSWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static TWINS_IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs `ops` through the reference and every surface; the first divergence, if any.
async fn run(template: &Value, ops: &[Op]) -> Result<(), String> {
    let text = template.to_string();
    let compiled = orch_codegen::compile_json(&text, None);
    let machine = compiled
        .to_machine()
        .ok_or_else(|| "the template does not compile".to_owned())?;
    let mut reference = Reference::new(&machine);
    let mut policy = PolicySurface::start(&text, &machine, Options::default()).await;
    let mut modern = McpSurface::start(&text, &machine, true).await;
    for (i, op) in ops.iter().enumerate() {
        let expected = reference.apply(op);
        if matches!(&expected.0, Decision::Refused(kind) if kind.starts_with("broken_rule:")) {
            BROKEN_RULES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        match &expected.0 {
            Decision::Elsewhere(..) => {
                FOREIGN_ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Decision::Twin(first) if matches!(**first, Decision::Ran { .. }) => {
                TWINS_IN_FLIGHT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            _ => {}
        }
        if std::env::var("ORCH_DIFFERENTIAL_TRACE").is_ok() {
            eprintln!("{op:?} -> {:?}", expected.0);
        }
        both_gateways_decide(i, op, expected, &mut policy, &mut modern, "").await?;
    }
    handshake_stream(&text, &machine, ops).await
}

/// `orch policy` and `orch mcp` (2026-07-28) decide step `i` (`op`) as the reference
/// did (`expected`); `mode` names the mode in a divergence (`""`: enforce).
async fn both_gateways_decide(
    i: usize,
    op: &Op,
    expected: Seen,
    policy: &mut PolicySurface<'_>,
    modern: &mut McpSurface<'_>,
    mode: &str,
) -> Result<(), String> {
    let seen = policy.apply(op).await;
    if seen != expected {
        return Err(format!(
            "orch policy{mode} diverges at step {i} ({op:?}): {seen:?}, the reference {expected:?}"
        ));
    }
    let seen = modern.apply(op).await;
    let expected = match op {
        // `orch mcp` has no other run here: nothing happens, and `r` is unchanged.
        Op::ForeignAnswer { .. } => (Decision::Skipped, expected.1, expected.2),
        _ => expected,
    };
    if seen != expected {
        return Err(format!(
            "orch mcp (2026-07-28){mode} diverges at step {i} ({op:?}): {seen:?}, the reference {expected:?}"
        ));
    }
    Ok(())
}

/// [`run`] on a runtime of its own (each case's gateways and tasks end with it).
fn run_blocking(template: &Value, ops: &[Op]) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let outcome = runtime.block_on(run(template, ops));
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}

/// The handshake family: `orch mcp` asks in-band, so a question and its answer are one
/// call. The stream is replayed as such: each call the reference asks about is answered
/// by the next `Answer` of the stream (or dismissed when there is none before the next
/// call); replays do not exist in-band and are left out.
async fn handshake_stream(text: &str, machine: &DynMachine, ops: &[Op]) -> Result<(), String> {
    let mut reference = Reference::new(machine);
    let mut legacy = McpSurface::start(text, machine, false).await;
    let mut i = 0;
    while i < ops.len() {
        // A copy delivered twice is one call on a handshake connection.
        let (Op::Call { tool, arg, reply } | Op::Twice { tool, arg, reply }) = ops[i] else {
            i += 1;
            continue;
        };
        // The answer the human gives if asked: the stream's next answer before its next
        // call, else a dismissal.
        let next = ops[i + 1..]
            .iter()
            .take_while(|op| !matches!(op, Op::Call { .. } | Op::Twice { .. }))
            .find_map(|op| match op {
                Op::Answer { said, reply } => Some((*said, *reply)),
                _ => None,
            });
        let (said, answer_reply) = next.unwrap_or((Said::Dismiss, Reply::Ok));
        let (mut expected, _, _) = reference.apply(&Op::Call { tool, arg, reply });
        let upstream_reply = if expected == Decision::Asked {
            expected = reference
                .apply(&Op::Answer {
                    said,
                    reply: answer_reply,
                })
                .0;
            answer_reply
        } else {
            reply
        };
        let mut shown = reference.policy.offered(&reference.session);
        shown.sort();
        let want = (expected, shown, position(&reference.session));
        legacy.answers.lock().expect("lock").push_back(said);
        let decision = legacy
            .send(McpSurface::call_params(tool, arg), upstream_reply)
            .await;
        legacy.answers.lock().expect("lock").clear();
        let seen = (decision, legacy.shown().await, legacy.at().await);
        if seen != want {
            return Err(format!(
                "orch mcp (handshake) diverges at call {i} ({:?}): {seen:?}, the reference {want:?}",
                ops[i]
            ));
        }
        i += 1;
    }
    Ok(())
}

/// Runs on a fixed seed (the same cases on every run and in CI; more with
/// `ORCH_DIFFERENTIAL_CASES`), and reports the smallest diverging template and stream.
#[test]
fn every_surface_decides_every_call_as_the_reference_does() {
    let cases = std::env::var("ORCH_DIFFERENTIAL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(96);
    // At most 10 steps: fewer recorded tools than the shortest history (10) holds, so a
    // recorded tool always changes it.
    let strategy = (template(), proptest::collection::vec(op(), 1..11));
    orch_test_support::events::check(cases, strategy, |(template, ops)| {
        let compiled = orch_codegen::compile_json(&template.to_string(), None);
        prop_assume!(compiled.to_machine().is_some());
        if let Err(divergence) = run_blocking(&template, &ops) {
            prop_assert!(false, "{divergence}\ntemplate: {template}");
        }
        Ok(())
    });
    for (count, what) in [
        (&BROKEN_RULES, "no stream broke a rule on arguments"),
        (
            &FOREIGN_ANSWERS,
            "no stream answered a question in another run",
        ),
        (
            &TWINS_IN_FLIGHT,
            "no stream delivered a call twice while it was in flight",
        ),
    ] {
        assert!(
            count.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "{what}"
        );
    }
    eprintln!(
        "faults: {} answers in another run, {} copies of a call in flight",
        FOREIGN_ANSWERS.load(std::sync::atomic::Ordering::Relaxed),
        TWINS_IN_FLIGHT.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// A fixed stream every surface must decide as the reference does, so that values from
/// results, broken rules and conditional approvals are covered on every run whatever the
/// random streams reach: `b` only with a value `a` returned, `c` asked about from 2 up.
#[test]
fn rules_on_arguments_are_decided_alike_on_a_fixed_stream() {
    let template = json!({"agentId": "differential", "tools": TOOLS, "orchestration": {
        "approve": [{"name": "large", "tool": "c", "when": {"path": "/n", "range": {"min": 2}}}],
        "rules": [{"name": "small", "tool": "b", "require": {"path": "/n", "inResult": {"tool": "a", "path": "/n/*"}}}],
        "steps": [{"name": "S0", "isDefault": true}]}});
    let call = |tool: usize, arg: u8, reply: Reply| Op::Call { tool, arg, reply };
    let ops = [
        call(1, 1, Reply::Ok), // refused: `a` has returned nothing yet
        call(0, 0, Reply::IsError),
        call(1, 1, Reply::Ok), // refused: a failed result holds no values
        call(0, 0, Reply::Ok), // `a` returns {"n": [0, 1]}
        call(1, 1, Reply::Ok), // runs
        call(1, 3, Reply::Ok), // refused: 3 is not a value `a` returned
        call(2, 1, Reply::Ok), // runs, ungated
        call(2, 3, Reply::Ok), // asked
        Op::Answer {
            said: Said::Approve,
            reply: Reply::Ok,
        },
        call(2, 3, Reply::Ok), // asked again: an approval is for one call
    ];
    if let Err(divergence) = run_blocking(&template, &ops) {
        panic!("{divergence}");
    }
    // The reference decides as the comments say.
    let machine = orch_codegen::compile_json(&template.to_string(), None)
        .to_machine()
        .expect("compiles");
    let mut reference = Reference::new(&machine);
    let decisions: Vec<String> = ops
        .iter()
        .map(|op| match reference.apply(op).0 {
            Decision::Refused(kind) => kind.split(':').next().unwrap_or("").to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        decisions,
        [
            "broken_rule",
            "Ran { recorded: false }",
            "broken_rule",
            "Ran { recorded: true }",
            "Ran { recorded: true }",
            "broken_rule",
            "Ran { recorded: true }",
            "Asked",
            "Ran { recorded: true }",
            "Asked",
        ]
    );
}

/// A decision log kept in memory: the records of the calls judged, as (tool, decision,
/// refusal kind or rule outcome), and whether every record says it was observed.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<DecisionRecord>>>);

impl Log {
    fn auditor(&self) -> Arc<Auditor> {
        let sink = Arc::clone(&self.0);
        let write = move |r: &DecisionRecord| sink.lock().expect("lock").push(r.clone());
        Arc::new(Auditor::new(write, "r"))
    }

    /// The decisions about calls, in order.
    fn calls(&self) -> Vec<(String, String, Option<String>)> {
        let records = self.0.lock().expect("lock");
        records
            .iter()
            .filter_map(|r| match &r.event {
                AuditEvent::Call { tool, .. } => {
                    Some((tool.clone(), r.decision.clone(), r.outcome.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Every record of the log was written in observe mode.
    fn all_observed(&self) -> bool {
        let records = self.0.lock().expect("lock");
        !records.is_empty() && records.iter().all(|r| r.mode == Mode::Observe)
    }
}

/// What an enforcing policy decides about `call` of `tool` now, as the log writes it.
fn would(
    policy: &Policy,
    session: &DynSession<'_>,
    tool: &str,
    call: &Call<'_>,
) -> (String, Option<String>) {
    match policy.refusal_of(session, tool, call) {
        None => ("admitted".to_owned(), None),
        Some(r) => {
            let decision = match r.kind {
                orch_agent::RefusalKind::NeedsApproval => "needs_approval",
                orch_agent::RefusalKind::Rejected => "rejected",
                _ => "refused",
            };
            (decision.to_owned(), Some(r.kind.as_str().to_owned()))
        }
    }
}

/// Observe mode on every surface: the same stream through the reference and `orch
/// policy` (two instances, one store) and `orch mcp` (2026-07-28), each in observe
/// mode. Every call runs (a copy in flight is still `busy`: that is the run protocol's,
/// not the template's), every tool is shown, and the run stands where an *enforcing*
/// session stands when the same calls run; each call's logged decision is what the
/// enforcing session would have decided there, and each surface logs the same decisions.
async fn observe_run(template: &Value, ops: &[Op]) -> Result<usize, String> {
    let text = template.to_string();
    let machine = orch_codegen::compile_json(&text, None)
        .to_machine()
        .ok_or_else(|| "the template does not compile".to_owned())?;
    let logs = [Log::default(), Log::default(), Log::default()];
    let observing = |log: &Log| {
        Policy::new(TOOLS)
            .in_mode(Mode::Observe)
            .audited(log.auditor())
    };
    let mut reference = Reference::with(&machine, observing(&logs[0]));
    // The same calls, run by an enforcing policy's session whatever it would decide.
    let enforcing = Policy::new(TOOLS);
    let mut enforced = DynSession::new(&machine);
    enforcing.prepare(&mut enforced);
    let mut would_decide = Vec::new();
    let policy_options = Options {
        mode: Mode::Observe,
        audit: Some(logs[1].auditor()),
        ..Options::default()
    };
    let mut policy = PolicySurface::start(&text, &machine, policy_options).await;
    let mcp_options = orch_mcp::Options {
        mode: Mode::Observe,
        audit: Some(logs[2].auditor()),
        ..orch_mcp::Options::default()
    };
    let mut modern = McpSurface::start_with(&text, &machine, true, &mcp_options).await;
    let mut all = TOOLS.map(str::to_owned).to_vec();
    all.sort();
    for (i, op) in ops.iter().enumerate() {
        if let Op::Call { tool, arg, reply } | Op::Twice { tool, arg, reply } = *op {
            let text = args(arg).to_string();
            let call = Call::of_text(TOOLS[tool], &text);
            would_decide.push((
                TOOLS[tool].to_owned(),
                would(&enforcing, &enforced, TOOLS[tool], &call),
            ));
            enforced.ran_call(TOOLS[tool], &call);
            let result = result_json(reply, tool);
            if protocol::classify(&result) == ToolResult::Ran {
                match protocol::result_values(&result) {
                    Some(values) => enforcing.record_result(&mut enforced, TOOLS[tool], &values),
                    None => enforcing.record(&mut enforced, TOOLS[tool]),
                };
            }
        }
        let expected = reference.apply(op);
        let ran = match &expected.0 {
            Decision::Ran { .. } | Decision::Skipped => true,
            Decision::Twin(first) => matches!(**first, Decision::Ran { .. }),
            _ => false,
        };
        if !ran || expected.1 != all {
            return Err(format!(
                "observe mode refused or asked at step {i} ({op:?}): {expected:?}"
            ));
        }
        if expected.2 != position(&enforced) {
            return Err(format!(
                "observe mode stands at {:?} after step {i} ({op:?}); enforce mode with the same calls run at {:?}",
                expected.2,
                position(&enforced)
            ));
        }
        both_gateways_decide(i, op, expected, &mut policy, &mut modern, " (observe)").await?;
    }
    let logged = logs[0].calls();
    let wanted: Vec<_> = would_decide
        .into_iter()
        .map(|(tool, (decision, outcome))| (tool, decision, outcome))
        .collect();
    // An admitted call's record has no outcome; a refused one's is its kind.
    if logged != wanted {
        return Err(format!(
            "the reference logged {logged:?}; enforce mode decides {wanted:?}"
        ));
    }
    for (log, surface) in logs
        .iter()
        .zip(["the reference", "orch policy", "orch mcp"])
    {
        if log.calls() != wanted {
            return Err(format!(
                "{surface} logged {:?}; enforce mode decides {wanted:?}",
                log.calls()
            ));
        }
        if !wanted.is_empty() && !log.all_observed() {
            return Err(format!(
                "{surface} logged a record without `\"mode\":\"observe\"`"
            ));
        }
    }
    Ok(wanted.iter().filter(|(_, d, _)| d != "admitted").count())
}

/// Observe mode decides alike on every surface, and as enforce mode would with the same
/// calls run ([`observe_run`]), on a fixed seed.
#[test]
fn observe_mode_runs_every_call_and_logs_what_enforce_mode_would_decide() {
    let cases = std::env::var("ORCH_DIFFERENTIAL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48);
    let strategy = (template(), proptest::collection::vec(op(), 1..11));
    static WOULD_REFUSE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    orch_test_support::events::check(cases, strategy, |(template, ops)| {
        let compiled = orch_codegen::compile_json(&template.to_string(), None);
        prop_assume!(compiled.to_machine().is_some());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let outcome = runtime.block_on(observe_run(&template, &ops));
        runtime.shutdown_timeout(Duration::from_secs(1));
        match outcome {
            Ok(would_refuse) => {
                WOULD_REFUSE.fetch_add(would_refuse, std::sync::atomic::Ordering::Relaxed);
            }
            Err(divergence) => prop_assert!(false, "{divergence}\ntemplate: {template}"),
        }
        Ok(())
    });
    // The streams must reach calls enforce mode refuses or asks about.
    assert!(
        WOULD_REFUSE.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no call would have been refused"
    );
}
