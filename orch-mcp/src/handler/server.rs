//! The MCP server side each client session speaks: the SDK's `ServerHandler`, one method
//! per request kind, each a wire over the calls in this module.

use super::*;

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
                    self.shared.limits.startup_timeout,
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
            self.shared.limits.mode,
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
