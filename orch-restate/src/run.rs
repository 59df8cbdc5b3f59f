//! `OrchRun`: a run as a Restate virtual object.

use crate::approvals::{OrchApprovalsClient, Pending, Resolution};
use crate::{Runs, Template, ToolCall};
use orch_agent::protocol::{self, Question, ToolResult, Unanswered};
use orch_agent::{Refusal, RefusalKind};
use orch_runtime::{Call, CallDigest, DynSession};
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

/// What came of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The tool ran and the run recorded it.
    Ran,
    /// The tool was run and did not complete (an error result, a result that is not a
    /// complete `CallToolResult`, or every attempt failed): nothing recorded.
    NotRun,
    /// The run refused the call: the tool never ran.
    Refused,
}

/// A refusal, in the words the model is sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalOut {
    /// Its kind (`not_allowed`, `out_of_sequence`, `needs_approval`, `rejected`,
    /// `stale_answer`, …; docs/protocol.md).
    pub kind: String,
    /// Why, and what is allowed now.
    pub reason: String,
}

impl From<&Refusal> for RefusalOut {
    fn from(r: &Refusal) -> Self {
        RefusalOut {
            kind: r.kind.as_str().to_owned(),
            reason: r.reason.clone(),
        }
    }
}

/// The answer to a call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallReply {
    /// What came of it.
    pub outcome: Outcome,
    /// The tool's result, when it was run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub result: Option<Value>,
    /// Why it did not run (refused) or did not count (`not_run`: `error`,
    /// `input_required`, `malformed`, `failed: …`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub refusal: Option<RefusalOut>,
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
/// and whether the snapshot was written by another version of the template (it carries
/// that version's fingerprint).
fn restore<'t>(
    template: &'t Template,
    snapshot: Option<Vec<u8>>,
) -> Result<(DynSession<'t>, bool), TerminalError> {
    let machine = &template.machine;
    let (mut session, migrated) = match snapshot {
        None => (DynSession::new(machine), false),
        Some(bytes) => orch_runtime::Snapshot::from_bytes(&bytes)
            .and_then(|snapshot| DynSession::restore(machine, &snapshot))
            .map(|(session, report)| (session, report.fingerprint_changed))
            .map_err(|e| {
                TerminalError::new(format!(
                    "the run cannot be restored with the template `{}` (fingerprint {:016x}): {e}",
                    machine.name(),
                    machine.fingerprint(),
                ))
            })?,
    };
    template.policy.prepare(&mut session);
    Ok((session, migrated))
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
    reply(
        template,
        session,
        Outcome::Refused,
        None,
        Some(refusal),
        None,
    )
}

/// The time now, journaled: a replay sees the time the first execution saw.
macro_rules! now_ms {
    ($ctx:expr) => {
        $ctx.run(|| async { Ok(protocol::now_ms()) })
            .name("now")
            .await?
    };
}

/// Writes the session (its snapshot names the template's fingerprint).
fn save<'c>(ctx: &impl ContextWriteState<'c>, session: &DynSession<'_>) {
    ctx.set(SESSION, session.snapshot_bytes());
}

fn owned(names: Vec<&str>) -> Vec<String> {
    names.into_iter().map(str::to_owned).collect()
}

fn reply(
    template: &Template,
    session: &DynSession<'_>,
    outcome: Outcome,
    result: Option<Value>,
    refusal: Option<&Refusal>,
    not_run: Option<String>,
) -> Json<CallReply> {
    Json(CallReply {
        outcome,
        result,
        refusal: refusal.map(RefusalOut::from),
        not_run,
        step: session.step().map(str::to_owned),
        allowed: template.policy.offered(session),
    })
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
            let (mut session, _) = load!(ctx, template);
            let tool = request.tool.as_str();
            let arguments = request.arguments_text().to_owned();
            let digest = CallDigest::of_text(tool, &arguments);
            let call = Call::new(digest, &arguments);
            let policy = &template.policy;
            match policy.admit_call(&mut session, tool, &call) {
                Ok(()) => {}
                Err(refusal) if refusal.kind == RefusalKind::NeedsApproval => {
                    // The question's nonce and expiry are journaled, so a replay asks the
                    // very same question.
                    let nonce: u64 = ctx.rand().random();
                    let now = now_ms!(ctx);
                    let ttl = u64::try_from(self.runs.question_ttl.as_millis()).unwrap_or(u64::MAX);
                    let question = Question {
                        nonce,
                        run: key.clone(),
                        step: session.step().map(str::to_owned),
                        tool: tool.to_owned(),
                        call: digest,
                        fingerprint: template.machine.fingerprint(),
                        expires_ms: now.saturating_add(ttl),
                    };
                    policy.ask_call(&mut session, tool, digest, question.id());
                    save(&ctx, &session);
                    let (awakeable, answered) = ctx.awakeable::<Json<Resolution>>();
                    ctx.object_client::<OrchApprovalsClient>(key.clone())
                        .ask(Json(Pending {
                            ticket: question.ticket().to_string(),
                            awakeable: awakeable.clone(),
                            tool: tool.to_owned(),
                            arguments: arguments.clone(),
                            step: question.step.clone(),
                            reason: refusal.reason.clone(),
                            expires_ms: question.expires_ms,
                        }))
                        .send();
                    // The run waits for the answer until the question expires, never longer:
                    // an expired question is closed and no longer holds the run (its later
                    // calls would queue behind it). A rejection of the awakeable itself
                    // (Restate's `/reject`) dismisses the question: nothing held, nothing run.
                    let wait = Duration::from_millis(question.expires_ms.saturating_sub(now));
                    let resolution: Option<Option<Resolution>> = restate_sdk::select! {
                        answer = answered => Some(answer.map(|Json(r)| r).ok()),
                        _ = ctx.sleep(wait) => None,
                    };
                    ctx.object_client::<OrchApprovalsClient>(key.clone())
                        .done(Json(awakeable))
                        .send();
                    let Some(resolution) = resolution else {
                        session.dismiss(digest, question.id());
                        save(&ctx, &session);
                        let refusal = policy.unanswered(&session, tool, Unanswered::Expired);
                        return Ok(refused(template, &session, &refusal));
                    };
                    let Some(resolution) = resolution else {
                        let refusal = Refusal {
                            tool: tool.to_owned(),
                            kind: RefusalKind::NeedsApproval,
                            reason: format!(
                                "error: `{tool}` was not run: the question was dismissed. {}",
                                policy.what_now(&session, true)
                            ),
                            rule: None,
                        };
                        return Ok(refused(template, &session, &refusal));
                    };
                    // The answer must name this question: one that names another (or none)
                    // applies to nothing.
                    let ticket = question.ticket().to_string();
                    let ours = resolution.ticket.as_deref() == Some(ticket.as_str());
                    let now = now_ms!(ctx);
                    let applied = ours
                        && now < question.expires_ms
                        && policy.answer_call(
                            &mut session,
                            tool,
                            digest,
                            question.id(),
                            resolution.approved,
                            resolution.reason.as_deref(),
                        );
                    if !applied {
                        let why = if ours && now >= question.expires_ms {
                            Unanswered::Expired
                        } else {
                            Unanswered::Stale
                        };
                        if session.dismiss(digest, question.id()) {
                            save(&ctx, &session);
                        }
                        let refusal = policy.unanswered(&session, tool, why);
                        return Ok(refused(template, &session, &refusal));
                    }
                    if let Err(refusal) = policy.admit_call(&mut session, tool, &call) {
                        save(&ctx, &session);
                        return Ok(refused(template, &session, &refusal));
                    }
                }
                Err(refusal) => {
                    save(&ctx, &session);
                    return Ok(refused(template, &session, &refusal));
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
            let (outcome, result, not_run) = match ran {
                Ok(Json(result)) => match protocol::classify(&result) {
                    ToolResult::Ran => {
                        policy.record_result(&mut session, tool, &result.to_string());
                        (Outcome::Ran, Some(result), None)
                    }
                    ToolResult::NotRun(why) => {
                        (Outcome::NotRun, Some(result), Some(why.as_str().to_owned()))
                    }
                },
                Err(failed) => (
                    Outcome::NotRun,
                    None,
                    Some(format!("failed: {}", failed.message())),
                ),
            };
            save(&ctx, &session);
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
            let (mut session, _) = load!(ctx, template);
            template.policy.message(&mut session, &text.0);
            save(&ctx, &session);
            Ok(Json(status(template, &session, false)))
        }

        /// Starts the run over from the default step (its history forgotten).
        #[handler]
        async fn reset(&self, ctx: ObjectContext<'_>) -> HandlerResult<Json<Status>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (mut session, _) = load!(ctx, template);
            template.policy.reset(&mut session);
            save(&ctx, &session);
            Ok(Json(status(template, &session, false)))
        }

        /// The tools the run allows now (gated ones included).
        #[handler]
        async fn list(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<Vec<String>>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (session, _) = load!(ctx, template);
            Ok(Json(template.policy.offered(&session)))
        }

        /// The run as it stands.
        #[handler]
        async fn status(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<Status>> {
            let key = ctx.key().to_owned();
            let template = self.template(&key)?;
            let (session, migrated) = load!(ctx, template);
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
        forced: orch_agent::Policy::forced_among(session, &allowed).map(str::to_owned),
        allowed,
        expected: session.expected().map(owned),
        history: session
            .history()
            .into_iter()
            .map(|t| t.map(str::to_owned))
            .collect(),
        migrated,
    }
}
