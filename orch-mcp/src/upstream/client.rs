//! The gateway's side of an upstream connection: the client handler that relays the
//! upstream's requests and notifications to the client they belong to.

use super::*;

/// The gateway's side of an upstream connection: the gateway's own (`owner` `None`: it
/// lists the tools, and serves the requests of clients without a connection of their
/// own) or one client session's.
pub(crate) struct UpstreamClient {
    pub(crate) relay: Arc<Relay>,
    pub(crate) routes: Arc<Routes>,
    /// The client session this connection is for, and what it said in `initialize`.
    pub(crate) owner: Option<(Peer<RoleServer>, ClientConfig)>,
    /// A session connection's own tool list, and how long a re-fetch may take.
    pub(crate) tools: Option<(Arc<ToolList>, Duration)>,
    /// A session connection's MCP session id over HTTP, once the session has told it.
    pub(crate) session: Arc<OnceLock<Arc<str>>>,
}

impl UpstreamClient {
    /// The gateway's own connection's side.
    pub(super) fn shared(relay: Arc<Relay>) -> Self {
        UpstreamClient {
            relay,
            routes: Arc::default(),
            owner: None,
            tools: None,
            session: Arc::default(),
        }
    }

    /// The session connection's own client, as an [`Owner`].
    pub(super) fn session_owner(&self) -> Option<Owner> {
        let (client, _) = self.owner.as_ref()?;
        Some(Owner {
            client: client.clone(),
            request: None,
            session: self.session.get().cloned(),
        })
    }

    /// Where a message from the upstream goes that is not about one request (a log
    /// line, a resource update): the session's client, or on the gateway's own
    /// connection the client of the only request in flight (else no one: it would
    /// reach a session it is not about).
    pub(super) async fn session_client(&self) -> Option<Owner> {
        match self.session_owner() {
            Some(owner) => Some(owner),
            None => self.routes.owner(None).await,
        }
    }

    /// Sends a notification that goes on a session's standalone stream, wherever the
    /// instance holding that stream is.
    pub(super) async fn notify(&self, owner: &Owner, notification: ServerNotification) {
        self.relay
            .instances
            .notify(owner.session.as_deref(), &owner.client, notification)
            .await;
    }

    /// Asks the client whose request caused it (else the session's client) what the
    /// upstream asks, on that request's stream, and relays the answer; cancelled when
    /// the upstream cancels its request.
    pub(super) async fn ask_client(
        &self,
        mut request: ServerRequest,
        context: RequestContext<RoleClient>,
        method: &str,
    ) -> Result<ClientResult, McpError> {
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
            _ => None,
        };
        let owner = match self.routes.owner(origin.as_ref()).await {
            Some(owner) => owner,
            None => self.session_owner().ok_or_else(|| {
                McpError::from(Error::NoOneToAsk {
                    method: method.to_owned(),
                })
            })?,
        };
        if let Some(id) = owner.request {
            request.extensions_mut().insert(OriginatingRequestId(id));
        }
        let meta = context.meta;
        request.get_meta_mut().extend(meta);
        // Sent from a task of its own: in this one the MCP SDK marks every request sent
        // as caused by the upstream's request being handled here (a task-local), which
        // overrides the mark set above — the question would go to the client's standalone
        // stream (or nowhere, without one) instead of the stream of the call it is about.
        let client = owner.client.clone();
        let asking = (owner.session.as_deref()).and_then(|s| self.relay.instances.asking(s));
        let handle = tokio::spawn(async move {
            client
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await
        })
        .await
        .map_err(|e| {
            McpError::from(Error::RelayFailed {
                method: method.to_owned(),
                why: e.to_string(),
            })
        })?
        .map_err(|e| relay_error(e, method))?;
        let (peer, id) = (handle.peer.clone(), handle.id.clone());
        // The client's answer is a request of its own, which a balancer may send to
        // another gateway instance: that one passes it on.
        let elsewhere = owner
            .session
            .as_deref()
            .and_then(|session| self.relay.instances.await_answer(session, &id));
        drop(asking);
        let answered_elsewhere = async {
            match elsewhere {
                Some(mut awaited) => (&mut awaited.answer).await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = handle.await_response() => answer.map_err(|e| relay_error(e, method)),
            Some(answer) = answered_elsewhere => crate::instances::answer_of(answer, method),
            () = context.ct.cancelled() => {
                let notification = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some("the upstream MCP server cancelled its request".into()),
                ));
                let _ = peer.send_notification(notification.into()).await;
                Err(Error::RelayCancelled {
                    method: method.to_owned(),
                }
                .into())
            }
        }
    }
}

/// The client's failure to answer a relayed request, for the upstream.
pub(super) fn relay_error(e: ServiceError, method: &str) -> McpError {
    match e {
        ServiceError::McpError(e) => e,
        other => Error::ClientSilent {
            method: method.to_owned(),
            why: other.to_string(),
        }
        .into(),
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        match &self.owner {
            Some((_, config)) => config.clone(),
            None => {
                let mut config = ClientConfig::new(
                    ClientCapabilities::default(),
                    Implementation::new("orch-mcp", env!("CARGO_PKG_VERSION")),
                );
                // What an `initialize` offers: the latest revision that has it
                // (2026-07-28 is reached by `server/discover`, never by `initialize`).
                config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
                config
            }
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(request));
        match self
            .ask_client(request, context, "elicitation/create")
            .await?
        {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(unexpected_answer("elicitation/create")),
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self
            .ask_client(request, context, "sampling/createMessage")
            .await?
        {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(unexpected_answer("sampling/createMessage")),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        match self.ask_client(request, context, "roots/list").await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(unexpected_answer("roots/list")),
        }
    }

    async fn on_progress(
        &self,
        mut params: ProgressNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let _turn = self.routes.turn(context.extensions.get()).await;
        // Progress reaches the client that asked for it, under its own token.
        let upstream_token = params.progress_token.clone();
        let routed = self.routes.progress(&upstream_token).await;
        let found = routed.is_some();
        if let Some((client, token)) = routed {
            params.progress_token = token;
            let _ = client.notify_progress(params).await;
        }
        self.routes.progress_done(&upstream_token, found);
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        match (&self.owner, &self.tools) {
            // A session's connection: its list is fetched again in a task of its own
            // (a re-fetch that hangs blocks nothing), then its client is told.
            (Some((client, _)), Some((tools, limit))) => {
                let (client, tools, limit) = (client.clone(), Arc::clone(tools), *limit);
                let peer = context.peer;
                tokio::spawn(async move {
                    if tools.refresh(&peer, limit).await.is_ok() {
                        let _ = client.notify_tool_list_changed().await;
                    }
                });
            }
            // The gateway's own: the gateway's task fetches it again, then tells its
            // clients (each client's filtered view may change with the upstream's list).
            _ => self.relay.upstream_tools_changed.notify_one(),
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let changed = ServerNotification::PromptListChangedNotification(Default::default());
        self.list_changed(changed).await;
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let changed = ServerNotification::ResourceListChangedNotification(Default::default());
        self.list_changed(changed).await;
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let _turn = self.routes.turn(context.extensions.get()).await;
        // Subscriptions are a session's: only its own connection carries its updates.
        if let Some(owner) = self.session_owner() {
            let updated = ServerNotification::ResourceUpdatedNotification(
                rmcp::model::ResourceUpdatedNotification::new(params),
            );
            self.notify(&owner, updated).await;
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let _turn = self.routes.turn(context.extensions.get()).await;
        if let Some(owner) = self.session_client().await {
            let line = ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(params),
            );
            self.notify(&owner, line).await;
        }
    }
}

impl UpstreamClient {
    /// A list of the upstream's changed: a session's connection tells its client; the
    /// gateway's own tells the clients without a connection of their own.
    pub(super) async fn list_changed(&self, changed: ServerNotification) {
        match self.session_owner() {
            Some(owner) => self.notify(&owner, changed).await,
            None => self.relay.broadcast(changed).await,
        }
    }
}

pub(super) fn unexpected_answer(method: &str) -> McpError {
    Error::ClientUnexpected {
        method: method.to_owned(),
    }
    .into()
}
