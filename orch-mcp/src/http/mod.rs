//! Streamable HTTP for many clients: the MCP SDK's service at `/mcp`, served by an
//! accept loop of our own (a connection cap, a time limit on request headers), behind a
//! guard that checks every request before the SDK sees it:
//!
//! - the credential: the operator's bearer token when one is configured, or a run token
//!   minted by `POST /runs` (401 otherwise, and for a run token that is unknown, revoked
//!   or expired); a request on a revision without sessions (2026-07-28) that reads or
//!   changes a workflow (`tools/list`, `tools/call`, `subscriptions/listen`) must
//!   present a run token, since nothing else names its run;
//! - the body of a POST: read within the body timeout (408), at most [`MAX_BODY`]
//!   bytes (413), a JSON-RPC message an MCP client may send (-32700 / -32600 /
//!   -32602, status 400);
//! - the session: a request naming a session that has ended (DELETE, or its TTL
//!   passed) gets 404 and its in-memory worker is closed; a new session (`initialize`)
//!   or one this instance must restore is refused with 503 while the gateway holds its
//!   maximum of sessions;
//! - a `tools/call` whose client goes away before the answer is cancelled, so that its
//!   lease is released at once;
//! - a session's in-memory worker is let go once none of its requests has been open for
//!   the idle time (half the session TTL, at most five minutes), never under a request
//!   that is still being answered.
//!
//! Each MCP session's handshake is kept in the session's record (see
//! [`orch_store::lease`]), so that any gateway instance sharing the store serves it.
//!
//! Besides `/mcp`, the guard answers `/runs` itself: `POST /runs` mints a run and its
//! token, `DELETE /runs/<id>` revokes one (see [`crate::runs`]).
//!
//! | file | what it holds |
//! | --- | --- |
//! | `guarded.rs` | the guard's state |
//! | `admission.rs` | the guard every request passes: credentials, the run, bodies, restores |
//! | `credentials.rs` | bearer tokens, run tokens, JWTs; the protected-resource metadata |
//! | `body.rs` | a POST's body, read and checked |
//! | `sessions.rs` | ended sessions, restores, the handshake kept in the record |
//! | `runs.rs` | `POST /runs` and `DELETE /runs/<id>` |
//! | `cancel.rs` | a call cancelled when its client goes away |
//! | `idle.rs` | a session's worker let go when none of its requests is open for a while |
//! | `accept.rs` | the accept loop |
//! | `responses.rs` | the gateway's own HTTP answers |

mod accept;
mod admission;
mod body;
mod cancel;
mod credentials;
mod guarded;
mod idle;
mod prelude;
mod responses;
mod runs;
mod sessions;

pub(crate) use accept::serve;
pub(crate) use admission::guard;
pub(crate) use guarded::{Guarded, MAX_BODY};
pub(crate) use idle::{let_idle_go, Activity};
pub(crate) use sessions::Handshakes;
