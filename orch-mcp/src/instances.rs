//! Gateway instances that share one store behind a load balancer, relaying to each other
//! what reached the wrong one.
//!
//! A client's MCP session lives in the store, and any instance serves its next request.
//! Two things of a session are tied to one instance, though: a question the upstream
//! asked (`elicitation/create`, `sampling/createMessage`, `roots/list`) waits for its
//! answer on the instance that relayed it, and the session's standalone stream (its
//! `GET`) is held open by one instance. The client's answer is a new `POST`, and a log
//! line arises on the instance serving the call that caused it; the balancer may send
//! either elsewhere. With a [`Bus`] (Redis `PUBLISH`/`SUBSCRIBE` on the store's server),
//! the instance that got an answer it is not waiting for, or a notification for a stream
//! it does not hold, publishes it, and the instance that waits for it, or holds the
//! stream, delivers it. Without a bus (one instance) nothing changes.
//!
//! An instance announces when it starts and stops holding a session's stream, so the
//! others know where to send. A notification for a session whose stream no instance is
//! known to hold waits (at most [`BACKLOG_AGE`], [`BACKLOG_LINES`] per session, as the
//! MCP SDK keeps one for a stream not yet opened) and the others are asked who holds it;
//! it goes out when one says so.

use rmcp::model::{ClientJsonRpcMessage, ClientResult, RequestId, ServerNotification};
use rmcp::ErrorData as McpError;
use rmcp::{Peer, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// Why a bus could not publish or subscribe: the bus's own error.
pub type BusError = Box<dyn std::error::Error + Send + Sync>;

/// A future the bus returns.
pub type BusFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BusError>> + Send + 'a>>;

/// A channel every gateway instance of one deployment publishes to and listens on:
/// what one publishes reaches every instance subscribed at that moment, at most once.
/// [`orch_store::RedisBus`] is one (the store's Redis server).
pub trait Bus: Send + Sync + 'static {
    /// Publishes `message` to every subscriber.
    fn publish<'a>(&'a self, message: &'a [u8]) -> BusFuture<'a, ()>;
    /// Subscribes: what is published after this returns arrives on the receiver, which
    /// ends when the subscription is lost.
    fn subscribe(&self) -> BusFuture<'_, tokio::sync::mpsc::Receiver<Vec<u8>>>;
}

impl Bus for orch_store::RedisBus {
    fn publish<'a>(&'a self, message: &'a [u8]) -> BusFuture<'a, ()> {
        Box::pin(async move {
            orch_store::RedisBus::publish(self, message)
                .await
                .map(|_| ())
                .map_err(BusError::from)
        })
    }

    fn subscribe(&self) -> BusFuture<'_, tokio::sync::mpsc::Receiver<Vec<u8>>> {
        Box::pin(async move {
            orch_store::RedisBus::subscribe(self)
                .await
                .map_err(BusError::from)
        })
    }
}

/// What instances tell each other.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Envelope {
    /// A client's answer (a JSON-RPC response or error) to a request an instance
    /// relayed to it from the upstream.
    Answer {
        from: String,
        session: String,
        message: Value,
    },
    /// A notification for a session's standalone stream, to the instance holding it.
    Notify {
        from: String,
        to: String,
        session: String,
        message: Value,
    },
    /// `from` holds the session's standalone stream now.
    Held { from: String, session: String },
    /// `from` no longer holds the session's standalone stream.
    Released { from: String, session: String },
    /// Who holds the session's standalone stream?
    Ask { from: String, session: String },
    /// An approver answered the posted question `question` (its public id): a call
    /// waiting on it looks at its run again.
    Answered { from: String, question: String },
}

/// How long a notification for a stream no instance is known to hold waits for one.
pub(crate) const BACKLOG_AGE: Duration = Duration::from_secs(30);
/// How many such notifications wait per session (the oldest go first).
pub(crate) const BACKLOG_LINES: usize = 64;

/// A notification waiting for its session's stream, with the session's client on this
/// instance.
struct Waiting {
    since: std::time::Instant,
    peer: Peer<RoleServer>,
    notification: ServerNotification,
}

/// This instance's side of the deployment.
pub(crate) struct Instances {
    /// This instance's name on the bus (its own messages come back to it).
    id: String,
    bus: OnceLock<Arc<dyn Bus>>,
    /// Questions relayed to a client and not yet answered, by session and the id the
    /// question has on the client's side.
    awaiting: Mutex<HashMap<(String, RequestId), tokio::sync::oneshot::Sender<Value>>>,
    /// Questions being sent to a session's client (not yet in `awaiting`), per session.
    asking: Mutex<HashMap<String, usize>>,
    /// Woken when a question has been registered.
    asked: tokio::sync::Notify,
    /// The standalone streams this instance holds open, counted per session.
    streams: Mutex<HashMap<String, usize>>,
    /// The client side of the sessions this instance serves, by session id.
    peers: Mutex<HashMap<String, Peer<RoleServer>>>,
    /// Woken when a session's client side is registered.
    peer_added: tokio::sync::Notify,
    /// The instance that holds a session's standalone stream, as announced.
    holders: Mutex<HashMap<String, String>>,
    /// Notifications waiting for a session's stream to be held somewhere.
    backlog: Mutex<HashMap<String, std::collections::VecDeque<Waiting>>>,
    /// Sessions created on this instance whose id the MCP SDK names only in the
    /// `initialize` response: their client side and upstream connection's id slot, by
    /// the token the HTTP layer put on that request ([`FreshSession`]).
    fresh: Mutex<HashMap<u64, Fresh>>,
    /// The public ids of posted questions an approver answered, here or on another
    /// instance, as they are told.
    answered: tokio::sync::broadcast::Sender<String>,
}

/// How many answers a waiting call may fall behind before it misses some (it then looks
/// at its run anyway).
const ANSWERS: usize = 256;

/// Where a session's upstream connection keeps the client's session id once known.
pub(crate) type NameSlot = Arc<OnceLock<Arc<str>>>;

/// A session being created here, not yet named ([`Instances::fresh`]).
struct Fresh {
    peer: Peer<RoleServer>,
    slot: Option<NameSlot>,
}

/// Marks an `initialize` request that creates a session (in the HTTP request's
/// extensions): the session's id is read off the response, then given to the session
/// ([`Instances::named`]), which could not know it while handling the request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FreshSession(pub(crate) u64);

impl Default for Instances {
    fn default() -> Self {
        let mut name = [0u8; 8];
        // Without randomness the name is still this process's; collisions only make an
        // instance ignore a message meant for it, never deliver a wrong one.
        let _ = getrandom::fill(&mut name);
        let id = name.iter().map(|b| format!("{b:02x}")).collect::<String>()
            + &format!("-{}", std::process::id());
        Instances {
            id,
            bus: OnceLock::new(),
            awaiting: Mutex::default(),
            asking: Mutex::default(),
            asked: tokio::sync::Notify::new(),
            streams: Mutex::default(),
            peers: Mutex::default(),
            peer_added: tokio::sync::Notify::new(),
            holders: Mutex::default(),
            fresh: Mutex::default(),
            backlog: Mutex::default(),
            answered: tokio::sync::broadcast::channel(ANSWERS).0,
        }
    }
}

/// A question waiting for its answer from another instance; forgotten when dropped.
pub(crate) struct Awaited<'a> {
    instances: &'a Instances,
    key: (String, RequestId),
    pub(crate) answer: tokio::sync::oneshot::Receiver<Value>,
}

impl Drop for Awaited<'_> {
    fn drop(&mut self) {
        lock(&self.instances.awaiting).remove(&self.key);
    }
}

/// A question being sent to a session's client; counted until dropped.
pub(crate) struct Asking<'a> {
    instances: &'a Instances,
    session: String,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        {
            let mut asking = lock(&self.instances.asking);
            if let Some(count) = asking.get_mut(&self.session) {
                *count -= 1;
                if *count == 0 {
                    asking.remove(&self.session);
                }
            }
        }
        self.instances.asked.notify_waiters();
    }
}

/// How long an answer waits for the questions being sent to its session to be
/// registered before it is taken for another instance's.
const ASK_SETTLE: Duration = Duration::from_secs(1);

/// A standalone stream this instance holds; counted until dropped.
pub(crate) struct Holding {
    instances: Arc<Instances>,
    session: String,
}

impl Drop for Holding {
    fn drop(&mut self) {
        let released = {
            let mut streams = lock(&self.instances.streams);
            match streams.get_mut(&self.session) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                Some(_) => {
                    streams.remove(&self.session);
                    true
                }
                None => false,
            }
        };
        if let (true, Some(bus), Ok(runtime)) = (
            released,
            self.instances.bus().cloned(),
            tokio::runtime::Handle::try_current(),
        ) {
            let envelope = Envelope::Released {
                from: self.instances.id.clone(),
                session: std::mem::take(&mut self.session),
            };
            runtime.spawn(async move { publish(&bus, &envelope).await });
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How long a notification for a session's stream waits for the session's client side to
/// be registered on the instance holding the stream.
const PEER_WAIT: Duration = Duration::from_secs(5);

/// How long an instance waits before subscribing again when its subscription is lost.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

impl Instances {
    /// Joins the deployment through `bus` (once; a second bus is ignored) and delivers
    /// what other instances publish until the gateway ends. The subscription is made
    /// before this returns.
    pub(crate) async fn join(self: &Arc<Self>, bus: Arc<dyn Bus>) -> Result<(), BusError> {
        if self.bus.set(Arc::clone(&bus)).is_err() {
            return Ok(());
        }
        let mut messages = bus.subscribe().await?;
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                while let Some(message) = messages.recv().await {
                    let Some(me) = me.upgrade() else { return };
                    me.deliver(&message).await;
                }
                if me.strong_count() == 0 {
                    return;
                }
                orch_runtime::eprintln_printable!(
                    "orch mcp: warning: the subscription to the other gateway instances was lost; subscribing again"
                );
                loop {
                    tokio::time::sleep(RESUBSCRIBE).await;
                    if me.strong_count() == 0 {
                        return;
                    }
                    match bus.subscribe().await {
                        Ok(again) => {
                            messages = again;
                            break;
                        }
                        Err(e) => orch_runtime::eprintln_printable!(
                            "orch mcp: warning: cannot subscribe to the other gateway instances: {e}"
                        ),
                    }
                }
            }
        });
        Ok(())
    }

    fn bus(&self) -> Option<&Arc<dyn Bus>> {
        self.bus.get()
    }

    /// The answers to posted questions from now on (each question's public id), here
    /// and on the other instances.
    pub(crate) fn answers(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.answered.subscribe()
    }

    /// Tells the calls waiting here and on the other instances that `question` was
    /// answered.
    pub(crate) async fn answered(&self, question: &str) {
        let _ = self.answered.send(question.to_owned());
        if let Some(bus) = self.bus() {
            let envelope = Envelope::Answered {
                from: self.id.clone(),
                question: question.to_owned(),
            };
            publish(bus, &envelope).await;
        }
    }

    /// A session being created by the `initialize` marked `token`: its client side and
    /// its upstream connection's id slot, until [`Instances::named`].
    pub(crate) fn fresh(&self, token: u64, peer: Peer<RoleServer>, named: Option<NameSlot>) {
        lock(&self.fresh).insert(token, Fresh { peer, slot: named });
    }

    /// The session the `initialize` marked `token` created is `session` (`None`: it
    /// created none): from now on its client side is this instance's for `session`, and
    /// what its upstream connection says goes to that session's streams. Without this,
    /// a session whose `initialized` notification reaches another instance stays
    /// nameless here, and the log lines of a later call on this instance go nowhere.
    pub(crate) fn named(&self, token: u64, session: Option<&str>) {
        let Some(Fresh { peer, slot }) = lock(&self.fresh).remove(&token) else {
            return;
        };
        if let Some(session) = session {
            if let Some(slot) = slot {
                let _ = slot.set(Arc::from(session));
            }
            self.serve(session, peer);
        }
    }

    /// Registers the client side of `session` (its latest, when restored again).
    pub(crate) fn serve(&self, session: &str, peer: Peer<RoleServer>) {
        {
            let mut peers = lock(&self.peers);
            peers.retain(|_, p| !p.is_transport_closed());
            peers.insert(session.to_owned(), peer);
        }
        self.peer_added.notify_waiters();
    }

    /// The client side of `session` on this instance, waiting for it a moment (a
    /// session restored by the request that opened its stream registers it just
    /// after).
    async fn peer(&self, session: &str) -> Option<Peer<RoleServer>> {
        let found = async {
            loop {
                let added = self.peer_added.notified();
                tokio::pin!(added);
                added.as_mut().enable();
                if let Some(peer) = lock(&self.peers).get(session) {
                    return peer.clone();
                }
                added.await;
            }
        };
        tokio::time::timeout(PEER_WAIT, found).await.ok()
    }

    /// Counts a standalone stream of `session` held by this instance until the guard is
    /// dropped; sends it what waited for it here, and tells the other instances.
    pub(crate) async fn hold(self: &Arc<Self>, session: &str) -> Holding {
        let first = {
            let mut streams = lock(&self.streams);
            let count = streams.entry(session.to_owned()).or_default();
            *count += 1;
            *count == 1
        };
        let holding = Holding {
            instances: Arc::clone(self),
            session: session.to_owned(),
        };
        let waited = lock(&self.backlog).remove(session).unwrap_or_default();
        for line in waited {
            let _ = line.peer.send_notification(line.notification).await;
        }
        if let (true, Some(bus)) = (first, self.bus()) {
            // Announced once this instance can deliver: its side of the session exists.
            let bus = Arc::clone(bus);
            let me = Arc::clone(self);
            let session = session.to_owned();
            tokio::spawn(async move {
                let _ = me.peer(&session).await;
                // Released meanwhile: say nothing (the release was announced).
                if !me.holds(&session) {
                    return;
                }
                let envelope = Envelope::Held {
                    from: me.id.clone(),
                    session,
                };
                publish(&bus, &envelope).await;
            });
        }
        holding
    }

    fn holds(&self, session: &str) -> bool {
        lock(&self.streams).contains_key(session)
    }

    /// With a bus: waits also for an answer to the question `id` of `session` that
    /// another instance received.
    pub(crate) fn await_answer(&self, session: &str, id: &RequestId) -> Option<Awaited<'_>> {
        self.bus()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let key = (session.to_owned(), id.clone());
        lock(&self.awaiting).insert(key.clone(), tx);
        Some(Awaited {
            instances: self,
            key,
            answer: rx,
        })
    }

    /// With a bus: counts a question being sent to `session`'s client until the guard
    /// is dropped (after [`Instances::await_answer`]), so that an answer arriving
    /// meanwhile is not taken for another instance's.
    pub(crate) fn asking(&self, session: &str) -> Option<Asking<'_>> {
        self.bus()?;
        *lock(&self.asking).entry(session.to_owned()).or_default() += 1;
        Some(Asking {
            instances: self,
            session: session.to_owned(),
        })
    }

    /// Is this instance waiting for the answer `id` of `session`? (Once the questions
    /// being sent to that session now are registered, at most [`ASK_SETTLE`].)
    pub(crate) async fn awaits(&self, session: &str, id: &RequestId) -> bool {
        let settled = async {
            loop {
                let asked = self.asked.notified();
                tokio::pin!(asked);
                asked.as_mut().enable();
                if !lock(&self.asking).contains_key(session) {
                    return;
                }
                asked.await;
            }
        };
        let _ = tokio::time::timeout(ASK_SETTLE, settled).await;
        lock(&self.awaiting).contains_key(&(session.to_owned(), id.clone()))
    }

    /// Passes a client's answer that this instance is not waiting for to the others;
    /// `false` without a bus (the answer is this instance's to handle, or no one's).
    pub(crate) async fn pass_answer(&self, session: &str, message: Value) -> bool {
        let Some(bus) = self.bus() else { return false };
        let envelope = Envelope::Answer {
            from: self.id.clone(),
            session: session.to_owned(),
            message,
        };
        publish(bus, &envelope).await;
        true
    }

    /// Sends a notification to `session`'s standalone stream: through `peer` when this
    /// instance holds that stream (or there is no bus), else through the instance that
    /// does.
    pub(crate) async fn notify(
        &self,
        session: Option<&str>,
        peer: &Peer<RoleServer>,
        notification: ServerNotification,
    ) {
        let (Some(session), Some(bus)) = (session, self.bus()) else {
            let _ = peer.send_notification(notification).await;
            return;
        };
        if self.holds(session) {
            let _ = peer.send_notification(notification).await;
            return;
        }
        let holder = lock(&self.holders).get(session).cloned();
        if let Some(to) = holder {
            self.send_to(bus, to, session, notification).await;
            return;
        }
        // No instance is known to hold the stream: the notification waits, and the
        // others are asked (the first to wait asks).
        let ask = {
            let mut backlog = lock(&self.backlog);
            backlog.retain(|_, lines| {
                lines.retain(|l| l.since.elapsed() < BACKLOG_AGE);
                !lines.is_empty()
            });
            let lines = backlog.entry(session.to_owned()).or_default();
            if lines.len() == BACKLOG_LINES {
                lines.pop_front();
            }
            lines.push_back(Waiting {
                since: std::time::Instant::now(),
                peer: peer.clone(),
                notification,
            });
            lines.len() == 1
        };
        if ask {
            let envelope = Envelope::Ask {
                from: self.id.clone(),
                session: session.to_owned(),
            };
            publish(bus, &envelope).await;
        }
    }

    /// Publishes `notification` for `session`'s stream, held by instance `to`.
    async fn send_to(
        &self,
        bus: &Arc<dyn Bus>,
        to: String,
        session: &str,
        notification: ServerNotification,
    ) {
        let Ok(message) = serde_json::to_value(rmcp::model::ServerJsonRpcMessage::notification(
            notification,
        )) else {
            return;
        };
        let envelope = Envelope::Notify {
            from: self.id.clone(),
            to,
            session: session.to_owned(),
            message,
        };
        publish(bus, &envelope).await;
    }

    /// Handles what another instance published.
    async fn deliver(&self, bytes: &[u8]) {
        let Ok(envelope) = serde_json::from_slice::<Envelope>(bytes) else {
            return;
        };
        match envelope {
            Envelope::Answer { from, .. }
            | Envelope::Notify { from, .. }
            | Envelope::Held { from, .. }
            | Envelope::Released { from, .. }
            | Envelope::Ask { from, .. }
            | Envelope::Answered { from, .. }
                if from == self.id => {}
            Envelope::Answered { question, .. } => {
                let _ = self.answered.send(question);
            }
            Envelope::Answer {
                session, message, ..
            } => {
                let Some(id) = message
                    .get("id")
                    .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok())
                else {
                    return;
                };
                if let Some(waiting) = lock(&self.awaiting).remove(&(session, id)) {
                    let _ = waiting.send(message);
                }
            }
            Envelope::Notify {
                to,
                session,
                message,
                ..
            } => {
                if to != self.id {
                    return;
                }
                if !self.holds(&session) {
                    // A sender that missed the release: tell it again.
                    if let Some(bus) = self.bus() {
                        let envelope = Envelope::Released {
                            from: self.id.clone(),
                            session,
                        };
                        publish(bus, &envelope).await;
                    }
                    return;
                }
                let Ok(rmcp::model::ServerJsonRpcMessage::Notification(n)) =
                    serde_json::from_value::<rmcp::model::ServerJsonRpcMessage>(message)
                else {
                    return;
                };
                if let Some(peer) = self.peer(&session).await {
                    let _ = peer.send_notification(n.notification).await;
                }
            }
            Envelope::Held { from, session } => {
                lock(&self.holders).insert(session.clone(), from.clone());
                let waited = lock(&self.backlog).remove(&session).unwrap_or_default();
                if let Some(bus) = self.bus() {
                    for line in waited {
                        if line.since.elapsed() < BACKLOG_AGE {
                            self.send_to(bus, from.clone(), &session, line.notification)
                                .await;
                        }
                    }
                }
            }
            Envelope::Released { from, session } => {
                let mut holders = lock(&self.holders);
                if holders.get(&session) == Some(&from) {
                    holders.remove(&session);
                }
            }
            Envelope::Ask { session, .. } => {
                if let (true, Some(bus)) = (self.holds(&session), self.bus()) {
                    let envelope = Envelope::Held {
                        from: self.id.clone(),
                        session,
                    };
                    publish(bus, &envelope).await;
                }
            }
        }
    }
}

/// Publishes `envelope` on `bus` (a failure is reported, not fatal: what it carried is
/// lost, as when no instance could take it).
async fn publish(bus: &Arc<dyn Bus>, envelope: &Envelope) {
    let Ok(bytes) = serde_json::to_vec(envelope) else {
        return;
    };
    if let Err(e) = bus.publish(&bytes).await {
        orch_runtime::eprintln_printable!(
            "orch mcp: warning: cannot reach the other gateway instances: {e}"
        );
    }
}

/// A client's answer (a JSON-RPC response or error, as received) as the MCP SDK would
/// have handed it over.
pub(crate) fn answer_of(message: Value, method: &str) -> Result<ClientResult, McpError> {
    match serde_json::from_value::<ClientJsonRpcMessage>(message) {
        Ok(ClientJsonRpcMessage::Response(response)) => Ok(response.result),
        Ok(ClientJsonRpcMessage::Error(error)) => Err(error.error),
        _ => Err(crate::error::Error::ClientNotAResponse {
            method: method.to_owned(),
        }
        .into()),
    }
}
