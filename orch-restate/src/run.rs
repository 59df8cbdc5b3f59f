//! `OrchRun`: a run as a Restate virtual object.

use crate::approvals::{OrchApprovalsClient, Pending, Resolution};
use crate::{Runs, Template, ToolCall};
use orch_agent::protocol::{self, ToolResult, Unanswered};
use orch_agent::run_host::{Begin, OnGate, RunHost};
use orch_agent::{Refusal, RefusalKind};
use orch_runtime::DynSession;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// State: the session's snapshot bytes (by names; they carry the fingerprint of the
/// template they were written with).
const SESSION: &str = "session";

/// A tool call: `{"tool": "refund", "arguments": {"order": "A-1", "amount": 120}}`
/// (`arguments` may be left out: `{}`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// The call's id, as the caller knows it (a model's tool call id): the same call
    /// delivered again under its id gets what it got the first time (one call runs
    /// once). Left out, the call is this invocation of `OrchRun/call` (Restate's
    /// invocation id; an invocation retried with its idempotency key is the same call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool.
    pub tool: String,
    /// Its arguments, kept byte for byte (the call's identity is taken over them, and
    /// the tool gets them as written).
    #[serde(default)]
    pub arguments: Option<Box<RawValue>>,
}

impl CallRequest {
    /// The arguments' text (`{}` when none were given).
    pub fn arguments_text(&self) -> &str {
        self.arguments.as_deref().map_or("{}", RawValue::get)
    }
}

/// How a call ended (the reply's `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The tool ran and the run recorded it.
    Ran,
    /// The tool was run and did not complete (an error result, a result that is not a
    /// complete `CallToolResult`, or every attempt failed): nothing recorded.
    NotRun,
    /// The run refused the call: the tool never ran.
    Refused,
}

/// The answer to a call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallReply {
    /// What came of it.
    pub outcome: Ended,
    /// The tool's result, when it was run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub result: Option<Value>,
    /// Why it did not run (refused) or did not count (`not_run`: `error`,
    /// `input_required`, `malformed`, `failed: …`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub refusal: Option<Refusal>,
    /// Why a tool that was run did not count.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub not_run: Option<String>,
    /// The active step after the call.
    pub step: Option<String>,
    /// The tools allowed after the call.
    pub allowed: Vec<String>,
}

/// A run as it stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The template's name.
    pub template: String,
    /// The active step.
    pub step: Option<String>,
    /// The tools allowed now (gated ones included: they wait for a human).
    pub allowed: Vec<String>,
    /// What the active step's sequence expects next, if it has one.
    pub expected: Option<Vec<String>>,
    /// The tool the next model call must call (the one an unfinished sequence expects,
    /// when it is the only one allowed and no human's answer is held).
    pub forced: Option<String>,
    /// The tools recorded, oldest first (`null`: a tool the template does not declare).
    pub history: Vec<Option<String>>,
    /// The run was last written by another version of the template and was carried over
    /// by names (it is written with this version at its next change).
    pub migrated: bool,
    /// How many remembered values (semantics §16) the run has forgotten to make room
    /// for newer ones: more than 0 says the template's `rememberedValues` is small for
    /// its runs.
    #[serde(default)]
    pub forgotten: u32,
    /// `enforce`, or `observe` when the template's calls are judged and recorded but
    /// never refused or asked about ([`Runs::template_in`](crate::Runs::template_in)).
    #[serde(default)]
    pub mode: orch_agent::Mode,
}

/// The run virtual object (`OrchRun`): one object per run, keyed by the run's id.
pub struct OrchRun {
    runs: Arc<Runs>,
}

impl OrchRun {
    pub(crate) fn new(runs: Arc<Runs>) -> Self {
        OrchRun { runs }
    }

    fn template(&self, key: &str) -> Result<&Template, TerminalError> {
        self.runs.template_of(key).map_err(TerminalError::new)
    }
}

/// The run's session from its stored snapshot (a fresh session when nothing is stored),
/// the run host that drives its calls (its ledger travels in the snapshot's host
/// section), and whether the snapshot was written by another version of the template
/// (it carries that version's fingerprint).
fn restore<'t>(
    template: &'t Template,
    snapshot: Option<Vec<u8>>,
) -> Result<(DynSession<'t>, RunHost, bool), TerminalError> {
    let machine = &template.machine;
    let unreadable = |e: &dyn std::fmt::Display| {
        TerminalError::new(format!(
            "the run cannot be restored with the template `{}` (fingerprint {:016x}): {e}",
            machine.name(),
            machine.fingerprint(),
        ))
    };
    let (mut session, host, migrated) = match snapshot {
        None => (DynSession::new(machine), RunHost::new(), false),
        Some(bytes) => {
            let snapshot =
                orch_runtime::Snapshot::from_bytes(&bytes).map_err(|e| unreadable(&e))?;
            let host = RunHost::decode(&snapshot.host).map_err(|why| {
                unreadable(&format!("the run host's calls in it cannot be read: {why}"))
            })?;
            let (session, report) =
                DynSession::restore(machine, &snapshot).map_err(|e| unreadable(&e))?;
            (session, host, report.fingerprint_changed)
        }
    };
    template.policy.prepare(&mut session);
    Ok((session, host, migrated))
}

/// Reads the run's stored snapshot and restores its session ([`restore`]).
macro_rules! load {
    ($ctx:expr, $template:expr) => {{
        let snapshot: Option<Vec<u8>> = $ctx.get(SESSION).await?;
        restore($template, snapshot)?
    }};
}

/// The answer to a call the run refused: the tool never ran.
fn refused(template: &Template, session: &DynSession<'_>, refusal: &Refusal) -> Json<CallReply> {
    reply(template, session, Ended::Refused, None, Some(refusal), None)
}

/// The time now, journaled: a replay sees the time the first execution saw.
macro_rules! now_ms {
    ($ctx:expr) => {
        $ctx.run(|| async { Ok(protocol::now_ms()) })
            .name("now")
            .await?
    };
}

/// Writes the session (its snapshot names the template's fingerprint) with the run
/// host's ledger in its host section.
fn save<'c>(ctx: &impl ContextWriteState<'c>, session: &DynSession<'_>, host: &RunHost) {
    let mut calls = Vec::new();
    host.encode(&mut calls);
    let mut out = Vec::new();
    session.snapshot_with_host_into(&calls, &mut out);
    ctx.set(SESSION, out);
}

fn owned(names: Vec<&str>) -> Vec<String> {
    names.into_iter().map(str::to_owned).collect()
}

fn reply(
    template: &Template,
    session: &DynSession<'_>,
    outcome: Ended,
    result: Option<Value>,
    refusal: Option<&Refusal>,
    not_run: Option<String>,
) -> Json<CallReply> {
    Json(CallReply {
        outcome,
        result,
        refusal: refusal.cloned(),
        not_run,
        step: session.step().map(str::to_owned),
        allowed: template.policy.offered(session),
    })
}

/// A question the run host asked about a call, as this object puts it to a human.
struct Asked<'a> {
    call_id: &'a str,
    tool: &'a str,
    arguments: &'a str,
    /// What the human's answer names it by ([`Pending::ticket`]).
    ticket: String,
    expires_ms: u64,
}

/// What came of waiting for a human.
enum Waited {
    /// An answer (it may name another question).
    Answer(Resolution),
    /// The awakeable was rejected (Restate's `/reject`): the question is dismissed.
    Dismissed,
    /// The question expired first.
    Expired,
}

/// Lists the question with the run's approvals (`OrchApprovals`) and waits, durably, for
/// its answer until it expires — never longer: an expired question is closed and no
/// longer holds the run (its later calls would queue behind it). `now`: the journaled
/// time the question was asked at.
async fn wait_for_answer(
    ctx: &ObjectContext<'_>,
    key: &str,
    asked: &Asked<'_>,
    session: &DynSession<'_>,
    refusal: &Refusal,
    now: u64,
) -> Result<Waited, HandlerError> {
    let (awakeable, answered) = ctx.awakeable::<Json<Resolution>>();
    ctx.object_client::<OrchApprovalsClient>(key.to_owned())
        .ask(Json(Pending {
            ticket: asked.ticket.clone(),
            awakeable: awakeable.clone(),
            tool: asked.tool.to_owned(),
            arguments: asked.arguments.to_owned(),
            step: session.step().map(str::to_owned),
            reason: refusal.reason.clone(),
            origins: session.origins(asked.tool, asked.arguments),
            expires_ms: asked.expires_ms,
            template: Some(session.machine().name().to_owned()),
            asked_ms: Some(now),
        }))
        .send();
    let wait = Duration::from_millis(asked.expires_ms.saturating_sub(now));
    let waited = restate_sdk::select! {
        answer = answered => match answer {
            Ok(Json(resolution)) => Waited::Answer(resolution),
            Err(_) => Waited::Dismissed,
        },
        _ = ctx.sleep(wait) => Waited::Expired,
    };
    ctx.object_client::<OrchApprovalsClient>(key.to_owned())
        .done(Json(awakeable))
        .send();
    Ok(waited)
}

/// Applies what came of waiting to the question through the run host: `None` when the
/// call may run now (approved, and admitted on it), else the refusal to answer with. An
/// answer applies only to the question it names, once, before the question expires; a
/// question that is not answered so is closed (nothing waits on it).
async fn apply_answer(
    ctx: &ObjectContext<'_>,
    policy: &orch_agent::Policy,
    session: &mut DynSession<'_>,
    host: &mut RunHost,
    asked: &Asked<'_>,
    waited: Waited,
) -> Result<Option<Refusal>, HandlerError> {
    let Asked {
        call_id,
        tool,
        arguments,
        ..
    } = *asked;
    let resolution = match waited {
        Waited::Answer(resolution) if resolution.ticket.as_deref() == Some(&asked.ticket) => {
            resolution
        }
        unanswered => {
            host.close_question(session, call_id, tool, arguments);
            return Ok(Some(match unanswered {
                Waited::Expired => policy.unanswered(session, tool, Unanswered::Expired),
                Waited::Dismissed => Refusal {
                    tool: tool.to_owned(),
                    kind: RefusalKind::NeedsApproval,
                    reason: format!(
                        "error: `{tool}` was not run: the question was dismissed. {}",
                        policy.what_now(session, true)
                    ),
                    rule: None,
                },
                // An answer that names another question (or none) applies to nothing.
                Waited::Answer(_) => policy.unanswered(session, tool, Unanswered::Stale),
            }));
        }
    };
    let now = now_ms!(ctx);
    let answered = host.answer_call(
        policy,
        session,
        call_id,
        tool,
        arguments,
        resolution.approved,
        resolution.reason.as_deref(),
        now,
    );
    if let Some(refusal) = answered.refusal() {
        host.close_question(session, call_id, tool, arguments);
        return Ok(Some(refusal.clone()));
    }
    // Approved: admitted on the approval (consumed); rejected: refused as such.
    Ok(
        match host.begin(
            policy,
            session,
            call_id,
            tool,
            arguments,
            OnGate::Refuse,
            now,
        ) {
            Begin::Run => None,
            Begin::Refused(refusal) | Begin::Again(refusal) | Begin::Ask { refusal, .. } => {
                Some(refusal)
            }
        },
    )
}

/// The handlers, and the client the macro generates (`OrchRunClient`: a method per
/// handler, documented on the handler).
mod handlers {
    #![allow(missing_docs)]
    use super::*;

    #[restate_sdk::object]
    impl OrchRun {
        /// Judges a tool call with the run protocol and runs it if allowed; a gated call
        /// waits (durably) for a human's answer.
        #[handler]
        async fn call(
            &self,
            mut ctx: ObjectContext<'_>,
            request: Json<CallRequest>,
        ) -> HandlerResult<Json<CallReply>> {
            let Json(request) = request;
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (mut session, mut host, _) = load!(ctx, template);
            host.set_question_ttl(self.runs.question_ttl);
            let tool = request.tool.as_str();
            let arguments = request.arguments_text().to_owned();
            let call_id = request
                .id
                .clone()
                .unwrap_or_else(|| ctx.invocation_id().to_owned());
            let policy = &template.policy;
            // The run host decides the call's life: judged, admitted, asked about, or
            // answered with what this call id got before.
            let now = now_ms!(ctx);
            match host.begin(
                policy,
                &mut session,
                &call_id,
                tool,
                &arguments,
                OnGate::Ask,
                now,
            ) {
                Begin::Run => {}
                Begin::Refused(refusal) | Begin::Again(refusal) => {
                    save(&ctx, &session, &host);
                    return Ok(refused(template, &session, &refusal));
                }
                Begin::Ask { question, refusal } => {
                    save(&ctx, &session, &host);
                    let expires_ms = now.saturating_add(
                        u64::try_from(host.question_ttl().as_millis()).unwrap_or(u64::MAX),
                    );
                    let asked = Asked {
                        call_id: &call_id,
                        tool,
                        arguments: &arguments,
                        ticket: format!("orch-q2:{question}"),
                        expires_ms,
                    };
                    let answer =
                        wait_for_answer(&ctx, &key, &asked, &session, &refusal, now).await?;
                    if let Some(refusal) =
                        apply_answer(&ctx, policy, &mut session, &mut host, &asked, answer).await?
                    {
                        save(&ctx, &session, &host);
                        return Ok(refused(template, &session, &refusal));
                    }
                }
            }
            // Admitted: run it, journaled — a replay after a crash gets the result the first
            // execution journaled, or runs the tool again (same idempotency key) if it never
            // finished.
            let tool_call = ToolCall {
                run: key.clone(),
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                idempotency_key: format!("{key}/{}", ctx.rand_uuid()),
            };
            let tools = Arc::clone(&template.tools);
            let ran = ctx
                .run(|| async move {
                    tools
                        .call(tool_call)
                        .await
                        .map(Json)
                        .map_err(HandlerError::from)
                })
                .name(tool)
                .retry_policy(RunRetryPolicy::default().max_attempts(self.runs.tool_attempts))
                .await;
            // Recorded only when it ran: a complete `CallToolResult` (the run protocol's
            // one rule); the run host settles the call either way.
            let (outcome, result, not_run) = match ran {
                Ok(Json(result)) => match protocol::classify(&result) {
                    ToolResult::Ran => {
                        let text = result.to_string();
                        host.finish(policy, &mut session, &call_id, tool, true, Some(&text));
                        (Ended::Ran, Some(result), None)
                    }
                    ToolResult::NotRun(why) => {
                        host.finish(policy, &mut session, &call_id, tool, false, None);
                        (Ended::NotRun, Some(result), Some(why.as_str().to_owned()))
                    }
                },
                Err(failed) => {
                    host.finish(policy, &mut session, &call_id, tool, false, None);
                    let why = format!("failed: {}", failed.message());
                    (Ended::NotRun, None, Some(why))
                }
            };
            save(&ctx, &session, &host);
            Ok(reply(template, &session, outcome, result, None, not_run))
        }

        /// Applies a user message (conditions on what the user says).
        #[handler]
        async fn message(
            &self,
            ctx: ObjectContext<'_>,
            text: Json<String>,
        ) -> HandlerResult<Json<Status>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (mut session, host, _) = load!(ctx, template);
            template.policy.message(&mut session, &text.0);
            save(&ctx, &session, &host);
            Ok(Json(status(template, &session, false)))
        }

        /// Starts the run over from the default step (its history forgotten).
        #[handler]
        async fn reset(&self, ctx: ObjectContext<'_>) -> HandlerResult<Json<Status>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (mut session, _, _) = load!(ctx, template);
            template.policy.reset(&mut session);
            // A run started over starts with an empty ledger too.
            save(&ctx, &session, &RunHost::new());
            Ok(Json(status(template, &session, false)))
        }

        /// The tools the run allows now (gated ones included).
        #[handler]
        async fn list(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<Vec<String>>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (session, _, _) = load!(ctx, template);
            Ok(Json(template.policy.offered(&session)))
        }

        /// The run as it stands.
        #[handler]
        async fn status(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<Status>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (session, _, migrated) = load!(ctx, template);
            Ok(Json(status(template, &session, migrated)))
        }
    }
}

pub use handlers::OrchRunClient;

fn status(template: &Template, session: &DynSession<'_>, migrated: bool) -> Status {
    let allowed = template.policy.offered(session);
    Status {
        template: template.machine.name().to_owned(),
        step: session.step().map(str::to_owned),
        forced: template.policy.forced(session),
        mode: template.policy.mode(),
        allowed,
        expected: session.expected().map(owned),
        history: session
            .history()
            .into_iter()
            .map(|t| t.map(str::to_owned))
            .collect(),
        migrated,
        forgotten: session.forgotten(),
    }
}
