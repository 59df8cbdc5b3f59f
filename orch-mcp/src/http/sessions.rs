//! A session's life over HTTP: the check that it has not ended, the gate its requests pass
//! while this instance restores it, and its handshake kept in the session's record.

use super::guarded::{Guarded, RestoreGates};
use super::prelude::*;
use super::responses::{error_response, session_full};

/// A request's pass through a restoring session's gate: held while the request is handed
/// to the MCP SDK; the first request's pass also ends the restore when it is dropped
/// (the SDK has restored the session by then, or failed to).
pub(super) struct RestorePass {
    _held: tokio::sync::OwnedMutexGuard<()>,
    /// Set on the request that began the restore: the map entry to remove.
    ends: Option<(RestoreGates, String)>,
}

impl Drop for RestorePass {
    fn drop(&mut self) {
        if let Some((gates, id)) = self.ends.take() {
            gates
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&id);
        }
    }
}

/// Keeps MCP handshakes (the client's `initialize` parameters) in each session's
/// record, so that a request reaching another gateway instance finds its session
/// there, and a DELETE removes the whole record: handshake, workflow state and lease.
pub(crate) struct Handshakes<S>(pub(crate) Arc<Shared<S>>);

#[async_trait::async_trait]
impl<S: SessionStore + 'static> HandshakeStore for Handshakes<S> {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let record = self
            .0
            .record(session_id)
            .await
            .map_err(|e| SessionStoreError::from(e.message.into_owned()))?;
        match record.and_then(|r| r.handshake) {
            None => Ok(None),
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let handshake = serde_json::to_vec(state)?;
        self.0
            .modify(session_id, |record| {
                let mut record = record.unwrap_or_default();
                record.handshake = Some(handshake.clone());
                Ok(Change::Write(record, ()))
            })
            .await
            .map_err(|e| SessionStoreError::from(e.message.into_owned()))
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.0.store.remove(session_id).await?;
        Ok(())
    }
}

impl<S: SessionStore + 'static> Guarded<S> {
    /// Sessions held now: the larger of this instance's session workers and, when the
    /// store can count cheaply (in memory), the sessions stored.
    /// The pass of a request of session `id` through its restore gate: `None` when this
    /// instance holds the session's worker and no restore of it is under way.
    pub(super) async fn restore_gate(&self, id: &str) -> Option<RestorePass> {
        let local = self.manager.sessions.read().await.contains_key(id);
        let (gate, begins) = {
            let mut gates = self
                .restoring
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match gates.get(id) {
                Some(gate) => (Arc::clone(gate), false),
                None if local => return None,
                None => {
                    let gate = Arc::new(tokio::sync::Mutex::new(()));
                    gates.insert(id.to_owned(), Arc::clone(&gate));
                    (gate, true)
                }
            }
        };
        let held = gate.lock_owned().await;
        let ends = begins.then(|| (Arc::clone(&self.restoring), id.to_owned()));
        Some(RestorePass { _held: held, ends })
    }

    pub(super) async fn live_sessions(&self) -> usize {
        let workers = self.manager.sessions.read().await.len();
        workers.max(self.shared.store.count().unwrap_or(0))
    }

    /// `None` when the session may be served; otherwise the response. Reading the
    /// record also keeps the session alive (the store's TTL counts from the last access).
    pub(super) async fn check_session(&self, id: &str) -> Option<Response> {
        let stored = match self.shared.record(id).await {
            Ok(stored) => stored,
            Err(e) => {
                return Some(error_response(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    -32603,
                    e.message.into_owned(),
                    Value::Null,
                ))
            }
        };
        let session_id: Arc<str> = id.into();
        if stored.is_none_or(|r| r.handshake.is_none()) {
            // Ended (DELETE on another instance, or the TTL passed): free the worker.
            let _ = self.manager.close_session(&session_id).await;
            return Some(error_response(
                http::StatusCode::NOT_FOUND,
                -32600,
                "Session not found: it ended (DELETE) or expired (--session-ttl); initialize a new one".into(),
                Value::Null,
            ));
        }
        let max = self.options.max_sessions;
        let full = {
            let workers = self.manager.sessions.read().await;
            !workers.contains_key(&session_id) && workers.len() >= max
        };
        if full {
            return Some(session_full(max, Value::Null));
        }
        None
    }
}
