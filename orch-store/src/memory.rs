//! The embedded store: a thread-safe map with a TTL measured from last access and a
//! maximum session count (least recently used evicted first). Expired sessions are
//! dropped lazily, during the operations themselves — no background thread.

use crate::{decode, SessionStore, StoreError, Updated, Versioned};
use orch_runtime::{Machine, RestoreReport, Session};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A source of "now", as time since some fixed start (tests use a manual clock).
pub type Clock = Arc<dyn Fn() -> Duration + Send + Sync>;

struct Entry {
    bytes: Vec<u8>,
    version: u64,
    /// Position in the LRU order.
    tick: u64,
    last_access: Duration,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Entry>,
    /// Access order: the first entry is the least recently used.
    order: BTreeMap<u64, String>,
    next_tick: u64,
    next_version: u64,
}

/// The embedded session store (the default): no setup, thread-safe.
///
/// ```
/// use std::time::Duration;
/// let store = orch_store::MemoryStore::builder()
///     .ttl(Duration::from_secs(30 * 60))
///     .max_sessions(10_000)
///     .build();
/// assert_eq!(store.len(), 0);
/// ```
pub struct MemoryStore {
    inner: Mutex<Inner>,
    ttl: Option<Duration>,
    max_sessions: usize,
    clock: Clock,
}

/// Configures a [`MemoryStore`].
pub struct MemoryStoreBuilder {
    ttl: Option<Duration>,
    max_sessions: usize,
    clock: Option<Clock>,
}

impl MemoryStoreBuilder {
    /// Sessions not accessed for `ttl` expire (default: 30 minutes).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sessions never expire.
    #[must_use]
    pub fn no_ttl(mut self) -> Self {
        self.ttl = None;
        self
    }

    /// At most `n` sessions (at least 1; default 100 000): storing one more evicts the
    /// least recently used.
    #[must_use]
    pub fn max_sessions(mut self, n: usize) -> Self {
        self.max_sessions = n.max(1);
        self
    }

    /// The clock the TTL is measured with (default: the monotonic system clock).
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore {
        let clock = self.clock.unwrap_or_else(|| {
            let start = Instant::now();
            Arc::new(move || start.elapsed())
        });
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            ttl: self.ttl,
            max_sessions: self.max_sessions,
            clock,
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store with the defaults (TTL 30 minutes, at most 100 000 sessions).
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for the TTL, the maximum count and the clock.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            ttl: Some(Duration::from_secs(30 * 60)),
            max_sessions: 100_000,
            clock: None,
        }
    }

    /// How many sessions are stored (expired ones dropped first).
    pub fn len(&self) -> usize {
        let mut inner = self.lock();
        self.expire(&mut inner);
        inner.map.len()
    }

    /// Is the store empty?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every expired session now (it also happens during every operation).
    pub fn purge_expired(&self) -> usize {
        let mut inner = self.lock();
        let before = inner.map.len();
        self.expire(&mut inner);
        before - inner.map.len()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated in a way
        // that matters (every operation keeps map and order consistent before it can
        // panic), so a poisoned lock is used as is.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expire(&self, inner: &mut Inner) {
        let Some(ttl) = self.ttl else { return };
        let now = (self.clock)();
        while let Some((&tick, key)) = inner.order.first_key_value() {
            // The least recently used entry expires first.
            let expired = inner
                .map
                .get(key)
                .is_none_or(|e| now.saturating_sub(e.last_access) >= ttl);
            if !expired {
                break;
            }
            if let Some(key) = inner.order.remove(&tick) {
                inner.map.remove(&key);
            }
        }
    }

    fn touch(&self, inner: &mut Inner, id: &str) {
        let now = (self.clock)();
        let tick = inner.next_tick;
        inner.next_tick += 1;
        if let Some(e) = inner.map.get_mut(id) {
            let old = std::mem::replace(&mut e.tick, tick);
            e.last_access = now;
            // The id's place in the order moves: its key is reused (a new one only for
            // an entry not yet in the order).
            let key = inner.order.remove(&old).unwrap_or_else(|| id.to_owned());
            inner.order.insert(tick, key);
        }
    }

    fn write(&self, inner: &mut Inner, id: &str, bytes: Vec<u8>) -> u64 {
        inner.next_version += 1;
        let version = inner.next_version;
        if let Some(e) = inner.map.get_mut(id) {
            e.bytes = bytes;
            e.version = version;
        } else {
            while inner.map.len() >= self.max_sessions {
                let Some((_, lru)) = inner.order.pop_first() else {
                    break;
                };
                inner.map.remove(&lru);
            }
            inner.map.insert(
                id.to_owned(),
                Entry {
                    bytes,
                    version,
                    tick: u64::MAX,
                    last_access: Duration::ZERO,
                },
            );
        }
        self.touch(inner, id);
        version
    }
}

impl SessionStore for MemoryStore {
    fn count(&self) -> Option<usize> {
        Some(self.len())
    }

    async fn ids(&self) -> Result<Vec<String>, StoreError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        Ok(inner.map.keys().cloned().collect())
    }

    /// Reads without touching: the sessions' places in the LRU order and their TTLs stay.
    async fn peek(&self, ids: &[String]) -> Result<Vec<Option<Versioned>>, StoreError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        Ok(ids
            .iter()
            .map(|id| {
                inner.map.get(id).map(|e| Versioned {
                    bytes: e.bytes.clone(),
                    version: e.version,
                })
            })
            .collect())
    }

    async fn load(&self, id: &str) -> Result<Option<Versioned>, StoreError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        self.touch(&mut inner, id);
        Ok(inner.map.get(id).map(|e| Versioned {
            bytes: e.bytes.clone(),
            version: e.version,
        }))
    }

    async fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Option<u64>, StoreError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        let current = inner.map.get(id).map(|e| e.version);
        if current != expected {
            return Ok(None);
        }
        Ok(Some(self.write(&mut inner, id, bytes)))
    }

    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, StoreError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        Ok(self.write(&mut inner, id, bytes))
    }

    /// Atomic without retries: the whole read–modify–write happens under the store's
    /// lock (the change function runs exactly once, and must not use this store).
    async fn update<M, R>(
        &self,
        id: &str,
        mut change: impl FnMut(&mut Session<M>) -> R + Send,
    ) -> Result<Updated<M, R>, StoreError>
    where
        M: Machine,
        R: Send,
    {
        let mut inner = self.lock();
        self.expire(&mut inner);
        let (mut session, report) = match inner.map.get(id) {
            Some(e) => decode::<M>(id, &e.bytes)?,
            None => (Session::<M>::new(), RestoreReport::default()),
        };
        let value = change(&mut session);
        let version = self.write(&mut inner, id, session.snapshot().to_bytes());
        Ok(Updated {
            session,
            value,
            version,
            attempts: 1,
            report,
        })
    }

    async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        match inner.map.remove(id) {
            Some(e) => {
                inner.order.remove(&e.tick);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
