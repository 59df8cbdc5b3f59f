//! Where what the upstream says is relayed: the gateway's clients, their standalone
//! streams and `subscriptions/listen` listeners.

use super::*;

/// The gateway's clients, to which upstream notifications are relayed, and the signal
/// that the upstream's tool list must be fetched again.
#[derive(Default)]
pub(crate) struct Relay {
    /// Clients on the handshake revisions (one per MCP session), each with whether it
    /// has an upstream connection of its own (which then tells it of list changes).
    pub(super) clients: Mutex<Vec<(Peer<RoleServer>, bool)>>,
    /// Open `subscriptions/listen` streams (2026-07-28), each with the run it listens
    /// for (`None`: only changes of the upstream's lists).
    pub(super) listeners: Mutex<Vec<Listener>>,
    pub(super) next_listener: AtomicU64,
    /// Cancelled when the upstream has gone away (requests in flight are answered then).
    pub(crate) upstream_gone: tokio_util::sync::CancellationToken,
    /// Notified when the upstream says its tool list changed (several notifications
    /// before the re-fetch starts make one re-fetch).
    pub(crate) upstream_tools_changed: tokio::sync::Notify,
    /// The other gateway instances sharing the store, if they are reachable.
    pub(crate) instances: Arc<crate::instances::Instances>,
}

/// One open `subscriptions/listen` stream.
pub(super) struct Listener {
    pub(super) id: u64,
    pub(super) run: Option<String>,
    pub(super) sink: SubscriptionSink,
    /// Woken when the tools its run sees may have changed (it looks, and tells its
    /// client only if they did).
    pub(super) wake: Arc<tokio::sync::Notify>,
}

/// Removes a listener when its stream ends (or its task is dropped).
pub(crate) struct Listening<'a> {
    pub(super) relay: &'a Relay,
    pub(super) id: u64,
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

    pub(super) fn sinks(&self) -> Vec<SubscriptionSink> {
        let listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        listeners.iter().map(|l| l.sink.clone()).collect()
    }

    /// Wakes the listeners of `run` (all listeners: `None`): the tools they see may have
    /// changed.
    pub(super) fn wake(&self, run: Option<&str>) {
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
