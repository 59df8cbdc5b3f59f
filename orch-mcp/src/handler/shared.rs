//! The state every client session of one gateway shares: the machine, the store, the
//! upstream connection and its tool list, the limits; reading and changing a session's
//! record.

use super::*;

/// The state every client session of one gateway shares.
pub(crate) struct Shared<S> {
    pub(crate) machine: DynMachine,
    pub(crate) store: S,
    /// The gateway's own upstream connection: it lists the tools, and carries the
    /// requests of clients without a connection of their own.
    pub(crate) upstream: Link,
    /// Where a client session's own upstream connection is opened (`None`: every
    /// session shares the gateway's, as with [`crate::Gateway::start_on`]).
    pub(crate) reconnect: Option<Upstream>,
    /// Ends the gateway with this reason (the upstream went away).
    pub(crate) ended: Arc<tokio::sync::watch::Sender<Option<String>>>,
    /// What the gateway says of itself in `initialize`.
    pub(crate) info: InitializeResult,
    pub(crate) relay: Arc<Relay>,
    pub(crate) limits: Limits,
    /// The upstream's tools as the gateway's own connection lists them.
    pub(super) tools: ToolList,
    /// Permits for requests being handled (a request that finds none is refused).
    pub(super) requests: Arc<Semaphore>,
    /// Tool calls being forwarded now.
    pub(crate) in_flight: AtomicUsize,
    /// Where decision records go, if anywhere.
    pub(crate) audit: Option<Arc<Auditor>>,
    /// How questions are put to approvers elsewhere, if they are.
    pub(crate) posting: Option<crate::Posting>,
}

impl<S: SessionStore + 'static> Shared<S> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        machine: DynMachine,
        store: S,
        upstream: Link,
        reconnect: Option<Upstream>,
        ended: Arc<tokio::sync::watch::Sender<Option<String>>>,
        info: InitializeResult,
        relay: Arc<Relay>,
        limits: Limits,
        tools: Vec<Tool>,
        audit: Option<Arc<Auditor>>,
        posting: Option<crate::Posting>,
    ) -> Self {
        Shared {
            machine,
            store,
            upstream,
            reconnect,
            ended,
            info,
            relay,
            requests: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            limits,
            tools: ToolList::new(tools),
            in_flight: AtomicUsize::new(0),
            audit,
            posting,
        }
    }

    /// The rules for a call in run `id`: recording its decisions in a buffer when the
    /// gateway keeps a decision log (a compare-and-set attempt may be retried: only the
    /// records of the attempt that was written are relayed to the log).
    pub(crate) fn judge(&self, policy: Policy, id: &str) -> Policy {
        match &self.audit {
            Some(_) => policy.audited(Arc::new(Auditor::buffered(id))),
            None => policy,
        }
    }

    /// Drops what an attempt recorded (before a new attempt).
    pub(super) fn forget_attempt(policy: &Policy) {
        if let Some(auditor) = policy.auditor() {
            auditor.take_buffered();
        }
    }

    /// Writes what the successful attempt recorded to the decision log.
    pub(super) fn log_attempt(&self, policy: &Policy) {
        if let (Some(audit), Some(buffered)) = (&self.audit, policy.auditor()) {
            audit.relay(buffered.take_buffered());
        }
    }

    /// The upstream's tools as the gateway's own connection last listed them.
    pub(crate) fn tools(&self) -> Arc<Vec<Tool>> {
        self.tools.get()
    }

    /// Fetches the upstream's tool list again on the gateway's own connection (after it
    /// said the list changed), within the call timeout; on success every client is told
    /// (see [`ToolList::refresh`]). Nothing waits for this: requests meanwhile use the
    /// last good list.
    pub(crate) async fn refresh_tools(&self) {
        let limit = self.limits.call_timeout;
        if self.tools.refresh(&self.upstream.peer, limit).await.is_ok() {
            self.relay.tools_changed().await;
        }
    }

    /// A permit to handle one request, or the error that says the gateway is full.
    pub(super) fn permit(&self) -> Result<OwnedSemaphorePermit, McpError> {
        Arc::clone(&self.requests).try_acquire_owned().map_err(|_| {
            Error::Busy {
                limit: self.limits.max_in_flight,
            }
            .into()
        })
    }

    /// The record stored under `id`, if any.
    pub(crate) async fn record(&self, id: &str) -> Result<Option<Record>, McpError> {
        match self.store.load(id).await.map_err(store_error)? {
            None => Ok(None),
            Some(v) => Record::decode(&v.bytes)
                .map(Some)
                .map_err(|e| corrupt(id, &e.to_string())),
        }
    }

    /// Applies `f` to the record of `id` with compare-and-set, reading again after a
    /// conflict. `f` sees `None` when nothing is stored, and may run more than once.
    pub(crate) async fn modify<R>(
        &self,
        id: &str,
        f: impl FnMut(Option<Record>) -> Result<Change<R>, RunError> + Send,
    ) -> Result<R, McpError> {
        self.modify_from(id, None, f).await.map(|(value, _)| value)
    }

    /// [`Shared::modify`], trying first against `known` (a version and the record this
    /// instance wrote at it) without reading: one round trip fewer when nobody wrote in
    /// between. The store's one compare-and-set loop ([`run::modify`]): a decision to
    /// write nothing is only taken on a record read from the store. Returns the value
    /// and, when it wrote, the new version and record.
    pub(super) async fn modify_from<R>(
        &self,
        id: &str,
        known: Option<(u64, Record)>,
        f: impl FnMut(Option<Record>) -> Result<Change<R>, RunError> + Send,
    ) -> Result<(R, Option<(u64, Record)>), McpError> {
        run::modify(&self.store, id, known, f)
            .await
            .map_err(|e| run_error(id, e))
    }
}
