//! The connection to the upstream MCP server: started as a child process or reached
//! over Streamable HTTP, with a client handler that relays its notifications to the
//! gateway's clients.

// Logging and resources/subscribe are deprecated by the 2026-07-28 revision only; the
// gateway also speaks the handshake revisions, where they are current.
#![allow(deprecated)]

use crate::error::Error;
use crate::GatewayError;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ClientRequest, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, GetExtensions, GetMeta,
    Implementation, ListRootsRequest, ListRootsResult, LoggingLevel, LoggingMessageNotification,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestId, ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
    SubscriptionFilter, Tool,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, OriginatingRequestId, PeerRequestOptions,
    RequestContext, RequestHandle, RunningService, ServiceError, SubscriptionSink,
};
use rmcp::transport::IntoTransport;
use rmcp::ErrorData as McpError;
use rmcp::{ClientHandler, ClientLifecycleMode, Peer, RoleClient, RoleServer};
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
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
    /// Clients on the handshake revisions (one per MCP session), each with whether it
    /// has an upstream connection of its own (which then tells it of list changes).
    clients: Mutex<Vec<(Peer<RoleServer>, bool)>>,
    /// Open `subscriptions/listen` streams (2026-07-28), each with the run it listens
    /// for (`None`: only changes of the upstream's lists).
    listeners: Mutex<Vec<Listener>>,
    next_listener: AtomicU64,
    /// Cancelled when the upstream has gone away (requests in flight are answered then).
    pub(crate) upstream_gone: tokio_util::sync::CancellationToken,
    /// Notified when the upstream says its tool list changed (several notifications
    /// before the re-fetch starts make one re-fetch).
    pub(crate) upstream_tools_changed: tokio::sync::Notify,
    /// The other gateway instances sharing the store, if they are reachable.
    pub(crate) instances: Arc<crate::instances::Instances>,
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

    /// Adds a client that finished its handshake; `linked`: it has an upstream
    /// connection of its own.
    pub(crate) fn add(&self, peer: Peer<RoleServer>, linked: bool) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(p, _)| !p.is_transport_closed());
        clients.push((peer, linked));
    }

    /// The clients still connected (`unlinked_only`: those without an upstream
    /// connection of their own).
    pub(crate) fn clients(&self, unlinked_only: bool) -> Vec<Peer<RoleServer>> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(p, _)| !p.is_transport_closed());
        clients
            .iter()
            .filter(|(_, linked)| !(unlinked_only && *linked))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Tells every client without a connection of its own that the tools changed (the
    /// gateway's own connection fetched the upstream's list again); every listener looks
    /// at its run's tools again.
    pub(crate) async fn tools_changed(&self) {
        let changed = ServerNotification::ToolListChangedNotification(Default::default());
        for peer in self.clients(true) {
            let _ = peer.send_notification(changed.clone()).await;
        }
        self.wake(None);
    }

    /// Relays a change the gateway's own upstream connection heard of to every client
    /// without a connection of its own (a listener gets it when it asked for its kind).
    pub(crate) async fn broadcast(&self, notification: ServerNotification) {
        for peer in self.clients(true) {
            // A client that went away meanwhile is no reason to stop the others.
            let _ = peer.send_notification(notification.clone()).await;
        }
        for sink in self.sinks() {
            // The sink sends only what its listener asked for (and was accepted).
            let _ = sink.send(notification.clone()).await;
        }
    }
}

/// How long a relayed notification waits for the ones before it to be relayed.
const TURN_LIMIT: Duration = Duration::from_secs(5);

/// The client requests forwarded on one upstream connection and not yet answered: what
/// the upstream says about one of them (progress, a question for the human, a log line)
/// goes to the client that made it, under that client's own identifiers.
#[derive(Default)]
pub(crate) struct Routes {
    // A tokio lock: a route is written while its request is being sent, so that a
    // notification about the request cannot be read before the route exists.
    table: tokio::sync::Mutex<Vec<Route>>,
    /// Requests answered whose route is still in `table` (its removal waits for the
    /// lock, in a task): never taken for a request in flight, so that a question the
    /// upstream asks meanwhile goes to the one request really in flight.
    answered: Mutex<Vec<RequestId>>,
    /// Progress notifications per upstream token: how many came off the wire (counted
    /// in order with the responses, by [`Observed`]) and how many have been relayed (the
    /// MCP SDK handles notifications in tasks of their own, so a request's answer can be
    /// at hand before the progress that preceded it has gone out).
    progress: Mutex<std::collections::HashMap<ProgressToken, (u64, u64)>>,
    /// Woken whenever a progress notification has been relayed.
    progress_relayed: tokio::sync::Notify,
    /// The notifications relayed to a client (progress, log lines, resource updates) in
    /// the order they came off the wire: tickets handed out by [`Observed`] as they
    /// arrive, and how many have had their turn (the MCP SDK handles each in a task of
    /// its own, so without turns they would race each other to the client).
    order: Mutex<(u64, u64)>,
    /// Woken whenever a notification has had its turn.
    turned: tokio::sync::Notify,
}

/// A relayed notification's place in its connection's wire order.
#[derive(Clone, Copy)]
struct Ticket(u64);

/// A notification's turn to be relayed; the next one's comes when this is dropped.
struct Turn<'a> {
    routes: &'a Routes,
    ticket: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        {
            let mut order = self
                .routes
                .order
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            order.1 = order.1.max(self.ticket + 1);
        }
        self.routes.turned.notify_waiters();
    }
}

/// One forwarded request.
struct Route {
    /// Its id on the upstream connection.
    upstream_id: RequestId,
    /// The progress token the MCP SDK put on it upstream.
    upstream_token: ProgressToken,
    /// The client that sent it, its id there, and the progress token it asked for.
    client: Peer<RoleServer>,
    client_id: RequestId,
    client_token: Option<ProgressToken>,
    /// The client's MCP session (over HTTP).
    session: Option<Arc<str>>,
}

/// Removes a route when its request is answered (or its task dropped).
pub(crate) struct Routed {
    routes: Arc<Routes>,
    upstream_id: RequestId,
}

impl Drop for Routed {
    fn drop(&mut self) {
        let routes = Arc::clone(&self.routes);
        let id = self.upstream_id.clone();
        // Usually uncontended: taken at once; else a task removes it, and until then
        // the route is marked answered.
        if let Ok(mut table) = routes.table.try_lock() {
            table.retain(|r| r.upstream_id != id);
            return;
        }
        routes
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                routes.table.lock().await.retain(|r| r.upstream_id != id);
                routes
                    .answered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|a| *a != id);
            });
        }
    }
}

/// The client a forwarded request came from, as [`Routes::send`] needs it.
pub(crate) struct Origin<'a> {
    pub(crate) client: &'a Peer<RoleServer>,
    pub(crate) id: &'a RequestId,
    pub(crate) progress_token: Option<ProgressToken>,
    /// The client's MCP session (over HTTP).
    pub(crate) session: Option<&'a str>,
}

impl Routes {
    /// Sends `request` on `peer` and routes what the upstream says about it to `origin`
    /// until the returned guard is dropped.
    pub(crate) async fn send(
        self: &Arc<Self>,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        options: PeerRequestOptions,
        origin: Option<Origin<'_>>,
    ) -> Result<(RequestHandle<RoleClient>, Option<Routed>), ServiceError> {
        let Some(origin) = origin else {
            return Ok((peer.send_cancellable_request(request, options).await?, None));
        };
        let mut table = self.table.lock().await;
        let handle = peer.send_cancellable_request(request, options).await?;
        table.push(Route {
            upstream_id: handle.id.clone(),
            upstream_token: handle.progress_token.clone(),
            client: origin.client.clone(),
            client_id: origin.id.clone(),
            client_token: origin.progress_token,
            session: origin.session.map(Arc::from),
        });
        let routed = Routed {
            routes: Arc::clone(self),
            upstream_id: handle.id.clone(),
        };
        Ok((handle, Some(routed)))
    }

    /// The next place in wire order.
    fn ticket(&self) -> Ticket {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        order.0 += 1;
        Ticket(order.0 - 1)
    }

    /// Waits until every notification that came off the wire before `ticket`'s has been
    /// relayed (at most [`TURN_LIMIT`]: one whose handler never ran holds up no other
    /// for longer). `None` (a notification without a ticket): no wait.
    async fn turn(&self, ticket: Option<&Ticket>) -> Option<Turn<'_>> {
        let Ticket(ticket) = *ticket?;
        let mine = async {
            loop {
                let turned = self.turned.notified();
                tokio::pin!(turned);
                turned.as_mut().enable();
                if self.order.lock().unwrap_or_else(PoisonError::into_inner).1 >= ticket {
                    return;
                }
                turned.await;
            }
        };
        let _ = tokio::time::timeout(TURN_LIMIT, mine).await;
        Some(Turn {
            routes: self,
            ticket,
        })
    }

    /// A progress notification with `token` came off the wire.
    fn progress_seen(&self, token: &ProgressToken) {
        let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        counts.entry(token.clone()).or_default().0 += 1;
    }

    /// A progress notification with `token` has been relayed (or dropped: no one asked
    /// for it).
    fn progress_done(&self, token: &ProgressToken, routed: bool) {
        {
            let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(count) = counts.get_mut(token) {
                count.1 += 1;
                // Progress for no request in flight: nobody waits for it.
                if !routed && count.1 >= count.0 {
                    counts.remove(token);
                }
            }
        }
        self.progress_relayed.notify_waiters();
    }

    /// Waits until every progress notification with `token` that came before the
    /// request's answer has been relayed, so the client gets them before the answer (at
    /// most `limit`, against a relay that never finishes); then forgets the token.
    pub(crate) async fn progress_drained(&self, token: &ProgressToken, limit: Duration) {
        let drained = async {
            loop {
                let relayed = self.progress_relayed.notified();
                tokio::pin!(relayed);
                relayed.as_mut().enable();
                {
                    let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
                    match counts.get(token) {
                        Some((seen, done)) if done < seen => {}
                        _ => {
                            counts.remove(token);
                            return;
                        }
                    }
                }
                relayed.await;
            }
        };
        if tokio::time::timeout(limit, drained).await.is_err() {
            let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            counts.remove(token);
        }
    }

    /// The client and its progress token for the upstream's progress `token`.
    async fn progress(&self, token: &ProgressToken) -> Option<(Peer<RoleServer>, ProgressToken)> {
        let table = self.table.lock().await;
        let route = table.iter().find(|r| r.upstream_token == *token)?;
        Some((route.client.clone(), route.client_token.clone()?))
    }

    /// The client request an upstream request or notification belongs to: the one whose
    /// response stream it came on (`origin`, over HTTP), else the only one in flight;
    /// with its client, and that client's session.
    async fn owner(&self, origin: Option<&RequestId>) -> Option<Owner> {
        let table = self.table.lock().await;
        let only_in_flight = || {
            let answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
            let mut live = table.iter().filter(|r| !answered.contains(&r.upstream_id));
            match (live.next(), live.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            }
        };
        let route = match origin {
            Some(id) => table.iter().find(|r| r.upstream_id == *id),
            None => None,
        }
        .or_else(only_in_flight)?;
        Some(Owner {
            client: route.client.clone(),
            request: Some(route.client_id.clone()),
            session: route.session.clone(),
        })
    }
}

/// Where something the upstream says goes: a client, the request of its it is about
/// (if any), and the client's MCP session (over HTTP).
pub(crate) struct Owner {
    client: Peer<RoleServer>,
    request: Option<RequestId>,
    session: Option<Arc<str>>,
}

/// The upstream's tools as one connection last listed them: read without waiting,
/// replaced whole when a re-fetch succeeds.
pub(crate) struct ToolList {
    tools: Mutex<Arc<Vec<Tool>>>,
}

impl ToolList {
    pub(crate) fn new(tools: Vec<Tool>) -> Self {
        ToolList {
            tools: Mutex::new(Arc::new(tools)),
        }
    }

    /// The last list.
    pub(crate) fn get(&self) -> Arc<Vec<Tool>> {
        Arc::clone(&self.tools.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Lists the tools again on `peer` within `limit`: on success the new list replaces
    /// the old; on failure the last good list stays, stderr says so, and `Err` is
    /// returned.
    pub(crate) async fn refresh(&self, peer: &Peer<RoleClient>, limit: Duration) -> Result<(), ()> {
        let fetched = tokio::time::timeout(limit, peer.list_all_tools()).await;
        let why = match fetched {
            Ok(Ok(tools)) => {
                *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
                return Ok(());
            }
            Ok(Err(e)) => crate::handler::upstream_error(e, "tools/list", limit)
                .message
                .into_owned(),
            Err(_) => format!("no answer within {} s", limit.as_secs_f64()),
        };
        orch_runtime::eprintln_printable!(
            "orch mcp: warning: the upstream MCP server said its tools changed, but listing them again failed ({why}); still serving the last list ({} tools)",
            self.get().len()
        );
        Err(())
    }
}

/// An upstream transport that counts the progress notifications coming off it, in the
/// order the messages arrive ([`Routes::progress_drained`]).
pub(crate) struct Observed<T> {
    inner: T,
    routes: Arc<Routes>,
}

impl<T> Observed<T> {
    pub(crate) fn new(inner: T, routes: Arc<Routes>) -> Self {
        Observed { inner, routes }
    }
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for Observed<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let mut message = self.inner.receive().await?;
        if let rmcp::model::JsonRpcMessage::Notification(n) = &mut message {
            if let ServerNotification::ProgressNotification(p) = &n.notification {
                self.routes.progress_seen(&p.params.progress_token);
            }
            if matches!(
                n.notification,
                ServerNotification::ProgressNotification(_)
                    | ServerNotification::LoggingMessageNotification(_)
                    | ServerNotification::ResourceUpdatedNotification(_)
            ) {
                let ticket = self.routes.ticket();
                n.notification.extensions_mut().insert(ticket);
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// One connection to the upstream, as a forwarded request uses it.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) peer: Peer<RoleClient>,
    /// Cancelled when this connection has gone away.
    pub(crate) gone: tokio_util::sync::CancellationToken,
    pub(crate) routes: Arc<Routes>,
    /// A handshake session's connection on 2026-07-28 (an upstream without the
    /// handshake): what the gateway keeps for the session that the revision no longer
    /// asks the server to keep.
    pub(crate) kept: Option<Arc<Kept>>,
}

/// What a handshake client's session keeps when its upstream connection is on
/// 2026-07-28, which removed `logging/setLevel` and `resources/(un)subscribe`: the
/// gateway answers those itself, sends the level in every request's `_meta`
/// (`io.modelcontextprotocol/logLevel`: the upstream logs only for requests that carry
/// it), and holds a `subscriptions/listen` stream for the session's subscriptions and
/// list changes.
pub(crate) struct Kept {
    level: Mutex<Option<LoggingLevel>>,
    /// The resources the session subscribed to, and the stream that listens for them
    /// (replaced whenever the set changes; closed when dropped).
    listening: tokio::sync::Mutex<(
        std::collections::BTreeSet<String>,
        Option<tokio_util::sync::DropGuard>,
    )>,
    peer: Peer<RoleClient>,
    client: Peer<RoleServer>,
    tools: Arc<ToolList>,
    limit: Duration,
}

impl Kept {
    /// The level the session set, if any.
    pub(crate) fn level(&self) -> Option<LoggingLevel> {
        *self.level.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `logging/setLevel`, kept.
    pub(crate) fn set_level(&self, level: LoggingLevel) {
        *self.level.lock().unwrap_or_else(PoisonError::into_inner) = Some(level);
    }

    /// `resources/subscribe` (`on`) or `unsubscribe`: the session's listen stream is
    /// opened again with the new set, and is open when this returns.
    pub(crate) async fn subscribe(self: &Arc<Self>, uri: String, on: bool) -> Result<(), McpError> {
        let mut listening = self.listening.lock().await;
        let changed = if on {
            listening.0.insert(uri)
        } else {
            listening.0.remove(&uri)
        };
        if changed {
            let stop = self.listen(listening.0.iter().cloned().collect()).await?;
            listening.1 = Some(stop.drop_guard());
        }
        Ok(())
    }

    /// Opens a `subscriptions/listen` stream for the list changes the upstream offers
    /// and `resources`, and relays what comes on it to the session's client until the
    /// returned token is cancelled (or the stream ends).
    async fn listen(
        self: &Arc<Self>,
        resources: Vec<String>,
    ) -> Result<tokio_util::sync::CancellationToken, McpError> {
        let mut filter = list_changes(&self.peer);
        if !resources.is_empty() {
            filter.resource_subscriptions = Some(resources);
        }
        let limit = self.limit;
        let mut subscription = match tokio::time::timeout(limit, self.peer.listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(e)) => {
                return Err(crate::handler::upstream_error(
                    e,
                    "subscriptions/listen",
                    limit,
                ))
            }
            Err(_) => return Err(Error::ListenTimeout { limit }.into()),
        };
        let stop = tokio_util::sync::CancellationToken::new();
        let (kept, ended) = (Arc::downgrade(self), stop.clone());
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = subscription.next() => next,
                    () = ended.cancelled() => return,
                };
                let (Ok(Some(notification)), Some(kept)) = (next, kept.upgrade()) else {
                    return;
                };
                match notification {
                    // The session's list is fetched again, then its client is told.
                    ServerNotification::ToolListChangedNotification(_) => {
                        if kept.tools.refresh(&kept.peer, kept.limit).await.is_ok() {
                            let _ = kept.client.notify_tool_list_changed().await;
                        }
                    }
                    other => {
                        let _ = kept.client.send_notification(other).await;
                    }
                }
            }
        });
        Ok(stop)
    }
}

/// A client session's own connection to the upstream (a handshake revision): opened with
/// the client's capabilities and identity, so the upstream sees the client as it would
/// without the gateway, and everything it says on it is the session's. Closed when
/// dropped (with the session).
pub(crate) struct SessionLink {
    pub(crate) link: Link,
    /// The tools the upstream lists on this connection.
    pub(crate) tools: Arc<ToolList>,
    /// The client's MCP session id (over HTTP), for what goes on its standalone stream:
    /// set when the session is known.
    pub(crate) session: Arc<OnceLock<Arc<str>>>,
    _close: CloseOnDrop,
}

struct CloseOnDrop(Option<rmcp::service::RunningServiceCancellationToken>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

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
    fn shared(relay: Arc<Relay>) -> Self {
        UpstreamClient {
            relay,
            routes: Arc::default(),
            owner: None,
            tools: None,
            session: Arc::default(),
        }
    }

    /// The session connection's own client, as an [`Owner`].
    fn session_owner(&self) -> Option<Owner> {
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
    async fn session_client(&self) -> Option<Owner> {
        match self.session_owner() {
            Some(owner) => Some(owner),
            None => self.routes.owner(None).await,
        }
    }

    /// Sends a notification that goes on a session's standalone stream, wherever the
    /// instance holding that stream is.
    async fn notify(&self, owner: &Owner, notification: ServerNotification) {
        self.relay
            .instances
            .notify(owner.session.as_deref(), &owner.client, notification)
            .await;
    }

    /// Asks the client whose request caused it (else the session's client) what the
    /// upstream asks, on that request's stream, and relays the answer; cancelled when
    /// the upstream cancels its request.
    async fn ask_client(
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
fn relay_error(e: ServiceError, method: &str) -> McpError {
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
    async fn list_changed(&self, changed: ServerNotification) {
        match self.session_owner() {
            Some(owner) => self.notify(&owner, changed).await,
            None => self.relay.broadcast(changed).await,
        }
    }
}

fn unexpected_answer(method: &str) -> McpError {
    Error::ClientUnexpected {
        method: method.to_owned(),
    }
    .into()
}

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
enum Handshake {
    /// It could not be started or reached, or did not answer in time.
    Unreachable(String),
    /// It answered the handshake with something the client could not take.
    Failed(String),
}

impl Handshake {
    fn message(self) -> String {
        match self {
            Handshake::Unreachable(m) | Handshake::Failed(m) => m,
        }
    }
}

/// One connection to `upstream` handled by `handler`, opened with `lifecycle`.
async fn connect_with(
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

/// Where an HTTP upstream's standalone stream (the GET the MCP SDK opens once the
/// upstream has named a session) is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Standalone {
    /// No session named in answer to `initialize`: none will be opened.
    NotExpected,
    /// A session was named: the stream is being opened.
    Expected,
    /// The upstream answered the stream's request (opened, refused or failed).
    Settled,
}

/// The HTTP client of an HTTP upstream: rmcp's reqwest client, watched for when the
/// standalone stream has been answered ([`Standalone`]).
#[derive(Clone)]
struct Watched {
    http: reqwest::Client,
    standalone: Arc<tokio::sync::watch::Sender<Standalone>>,
}

/// How many redirects an upstream's HTTP client follows for one request.
const MAX_REDIRECTS: usize = 10;

impl Watched {
    /// A client as rmcp builds its own: no idle pooled connections (a response body not
    /// read to its end would stall the next request on the connection), and redirects
    /// followed only when they keep the method and body (307, 308) on the same origin.
    fn new() -> Result<Self, reqwest::Error> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects)
            .build()?;
        Ok(Watched {
            http,
            standalone: Arc::new(tokio::sync::watch::channel(Standalone::NotExpected).0),
        })
    }

    /// Resolves when no standalone stream is being opened.
    async fn standalone_settled(&self) {
        let mut seen = self.standalone.subscribe();
        let _ = seen.wait_for(|s| *s != Standalone::Expected).await;
    }

    /// The answer to the `initialize` handshake named the upstream's session.
    fn session_named(&self) {
        self.standalone.send_if_modified(|s| {
            let first = *s == Standalone::NotExpected;
            if first {
                *s = Standalone::Expected;
            }
            first
        });
    }
}

impl rmcp::transport::streamable_http_client::StreamableHttpClient for Watched {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        rmcp::transport::streamable_http_client::StreamableHttpPostResponse,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            usize::MAX,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        rmcp::transport::streamable_http_client::StreamableHttpPostResponse,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        use rmcp::transport::streamable_http_client::StreamableHttpPostResponse as Response;
        // An error the upstream answers a POST with is the answer to that POST's request,
        // even where it could not say so (`"id": null`, as a server that refuses the
        // request before reading it answers): otherwise the request would wait for an
        // answer that never comes, until its timeout.
        let asked = match &message {
            rmcp::model::ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let answering = |response: Response| match (response, &asked) {
            (Response::Json(rmcp::model::JsonRpcMessage::Error(mut error), session), Some(id))
                if error.id.is_none() =>
            {
                error.id = Some(id.clone());
                Response::Json(rmcp::model::JsonRpcMessage::Error(error), session)
            }
            (response, _) => response,
        };
        // The answer to a `tools/call` is read here, so that a result naming a task is
        // never taken for a complete one (`unfinished`).
        if let rmcp::model::ClientJsonRpcMessage::Request(request) = &message {
            if matches!(request.request, ClientRequest::CallToolRequest(_)) {
                return crate::unfinished::post_call(
                    &self.http,
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                )
                .await
                .map(answering);
            }
        }
        // The MCP SDK opens the standalone stream for a session named in answer to the
        // `initialize` handshake (never for a revision without one).
        let initialize = matches!(
            &message,
            rmcp::model::ClientJsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_))
        );
        let response = self
            .http
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        if let (true, Response::Json(_, Some(_)) | Response::Sse(_, Some(_))) =
            (initialize, &response)
        {
            self.session_named();
        }
        Ok(answering(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        futures::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            usize::MAX,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        futures::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        // The standalone stream: a session's first GET (a resumed one names its last
        // event).
        let standalone = session_id.is_some() && last_event_id.is_none();
        let stream = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        if standalone {
            self.standalone.send_replace(Standalone::Settled);
        }
        // A resumed stream may carry the answer to a `tools/call`.
        stream.map(crate::unfinished::marked_events)
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
async fn handshake<T, E, A>(
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
fn list_changes(peer: &Peer<RoleClient>) -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::default();
    filter.tools_list_changed = Some(true);
    if let Some(info) = peer.peer_info() {
        let caps = &info.capabilities;
        filter.prompts_list_changed = caps.prompts.as_ref().map(|_| true);
        filter.resources_list_changed = caps.resources.as_ref().map(|_| true);
    }
    filter
}
