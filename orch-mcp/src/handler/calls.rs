//! A client's requests through the workflow: the tools a run may see, a tool call from
//! admission to its recorded result, a question put to the client's human, and the
//! other requests passed through.

use super::*;

impl<S: SessionStore + 'static> Downstream<S> {
    /// The upstream's tools that the workflow state under `key` allows now, in the
    /// upstream's order (as the connection of a request on a `modern` revision or not
    /// lists them); `None` when `key` names a run or session that has ended (only a run
    /// whose record its first call makes — [`Self::may_begin`] — has just begun without
    /// one).
    pub(super) async fn visible_tools(
        &self,
        key: &str,
        modern: bool,
    ) -> Result<Option<Vec<Tool>>, McpError> {
        let (tools, policy) = self.policy(modern);
        let record = match self.shared.record(key).await? {
            Some(record) => record,
            None if self.may_begin(key) => Record::default(),
            // An HTTP session's record is made at its handshake, a started run's by
            // `POST /runs`: none means it ended (DELETE, revoked, the TTL passed) —
            // perhaps while this request was on its way. It is never served afresh.
            None => return Ok(None),
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

    /// Whether the workflow state under `key` begins with its first call when nothing is
    /// stored: over stdio (the one session), and for the run a JWT claim names and the
    /// anonymous run. An HTTP session's record is made at its handshake and a started
    /// run's by `POST /runs`, so for them a missing record means the session or run has
    /// ended, and it is not brought back.
    pub(super) fn may_begin(&self, key: &str) -> bool {
        self.fixed_id.is_some() || key.starts_with(JWT_PREFIX) || key == crate::ANONYMOUS_RUN
    }

    /// The key of this request's workflow state in the store: the run its bearer token
    /// names over HTTP (checked by the guard), else its MCP session (the
    /// `Mcp-Session-Id` over HTTP; over stdio the process serves one run, whichever
    /// revision the client speaks).
    pub(super) fn state_key(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, McpError> {
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

    /// The delivery a tool call came as, on a handshake revision: its JSON-RPC request id
    /// within the client's MCP session (the `Mcp-Session-Id` over HTTP; over stdio this
    /// process's one session), which JSON-RPC and MCP make unique within a session — so
    /// the same request delivered again is answered with what it got and never runs
    /// twice ([`run::admit`]). The 2026-07-28 family has no session to scope an id by.
    fn delivery(
        &self,
        context: &RequestContext<RoleServer>,
        call: CallDigest,
    ) -> Option<(String, Delivery)> {
        // Over stdio the session is this process's: a process started again over the
        // same stored run (`--run` on Redis) is a new client whose ids start afresh.
        static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let session = match &self.fixed_id {
            Some(_) => PROCESS.get_or_init(|| format!("stdio-{:016x}", protocol::nonce())),
            None => context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())?,
        };
        let request = serde_json::to_string(&context.id).ok()?;
        // A session id cannot hold the separator (a header value is visible ASCII).
        let delivery = Delivery::new(&format!("{session}\u{1f}{request}"), call);
        Some((request, delivery))
    }

    /// Forwards a request that the orchestration does not judge, holding a permit.
    pub(super) async fn pass(
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
    pub(super) fn stamp(&self, meta: &mut Option<MetaObject>) {
        if let Ok(info) = serde_json::to_value(&self.shared.info.server_info) {
            meta.get_or_insert_default()
                .insert(SERVER_INFO_META_KEY.to_owned(), info);
        }
    }

    /// The upstream's tools as this request's connection lists them, and the rules over
    /// them.
    pub(super) fn policy(&self, modern: bool) -> (Arc<Vec<Tool>>, Policy) {
        let tools = match self.session.get() {
            Some(session) if !modern => session.tools.get(),
            _ => self.shared.tools(),
        };
        let policy =
            Policy::new(tools.iter().map(|t| t.name.to_string())).in_mode(self.shared.limits.mode);
        (tools, policy)
    }

    pub(super) async fn call(
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
        let may_create = self.may_begin(&id);
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
        // The gateway's clock is the call's time: budgets with a window judge by it.
        let checked = Call::new(digest, &text).at(orch_agent::protocol::now_ms());
        let modern = is_modern(&context);
        let delivery = match modern {
            true => None,
            false => self.delivery(&context, digest),
        };
        let (can_ask, client) = if modern {
            let can = approval::can_ask(context.meta.client_capabilities().as_ref());
            (can, context.meta.client_info())
        } else {
            let info = context.peer.peer_info();
            let can = approval::can_ask(info.as_deref().map(|i| &i.capabilities));
            (can, info.map(|i| i.client_info.clone()))
        };
        // Who asks, should a question be posted: the client, as it named itself.
        let asked_by = client.map(|c| super::admission::asked_by(&c.name, &c.version));
        let ttl = self.shared.limits.question_ttl;
        let posting = self.shared.posting.is_some();
        let ask = match (posting, can_ask) {
            // Approvers elsewhere answer the question the run holds: the call coming
            // again before their answer is not a new question.
            (true, _) => Gate::AskOnce { run: &id, ttl },
            (false, true) => Gate::Ask { run: &id, ttl },
            (false, false) => Gate::Refuse,
        };
        // Told of answers from before the question is posted, so none is missed.
        let mut answers = posting.then(|| self.shared.relay.instances.answers());
        let shown = match posting {
            true => serde_json::to_string(&arguments).unwrap_or_default(),
            false => String::new(),
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
        let incoming = Incoming {
            tool: &tool,
            call: &checked,
            delivery: delivery.as_ref().map(|(shown, d)| (shown.as_str(), d)),
            shown: &shown,
            asked_by: asked_by.as_deref(),
        };
        let reserve = |gate| shared.reserve(&id, &policy, incoming, gate, may_create, &context.ct);
        // An answer that applies to no question the run holds is refused as it is
        // (`stale_answer`): asking again on it would let the next copy of the same
        // answer run the call a second time.
        let mut reserved = reserve(gate).await?;
        if let (Reserved::Posted(posted, new), Some(answers)) = (&reserved, answers.as_mut()) {
            // An approver elsewhere answers; the call waits for it (bounded), then looks
            // at its run again: approved, it runs once.
            if *new {
                shared.announce(&id, posted).await;
            }
            shared.await_answer(&id, posted, answers, &context.ct).await;
            reserved = reserve(gate).await?;
        }
        if let Reserved::Asked(question) = &reserved {
            let shown = approval::question(&tool, &arguments, question)?;
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
                    let refused =
                        RefusalResult::new(&tool, "needs_approval", message, None, &policy);
                    return Ok(refused.into_result(structured).into());
                }
            };
        }
        let reservation = match reserved {
            Reserved::Go(reservation) => reservation,
            Reserved::Refused(refused) => return Ok(refused.into_result(structured).into()),
            Reserved::Posted(posted, _) => {
                let refused = super::approvals::waiting(&tool, &posted, &policy);
                return Ok(refused.into_result(structured).into());
            }
            Reserved::Asked(_) => {
                let message = format!("error: `{tool}` was not run: the workflow run asked about it again while a human decided; call it again to ask again");
                let refused = RefusalResult::new(&tool, "needs_approval", message, None, &policy);
                return Ok(refused.into_result(structured).into());
            }
        };
        self.run_admitted(params, &context, &id, &policy, &tool, reservation)
            .await
    }

    /// Forwards an admitted call upstream under its lease and settles it by its result:
    /// recorded only when the tool ran (a complete, successful result), released when
    /// it did not, lost (by the template's `lostResults`) when no result came.
    pub(super) async fn run_admitted(
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
                lease.settle(run::Ended::NotRun).await;
                return Ok(CallToolResponse::InputRequired(asked));
            }
            // A task (a call still running, `unfinished`) or something else: the call
            // has not completed, and is not recorded.
            Ok(other) => {
                lease.settle(run::Ended::NotRun).await;
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
                    true => run::Ended::Lost,
                    false => run::Ended::NotRun,
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
            lease.settle(run::Ended::NotRun).await;
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
            .settle(id, policy, reservation, run::Ended::Ran, values.as_deref())
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
    pub(super) async fn elicit(
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
