//! The connection to the upstream MCP server: started as a child process or reached
//! over Streamable HTTP, with a client handler that relays its notifications to the
//! gateway's clients.

// Logging and resources/subscribe are deprecated by the 2026-07-28 revision only; the
// gateway also speaks the handshake revisions, where they are current.
#![allow(deprecated)]

use crate::GatewayError;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingMessageNotification,
    LoggingMessageNotificationParam, ProtocolVersion, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RunningService, SubscriptionSink};
use rmcp::transport::IntoTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, Peer, RoleClient, RoleServer};
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Where the upstream MCP server is.
#[derive(Clone, Debug)]
pub enum Upstream {
    /// Start this program with these arguments and speak MCP over its standard input
    /// and output. It inherits the gateway's environment and standard error.
    Command {
        /// The program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// An MCP server speaking Streamable HTTP at this URL.
    Url(String),
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Command { program, args } => {
                write!(f, "`{}", program.to_string_lossy())?;
                for a in args {
                    write!(f, " {}", a.to_string_lossy())?;
                }
                f.write_str("`")
            }
            Upstream::Url(url) => write!(f, "{url}"),
        }
    }
}

/// The gateway's clients, to which upstream notifications are relayed, and the signal
/// that the upstream's tool list must be fetched again.
#[derive(Default)]
pub(crate) struct Relay {
    /// Clients on the handshake revisions (one per MCP session).
    clients: Mutex<Vec<Peer<RoleServer>>>,
    /// Open `subscriptions/listen` streams (2026-07-28), each with the run it listens
    /// for (`None`: only changes of the upstream's lists).
    listeners: Mutex<Vec<Listener>>,
    next_listener: AtomicU64,
    /// Cancelled when the upstream has gone away (requests in flight are answered then).
    pub(crate) upstream_gone: tokio_util::sync::CancellationToken,
    /// Notified when the upstream says its tool list changed (several notifications
    /// before the re-fetch starts make one re-fetch).
    pub(crate) upstream_tools_changed: tokio::sync::Notify,
}

/// One open `subscriptions/listen` stream.
struct Listener {
    id: u64,
    run: Option<String>,
    sink: SubscriptionSink,
    /// Woken when the tools its run sees may have changed (it looks, and tells its
    /// client only if they did).
    wake: Arc<tokio::sync::Notify>,
}

/// Removes a listener when its stream ends (or its task is dropped).
pub(crate) struct Listening<'a> {
    relay: &'a Relay,
    id: u64,
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        let mut listeners = self
            .relay
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        listeners.retain(|l| l.id != self.id);
    }
}

impl Relay {
    /// Adds a `subscriptions/listen` stream for `run`'s changes (and the upstream's),
    /// until the returned guard is dropped: the upstream's prompt and resource list
    /// changes go to `sink`; the returned `Notify` is woken when the run's tools may have
    /// changed.
    pub(crate) fn listen(
        &self,
        run: Option<String>,
        sink: SubscriptionSink,
    ) -> (Listening<'_>, Arc<tokio::sync::Notify>) {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        let wake = Arc::new(tokio::sync::Notify::new());
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Listener {
                id,
                run,
                sink,
                wake: Arc::clone(&wake),
            });
        (Listening { relay: self, id }, wake)
    }

    fn sinks(&self) -> Vec<SubscriptionSink> {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        listeners.iter().map(|l| l.sink.clone()).collect()
    }

    /// Wakes the listeners of `run` (all listeners: `None`): the tools they see may have
    /// changed.
    fn wake(&self, run: Option<&str>) {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for l in listeners.iter() {
            if run.is_none() || l.run.as_deref() == run {
                l.wake.notify_one();
            }
        }
    }

    /// A call of `run` changed the tools it allows: its listeners look again.
    pub(crate) fn run_tools_changed(&self, run: &str) {
        self.wake(Some(run));
    }

    /// Adds a client that finished its handshake.
    pub(crate) fn add(&self, peer: Peer<RoleServer>) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|p| !p.is_transport_closed());
        clients.push(peer);
    }

    /// The clients still connected.
    pub(crate) fn clients(&self) -> Vec<Peer<RoleServer>> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|p| !p.is_transport_closed());
        clients.clone()
    }

    /// Tells every client that the tools changed (the upstream's list was fetched
    /// again); every listener looks at its run's tools again.
    pub(crate) async fn tools_changed(&self) {
        let changed = ServerNotification::ToolListChangedNotification(Default::default());
        for peer in self.clients() {
            let _ = peer.send_notification(changed.clone()).await;
        }
        self.wake(None);
    }

    /// Relays an upstream notification to every client (a listener gets it when it
    /// asked for its kind).
    pub(crate) async fn broadcast(&self, notification: ServerNotification) {
        for peer in self.clients() {
            // A client that went away meanwhile is no reason to stop the others.
            let _ = peer.send_notification(notification.clone()).await;
        }
        for sink in self.sinks() {
            // The sink sends only what its listener asked for (and was accepted).
            let _ = sink.send(notification.clone()).await;
        }
    }
}

/// The gateway's side of the upstream connection.
pub(crate) struct UpstreamClient {
    pub(crate) relay: Arc<Relay>,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("orch-mcp", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // The gateway fetches the list again in a task of its own, then tells its
        // clients (each client's filtered view may change with the upstream's list).
        self.relay.upstream_tools_changed.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay
            .broadcast(ServerNotification::PromptListChangedNotification(
                Default::default(),
            ))
            .await;
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay
            .broadcast(ServerNotification::ResourceListChangedNotification(
                Default::default(),
            ))
            .await;
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .broadcast(ServerNotification::ResourceUpdatedNotification(
                ResourceUpdatedNotification::new(params),
            ))
            .await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .broadcast(ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(params),
            ))
            .await;
    }
}

/// A running upstream connection.
pub(crate) type Running = RunningService<RoleClient, UpstreamClient>;

/// Starts (or reaches) the upstream and completes the MCP handshake within `timeout`.
pub(crate) async fn connect(
    upstream: &Upstream,
    relay: Arc<Relay>,
    timeout: Duration,
) -> Result<Running, GatewayError> {
    let what = upstream.to_string();
    match upstream {
        Upstream::Command { program, args } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            let transport = rmcp::transport::TokioChildProcess::new(command).map_err(|e| {
                GatewayError::Upstream(format!("cannot start the upstream MCP server {what}: {e}"))
            })?;
            connect_on(transport, &what, relay, timeout).await
        }
        Upstream::Url(url) => {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.as_str());
            connect_on(transport, &what, relay, timeout).await
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
    let handler = UpstreamClient { relay };
    // Either revision: `server/discover` first, the `initialize` handshake when the
    // upstream does not know it.
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let connected = rmcp::serve_client_with_lifecycle(handler, transport, lifecycle);
    match tokio::time::timeout(timeout, connected).await {
        Err(_) => Err(GatewayError::Upstream(format!(
            "the upstream MCP server {what} did not complete the MCP handshake within {} s",
            timeout.as_secs_f64()
        ))),
        Ok(Err(e)) => Err(GatewayError::Upstream(format!(
            "the upstream MCP server {what} failed the MCP handshake: {e}"
        ))),
        Ok(Ok(running)) => Ok(running),
    }
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
    let Some(info) = peer.peer_info() else { return };
    let caps = &info.capabilities;
    let mut filter = SubscriptionFilter::default();
    filter.tools_list_changed = Some(true);
    filter.prompts_list_changed = caps.prompts.as_ref().map(|_| true);
    filter.resources_list_changed = caps.resources.as_ref().map(|_| true);
    let mut subscription = tokio::select! {
        opened = peer.listen(filter) => match opened {
            Ok(subscription) => subscription,
            Err(e) => {
                eprintln!(
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
