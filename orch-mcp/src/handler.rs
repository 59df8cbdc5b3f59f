//! The gateway's MCP server side: one [`Downstream`] per client session, sharing the
//! gateway's [`Shared`] state.
//!
//! A tool call goes through three steps, each a compare-and-set on the session's
//! [`Record`]: *reserve* (admit the call against the stored state and write a lease in
//! the same compare-and-set; a call that finds another call's lease waits for it),
//! *forward* (bounded by the call timeout, cancelled with the client's cancellation),
//! then *finish* (record the tool and drop the lease) or *release* (drop the lease,
//! record nothing).

// Logging and resources/subscribe are deprecated by the 2026-07-28 revision only; the
// gateway also speaks the handshake revisions, where they are current.
#![allow(deprecated)]

use crate::approval::{self, Answer};
use crate::error::Error;
use crate::instances::FreshSession;
use crate::jwt::JWT_PREFIX;
use crate::runs::{RunKey, RUN_PREFIX};
use crate::telemetry;
use crate::upstream::{self, Link, Origin, Relay, SessionLink, ToolList, Upstream};
use crate::Limits;
use orch_agent::audit::Auditor;
use orch_agent::protocol::{self, Question, ToolResult};
use orch_agent::{Gate, Policy, Refusal, RefusalKind};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, CallDigest};
pub(crate) use orch_store::lease::Change;
use orch_store::lease::{token, Record};
use orch_store::run::{self, RunError};
use orch_store::{SessionStore, StoreError};
use rmcp::model::{
    CacheScope, CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotification, CancelledNotificationParam, ClientRequest, ClientResult,
    CompleteRequest, CompleteRequestParams, CompleteResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, GetPromptRequest, GetPromptRequestParams, GetPromptResponse,
    InitializeRequestParams, InitializeResult, ListPromptsRequest, ListPromptsResult,
    ListResourceTemplatesRequest, ListResourceTemplatesResult, ListResourcesRequest,
    ListResourcesResult, ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject,
    ResultType, ServerRequest, ServerResult, SetLevelRequest, SetLevelRequestParams,
    SubscribeRequest, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequest,
    UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, ServiceError, SubscriptionContext,
};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How much longer than the call timeout a lease lasts: time to record the result.
const LEASE_MARGIN: Duration = Duration::from_secs(10);

/// How often a `subscriptions/listen` stream reads its run, to hear of changes made
/// through other gateway instances (those made through its own wake it at once).
const LISTEN_POLL: Duration = Duration::from_secs(1);

/// How long an answer waits at most for the progress that came before it to be relayed.
const PROGRESS_DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// The longest pause between two looks at a session whose call is in flight.
const MAX_WAIT_PAUSE: Duration = Duration::from_millis(50);

/// The state every client session of one gateway shares.
pub(crate) struct Shared<S> {
    pub(crate) machine: DynMachine,
    pub(crate) store: S,
    /// The gateway's own upstream connection: it lists the tools, and carries the
    /// requests of clients without a connection of their own.
    pub(crate) upstream: Link,
    /// Where a client session's own upstream connection is opened (`None`: every
    /// session shares the gateway's, as with [`crate::Gateway::start_on`]).
    pub(crate) reconnect: Option<Upstream>,
    /// Ends the gateway with this reason (the upstream went away).
    pub(crate) ended: Arc<tokio::sync::watch::Sender<Option<String>>>,
    /// What the gateway says of itself in `initialize`.
    pub(crate) info: InitializeResult,
    pub(crate) relay: Arc<Relay>,
    pub(crate) limits: Limits,
    /// The upstream's tools as the gateway's own connection lists them.
    tools: ToolList,
    /// Permits for requests being handled (a request that finds none is refused).
    requests: Arc<Semaphore>,
    /// Tool calls being forwarded now.
    pub(crate) in_flight: AtomicUsize,
    /// Where decision records go, if anywhere.
    pub(crate) audit: Option<Arc<Auditor>>,
}

/// A call the gateway answers itself, with a tool result whose `isError` is true: the
/// text for the model, and the same facts as data for the client (`structuredContent`).
pub(crate) struct Refused {
    message: String,
    detail: serde_json::Value,
}

impl Refused {
    /// The refusal of `tool` by the workflow in `session`, as the gateway answers it.
    fn by_workflow(policy: &Policy, session: &DynSession<'_>, refusal: Refusal) -> Self {
        let detail = policy.workflow_refusal_data(&refusal, Some(session));
        Refused {
            message: refusal.reason,
            detail,
        }
    }

    fn new(
        tool: &str,
        reason: &str,
        message: String,
        session: Option<&DynSession<'_>>,
        policy: &Policy,
    ) -> Self {
        let detail = policy.refusal_data(tool, reason, &message, session);
        Refused { message, detail }
    }

    /// The tool result the client gets: the facts (`{"tool", "reason", …}`) in `_meta`
    /// under [`REFUSAL_META_KEY`] always, and as `structuredContent` (`{"refusal": …}`) unless the tool
    /// declares an `outputSchema` (`structured` false), which they would not match (an
    /// SDK that checks results against it would reject the refusal).
    fn into_result(self, structured: bool) -> CallToolResult {
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.message)]);
        let facts = self.detail.get("refusal").cloned().unwrap_or_default();
        result
            .meta
            .get_or_insert_default()
            .insert(REFUSAL_META_KEY.to_owned(), facts);
        if structured {
            result.structured_content = Some(self.detail);
        }
        result
    }
}

/// Where a refusal's facts are in the result's `_meta` (docs/mcp.md, "Refusals").
pub(crate) const REFUSAL_META_KEY: &str = "orch/refusal";

/// What one look at a session decided for a tool call.
enum Admission<'m> {
    /// The lease with this token was written; the session as admitted (what the lease's
    /// record holds), so that recording the result need not restore it again.
    Reserved(u64, DynSession<'m>),
    /// The orchestration refuses the call.
    Refused(Refused),
    /// Another call of the session is in flight: its tool.
    Busy(String),
    /// The call is gated: the run now holds this question for a human.
    Asked(Question),
}

/// What reserving a session for a call came to.
// Made once per call and matched at once: boxing the reservation would add an
// allocation to every call's path to save stack bytes nobody keeps.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Reserved<'m> {
    /// The call may go upstream.
    Go(Reservation<'m>),
    /// The call is answered without going upstream.
    Refused(Refused),
    /// The call waits for a human; the run holds this question.
    Asked(Question),
}

/// A call's hold on its session: the lease's token, the version and record the lease was
/// written with (so that recording the result can skip a read), and the session as
/// admitted (so that it need not be restored again while nobody wrote meanwhile).
pub(crate) struct Reservation<'m> {
    token: u64,
    written: Option<(u64, Record)>,
    session: Option<DynSession<'m>>,
}

impl<S: SessionStore + 'static> Shared<S> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        machine: DynMachine,
        store: S,
        upstream: Link,
        reconnect: Option<Upstream>,
        ended: Arc<tokio::sync::watch::Sender<Option<String>>>,
        info: InitializeResult,
        relay: Arc<Relay>,
        limits: Limits,
        tools: Vec<Tool>,
        audit: Option<Arc<Auditor>>,
    ) -> Self {
        Shared {
            machine,
            store,
            upstream,
            reconnect,
            ended,
            info,
            relay,
            requests: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            limits,
            tools: ToolList::new(tools),
            in_flight: AtomicUsize::new(0),
            audit,
        }
    }

    /// The rules for a call in run `id`: recording its decisions in a buffer when the
    /// gateway keeps a decision log (a compare-and-set attempt may be retried: only the
    /// records of the attempt that was written are relayed to the log).
    pub(crate) fn judge(&self, policy: Policy, id: &str) -> Policy {
        match &self.audit {
            Some(_) => policy.audited(Arc::new(Auditor::buffered(id))),
            None => policy,
        }
    }

    /// Drops what an attempt recorded (before a new attempt).
    fn forget_attempt(policy: &Policy) {
        if let Some(auditor) = policy.auditor() {
            auditor.take_buffered();
        }
    }

    /// Writes what the successful attempt recorded to the decision log.
    fn log_attempt(&self, policy: &Policy) {
        if let (Some(audit), Some(buffered)) = (&self.audit, policy.auditor()) {
            audit.relay(buffered.take_buffered());
        }
    }

    /// The upstream's tools as the gateway's own connection last listed them.
    pub(crate) fn tools(&self) -> Arc<Vec<Tool>> {
        self.tools.get()
    }

    /// Fetches the upstream's tool list again on the gateway's own connection (after it
    /// said the list changed), within the call timeout; on success every client is told
    /// (see [`ToolList::refresh`]). Nothing waits for this: requests meanwhile use the
    /// last good list.
    pub(crate) async fn refresh_tools(&self) {
        let limit = self.limits.call_timeout;
        if self.tools.refresh(&self.upstream.peer, limit).await.is_ok() {
            self.relay.tools_changed().await;
        }
    }

    /// A permit to handle one request, or the error that says the gateway is full.
    fn permit(&self) -> Result<OwnedSemaphorePermit, McpError> {
        Arc::clone(&self.requests).try_acquire_owned().map_err(|_| {
            Error::Busy {
                limit: self.limits.max_in_flight,
            }
            .into()
        })
    }

    /// The record stored under `id`, if any.
    pub(crate) async fn record(&self, id: &str) -> Result<Option<Record>, McpError> {
        match self.store.load(id).await.map_err(store_error)? {
            None => Ok(None),
            Some(v) => Record::decode(&v.bytes)
                .map(Some)
                .map_err(|e| corrupt(id, &e.to_string())),
        }
    }

    /// Applies `f` to the record of `id` with compare-and-set, reading again after a
    /// conflict. `f` sees `None` when nothing is stored, and may run more than once.
    pub(crate) async fn modify<R>(
        &self,
        id: &str,
        f: impl FnMut(Option<Record>) -> Result<Change<R>, RunError> + Send,
    ) -> Result<R, McpError> {
        self.modify_from(id, None, f).await.map(|(value, _)| value)
    }

    /// [`Shared::modify`], trying first against `known` (a version and the record this
    /// instance wrote at it) without reading: one round trip fewer when nobody wrote in
    /// between. The store's one compare-and-set loop ([`run::modify`]): a decision to
    /// write nothing is only taken on a record read from the store. Returns the value
    /// and, when it wrote, the new version and record.
    async fn modify_from<R>(
        &self,
        id: &str,
        known: Option<(u64, Record)>,
        f: impl FnMut(Option<Record>) -> Result<Change<R>, RunError> + Send,
    ) -> Result<(R, Option<(u64, Record)>), McpError> {
        run::modify(&self.store, id, known, f)
            .await
            .map_err(|e| run_error(id, e))
    }

    /// One look at session `id` for a call of `tool`: refuse it, find it busy, or admit
    /// it and write its lease in the same compare-and-set.
    async fn try_reserve(
        &self,
        id: &str,
        policy: &Policy,
        tool: &str,
        call: &Call<'_>,
        gate: Gate<'_>,
        may_create: bool,
    ) -> Result<(Admission<'_>, Option<(u64, Record)>), McpError> {
        let lease_for = self.limits.call_timeout + LEASE_MARGIN;
        let tried = self
            .modify_from(id, None, |record| {
                Self::forget_attempt(policy);
                let mut record = match record {
                    Some(record) => record,
                    None if may_create => Record::default(),
                    // An HTTP session's record is made at its handshake: none means it
                    // ended (DELETE, TTL) meanwhile. Do not bring it back.
                    None => return Err(RunError::Ended),
                };
                let (admission, write) = run::admit(
                    &mut record,
                    &self.machine,
                    policy,
                    |snapshot| run::restore(&self.machine, policy, snapshot),
                    tool,
                    call,
                    gate,
                    lease_for,
                )?;
                let admission = match admission {
                    run::Admission::Admitted { token, session } => {
                        Admission::Reserved(token, session)
                    }
                    run::Admission::Busy(tool) => Admission::Busy(tool),
                    run::Admission::Refused {
                        question: Some(question),
                        ..
                    } => Admission::Asked(question),
                    run::Admission::Refused {
                        refusal, session, ..
                    } => {
                        if refusal.kind == RefusalKind::OutcomeUnknown && write {
                            orch_runtime::eprintln_printable!(
                                "orch mcp: a call in workflow run `{id}` lapsed without its result and its tool must not run twice: the run is held until an operator resolves it (`orch resolve TEMPLATE {id} --ran|--not-run`)"
                            );
                        }
                        Admission::Refused(Refused::by_workflow(policy, &session, refusal))
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

    /// Reserves session `id` for a call of `tool`: the lease's token, or the refusal.
    /// While another call of the session is in flight this waits (at most the call
    /// timeout, and not past `ct`'s cancellation), then looks again: the second call is
    /// judged against the state the first one left.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn reserve(
        &self,
        id: &str,
        policy: &Policy,
        tool: &str,
        call: &Call<'_>,
        gate: Gate<'_>,
        may_create: bool,
        ct: &CancellationToken,
    ) -> Result<Reserved<'_>, McpError> {
        let limit = self.limits.call_timeout;
        let deadline = Instant::now() + limit;
        let mut pause = Duration::from_millis(1);
        loop {
            let tried = self
                .try_reserve(id, policy, tool, call, gate, may_create)
                .await?;
            let busy = match tried {
                (Admission::Reserved(token, session), written) => {
                    return Ok(Reserved::Go(Reservation {
                        token,
                        written,
                        session: Some(session),
                    }))
                }
                (Admission::Refused(reason), _) => return Ok(Reserved::Refused(reason)),
                (Admission::Asked(question), _) => return Ok(Reserved::Asked(question)),
                (Admission::Busy(other), _) => other,
            };
            if Instant::now() >= deadline {
                let message = format!(
                    "error: `{tool}` was not run: a call of `{busy}` in the same session has been running for more than {} s; try again when it has finished.",
                    limit.as_secs_f64()
                );
                return Ok(Reserved::Refused(Refused::new(
                    tool,
                    RefusalKind::Busy.as_str(),
                    message,
                    None,
                    policy,
                )));
            }
            // A little randomness, so that waiters on several instances do not look
            // at the session in lockstep.
            let jitter = Duration::from_micros(token() % 1000);
            tokio::select! {
                () = tokio::time::sleep(pause + jitter) => {}
                () = ct.cancelled() => return Err(cancelled(tool)),
            }
            pause = (pause * 2).min(MAX_WAIT_PAUSE);
        }
    }

    /// Settles the call holding lease `token` of session `id` with what the gateway knows
    /// of its `outcome` ([`run::settle`]): recorded, released, or — a lost result — what
    /// the template's `lostResults` says. `admitted`: the session as admitted, used when
    /// the record is still the one the lease was written with (no restore). A session
    /// deleted meanwhile stays deleted.
    pub(crate) async fn settle(
        &self,
        id: &str,
        policy: &Policy,
        reservation: Reservation<'_>,
        outcome: run::Outcome,
        result: Option<&str>,
    ) -> Result<run::Settled, McpError> {
        let Reservation {
            token,
            written,
            session: mut admitted,
        } = reservation;
        let admitted_from = written.as_ref().map(|(_, r)| r.snapshot.clone());
        let settled = self.modify_from(id, written, |record| {
            Self::forget_attempt(policy);
            let Some(mut record) = record else {
                return Ok(Change::Keep(run::Settled::Lapsed));
            };
            let same = admitted_from.as_ref() == Some(&record.snapshot);
            let admitted = admitted.take();
            let restore = |snapshot: Option<&[u8]>| match admitted {
                Some(session) if same => Ok(session),
                _ => run::restore(&self.machine, policy, snapshot),
            };
            let (settled, write) = run::settle(
                &mut record,
                &self.machine,
                policy,
                restore,
                Some(token),
                outcome,
                result,
                true,
            )?;
            if settled == run::Settled::Held {
                orch_runtime::eprintln_printable!(
                    "orch mcp: the result of a call in workflow run `{id}` was lost and its tool must not run twice: the run is held until an operator resolves it (`orch resolve TEMPLATE {id} --ran|--not-run`)"
                );
            }
            Ok(match write {
                true => Change::Write(record, settled),
                false => Change::Keep(settled),
            })
        });
        let settled = settled.await;
        if settled.is_ok() {
            self.log_attempt(policy);
        }
        settled.map(|(settled, _)| settled)
    }

    /// Settles lease `token` of session `id` with no session at hand (`outcome`:
    /// [`run::Outcome::NotRun`] releases it, [`run::Outcome::Lost`] applies the tool's
    /// lost rule).
    pub(crate) async fn settle_token(
        &self,
        id: &str,
        token: u64,
        outcome: run::Outcome,
    ) -> Result<run::Settled, McpError> {
        let policy = Policy::new(self.tools().iter().map(|t| t.name.to_string()));
        let policy = self.judge(policy, id);
        let reservation = Reservation {
            token,
            written: None,
            session: None,
        };
        self.settle(id, &policy, reservation, outcome, None).await
    }

    /// Sends `request` to the upstream on `link` and waits for its answer, at most the
    /// call timeout; what the upstream says about it meanwhile (progress, questions for
    /// the human, log lines) goes to the client that sent it (`context`). When the
    /// client cancels first (or went away), the upstream is told to cancel too.
    async fn forward(
        &self,
        link: &Link,
        request: ClientRequest,
        method: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, Unanswered> {
        let limit = self.limits.call_timeout;
        let ct = &context.ct;
        let gone = || {
            Unanswered::lost(
                Error::UpstreamGone {
                    method: method.to_owned(),
                }
                .into(),
            )
        };
        let progress_token = context.meta.get_progress_token();
        let asked_progress = progress_token.is_some();
        let origin = Origin {
            client: &context.peer,
            id: &context.id,
            progress_token,
            session: mcp_session(&context.extensions),
        };
        // The client's own `_meta` goes on (the MCP SDK took it off the request): on
        // 2026-07-28 its revision, capabilities, identity and log level, so the upstream
        // sees the client as it is, not the gateway. The SDK puts its own progress token
        // on; the gateway's trace context, when it set one, stays.
        let mut options = PeerRequestOptions::with_timeout(limit);
        let mut meta = context.meta.clone();
        let ours = match &request {
            ClientRequest::CallToolRequest(call) => call.params.meta.as_ref(),
            _ => None,
        };
        // The gateway's span context (set on a call it traces) replaces the client's:
        // the upstream's spans are children of the gateway's, in the client's trace.
        if ours.is_some_and(|m| m.0 .0.contains_key("traceparent")) {
            meta.0 .0.remove("traceparent");
            meta.0 .0.remove("tracestate");
        }
        // An upstream reached with the `initialize` handshake speaks its session's
        // revision: a 2026-07-28 client's request reaches it without the keys that name
        // another one. (The MCP SDK would otherwise send it as 2026-07-28, which such an
        // upstream refuses, and every later request on the connection too.)
        if !crate::upstream::is_modern(&link.peer) {
            for key in MODERN_REQUEST_META {
                meta.0 .0.remove(key);
            }
        }
        // A handshake session on a 2026-07-28 connection: the level it set goes with
        // every request (the upstream logs only for requests that carry one).
        if let Some(level) = link.kept.as_ref().and_then(|kept| kept.level()) {
            meta.set_log_level(level);
        }
        options.meta = Some(meta);
        // Sending may wait on the upstream's pipe; an upstream that died meanwhile ends
        // the wait (before anything was sent: the request never reached it).
        let (handle, _routed) = tokio::select! {
            biased;
            () = link.gone.cancelled() => return Err(Unanswered {
                lost: false,
                ..gone()
            }),
            sent = link.routes.send(&link.peer, request, options, Some(origin)) => {
                // A failed send may have written part of the request: its fate is
                // unknown.
                sent.map_err(|e| Unanswered::of(e, method, limit))?
            }
        };
        let (peer, request_id) = (handle.peer.clone(), handle.id.clone());
        let upstream_token = handle.progress_token.clone();
        // Biased, in this order: an answer that has arrived is taken (the call ran, so it
        // is recorded), whatever else happened at the same time; then the upstream going
        // away; the client's cancellation last (the gateway stops its client side once
        // the upstream is gone, and the client is told what happened).
        tokio::select! {
            biased;
            answer = handle.await_response() => {
                // The progress the upstream sent before its answer goes out first (to a
                // client that asked for progress; without a token nothing is relayed).
                if asked_progress {
                    link.routes.progress_drained(&upstream_token, PROGRESS_DRAIN_LIMIT).await;
                }
                answer
                    .map(with_result_type)
                    .map_err(|e| Unanswered::of(e, method, limit))
            }
            () = link.gone.cancelled() => Err(gone()),
            () = ct.cancelled() => {
                if link.gone.is_cancelled() {
                    return Err(gone());
                }
                let notification = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(request_id),
                    Some("the gateway's client cancelled the request".into()),
                ));
                // The upstream may be gone; the client is answered either way.
                let _ = peer.send_notification(notification.into()).await;
                Err(Unanswered::lost(cancelled(method)))
            }
        }
    }
}

/// A forwarded request that got no result: the error the client gets, and whether the
/// request may have reached the upstream without its answer coming back (a *lost*
/// result: a timeout, the upstream gone mid-call, a cancellation) rather than being
/// answered with an error (the upstream's own) or never sent.
pub(crate) struct Unanswered {
    error: McpError,
    lost: bool,
}

impl Unanswered {
    fn lost(error: McpError) -> Self {
        Unanswered { error, lost: true }
    }

    /// An rmcp failure: the upstream's own error is an answer; anything else is lost.
    fn of(e: ServiceError, method: &str, limit: Duration) -> Self {
        let lost = !matches!(e, ServiceError::McpError(_));
        Unanswered {
            error: upstream_error(e, method, limit),
            lost,
        }
    }
}

impl From<Unanswered> for McpError {
    fn from(u: Unanswered) -> Self {
        u.error
    }
}

/// Where 2026-07-28 results name their server.
const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The `resultType` and `_meta` of a result the gateway answers or relays, if its kind
/// has them.
fn fields_of(
    result: &mut ServerResult,
) -> Option<(&mut Option<ResultType>, &mut Option<MetaObject>)> {
    Some(match result {
        ServerResult::CompleteResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::GetPromptResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListPromptsResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListResourcesResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListResourceTemplatesResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ReadResourceResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListToolsResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::CallToolResult(r) => (&mut r.result_type, &mut r.meta),
        _ => return None,
    })
}

/// An upstream result as a result of the 2026-07-28 revision: an upstream on a
/// handshake revision sends no `resultType`, which means `complete` there. (The MCP SDK
/// drops the field again for clients on a handshake revision.)
fn with_result_type(mut result: ServerResult) -> ServerResult {
    if let Some((result_type, _)) = fields_of(&mut result) {
        result_type.get_or_insert(ResultType::COMPLETE);
    }
    result
}

/// A JSON-RPC error for the client from a failed upstream request of `method`: the
/// upstream's own error as it is, a timeout as one that says so, anything else (the
/// connection is gone) as an internal error that says so.
pub(crate) fn upstream_error(e: ServiceError, method: &str, limit: Duration) -> McpError {
    match e {
        ServiceError::McpError(e) => e,
        ServiceError::Timeout { .. } => Error::UpstreamTimeout {
            method: method.to_owned(),
            limit,
        }
        .into(),
        other => Error::UpstreamUnavailable {
            why: other.to_string(),
        }
        .into(),
    }
}

fn cancelled(what: &str) -> McpError {
    Error::Cancelled {
        method: what.to_owned(),
    }
    .into()
}

fn ended(id: &str) -> McpError {
    Error::Ended { id: id.to_owned() }.into()
}

pub(crate) fn store_error(e: StoreError) -> McpError {
    Error::Store(e).into()
}

fn corrupt(id: &str, why: &str) -> McpError {
    Error::Corrupt {
        id: id.to_owned(),
        why: why.to_owned(),
    }
    .into()
}

/// A failure of the run protocol for session `id`, as the client gets it.
fn run_error(id: &str, e: RunError) -> McpError {
    match e {
        RunError::Ended => ended(id),
        RunError::Store(e) => store_error(e),
        RunError::Corrupt(why) => corrupt(id, &why),
        RunError::Conflict { attempts } => Error::Conflict {
            id: id.to_owned(),
            attempts,
        }
        .into(),
    }
}

/// Holds a session's lease while a call is forwarded: dropped without
/// [`LeaseGuard::disarm`] (the request's task was dropped: the client went away, the
/// gateway stops), the call's result is lost, and a task of its own settles the lease by
/// the tool's lost rule.
struct LeaseGuard<S: SessionStore + 'static> {
    shared: Arc<Shared<S>>,
    id: String,
    token: u64,
    armed: bool,
}

impl<S: SessionStore + 'static> LeaseGuard<S> {
    fn disarm(&mut self) {
        self.armed = false;
    }

    /// Settles the lease with what the gateway knows of the call's outcome.
    async fn settle(mut self, outcome: run::Outcome) {
        self.armed = false;
        if let Err(e) = self
            .shared
            .settle_token(&self.id, self.token, outcome)
            .await
        {
            orch_runtime::eprintln_printable!(
                "orch mcp: warning: the lease of session `{}` could not be settled ({}); it lapses by itself, and the template's lostResults decides what that means",
                self.id, e.message
            );
        }
    }
}

impl<S: SessionStore + 'static> Drop for LeaseGuard<S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (shared, id, token) = (Arc::clone(&self.shared), self.id.clone(), self.token);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = shared.settle_token(&id, token, run::Outcome::Lost).await;
            });
        }
    }
}

/// One client session.
pub(crate) struct Downstream<S> {
    pub(crate) shared: Arc<Shared<S>>,
    /// The session's id when the transport has no session ids (stdio: one client).
    pub(crate) fixed_id: Option<String>,
    /// The session's own upstream connection, opened at its `initialize` (a handshake
    /// revision); closed with the session.
    pub(crate) session: std::sync::OnceLock<SessionLink>,
}

impl<S> Downstream<S> {
    /// Over HTTP, once the session's id is in a request of it: what goes to its client
    /// from other instances, and what its connection relays to its standalone stream,
    /// are addressed by it.
    fn known_as(&self, extensions: &rmcp::model::Extensions, peer: &Peer<RoleServer>) {
        if let Some(id) = mcp_session(extensions) {
            self.shared.relay.instances.serve(id, peer.clone());
            if let Some(link) = self.session.get() {
                let _ = link.session.set(Arc::from(id));
            }
        }
    }

    /// A fresh session (the `initialize` the HTTP layer marked [`FreshSession`]):
    /// registered to be named when the response says its id.
    fn await_name(&self, extensions: &rmcp::model::Extensions, peer: &Peer<RoleServer>) {
        let token = extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<FreshSession>());
        if let Some(FreshSession(token)) = token {
            let slot = self.session.get().map(|link| Arc::clone(&link.session));
            self.shared
                .relay
                .instances
                .fresh(*token, peer.clone(), slot);
        }
    }

    /// A client session of `shared`'s gateway (`fixed_id`: its id when the transport has
    /// none).
    pub(crate) fn new(shared: Arc<Shared<S>>, fixed_id: Option<String>) -> Self {
        Downstream {
            shared,
            fixed_id,
            session: std::sync::OnceLock::new(),
        }
    }

    /// The upstream connection a request of this session goes on: the session's own on
    /// a handshake revision, else the gateway's.
    fn link(&self, context: &RequestContext<RoleServer>) -> Link {
        match self.session.get() {
            Some(session) if !is_modern(context) => session.link.clone(),
            _ => self.shared.upstream.clone(),
        }
    }
}

/// The MCP session a request or notification came in (over HTTP).
fn mcp_session(extensions: &rmcp::model::Extensions) -> Option<&str> {
    extensions
        .get::<http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}

/// The request `_meta` keys of the revisions without sessions (2026-07-28): the
/// revision, the client's capabilities and identity, and its log level.
const MODERN_REQUEST_META: [&str; 4] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
];

/// Did this request come on a revision without sessions (2026-07-28 or later)?
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    names_modern_revision(&context.meta)
}

/// Does a request's `_meta` name a revision without sessions (2026-07-28 or later)?
pub(crate) fn names_modern_revision(meta: &RequestMetaObject) -> bool {
    meta.protocol_version().is_some_and(|v| !v.has_initialize())
}

impl<S: SessionStore + 'static> Downstream<S> {
    /// The upstream's tools that the workflow state under `key` allows now, in the
    /// upstream's order (as the connection of a request on a `modern` revision or not
    /// lists them); `None` when `key` names a run that has ended (a session or the stdio
    /// connection without a record has just begun).
    async fn visible_tools(&self, key: &str, modern: bool) -> Result<Option<Vec<Tool>>, McpError> {
        let (tools, policy) = self.policy(modern);
        let record = match self.shared.record(key).await? {
            Some(record) => record,
            None if key.starts_with(RUN_PREFIX) => return Ok(None),
            None => Record::default(),
        };
        let session = run::restore(&self.shared.machine, &policy, record.snapshot.as_deref())
            .map_err(|e| run_error(key, e))?;
        // What a client sees is the run protocol's one rule (`Policy::offered`, as
        // `orch policy` and every binding list): the tools the run allows now, gated ones
        // included — a call of one is then put to a human.
        let offered = policy.offered(&session);
        Ok(Some(
            tools
                .iter()
                .filter(|t| offered.iter().any(|o| *o == *t.name))
                .cloned()
                .collect(),
        ))
    }

    /// The key of this request's workflow state in the store: the run its bearer token
    /// names over HTTP (checked by the guard), else its MCP session (the
    /// `Mcp-Session-Id` over HTTP; over stdio the process serves one run, whichever
    /// revision the client speaks).
    fn state_key(&self, context: &RequestContext<RoleServer>) -> Result<String, McpError> {
        let parts = context.extensions.get::<http::request::Parts>();
        if let Some(RunKey(key)) = parts.and_then(|p| p.extensions.get::<RunKey>()) {
            return Ok(key.clone());
        }
        if let Some(id) = &self.fixed_id {
            return Ok(id.clone());
        }
        if let Some(session) = parts
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
        {
            return Ok(session.to_owned());
        }
        Err(Error::NoRun.into())
    }

    /// Forwards a request that the orchestration does not judge, holding a permit.
    async fn pass(
        &self,
        request: ClientRequest,
        method: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let _permit = self.shared.permit()?;
        let link = self.link(context);
        let mut result = self.shared.forward(&link, request, method, context).await?;
        if is_modern(context) {
            if let Some((_, meta)) = fields_of(&mut result) {
                self.stamp(meta);
            }
        }
        Ok(result)
    }

    /// Names the gateway in a result's `_meta`, as 2026-07-28 asks of servers.
    fn stamp(&self, meta: &mut Option<MetaObject>) {
        if let Ok(info) = serde_json::to_value(&self.shared.info.server_info) {
            meta.get_or_insert_default()
                .insert(SERVER_INFO_META_KEY.to_owned(), info);
        }
    }

    /// The upstream's tools as this request's connection lists them, and the rules over
    /// them.
    fn policy(&self, modern: bool) -> (Arc<Vec<Tool>>, Policy) {
        let tools = match self.session.get() {
            Some(session) if !modern => session.tools.get(),
            _ => self.shared.tools(),
        };
        let policy = Policy::new(tools.iter().map(|t| t.name.to_string()));
        (tools, policy)
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let _permit = self.shared.permit()?;
        let id = self.state_key(&context)?;
        let (tools, policy) = self.policy(is_modern(&context));
        let policy = self.shared.judge(policy, &id);
        let tool = params.name.to_string();
        // A refusal carries its facts as structured content only where that cannot
        // contradict the tool's declared output schema.
        let structured = !tools
            .iter()
            .any(|t| t.name == tool && t.output_schema.is_some());
        // Over stdio the one session's record is made by its first call, and so is the
        // record of a run a JWT claim names, and of the anonymous run.
        let may_create =
            self.fixed_id.is_some() || id.starts_with(JWT_PREFIX) || id == crate::ANONYMOUS_RUN;
        // The call's identity, for an approval of this exact call (semantics §13).
        let arguments = serde_json::Value::Object(params.arguments.clone().unwrap_or_default());
        let digest = CallDigest::of_json(&tool, &arguments);
        // What rules on arguments read (semantics §16): the arguments as the client sent
        // them — the framing refused any whose numbers the parse would have changed —,
        // written out only when the template has rules.
        let text = match self.shared.machine.has_argument_rules() {
            true => serde_json::to_string(&arguments).unwrap_or_default(),
            false => String::new(),
        };
        let checked = Call::new(digest, &text);
        let modern = is_modern(&context);
        let can_ask = if modern {
            approval::can_ask(context.meta.client_capabilities().as_ref())
        } else {
            let info = context.peer.peer_info();
            approval::can_ask(info.as_deref().map(|i| &i.capabilities))
        };
        let ttl = self.shared.limits.question_ttl;
        let ask = match can_ask {
            true => Gate::Ask { run: &id, ttl },
            false => Gate::Refuse,
        };
        let retry = match modern {
            true => approval::answer_in_retry(
                params.request_state.as_deref(),
                params.input_responses.as_ref(),
                &digest,
            )?,
            false => None,
        };
        let Some(gate) = orch_agent::elicitation::gate(&id, retry, ask) else {
            return Ok(dismissed(&tool, &policy, structured).into());
        };
        let shared = &self.shared;
        let reserve =
            |gate| shared.reserve(&id, &policy, &tool, &checked, gate, may_create, &context.ct);
        // An answer that applies to no question the run holds is refused as it is
        // (`stale_answer`): asking again on it would let the next copy of the same
        // answer run the call a second time.
        let mut reserved = reserve(gate).await?;
        if let Reserved::Asked(question) = &reserved {
            let shown = approval::question(&tool, &arguments, question.step.as_deref())?;
            if modern {
                return Ok(approval::input_required(shown, question).into());
            }
            // A handshake revision: ask the client now, while the call waits. Nothing
            // goes upstream before the answer.
            let ticket = question.ticket();
            reserved = match self.elicit(&context, shown).await {
                Ok(Answer::Dismissed) => return Ok(dismissed(&tool, &policy, structured).into()),
                Ok(answer) => {
                    let approved = answer == Answer::Approved;
                    reserve(Gate::Answer {
                        run: &id,
                        ticket,
                        approved,
                    })
                    .await?
                }
                Err(why) => {
                    let message = format!("error: `{tool}` was not run: it needs a human's approval, and asking the client failed ({why})");
                    let refused = Refused::new(&tool, "needs_approval", message, None, &policy);
                    return Ok(refused.into_result(structured).into());
                }
            };
        }
        let reservation = match reserved {
            Reserved::Go(reservation) => reservation,
            Reserved::Refused(refused) => return Ok(refused.into_result(structured).into()),
            Reserved::Asked(_) => {
                let message = format!("error: `{tool}` was not run: the workflow run asked about it again while a human decided; call it again to ask again");
                let refused = Refused::new(&tool, "needs_approval", message, None, &policy);
                return Ok(refused.into_result(structured).into());
            }
        };
        self.run_admitted(params, &context, &id, &policy, &tool, reservation)
            .await
    }

    /// Forwards an admitted call upstream under its lease and settles it by its result:
    /// recorded only when the tool ran (a complete, successful result), released when
    /// it did not, lost (by the template's `lostResults`) when no result came.
    async fn run_admitted(
        &self,
        params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        id: &str,
        policy: &Policy,
        tool: &str,
        reservation: Reservation<'_>,
    ) -> Result<CallToolResponse, McpError> {
        let mut lease = LeaseGuard {
            shared: Arc::clone(&self.shared),
            id: id.to_owned(),
            token: reservation.token,
            armed: true,
        };
        // The answer to the gateway's own question is the gateway's: the upstream gets
        // the call as the model made it.
        let mut params = params;
        if approval::is_ours(params.request_state.as_deref()) {
            params.input_responses = None;
            params.request_state = None;
        }
        // The upstream's spans join this call's trace.
        telemetry::propagate(&mut params.meta);
        let link = self.link(context);
        let forwarded = self
            .shared
            .forward(
                &link,
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                "tools/call",
                context,
            )
            .await;
        let result = match forwarded {
            Ok(ServerResult::CallToolResult(result)) => result,
            // The upstream needs the client's input first (2026-07-28, multi-round): the
            // call did not run; the client answers and calls again, and that call is
            // judged and forwarded like any other (the upstream's `requestState` and
            // the client's `inputResponses` passed on as they are).
            Ok(ServerResult::InputRequiredResult(asked)) => {
                lease.settle(run::Outcome::NotRun).await;
                return Ok(CallToolResponse::InputRequired(asked));
            }
            // A task (a call still running, `unfinished`) or something else: the call
            // has not completed, and is not recorded.
            Ok(other) => {
                lease.settle(run::Outcome::NotRun).await;
                let tool = tool.to_owned();
                let unfinished = serde_json::to_value(&other).is_ok_and(|v| {
                    protocol::classify(&v) == ToolResult::NotRun(protocol::NotRun::Task)
                });
                return Err(match unfinished {
                    true => Error::UnfinishedResult { tool },
                    false => Error::NotAToolResult { tool },
                }
                .into());
            }
            Err(unanswered) => {
                let outcome = match unanswered.lost {
                    true => run::Outcome::Lost,
                    false => run::Outcome::NotRun,
                };
                lease.settle(outcome).await;
                return Err(unanswered.error);
            }
        };
        // Only a complete, successful result says the tool ran (the run protocol's
        // rule, `protocol::classify`): an error, or a result that is not complete, is
        // not recorded, so the model may call it again.
        let result_type = result.result_type.as_ref().map(|t| t.as_str());
        // (A result naming a task never gets here: it was marked `task` as it arrived.)
        let ran = protocol::classify_fields(result_type, false, result.is_error);
        if ran != ToolResult::Ran {
            lease.settle(run::Outcome::NotRun).await;
            return Ok(result.into());
        }
        lease.disarm();
        // What rules on arguments read of the result, for a tool they read.
        let values = match self.shared.machine.reads_results_of(tool) {
            true => serde_json::to_value(&result)
                .ok()
                .and_then(|v| protocol::result_values(&v)),
            false => None,
        };
        let settled = self
            .shared
            .settle(
                id,
                policy,
                reservation,
                run::Outcome::Ran,
                values.as_deref(),
            )
            .await;
        let changed = match settled {
            Ok(run::Settled::Recorded { changed }) => changed,
            Ok(_) => {
                return Err(Error::AdmissionLapsed {
                    tool: tool.to_owned(),
                }
                .into());
            }
            Err(e) => {
                // Neither recorded nor released: the lease lapses, and the template's
                // lostResults decides what that means.
                return Err(Error::NotRecorded {
                    tool: tool.to_owned(),
                    why: e.message.to_string(),
                }
                .into());
            }
        };
        if changed {
            // The client may have hung up meanwhile; the call itself succeeded. A client
            // without sessions hears of it on its `subscriptions/listen` stream.
            if !is_modern(context) {
                let _ = context.peer.notify_tool_list_changed().await;
            }
            self.shared.relay.run_tools_changed(id);
        }
        Ok(result.into())
    }

    /// Asks the client's human about a gated call (`elicitation/create`, a handshake
    /// revision), within the call timeout and the client's cancellation.
    ///
    /// The question is registered with the instances sharing the store, as a question
    /// relayed from the upstream is: the client's answer is a request of its own, and
    /// the HTTP layer passes on every answer no one here waits for. Unregistered, the
    /// answer to the gateway's own question was passed to the bus, taken by no one, and
    /// the call timed out — even with one instance.
    async fn elicit(
        &self,
        context: &RequestContext<RoleServer>,
        question: ElicitRequestParams,
    ) -> Result<Answer, String> {
        let limit = self.shared.limits.call_timeout;
        let instances = &self.shared.relay.instances;
        let session = mcp_session(&context.extensions);
        let asking = session.and_then(|s| instances.asking(s));
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(question));
        let handle = context
            .peer
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(limit))
            .await
            .map_err(|e| e.to_string())?;
        let elsewhere = session.and_then(|s| instances.await_answer(s, &handle.id));
        drop(asking);
        let answered_elsewhere = async {
            match elsewhere {
                Some(mut awaited) => (&mut awaited.answer).await.ok(),
                None => std::future::pending().await,
            }
        };
        let answer = tokio::select! {
            answer = handle.await_response() => answer.map_err(|e| e.to_string())?,
            Some(answer) = answered_elsewhere => {
                crate::instances::answer_of(answer, "elicitation/create").map_err(|e| e.message.into_owned())?
            }
            () = context.ct.cancelled() => return Err("the client cancelled the call".into()),
        };
        let ClientResult::ElicitResult(result) = answer else {
            return Err(
                "the client answered `elicitation/create` with another kind of result".into(),
            );
        };
        let value = serde_json::to_value(&result).map_err(|e| e.to_string())?;
        approval::answer_of(&value).map_err(|e| e.message.into_owned())
    }
}

/// The answer to a call whose approval the human dismissed: not run, nothing held.
fn dismissed(tool: &str, policy: &Policy, structured: bool) -> CallToolResult {
    let message = format!(
        "error: `{tool}` was not run: it needs a human's approval, and the human dismissed the question without answering"
    );
    Refused::new(tool, "needs_approval", message, None, policy).into_result(structured)
}

/// Counts a forwarded tool call while it is in flight.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<S: SessionStore + 'static> ServerHandler for Downstream<S> {
    fn get_info(&self) -> InitializeResult {
        self.shared.info.clone()
    }

    /// Every revision the MCP SDK knows: the handshake revisions keyed by session or
    /// run credential, 2026-07-28 and later by run credential.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    /// The upstream tool `name` as last listed, so that the MCP SDK can check a
    /// request's `Mcp-Param-*` headers against its input schema.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools().iter().find(|t| t.name == name).cloned()
    }

    /// `subscriptions/listen`: the list changes the gateway relays (a run's tools; the
    /// upstream's prompts and resources as it advertises them). Resource subscriptions
    /// are not relayed.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        Some(accepted)
    }

    /// A run's tool changes reach its listeners on this instance at once (the call
    /// that changed them wakes them), and those made through other instances sharing the
    /// store within [`LISTEN_POLL`]: each listener reads its run that often. A listener
    /// is told only when the tools its run sees differ from the last it saw; its stream
    /// ends when the run does.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let run = self.state_key(context.request_context()).ok();
        let sink = context.sink().clone();
        let (_listening, wake) = self.shared.relay.listen(run.clone(), sink.clone());
        let Some(run) = run.filter(|_| context.accepted().tools_list_changed == Some(true)) else {
            context.cancelled().await;
            return Ok(());
        };
        let mut last = self.visible_tools(&run, true).await.ok().flatten();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                () = wake.notified() => {}
                () = tokio::time::sleep(LISTEN_POLL) => {}
            }
            match self.visible_tools(&run, true).await {
                // The run ended: so does its stream.
                Ok(None) => return Ok(()),
                Ok(Some(now)) => {
                    if last.as_ref().is_some_and(|last| *last != now) {
                        let _ = sink.notify_tool_list_changed().await;
                    }
                    last = Some(now);
                }
                // The store is unreachable: look again at the next wake or poll.
                Err(_) => {}
            }
        }
    }

    /// A handshake client: the session gets its own upstream connection, opened with
    /// the client's capabilities and identity, so that the upstream sees the client as
    /// it would without the gateway (it asks it for input, samples, roots as the
    /// client allows) and everything it says there (logs, progress, resource updates)
    /// is this session's alone.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        if let (Some(upstream), None) = (&self.shared.reconnect, self.session.get()) {
            let mut config = request.clone();
            config.protocol_version = result.protocol_version.clone();
            config.meta = None;
            // Over stdio the gateway serves this one session: when its upstream goes
            // away, so does the gateway (exit 2, for a supervisor to restart it).
            let on_gone = || -> Option<upstream::OnGone> {
                self.fixed_id.as_ref()?;
                let ended = Arc::clone(&self.shared.ended);
                Some(Box::new(move |reason| {
                    let _ = ended.send(Some(reason));
                }))
            };
            let connect = |config, modern| {
                upstream::connect_session(
                    upstream,
                    Arc::clone(&self.shared.relay),
                    context.peer.clone(),
                    config,
                    self.shared.limits.call_timeout,
                    on_gone(),
                    modern,
                )
            };
            let mut connected = connect(config.clone(), false).await;
            // An upstream that speaks only 2026-07-28 takes no handshake: the session's
            // connection is on that revision, the gateway keeping for the session what
            // the revision removed (its log level, its subscriptions).
            if connected.is_err() && upstream::is_modern(&self.shared.upstream.peer) {
                connected = connect(config, true).await;
            }
            match connected {
                // A second `initialize` on one session keeps the first connection.
                Ok(link) => {
                    let _ = self.session.set(link);
                    // A session restored on this instance names its id here already;
                    // a fresh one's id is in the response, which the HTTP layer reads
                    // and gives to the session (its `initialized` may reach another
                    // instance).
                    self.known_as(&context.extensions, &context.peer);
                    self.await_name(&context.extensions, &context.peer);
                }
                Err(why) => {
                    return Err(Error::UpstreamUnavailable {
                        why: why.to_string(),
                    }
                    .into())
                }
            }
        }
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let linked = self.session.get().is_some();
        // Over HTTP the session's id is known from here on.
        self.known_as(&context.extensions, &context.peer);
        self.shared.relay.add(context.peer, linked);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let _permit = self.shared.permit()?;
        let id = self.state_key(&context)?;
        let allowed = self
            .visible_tools(&id, is_modern(&context))
            .await?
            .ok_or_else(|| ended(&id))?;
        let mut result = ListToolsResult::with_all_items(allowed);
        // The list is the run's, and changes with its next call: no one else may cache
        // it, and it is stale at once (`subscriptions/listen` says when it changed).
        result.ttl_ms = Some(0);
        result.cache_scope = Some(CacheScope::Private);
        if is_modern(&context) {
            self.stamp(&mut result.meta);
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let _counted = InFlight::new(&self.shared.in_flight);
        let modern = is_modern(&context);
        let run = self.state_key(&context).unwrap_or_default();
        let span = telemetry::call(
            &request.name,
            &run,
            &serde_json::to_string(&context.id).unwrap_or_default(),
            &context.meta,
        );
        let mut response = span.run(self.call(request, context)).await?;
        span.answered(&response);
        if modern {
            match &mut response {
                CallToolResponse::Complete(result) => self.stamp(&mut result.meta),
                CallToolResponse::InputRequired(result) => self.stamp(&mut result.meta),
                _ => {}
            }
        }
        Ok(response)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let forwarded = ListPromptsRequest {
            params: request,
            ..Default::default()
        };
        match self
            .pass(
                ClientRequest::ListPromptsRequest(forwarded),
                "prompts/list",
                &context,
            )
            .await?
        {
            ServerResult::ListPromptsResult(r) => Ok(r),
            _ => Err(unexpected("prompts/list")),
        }
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let forwarded = ClientRequest::GetPromptRequest(GetPromptRequest::new(request));
        match self.pass(forwarded, "prompts/get", &context).await? {
            ServerResult::GetPromptResult(r) => Ok(r.into()),
            ServerResult::InputRequiredResult(r) => Ok(GetPromptResponse::InputRequired(r)),
            _ => Err(unexpected("prompts/get")),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let forwarded = ListResourcesRequest {
            params: request,
            ..Default::default()
        };
        match self
            .pass(
                ClientRequest::ListResourcesRequest(forwarded),
                "resources/list",
                &context,
            )
            .await?
        {
            ServerResult::ListResourcesResult(r) => Ok(r),
            _ => Err(unexpected("resources/list")),
        }
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let forwarded = ListResourceTemplatesRequest {
            params: request,
            ..Default::default()
        };
        match self
            .pass(
                ClientRequest::ListResourceTemplatesRequest(forwarded),
                "resources/templates/list",
                &context,
            )
            .await?
        {
            ServerResult::ListResourceTemplatesResult(r) => Ok(r),
            _ => Err(unexpected("resources/templates/list")),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let forwarded = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request));
        match self.pass(forwarded, "resources/read", &context).await? {
            ServerResult::ReadResourceResult(r) => Ok(r.into()),
            ServerResult::InputRequiredResult(r) => Ok(ReadResourceResponse::InputRequired(r)),
            _ => Err(unexpected("resources/read")),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(kept) = self.link(&context).kept {
            return kept.subscribe(request.uri, true).await;
        }
        let forwarded = ClientRequest::SubscribeRequest(SubscribeRequest::new(request));
        self.pass(forwarded, "resources/subscribe", &context)
            .await
            .map(|_| ())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(kept) = self.link(&context).kept {
            return kept.subscribe(request.uri, false).await;
        }
        let forwarded = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(request));
        self.pass(forwarded, "resources/unsubscribe", &context)
            .await
            .map(|_| ())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let forwarded = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        match self
            .pass(forwarded, "completion/complete", &context)
            .await?
        {
            ServerResult::CompleteResult(r) => Ok(r),
            _ => Err(unexpected("completion/complete")),
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(kept) = self.link(&context).kept {
            kept.set_level(request.level);
            return Ok(());
        }
        let forwarded = ClientRequest::SetLevelRequest(SetLevelRequest::new(request));
        self.pass(forwarded, "logging/setLevel", &context)
            .await
            .map(|_| ())
    }
}

fn unexpected(method: &str) -> McpError {
    Error::UpstreamUnexpected {
        method: method.to_owned(),
    }
    .into()
}
