//! What the guard needs: the shared gateway, the MCP SDK's session manager, the HTTP
//! options, the JWT verifier and the sessions being restored.

use super::prelude::*;

/// The largest request body the gateway reads (the MCP SDK's default).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// What the guard needs.
pub(crate) struct Guarded<S> {
    pub(crate) shared: Arc<Shared<S>>,
    pub(crate) manager: Arc<LocalSessionManager>,
    pub(crate) options: HttpOptions,
    /// Checks bearer JWTs, when the gateway accepts them.
    pub(crate) jwt: Option<JwtVerifier>,
    /// Sessions this instance is restoring from the store (their handshake replayed into
    /// a new worker), each with the gate its requests pass one at a time until the
    /// restore is done ([`Guarded::restore_gate`]).
    pub(crate) restoring: RestoreGates,
    /// Which sessions have requests open, and since when they have had none: a session's
    /// worker is let go only when it is idle ([`super::idle`]).
    pub(crate) activity: Arc<super::idle::Activity>,
}

/// The gates of sessions being restored, by session id.
pub(crate) type RestoreGates = Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;
