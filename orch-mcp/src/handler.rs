//! The gateway's MCP server side: one [`Downstream`] per client session, sharing the
//! gateway's [`Shared`] state.

// Logging and resources/subscribe are deprecated by the 2026-07-28 revision only; the
// gateway speaks the handshake revisions, where they are current.
#![allow(deprecated)]

use crate::upstream::Relay;
use orch_agent::{Orchestrated, Policy};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::Snapshot;
use orch_store::{SessionStore, StoreError, Versioned};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    CompleteRequest, CompleteRequestParams, CompleteResult, ContentBlock, GetPromptRequest,
    GetPromptRequestParams, GetPromptResponse, InitializeResult, ListPromptsRequest,
    ListPromptsResult, ListResourceTemplatesRequest, ListResourceTemplatesResult,
    ListResourcesRequest, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse,
    ServerResult, SetLevelRequest, SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams,
    Tool, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, ServiceError};
use rmcp::{ErrorData as McpError, Peer, RoleClient, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// How many times a recording is retried when another gateway instance changed the same
/// session in between.
const RECORD_ATTEMPTS: u32 = 50;

/// The state every client session of one gateway shares.
pub(crate) struct Shared<S> {
    pub(crate) machine: DynMachine,
    pub(crate) store: S,
    pub(crate) upstream: Peer<RoleClient>,
    /// What the gateway says of itself in `initialize`.
    pub(crate) info: InitializeResult,
    pub(crate) relay: Arc<Relay>,
    /// The upstream's tools, fetched when first needed and again after the upstream said
    /// its list changed.
    tools: tokio::sync::Mutex<Option<Arc<Vec<Tool>>>>,
    /// One lock per session with a call in progress on this instance.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Tool calls being forwarded now.
    pub(crate) in_flight: AtomicUsize,
}

impl<S: SessionStore + 'static> Shared<S> {
    pub(crate) fn new(
        machine: DynMachine,
        store: S,
        upstream: Peer<RoleClient>,
        info: InitializeResult,
        relay: Arc<Relay>,
    ) -> Self {
        Shared {
            machine,
            store,
            upstream,
            info,
            relay,
            tools: tokio::sync::Mutex::new(None),
            locks: Mutex::new(HashMap::new()),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// The upstream's tools (all pages).
    pub(crate) async fn upstream_tools(&self) -> Result<Arc<Vec<Tool>>, McpError> {
        let mut cached = self.tools.lock().await;
        let stale = self.relay.tools_stale.swap(false, Ordering::SeqCst);
        if let (Some(tools), false) = (cached.as_ref(), stale) {
            return Ok(Arc::clone(tools));
        }
        let tools = Arc::new(
            self.upstream
                .list_all_tools()
                .await
                .map_err(upstream_error)?,
        );
        *cached = Some(Arc::clone(&tools));
        Ok(tools)
    }

    /// The session `id` as stored (a fresh session if nothing is stored), with the
    /// upstream's tools as its host tools, and the stored version.
    fn restore(
        &self,
        id: &str,
        stored: Option<&[u8]>,
        policy: &Policy,
    ) -> Result<DynSession<'_>, McpError> {
        let mut session = match stored {
            None => DynSession::new(&self.machine),
            Some(bytes) => {
                let restored = Snapshot::from_bytes(bytes)
                    .and_then(|snapshot| DynSession::restore(&self.machine, &snapshot));
                match restored {
                    Ok((session, _report)) => session,
                    Err(e) => {
                        return Err(McpError::internal_error(
                            format!("orchestration session `{id}` cannot be restored: {e}"),
                            None,
                        ))
                    }
                }
            }
        };
        policy.prepare(&mut session);
        Ok(session)
    }

    /// What is stored under session `id`.
    async fn load(&self, id: &str) -> Result<Option<Versioned>, McpError> {
        self.store.load(id).await.map_err(store_error)
    }

    /// Runs `f` on the current state of session `id` (read only).
    async fn read<R>(
        &self,
        id: &str,
        policy: &Policy,
        f: impl FnOnce(&DynSession<'_>) -> R,
    ) -> Result<R, McpError> {
        let stored = self.load(id).await?;
        let session = self.restore(id, stored.as_ref().map(|v| v.bytes.as_slice()), policy)?;
        Ok(f(&session))
    }

    /// Records that `tool` ran in session `id`, starting from `stored` (what the call was
    /// admitted against: one store read per call); reads again only after a conflict.
    /// Returns whether the tools the session allows changed.
    async fn record(
        &self,
        id: &str,
        policy: &Policy,
        tool: &str,
        mut stored: Option<Versioned>,
    ) -> Result<bool, McpError> {
        for attempt in 0..RECORD_ATTEMPTS {
            if attempt > 0 {
                stored = self.load(id).await?;
            }
            let mut session =
                self.restore(id, stored.as_ref().map(|v| v.bytes.as_slice()), policy)?;
            let before = policy.offered(&session);
            policy.record(&mut session, tool);
            let changed = policy.offered(&session) != before;
            let bytes = session.snapshot().to_bytes();
            let written = self
                .store
                .compare_and_set(id, stored.as_ref().map(|v| v.version), bytes)
                .await
                .map_err(store_error)?;
            if written.is_some() {
                return Ok(changed);
            }
        }
        Err(McpError::internal_error(
            format!(
                "`{tool}` ran, but orchestration session `{id}` could not be updated: \
                 {RECORD_ATTEMPTS} attempts conflicted with concurrent updates"
            ),
            None,
        ))
    }

    /// The lock that serializes the tool calls of session `id` on this instance.
    fn session_lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the locks nobody holds or waits for.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(locks.entry(id.to_owned()).or_default())
    }
}

/// A JSON-RPC error for the client from a failed upstream request: the upstream's own
/// error as it is, anything else (the connection is gone, a timeout) as an internal
/// error that says so.
pub(crate) fn upstream_error(e: ServiceError) -> McpError {
    match e {
        ServiceError::McpError(e) => e,
        other => McpError::internal_error(
            format!("the upstream MCP server is unavailable: {other}"),
            None,
        ),
    }
}

fn store_error(e: StoreError) -> McpError {
    McpError::internal_error(format!("orchestration session store: {e}"), None)
}

/// One client session.
pub(crate) struct Downstream<S> {
    pub(crate) shared: Arc<Shared<S>>,
    /// The session's id when the transport has no session ids (stdio: one client).
    pub(crate) fixed_id: Option<String>,
}

impl<S> Downstream<S> {
    /// The orchestration session of this request: the `Mcp-Session-Id` it came with over
    /// HTTP, the connection's own id over stdio.
    fn session_id(&self, context: &RequestContext<RoleServer>) -> Result<String, McpError> {
        if let Some(id) = &self.fixed_id {
            return Ok(id.clone());
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                McpError::invalid_request(
                    "orch mcp keeps one orchestration session per MCP session: \
                     this request has no Mcp-Session-Id (initialize first)",
                    None,
                )
            })
    }
}

impl<S: SessionStore + 'static> Downstream<S> {
    async fn forward(&self, request: ClientRequest) -> Result<ServerResult, McpError> {
        self.shared
            .upstream
            .send_request(request)
            .await
            .map_err(upstream_error)
    }

    async fn policy(&self) -> Result<(Arc<Vec<Tool>>, Policy), McpError> {
        let tools = self.shared.upstream_tools().await?;
        let policy = Policy::new(tools.iter().map(|t| t.name.to_string()));
        Ok((tools, policy))
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let id = self.session_id(&context)?;
        let lock = self.shared.session_lock(&id);
        let _turn = lock.lock().await;
        let (_, policy) = self.policy().await?;
        let tool = params.name.to_string();
        let stored = self.shared.load(&id).await?;
        let admitted = self
            .shared
            .restore(&id, stored.as_ref().map(|v| v.bytes.as_slice()), &policy)
            .map(|session| policy.admit(&session, &tool))?;
        if let Err(refusal) = admitted {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                refusal.reason,
            )]));
        }
        let forwarded = self
            .forward(ClientRequest::CallToolRequest(CallToolRequest::new(params)))
            .await?;
        let result = match forwarded {
            ServerResult::CallToolResult(result) => result,
            _ => {
                return Err(McpError::internal_error(
                    format!("the upstream MCP server answered `tools/call` of `{tool}` with something other than a tool result"),
                    None,
                ))
            }
        };
        // A result with `isError` says the tool failed: the orchestration does not
        // count it (docs/mcp.md), so the model may call it again.
        if result.is_error != Some(true) {
            let changed = self
                .shared
                .record(&id, &policy, &tool, stored)
                .await
                .map_err(|e| {
                    McpError::internal_error(
                        format!(
                            "`{tool}` ran, but the orchestration could not record it: {}",
                            e.message
                        ),
                        None,
                    )
                })?;
            if changed {
                // The client may have hung up meanwhile; the call itself succeeded.
                let _ = context.peer.notify_tool_list_changed().await;
            }
        }
        Ok(result)
    }
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

    /// The revisions with an `initialize` handshake: 2026-07-28 has no sessions, and an
    /// orchestration is a session's state.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.relay.add(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let id = self.session_id(&context)?;
        let (tools, policy) = self.policy().await?;
        let allowed: Vec<Tool> = self
            .shared
            .read(&id, &policy, |session| {
                tools
                    .iter()
                    .filter(|t| session.check_tool(&t.name).is_ok())
                    .cloned()
                    .collect()
            })
            .await?;
        Ok(ListToolsResult::with_all_items(allowed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let _counted = InFlight::new(&self.shared.in_flight);
        self.call(request, context)
            .await
            .map(CallToolResponse::from)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let forwarded = ListPromptsRequest {
            params: request,
            ..Default::default()
        };
        match self
            .forward(ClientRequest::ListPromptsRequest(forwarded))
            .await?
        {
            ServerResult::ListPromptsResult(r) => Ok(r),
            _ => Err(unexpected("prompts/list")),
        }
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        match self
            .forward(ClientRequest::GetPromptRequest(GetPromptRequest::new(
                request,
            )))
            .await?
        {
            ServerResult::GetPromptResult(r) => Ok(r.into()),
            _ => Err(unexpected("prompts/get")),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let forwarded = ListResourcesRequest {
            params: request,
            ..Default::default()
        };
        match self
            .forward(ClientRequest::ListResourcesRequest(forwarded))
            .await?
        {
            ServerResult::ListResourcesResult(r) => Ok(r),
            _ => Err(unexpected("resources/list")),
        }
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let forwarded = ListResourceTemplatesRequest {
            params: request,
            ..Default::default()
        };
        match self
            .forward(ClientRequest::ListResourceTemplatesRequest(forwarded))
            .await?
        {
            ServerResult::ListResourceTemplatesResult(r) => Ok(r),
            _ => Err(unexpected("resources/templates/list")),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        match self
            .forward(ClientRequest::ReadResourceRequest(
                ReadResourceRequest::new(request),
            ))
            .await?
        {
            ServerResult::ReadResourceResult(r) => Ok(r.into()),
            _ => Err(unexpected("resources/read")),
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward(ClientRequest::SubscribeRequest(SubscribeRequest::new(
            request,
        )))
        .await
        .map(|_| ())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward(ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(
            request,
        )))
        .await
        .map(|_| ())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        match self
            .forward(ClientRequest::CompleteRequest(CompleteRequest::new(
                request,
            )))
            .await?
        {
            ServerResult::CompleteResult(r) => Ok(r),
            _ => Err(unexpected("completion/complete")),
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward(ClientRequest::SetLevelRequest(SetLevelRequest::new(
            request,
        )))
        .await
        .map(|_| ())
    }
}

fn unexpected(method: &str) -> McpError {
    McpError::internal_error(
        format!("the upstream MCP server answered `{method}` with a result of another kind"),
        None,
    )
}
