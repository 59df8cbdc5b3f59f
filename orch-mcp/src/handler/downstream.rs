//! One client session: the gateway's shared state, the session's own upstream
//! connection, and what a request says about the revision and session it came on.

use super::*;

/// One client session.
pub(crate) struct Downstream<S> {
    pub(crate) shared: Arc<Shared<S>>,
    /// The session's id when the transport has no session ids (stdio: one client).
    pub(crate) fixed_id: Option<String>,
    /// The session's own upstream connection, opened at its `initialize` (a handshake
    /// revision); closed with the session.
    pub(crate) session: std::sync::OnceLock<SessionLink>,
}

impl<S> Downstream<S> {
    /// Over HTTP, once the session's id is in a request of it: what goes to its client
    /// from other instances, and what its connection relays to its standalone stream,
    /// are addressed by it.
    pub(super) fn known_as(&self, extensions: &rmcp::model::Extensions, peer: &Peer<RoleServer>) {
        if let Some(id) = mcp_session(extensions) {
            self.shared.relay.instances.serve(id, peer.clone());
            if let Some(link) = self.session.get() {
                let _ = link.session.set(Arc::from(id));
            }
        }
    }

    /// A fresh session (the `initialize` the HTTP layer marked [`FreshSession`]):
    /// registered to be named when the response says its id.
    pub(super) fn await_name(&self, extensions: &rmcp::model::Extensions, peer: &Peer<RoleServer>) {
        let token = extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<FreshSession>());
        if let Some(FreshSession(token)) = token {
            let slot = self.session.get().map(|link| Arc::clone(&link.session));
            self.shared
                .relay
                .instances
                .fresh(*token, peer.clone(), slot);
        }
    }

    /// A client session of `shared`'s gateway (`fixed_id`: its id when the transport has
    /// none).
    pub(crate) fn new(shared: Arc<Shared<S>>, fixed_id: Option<String>) -> Self {
        Downstream {
            shared,
            fixed_id,
            session: std::sync::OnceLock::new(),
        }
    }

    /// The upstream connection a request of this session goes on: the session's own on
    /// a handshake revision, else the gateway's.
    pub(super) fn link(&self, context: &RequestContext<RoleServer>) -> Link {
        match self.session.get() {
            Some(session) if !is_modern(context) => session.link.clone(),
            _ => self.shared.upstream.clone(),
        }
    }
}

/// The MCP session a request or notification came in (over HTTP).
pub(super) fn mcp_session(extensions: &rmcp::model::Extensions) -> Option<&str> {
    extensions
        .get::<http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}

/// Did this request come on a revision without sessions (2026-07-28 or later)?
pub(super) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    names_modern_revision(&context.meta)
}

/// Does a request's `_meta` name a revision without sessions (2026-07-28 or later)?
pub(crate) fn names_modern_revision(meta: &RequestMetaObject) -> bool {
    meta.protocol_version().is_some_and(|v| !v.has_initialize())
}

/// Counts a forwarded tool call while it is in flight.
pub(super) struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    pub(super) fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
