//! Session stores for **orch**: keep each conversation's orchestration state between
//! requests, on one server ([`MemoryStore`], the embedded default) or many
//! ([`RedisStore`], feature `redis`: one Redis server or a Redis Cluster).
//!
//! Sessions are stored as binary [`orch_runtime::Snapshot`]s (by names, versioned,
//! fingerprinted), so a changed template restores by name. Every stored value carries a
//! version; [`SessionStore::update`] is an optimistic read–modify–write: it loads the
//! session, applies the change, and writes it back only if nobody else wrote in between
//! (compare-and-set), retrying a bounded number of times — no lost updates, unlike a
//! plain get/put.
//!
//! ```
//! # orch_runtime::__doc_machine!();
//! use orch_store::{MemoryStore, SessionStore};
//! # async fn demo_fn() -> Result<(), orch_store::StoreError> {
//! let store = MemoryStore::new();
//! let updated = store
//!     .update::<demo::Machine, _>("session-42", |s| {
//!         s.on_user_message("research this");
//!         s.record(demo::Tool::Search)
//!     })
//!     .await?;
//! assert_eq!(updated.session.sequence_index(), 1);
//! # Ok(()) }
//! # futures_lite_block_on(demo_fn()).unwrap();
//! # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "redis")]
mod bus;
pub mod index;
pub mod lease;
mod memory;
#[cfg(feature = "redis")]
mod redis_store;

#[cfg(feature = "redis")]
pub use bus::RedisBus;
pub use memory::{MemoryStore, MemoryStoreBuilder};
#[cfg(feature = "redis")]
pub use redis_store::RedisStore;

use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Machine, RestoreError, RestoreReport, Session, Snapshot};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A stored value and its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The encoded snapshot.
    pub bytes: Vec<u8>,
    /// Its version: changes on every write (never reused, even after a delete).
    pub version: u64,
}

/// Why a store operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// `update` kept conflicting with concurrent writers.
    Conflict {
        /// The session id.
        id: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The stored data could not be decoded or restored.
    Snapshot {
        /// The session id.
        id: String,
        /// What was wrong.
        error: RestoreError,
    },
    /// The backend failed (for Redis: connection refused, timeout, protocol error...)
    /// before anything was written: nothing changed.
    Backend {
        /// What failed, in words (the cause's own words included).
        why: String,
        /// The backend's own error, when there is one (`redis::RedisError` for Redis).
        source: Option<Cause>,
    },
    /// A write was sent but its answer never came (a timeout, a dropped connection):
    /// it may or may not have been applied. Read the session again before deciding
    /// what to do; do not assume the update failed.
    OutcomeUnknown {
        /// The session id.
        id: String,
        /// What happened.
        why: String,
        /// The backend's own error, when there is one.
        source: Option<Cause>,
    },
    /// The write was applied by the primary, but fewer replicas than asked for
    /// (`RedisStore::wait_for_replicas`) confirmed it in time: if the primary fails now,
    /// the write may be lost. The session holds the new value for as long as the primary
    /// lives.
    NotDurable {
        /// The session id.
        id: String,
        /// The version that was written.
        version: u64,
        /// How many replicas confirmed it.
        replicas: u64,
        /// How many were asked for.
        wanted: u64,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Conflict { id, attempts } => write!(
                f,
                "could not update session `{id}`: {attempts} attempts conflicted with concurrent updates"
            ),
            StoreError::Snapshot { id, error } => write!(f, "session `{id}` cannot be restored: {error}"),
            StoreError::Backend { why, .. } => write!(f, "session store error: {why}"),
            StoreError::OutcomeUnknown { id, why, .. } => write!(
                f,
                "the update of session `{id}` was sent but not confirmed ({why}): it may or may not have been applied"
            ),
            StoreError::NotDurable { id, version, replicas, wanted } => write!(
                f,
                "the update of session `{id}` (version {version}) was applied but only {replicas} of {wanted} replicas confirmed it in time: it may not be durable"
            ),
        }
    }
}

/// The typed cause a [`StoreError`] keeps ([`std::error::Error::source`]).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

impl StoreError {
    /// A backend failure without a typed cause: `why`, in words.
    pub fn backend(why: impl Into<String>) -> Self {
        StoreError::Backend {
            why: why.into(),
            source: None,
        }
    }
}

/// The message says everything (the cause's words included); `source()` gives the
/// typed cause to a program that walks the chain.
impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Snapshot { error, .. } => Some(error),
            StoreError::Backend { source, .. } | StoreError::OutcomeUnknown { source, .. } => {
                source
                    .as_deref()
                    .map(|e| e as &(dyn std::error::Error + 'static))
            }
            StoreError::Conflict { .. } | StoreError::NotDurable { .. } => None,
        }
    }
}

/// A place to keep sessions. Implementations provide versioned raw bytes
/// ([`load`](SessionStore::load), [`compare_and_set`](SessionStore::compare_and_set),
/// [`store`](SessionStore::store), [`remove`](SessionStore::remove)); the typed
/// operations ([`get`](SessionStore::get), [`put`](SessionStore::put),
/// [`delete`](SessionStore::delete), [`update`](SessionStore::update)) are provided.
/// Implementations are thread-safe.
pub trait SessionStore: Send + Sync {
    /// The value stored under `id`, if any (and not expired).
    fn load(&self, id: &str) -> impl Future<Output = Result<Option<Versioned>, StoreError>> + Send;

    /// Writes `bytes` under `id` if the stored version is still `expected` (`None`: only
    /// if nothing is stored). Returns the new version, or `None` on a conflict.
    fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// Writes `bytes` under `id` whatever is stored. Returns the new version.
    fn store(
        &self,
        id: &str,
        bytes: Vec<u8>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Deletes `id`. Returns whether something was stored.
    fn remove(&self, id: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// How many sessions the store holds, when it can tell without a scan (the
    /// in-memory store can; the default, for stores that cannot, is `None`).
    fn count(&self) -> Option<usize> {
        None
    }

    /// The ids of the sessions the store holds, for an operator's view of every run (the
    /// console): a scan, whose cost grows with the store. No order is promised; a session
    /// created or expiring during the scan may be missed. Listing does not refresh a
    /// session's TTL. The default, for a store that cannot list: an error saying so.
    fn ids(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        async {
            Err(StoreError::backend(
                "this session store cannot list its sessions",
            ))
        }
    }

    /// The values stored under `ids`, in their order (`None`: nothing stored), for an
    /// operator's view: unlike [`load`](SessionStore::load), reading is not the session's
    /// use, so its TTL is not refreshed (a console left open keeps no run alive). Stores
    /// that can ask for many values at once do (Redis pipelines them); the default
    /// loads each in turn.
    fn peek(
        &self,
        ids: &[String],
    ) -> impl Future<Output = Result<Vec<Option<Versioned>>, StoreError>> + Send {
        async move {
            let mut found = Vec::with_capacity(ids.len());
            for id in ids {
                found.push(self.load(id).await?);
            }
            Ok(found)
        }
    }

    /// The value this store instance last saw under `id` (read or written by it), if it
    /// keeps such a cache; [`update`](SessionStore::update) then tries a compare-and-set
    /// against it first and reads only on a conflict (the default: no cache).
    fn cached(&self, id: &str) -> Option<Versioned> {
        let _ = id;
        None
    }

    /// Waits before retry `attempt` (1-based) of a conflicting [`update`](SessionStore::update).
    /// The default yields to the executor once.
    fn backoff(&self, attempt: u32) -> impl Future<Output = ()> + Send {
        let _ = attempt;
        YieldNow(false)
    }

    /// The session stored under `id`.
    fn get<M: Machine>(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Loaded<M>>, StoreError>> + Send {
        async move {
            match self.load(id).await? {
                None => Ok(None),
                Some(v) => {
                    let (session, report) = decode::<M>(id, &v.bytes)?;
                    Ok(Some(Loaded {
                        session,
                        version: v.version,
                        report,
                    }))
                }
            }
        }
    }

    /// Stores `session` under `id` (overwriting). Returns the new version.
    fn put<M: Machine>(
        &self,
        id: &str,
        session: &Session<M>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let bytes = session.snapshot().to_bytes();
        async move { self.store(id, bytes).await }
    }

    /// Deletes the session `id`. Returns whether it existed.
    fn delete(&self, id: &str) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.remove(id)
    }

    /// Applies `change` to the session `id` atomically (a fresh session if there is
    /// none). The default is an optimistic read–modify–write: compare-and-set on the
    /// version, retried up to [`DEFAULT_MAX_ATTEMPTS`] times with
    /// [`backoff`](SessionStore::backoff) between attempts. `change` may run more than
    /// once (once per attempt) and must only change the session it is given.
    fn update<M, R>(
        &self,
        id: &str,
        change: impl FnMut(&mut Session<M>) -> R + Send,
    ) -> impl Future<Output = Result<Updated<M, R>, StoreError>> + Send
    where
        M: Machine,
        R: Send,
    {
        self.update_with_limit(id, DEFAULT_MAX_ATTEMPTS, change)
    }

    /// [`update`](SessionStore::update) with an explicit attempt limit (at least 1).
    fn update_with_limit<M, R>(
        &self,
        id: &str,
        max_attempts: u32,
        change: impl FnMut(&mut Session<M>) -> R + Send,
    ) -> impl Future<Output = Result<Updated<M, R>, StoreError>> + Send
    where
        M: Machine,
        R: Send,
    {
        update_loop(self, id, max_attempts, true, change)
    }

    /// [`update`](SessionStore::update) for a session of a machine loaded at run time
    /// ([`DynMachine`]): the same loop, the same attempt limit.
    fn update_dyn<'m, R>(
        &self,
        machine: &'m DynMachine,
        id: &str,
        change: impl FnMut(&mut DynSession<'m>) -> R + Send,
    ) -> impl Future<Output = Result<UpdatedDyn<'m, R>, StoreError>> + Send
    where
        R: Send,
    {
        async move {
            let (session, value, version, attempts, report) = update_session(
                self,
                id,
                DEFAULT_MAX_ATTEMPTS,
                self.cached(id),
                |bytes| decode_dyn(machine, id, bytes),
                || DynSession::new(machine),
                |s| s.snapshot().to_bytes(),
                change,
            )
            .await?;
            Ok(UpdatedDyn {
                session,
                value,
                version,
                attempts,
                report,
            })
        }
    }
}

/// What one look at a stored value decided ([`modify`]).
#[derive(Debug)]
pub enum Change<R> {
    /// Write these bytes (if the value is still the one looked at), then return `R`.
    Write(Vec<u8>, R),
    /// Write nothing and return `R`.
    Keep(R),
}

/// What [`modify`] did.
#[derive(Debug)]
pub struct Modified<R> {
    /// What the change returned (on the attempt that counted).
    pub value: R,
    /// The value written, with its new version (`None`: the change kept the value).
    pub written: Option<Versioned>,
    /// How many attempts it took (1 without contention).
    pub attempts: u32,
}

/// Why [`modify`] failed.
#[derive(Debug)]
pub enum ModifyError<E> {
    /// The store failed, or every attempt conflicted ([`StoreError::Conflict`]).
    Store(StoreError),
    /// The change function refused (its own error).
    Change(E),
}

impl<E> From<StoreError> for ModifyError<E> {
    fn from(e: StoreError) -> Self {
        ModifyError::Store(e)
    }
}

/// The one optimistic read–modify–write of this crate, for any value a store holds:
/// typed sessions ([`SessionStore::update`]), run-time sessions
/// ([`SessionStore::update_dyn`]) and other records (the MCP gateway's). `change` looks
/// at the stored value (`None`: nothing stored) and decides; a write is a
/// compare-and-set on the version it looked at, and a conflict means someone else wrote
/// in between: after [`SessionStore::backoff`] it looks again, at most `max_attempts`
/// times (at least 1).
///
/// `known` is a value this process believes is current (one it wrote, or the store's
/// [`SessionStore::cached`] one): the first attempt is made against it without reading.
/// A decision to write nothing is only taken on a value read from the store: a `Keep` on
/// `known` reads and looks again at once. `change` may run more than once.
pub async fn modify<S, R, E>(
    store: &S,
    id: &str,
    max_attempts: u32,
    mut known: Option<Versioned>,
    mut change: impl FnMut(Option<&Versioned>) -> Result<Change<R>, E> + Send,
) -> Result<Modified<R>, ModifyError<E>>
where
    S: SessionStore + ?Sized,
{
    let max_attempts = max_attempts.max(1);
    for attempt in 1..=max_attempts {
        let (current, read) = match known.take() {
            Some(v) => (Some(v), false),
            None => (store.load(id).await?, true),
        };
        match change(current.as_ref()).map_err(ModifyError::Change)? {
            Change::Keep(value) if read => {
                return Ok(Modified {
                    value,
                    written: None,
                    attempts: attempt,
                })
            }
            // Decided on a value this process only believed current: read.
            Change::Keep(_) => continue,
            Change::Write(bytes, value) => {
                let expected = current.as_ref().map(|v| v.version);
                if let Some(version) = store.compare_and_set(id, expected, bytes.clone()).await? {
                    return Ok(Modified {
                        value,
                        written: Some(Versioned { bytes, version }),
                        attempts: attempt,
                    });
                }
            }
        }
        // Someone else wrote in between: let them finish, then try again.
        if attempt < max_attempts {
            store.backoff(attempt).await;
        }
    }
    Err(ModifyError::Store(StoreError::Conflict {
        id: id.to_owned(),
        attempts: max_attempts,
    }))
}

/// [`modify`] whose change can only fail with a store error.
fn flatten(e: ModifyError<StoreError>) -> StoreError {
    match e {
        ModifyError::Store(e) | ModifyError::Change(e) => e,
    }
}

/// The optimistic read–modify–write of [`SessionStore::update_with_limit`], for stores
/// that wrap it (a store that serializes its own tasks per session first, say). With
/// `cache_first` false, the first attempt reads instead of trusting
/// [`SessionStore::cached`].
pub(crate) async fn update_loop<S, M, R>(
    store: &S,
    id: &str,
    max_attempts: u32,
    cache_first: bool,
    change: impl FnMut(&mut Session<M>) -> R + Send,
) -> Result<Updated<M, R>, StoreError>
where
    S: SessionStore + ?Sized,
    M: Machine,
    R: Send,
{
    let known = if cache_first { store.cached(id) } else { None };
    let (session, value, version, attempts, report) = update_session(
        store,
        id,
        max_attempts,
        known,
        |bytes| decode::<M>(id, bytes),
        Session::<M>::new,
        |s| s.snapshot().to_bytes(),
        change,
    )
    .await?;
    Ok(Updated {
        session,
        value,
        version,
        attempts,
        report,
    })
}

/// What [`update_session`] gives back: the session written, the change's value, the
/// version, the attempts and the restore report.
type SessionUpdate<T, R> = (T, R, u64, u32, RestoreReport);

/// [`modify`] for a session of any kind (typed or run-time): restore it (or start a
/// fresh one), change it, write its snapshot.
#[allow(clippy::too_many_arguments)]
async fn update_session<S, T, R>(
    store: &S,
    id: &str,
    max_attempts: u32,
    known: Option<Versioned>,
    restore: impl Fn(&[u8]) -> Result<(T, RestoreReport), StoreError> + Send + Sync,
    fresh: impl Fn() -> T + Send + Sync,
    snapshot: impl Fn(&T) -> Vec<u8> + Send + Sync,
    mut change: impl FnMut(&mut T) -> R + Send,
) -> Result<SessionUpdate<T, R>, StoreError>
where
    S: SessionStore + ?Sized,
{
    let modified = modify(store, id, max_attempts, known, |current| {
        let (mut session, report) = match current {
            Some(v) => restore(&v.bytes)?,
            None => (fresh(), RestoreReport::default()),
        };
        let value = change(&mut session);
        Ok(Change::Write(snapshot(&session), (session, value, report)))
    })
    .await
    .map_err(flatten)?;
    let (session, value, report) = modified.value;
    let version = modified.written.map_or(0, |w| w.version);
    Ok((session, value, version, modified.attempts, report))
}

/// A session read from a store.
#[derive(Debug)]
pub struct Loaded<M: Machine> {
    /// The session.
    pub session: Session<M>,
    /// The stored version it was read at.
    pub version: u64,
    /// What could not be carried over if the template changed since it was stored.
    pub report: RestoreReport,
}

/// The result of [`SessionStore::update`].
#[derive(Debug)]
pub struct Updated<M: Machine, R> {
    /// The session as written.
    pub session: Session<M>,
    /// What the change function returned (on the attempt that was written).
    pub value: R,
    /// The version written.
    pub version: u64,
    /// How many attempts it took (1 without contention).
    pub attempts: u32,
    /// What could not be carried over if the template changed since it was stored.
    pub report: RestoreReport,
}

/// The result of [`SessionStore::update_dyn`].
#[derive(Debug)]
pub struct UpdatedDyn<'m, R> {
    /// The session as written.
    pub session: DynSession<'m>,
    /// What the change function returned (on the attempt that was written).
    pub value: R,
    /// The version written.
    pub version: u64,
    /// How many attempts it took (1 without contention).
    pub attempts: u32,
    /// What could not be carried over if the template changed since it was stored.
    pub report: RestoreReport,
}

/// Decodes and restores a stored run-time session.
pub(crate) fn decode_dyn<'m>(
    machine: &'m DynMachine,
    id: &str,
    bytes: &[u8],
) -> Result<(DynSession<'m>, RestoreReport), StoreError> {
    let err = |error| StoreError::Snapshot {
        id: id.to_owned(),
        error,
    };
    let snapshot = Snapshot::from_bytes(bytes).map_err(err)?;
    DynSession::restore(machine, &snapshot).map_err(err)
}

/// The default bound on [`SessionStore::update`] attempts.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 200;

/// Decodes and restores a stored session.
pub(crate) fn decode<M: Machine>(
    id: &str,
    bytes: &[u8],
) -> Result<(Session<M>, RestoreReport), StoreError> {
    let err = |error| StoreError::Snapshot {
        id: id.to_owned(),
        error,
    };
    let snapshot = Snapshot::from_bytes(bytes).map_err(err)?;
    Session::<M>::restore(&snapshot).map_err(err)
}

/// Yields to the executor once (runtime-agnostic).
pub(crate) struct YieldNow(pub(crate) bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
