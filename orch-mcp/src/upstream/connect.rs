//! Starting or reaching the upstream and completing the MCP handshake (either revision
//! family), a session's own connection, and listening to a 2026-07-28 upstream.

use super::*;

/// A running upstream connection.
pub(crate) type Running = RunningService<RoleClient, UpstreamClient>;

/// Starts (or reaches) the upstream and completes the MCP handshake within `timeout`.
pub(crate) async fn connect(
    upstream: &Upstream,
    relay: Arc<Relay>,
    timeout: Duration,
) -> Result<Running, GatewayError> {
    let auto = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    };
    let shared = || UpstreamClient::shared(Arc::clone(&relay));
    match connect_with(upstream, shared(), timeout, auto).await {
        Ok(running) => Ok(running),
        // An upstream that answers `server/discover` with something that is neither a
        // DiscoverResult nor an error (`{}`) is met with the `initialize` handshake on a
        // new connection, as a client that never heard of `server/discover` would.
        Err(Handshake::Failed(first)) => {
            connect_with(upstream, shared(), timeout, ClientLifecycleMode::Initialize)
                .await
                .map_err(|second| {
                    GatewayError::UpstreamStart(format!(
                        "{first}; with the `initialize` handshake alone: {}",
                        second.message()
                    ))
                })
        }
        Err(other) => Err(GatewayError::UpstreamStart(other.message())),
    }
}

/// Why a connection to the upstream failed.
pub(super) enum Handshake {
    /// It could not be started or reached, or did not answer in time.
    Unreachable(String),
    /// It answered the handshake with something the client could not take.
    Failed(String),
}

impl Handshake {
    pub(super) fn message(self) -> String {
        match self {
            Handshake::Unreachable(m) | Handshake::Failed(m) => m,
        }
    }
}

/// One connection to `upstream` handled by `handler`, opened with `lifecycle`.
pub(super) async fn connect_with(
    upstream: &Upstream,
    handler: UpstreamClient,
    timeout: Duration,
    lifecycle: ClientLifecycleMode,
) -> Result<Running, Handshake> {
    let what = upstream.to_string();
    match upstream {
        Upstream::Command { program, args } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            let transport = crate::child::ChildUpstream::spawn(command).map_err(|e| {
                Handshake::Unreachable(format!("cannot start the upstream MCP server {what}: {e}"))
            })?;
            handshake(transport, &what, handler, timeout, lifecycle).await
        }
        Upstream::Url(url) => {
            let client = Watched::new().map_err(|e| {
                Handshake::Unreachable(format!(
                    "cannot make an HTTP client for the upstream MCP server {what}: {e}"
                ))
            })?;
            let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.as_str(),
            );
            let transport =
                rmcp::transport::StreamableHttpClientTransport::with_client(client.clone(), config);
            let started = tokio::time::Instant::now();
            let running = handshake(transport, &what, handler, timeout, lifecycle).await?;
            // What the upstream says outside any request (a question of a tool that does
            // not name its call, a log line) comes on its standalone stream, and an
            // upstream drops what it says while that stream is not open: nothing is
            // forwarded before it is (or the upstream refused it). A slow stream is not
            // fatal: after the handshake's time limit the connection is used anyway, as a
            // client going directly would.
            let left = timeout.saturating_sub(started.elapsed());
            let _ = tokio::time::timeout(left, client.standalone_settled()).await;
            Ok(running)
        }
    }
}

/// Completes the MCP handshake with the upstream at the end of `transport` within
/// `timeout`; `what` names it in errors.
pub(crate) async fn connect_on<T, E, A>(
    transport: T,
    what: &str,
    relay: Arc<Relay>,
    timeout: Duration,
) -> Result<Running, GatewayError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    // Either revision: `server/discover` first, the `initialize` handshake when the
    // upstream does not know it.
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    };
    handshake(
        transport,
        what,
        UpstreamClient::shared(relay),
        timeout,
        lifecycle,
    )
    .await
    .map_err(|e| GatewayError::UpstreamStart(e.message()))
}

/// The MCP handshake with the upstream at the end of `transport` in `lifecycle`, within
/// `timeout`, the connection handled by `handler`. Every connection is [`Observed`]: its
/// requests' answers wait for the progress before them.
pub(super) async fn handshake<T, E, A>(
    transport: T,
    what: &str,
    handler: UpstreamClient,
    timeout: Duration,
    lifecycle: ClientLifecycleMode,
) -> Result<Running, Handshake>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let transport = Observed::new(transport.into_transport(), Arc::clone(&handler.routes));
    let connected = rmcp::serve_client_with_lifecycle(handler, transport, lifecycle);
    match tokio::time::timeout(timeout, connected).await {
        Err(_) => Err(Handshake::Unreachable(format!(
            "the upstream MCP server {what} did not complete the MCP handshake within {} s",
            timeout.as_secs_f64()
        ))),
        Ok(Err(e)) => Err(Handshake::Failed(format!(
            "the upstream MCP server {what} failed the MCP handshake: {e}"
        ))),
        Ok(Ok(running)) => Ok(running),
    }
}

/// Told why a session's upstream connection went away (unless the gateway closed it).
pub(crate) type OnGone = Box<dyn FnOnce(String) + Send>;

/// Opens a client session's own connection to the upstream (see [`SessionLink`]): the
/// `initialize` handshake with what the client said in its own (`config`), within
/// `timeout`.
pub(crate) async fn connect_session(
    upstream: &Upstream,
    relay: Arc<Relay>,
    client: Peer<RoleServer>,
    config: ClientConfig,
    timeout: Duration,
    on_gone: Option<OnGone>,
    modern: bool,
) -> Result<SessionLink, String> {
    let tools = Arc::new(ToolList::new(Vec::new()));
    let routes: Arc<Routes> = Arc::default();
    let handler = UpstreamClient {
        relay,
        routes: Arc::clone(&routes),
        owner: Some((client, config)),
        tools: Some((Arc::clone(&tools), timeout)),
        session: Arc::default(),
    };
    let session = Arc::clone(&handler.session);
    let what = upstream.to_string();
    // An upstream without the handshake is reached on 2026-07-28, with the client's
    // identity and capabilities in every request's `_meta`.
    let lifecycle = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    let connected = connect_with(upstream, handler, timeout, lifecycle);
    let handshake = async {
        let running = connected.await.map_err(Handshake::message)?;
        // The session's first list: what its calls are checked against.
        let listed = running.peer().list_all_tools().await.map_err(|e| {
            format!(
                "the upstream MCP server {what} cannot list its tools: {}",
                crate::handler::upstream_error(e, "tools/list", timeout).message
            )
        })?;
        Ok::<_, String>((running, listed))
    };
    let (running, listed) = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| {
            format!(
                "the upstream MCP server {what} did not complete the MCP handshake and list its tools within {} s",
                timeout.as_secs_f64()
            )
        })??;
    *tools.tools.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(listed);
    let kept = match (is_modern(running.peer()), &running.service().owner) {
        (true, Some((client, _))) => {
            let kept = Arc::new(Kept {
                level: Mutex::new(None),
                listening: tokio::sync::Mutex::new(Default::default()),
                peer: running.peer().clone(),
                client: client.clone(),
                tools: Arc::clone(&tools),
                limit: timeout,
            });
            // List changes come only on a listen stream on this revision.
            match kept.listen(Vec::new()).await {
                Ok(stop) => kept.listening.lock().await.1 = Some(stop.drop_guard()),
                Err(e) => orch_runtime::eprintln_printable!(
                    "orch mcp: warning: the upstream MCP server refused `subscriptions/listen` ({}); a session will not hear of changes of its tool list",
                    e.message
                ),
            }
            Some(kept)
        }
        _ => None,
    };
    let link = Link {
        peer: running.peer().clone(),
        gone: tokio_util::sync::CancellationToken::new(),
        routes: Arc::clone(&running.service().routes),
        kept,
    };
    let close = CloseOnDrop(Some(running.cancellation_token()));
    let gone = link.gone.clone();
    tokio::spawn(async move {
        let _fire = gone.drop_guard();
        let reason = match running.waiting().await {
            // Closed by the gateway: the session ended.
            Ok(rmcp::service::QuitReason::Cancelled) => return,
            Ok(_) => format!("the upstream MCP server {what} closed the connection"),
            Err(e) => format!("the upstream MCP server {what} failed: {e}"),
        };
        if let Some(on_gone) = on_gone {
            on_gone(reason);
        }
    });
    Ok(SessionLink {
        link,
        tools,
        session,
        _close: close,
    })
}

/// Is the upstream on a revision without sessions (2026-07-28 or later)?
pub(crate) fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize())
}

/// On a 2026-07-28 upstream, change notifications come only on a `subscriptions/listen`
/// stream the client opens: open one for the list changes the upstream advertises and
/// relay them as the handshake revisions' notifications are. Ends when the stream does
/// (the upstream went away, or `stop` fires).
pub(crate) async fn listen_upstream(
    peer: Peer<RoleClient>,
    relay: Arc<Relay>,
    stop: tokio_util::sync::CancellationToken,
) {
    if peer.peer_info().is_none() {
        return;
    }
    let filter = list_changes(&peer);
    let mut subscription = tokio::select! {
        opened = peer.listen(filter) => match opened {
            Ok(subscription) => subscription,
            Err(e) => {
                orch_runtime::eprintln_printable!(
                    "orch mcp: warning: the upstream MCP server refused `subscriptions/listen` ({e}); changes of its tool list will not be seen"
                );
                return;
            }
        },
        () = stop.cancelled() => return,
    };
    loop {
        let next = tokio::select! {
            next = subscription.next() => next,
            () = stop.cancelled() => return,
        };
        let Ok(Some(notification)) = next else { return };
        match notification {
            ServerNotification::ToolListChangedNotification(_) => {
                relay.upstream_tools_changed.notify_one();
            }
            other => relay.broadcast(other).await,
        }
    }
}

/// A `subscriptions/listen` filter for the list changes the upstream on `peer` offers:
/// its tools always, its prompts and resources when it has them.
pub(super) fn list_changes(peer: &Peer<RoleClient>) -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::default();
    filter.tools_list_changed = Some(true);
    if let Some(info) = peer.peer_info() {
        let caps = &info.capabilities;
        filter.prompts_list_changed = caps.prompts.as_ref().map(|_| true);
        filter.resources_list_changed = caps.resources.as_ref().map(|_| true);
    }
    filter
}
