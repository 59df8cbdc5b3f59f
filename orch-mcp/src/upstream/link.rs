//! One connection to the upstream as a forwarded request uses it, and what a handshake
//! session keeps when its connection is on 2026-07-28.

use super::*;

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
    pub(super) level: Mutex<Option<LoggingLevel>>,
    /// The resources the session subscribed to, and the stream that listens for them
    /// (replaced whenever the set changes; closed when dropped).
    pub(super) listening: tokio::sync::Mutex<(
        std::collections::BTreeSet<String>,
        Option<tokio_util::sync::DropGuard>,
    )>,
    pub(super) peer: Peer<RoleClient>,
    pub(super) client: Peer<RoleServer>,
    pub(super) tools: Arc<ToolList>,
    pub(super) limit: Duration,
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
    pub(super) async fn listen(
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
    pub(super) _close: CloseOnDrop,
}

pub(super) struct CloseOnDrop(pub(super) Option<rmcp::service::RunningServiceCancellationToken>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}
