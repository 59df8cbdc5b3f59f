//! A Redis-backed store (feature `redis`), on one server or a Redis Cluster: namespaced
//! keys, TTL with `EX` (refreshed on every access), compare-and-set as a Lua script on
//! the session's own key (so it works on any cluster slot and no key is hot), and an
//! optional `WAIT` for replicas.
//!
//! A stored value is a 20-digit decimal version followed by the snapshot bytes. A
//! version is a random 32-bit *epoch*, chosen when the session is created (or blindly
//! overwritten), above a 32-bit counter that each compare-and-set increments: versions
//! are never reused, even after a delete and a re-creation, so a writer holding an old
//! version never overwrites a newer session. The store computes the next version and
//! the script only compares and sets, so the script touches one key.

use crate::{SessionStore, StoreError, Versioned};
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Value};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Width of the decimal version prefix of every stored value.
const VERSION_WIDTH: usize = 20;

/// Compare-and-set on one key. KEYS[1] the session. ARGV[1]: the expected version prefix,
/// `""` for "must not exist", `"*"` for "any"; ARGV[2]: the new value (version prefix and
/// snapshot); ARGV[3]: TTL in seconds (0: none). Returns `{1}` when written, `{0, value}`
/// on a conflict with the current value (`false` when there is none), so a retry needs
/// no read.
const CAS: &str = r"
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  if cur then return {0, cur} end
elseif ARGV[1] ~= '*' then
  if (not cur) or string.sub(cur, 1, 20) ~= ARGV[1] then return {0, cur} end
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return {1}
";

/// How many sessions a store instance remembers for one-round-trip updates.
const DEFAULT_CACHE: usize = 10_000;

/// The connection: one server (multiplexed, reconnecting) or a cluster (slot-aware,
/// following MOVED/ASK redirections and failovers).
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// Sessions in Redis, shared by every server that uses the same namespace.
///
/// ```no_run
/// # async fn f() -> Result<(), orch_store::StoreError> {
/// use std::time::Duration;
/// let store = orch_store::RedisStore::connect("redis://127.0.0.1:6379/")
///     .await?
///     .namespace("my-agent")
///     .ttl(Some(Duration::from_secs(3600)));
/// let cluster = orch_store::RedisStore::connect_cluster(&[
///     "redis://10.0.0.1:7000/",
///     "redis://10.0.0.2:7000/",
/// ])
/// .await?
/// .wait_for_replicas(1, Duration::from_millis(200));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    conn: Conn,
    namespace: String,
    ttl: Option<Duration>,
    durability: Option<(u64, Duration)>,
    cache: Arc<Cache>,
    stats: Arc<Stats>,
    turns: Arc<Turns>,
}

/// One lock per session being updated through this instance (and its clones), so its
/// own tasks take turns, fairly and without spending round trips on conflicts among
/// themselves; other instances are still met by the compare-and-set.
#[derive(Default)]
struct Turns {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Turns {
    fn lock_for(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        match self.locks.lock() {
            Ok(mut locks) => locks.entry(id.to_owned()).or_default().clone(),
            // A poisoned map only loses the fairness, never correctness.
            Err(_) => Arc::default(),
        }
    }

    /// Forgets the lock of `id` when nobody else holds or waits for it.
    fn release(&self, id: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        if let Ok(mut locks) = self.locks.lock() {
            // The map's reference and `lock`.
            if Arc::strong_count(&lock) == 2 {
                locks.remove(id);
            }
        }
    }
}

/// The last value this instance saw per session, bounded.
#[derive(Default)]
struct Cache {
    capacity: usize,
    entries: Mutex<HashMap<String, Versioned>>,
}

impl Cache {
    fn get(&self, id: &str) -> Option<Versioned> {
        self.entries.lock().ok()?.get(id).cloned()
    }

    fn put(&self, id: &str, value: Option<Versioned>) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        match value {
            Some(v) if self.capacity > 0 => {
                // Tasks sharing this instance race: never replace a value with an older
                // one of the same epoch (a slow reply must not undo a newer write).
                if let Some(known) = entries.get(id) {
                    if known.version >> 32 == v.version >> 32 && known.version > v.version {
                        return;
                    }
                }
                if entries.len() >= self.capacity && !entries.contains_key(id) {
                    // Bounded: forget everything rather than track recency; the cache
                    // only saves a read.
                    entries.clear();
                }
                entries.insert(id.to_owned(), v);
            }
            _ => {
                entries.remove(id);
            }
        }
    }
}

/// Round trips (commands or pipelines sent to Redis) made by a store instance.
#[derive(Default)]
struct Stats {
    round_trips: AtomicU64,
}

fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend {
        why: format!("redis: {e}"),
        source: Some(Box::new(e)),
    }
}

/// The error of a write: when the command may have reached the server (no answer in
/// time, the connection dropped while waiting), its outcome is unknown; when it
/// certainly did not (refused, could not connect) or the server answered with an
/// error (a cluster redirection the client could not follow within its retries
/// included: a node that answers MOVED did not run the command), nothing was written.
fn written(id: &str, e: redis::RedisError) -> StoreError {
    if e.is_timeout()
        || e.is_connection_dropped()
        || (e.is_io_error() && !e.is_connection_refusal())
    {
        StoreError::OutcomeUnknown {
            id: id.to_owned(),
            why: format!("redis: {e}"),
            source: Some(Box::new(e)),
        }
    } else {
        backend(e)
    }
}

/// A random 32-bit epoch in the high half of a version, counter 1.
fn fresh_version() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let epoch = h.finish() >> 32;
    (epoch << 32) | 1
}

/// `version` as the stored prefix.
fn prefix(version: u64) -> String {
    format!("{version:020}")
}

/// A stored value: its version and snapshot bytes.
fn parse_value(key: &str, value: &[u8]) -> Result<Versioned, StoreError> {
    let version = value
        .get(..VERSION_WIDTH)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| {
            StoreError::backend(format!(
                "redis: the value of `{key}` is not an orch session"
            ))
        })?;
    Ok(Versioned {
        bytes: value[VERSION_WIDTH..].to_vec(),
        version,
    })
}

/// A script reply: `Ok(None)` written, `Ok(Some(current))` a conflict.
fn parse_cas_reply(key: &str, reply: &Value) -> Result<Option<Option<Versioned>>, StoreError> {
    let unexpected = || {
        StoreError::backend(format!(
            "redis: unexpected reply to the compare-and-set of `{key}`: {reply:?}"
        ))
    };
    let Value::Array(items) = reply else {
        return Err(unexpected());
    };
    match items.as_slice() {
        [Value::Int(1)] => Ok(None),
        [Value::Int(0)] | [Value::Int(0), Value::Nil] => Ok(Some(None)),
        [Value::Int(0), Value::BulkString(cur)] => Ok(Some(Some(parse_value(key, cur)?))),
        _ => Err(unexpected()),
    }
}

/// The Redis Cluster hash slot of `key` (CRC16/XMODEM of the key, or of its `{tag}`).
fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &b in tagged {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}

impl RedisStore {
    /// Connects to the server at `url` (`redis://host:port/db`). Namespace `orch`, TTL
    /// 30 minutes. A server that cannot be reached is an error, not a hang: the
    /// connection attempt is bounded.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with_timeouts(url, Duration::from_secs(2), Duration::from_secs(5)).await
    }

    /// [`RedisStore::connect`] with other time limits: `connect` to establish a
    /// connection, `response` to wait for the answer to one command. A write whose
    /// answer does not come in time is [`StoreError::OutcomeUnknown`].
    pub async fn connect_with_timeouts(
        url: &str,
        connect: Duration,
        response: Duration,
    ) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(backend)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(connect)
            .set_response_timeout(response)
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(backend)?;
        Ok(Self::with(Conn::Single(conn)))
    }

    /// Connects to a Redis Cluster through any of its nodes (`redis://host:port/`);
    /// the client learns the slot map from them. Sessions spread over every slot (no
    /// hash tag pins a namespace to one node); MOVED and ASK redirections and failovers
    /// are followed, with bounded retries. Same namespaces, TTL and compare-and-set as
    /// [`RedisStore::connect`].
    pub async fn connect_cluster(seeds: &[&str]) -> Result<Self, StoreError> {
        Self::connect_cluster_with_timeouts(seeds, Duration::from_secs(2), Duration::from_secs(5))
            .await
    }

    /// [`RedisStore::connect_cluster`] with other time limits (see
    /// [`RedisStore::connect_with_timeouts`]).
    pub async fn connect_cluster_with_timeouts(
        seeds: &[&str],
        connect: Duration,
        response: Duration,
    ) -> Result<Self, StoreError> {
        if seeds.is_empty() {
            return Err(StoreError::backend(
                "redis: connect_cluster needs at least one node".to_owned(),
            ));
        }
        let client = redis::cluster::ClusterClientBuilder::new(seeds.to_vec())
            .connection_timeout(connect)
            .response_timeout(response)
            .retries(10)
            .min_retry_wait(50)
            .max_retry_wait(1_000)
            .build()
            .map_err(backend)?;
        let conn = client.get_async_connection().await.map_err(backend)?;
        Ok(Self::with(Conn::Cluster(conn)))
    }

    fn with(conn: Conn) -> Self {
        RedisStore {
            conn,
            namespace: "orch".to_owned(),
            ttl: Some(Duration::from_secs(30 * 60)),
            durability: None,
            cache: Arc::new(Cache {
                capacity: DEFAULT_CACHE,
                entries: Mutex::default(),
            }),
            stats: Arc::default(),
            turns: Arc::default(),
        }
    }

    /// Keys are `<namespace>:session:<id>`, the namespace escaped (`%` as `%25`, `:` as
    /// `%3A`) so that no namespace and id can make another's key: namespace `a` with
    /// id `b:session:c` and namespace `a:session:b` with id `c` are two keys.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }

    /// Sessions not accessed for `ttl` expire (`None`: never; sub-second TTLs round up
    /// to one second).
    #[must_use]
    pub fn ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// After every write, wait (Redis `WAIT`, in the same round trip) until `replicas`
    /// replicas of the session's primary have it, for at most `timeout`. A write that
    /// fewer replicas confirm is [`StoreError::NotDurable`], never a silent success.
    /// (Redis replication stays asynchronous: this bounds what a failover can lose to
    /// writes that returned an error.)
    #[must_use]
    pub fn wait_for_replicas(mut self, replicas: u64, timeout: Duration) -> Self {
        self.durability = (replicas > 0).then_some((replicas, timeout));
        self
    }

    /// How many sessions this instance remembers, so that an update of a session it
    /// last wrote or read is one round trip (default 10,000; 0: always read first).
    #[must_use]
    pub fn cache_capacity(mut self, sessions: usize) -> Self {
        self.cache = Arc::new(Cache {
            capacity: sessions,
            entries: Mutex::default(),
        });
        self
    }

    /// Round trips to Redis made by this instance and its clones so far (a pipeline of
    /// a compare-and-set and a `WAIT` is one).
    pub fn round_trips(&self) -> u64 {
        self.stats.round_trips.load(Ordering::Relaxed)
    }

    fn key(&self, id: &str) -> String {
        let mut key = String::with_capacity(self.namespace.len() + 9 + id.len());
        for c in self.namespace.chars() {
            match c {
                '%' => key.push_str("%25"),
                ':' => key.push_str("%3A"),
                c => key.push(c),
            }
        }
        key.push_str(":session:");
        key.push_str(id);
        key
    }

    /// What every session key of this namespace starts with (`<namespace>:session:`).
    fn key_prefix(&self) -> String {
        self.key("")
    }

    /// The session keys of this namespace on one node (`route`: which one, in a
    /// cluster), by `SCAN` with a `MATCH` on the prefix (its glob characters escaped).
    async fn scan_node(&self, route: Option<RoutingInfo>) -> Result<Vec<String>, StoreError> {
        let prefix = self.key_prefix();
        let mut pattern = String::with_capacity(prefix.len() + 2);
        for c in prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push('*');
        let mut cursor = 0u64;
        let mut ids = Vec::new();
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1_000);
            self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
            let reply = match (&self.conn, &route) {
                (Conn::Cluster(c), Some(route)) => {
                    c.clone().route_command(&cmd, route.clone()).await
                }
                _ => self.query(&cmd).await,
            }
            .map_err(backend)?;
            let (next, keys) = match reply {
                Value::Array(parts) if parts.len() == 2 => {
                    let next = match &parts[0] {
                        Value::BulkString(b) => {
                            std::str::from_utf8(b).ok().and_then(|t| t.parse().ok())
                        }
                        Value::Int(n) => u64::try_from(*n).ok(),
                        _ => None,
                    };
                    (next, parts.into_iter().nth(1))
                }
                _ => (None, None),
            };
            let (Some(next), Some(Value::Array(keys))) = (next, keys) else {
                return Err(StoreError::backend("redis: unexpected reply to SCAN"));
            };
            for key in keys {
                if let Value::BulkString(key) = key {
                    if let Some(id) = key.strip_prefix(prefix.as_bytes()) {
                        ids.push(String::from_utf8_lossy(id).into_owned());
                    }
                }
            }
            if next == 0 {
                return Ok(ids);
            }
            cursor = next;
        }
    }

    /// One slot of each shard of the cluster (`CLUSTER SLOTS`), to route a scan of that
    /// shard's primary to.
    async fn shards(&self) -> Result<Vec<u16>, StoreError> {
        let reply = self
            .query(&redis::cmd("CLUSTER").arg("SLOTS").clone())
            .await
            .map_err(backend)?;
        let Value::Array(ranges) = reply else {
            return Err(StoreError::backend(
                "redis: unexpected reply to CLUSTER SLOTS",
            ));
        };
        let mut slots = Vec::with_capacity(ranges.len());
        for range in ranges {
            match range {
                Value::Array(parts) => match parts.first() {
                    Some(Value::Int(start)) => match u16::try_from(*start) {
                        Ok(start) => slots.push(start),
                        Err(_) => {
                            return Err(StoreError::backend(
                                "redis: CLUSTER SLOTS named a slot out of range",
                            ))
                        }
                    },
                    _ => {
                        return Err(StoreError::backend(
                            "redis: unexpected range in CLUSTER SLOTS",
                        ))
                    }
                },
                _ => {
                    return Err(StoreError::backend(
                        "redis: unexpected range in CLUSTER SLOTS",
                    ))
                }
            }
        }
        Ok(slots)
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl.map_or(0, |t| t.as_secs().max(1))
    }

    async fn query(&self, cmd: &Cmd) -> redis::RedisResult<Value> {
        self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
        match &self.conn {
            Conn::Single(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        }
    }

    /// Writes `bytes` at version `new` if the stored prefix is `expected`; with
    /// durability, `WAIT` in the same pipeline (routed to the key's primary).
    async fn cas(
        &self,
        id: &str,
        expected: &str,
        new: u64,
        bytes: &[u8],
    ) -> Result<Option<Option<Versioned>>, StoreError> {
        let key = self.key(id);
        let mut value = prefix(new).into_bytes();
        value.extend_from_slice(bytes);
        let mut eval = redis::cmd("EVAL");
        eval.arg(CAS)
            .arg(1)
            .arg(&key)
            .arg(expected)
            .arg(&value)
            .arg(self.ttl_secs());
        let (reply, acked) = match self.durability {
            None => (self.query(&eval).await.map_err(|e| written(id, e))?, None),
            Some((replicas, timeout)) => {
                let mut wait = redis::cmd("WAIT");
                wait.arg(replicas).arg(
                    u64::try_from(timeout.as_millis())
                        .unwrap_or(u64::MAX)
                        .max(1),
                );
                let (reply, acked) = match &self.conn {
                    // One server: both in one pipeline, one round trip.
                    Conn::Single(c) => {
                        let mut pipe = redis::pipe();
                        pipe.add_command(eval).add_command(wait);
                        self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
                        let mut replies: Vec<Value> = pipe
                            .query_async(&mut c.clone())
                            .await
                            .map_err(|e| written(id, e))?;
                        let acked = replies.pop();
                        (replies.pop(), acked)
                    }
                    // A cluster: `WAIT` has no key, so it is routed explicitly to the
                    // primary that owns the session's slot, on the connection the write
                    // went through.
                    Conn::Cluster(c) => {
                        let reply = self.query(&eval).await.map_err(|e| written(id, e))?;
                        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                            Route::new(slot(key.as_bytes()), SlotAddr::Master),
                        ));
                        self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
                        // The write was answered by the slot's primary; if `WAIT` then
                        // fails (the slot moved in between, the node is a replica now),
                        // no replica confirmed it: `NotDurable` below, never a plain
                        // backend error, since the write itself was applied.
                        let acked = c
                            .clone()
                            .route_command(&wait, route)
                            .await
                            .unwrap_or(Value::Int(0));
                        (Some(reply), Some(acked))
                    }
                };
                let acked = match acked {
                    Some(Value::Int(n)) => u64::try_from(n).unwrap_or(0),
                    other => {
                        return Err(StoreError::OutcomeUnknown {
                            id: id.to_owned(),
                            why: format!("redis: unexpected reply to WAIT: {other:?}"),
                            source: None,
                        })
                    }
                };
                let reply = reply.ok_or_else(|| StoreError::OutcomeUnknown {
                    id: id.to_owned(),
                    why: "redis: no reply to the compare-and-set".to_owned(),
                    source: None,
                })?;
                (reply, Some((acked, replicas)))
            }
        };
        let outcome = parse_cas_reply(&key, &reply)?;
        match &outcome {
            None => {
                self.cache.put(
                    id,
                    Some(Versioned {
                        bytes: bytes.to_vec(),
                        version: new,
                    }),
                );
                if let Some((acked, wanted)) = acked.filter(|(a, w)| a < w) {
                    return Err(StoreError::NotDurable {
                        id: id.to_owned(),
                        version: new,
                        replicas: acked,
                        wanted,
                    });
                }
            }
            Some(current) => self.cache.put(id, current.clone()),
        }
        Ok(outcome)
    }
}

impl SessionStore for RedisStore {
    async fn load(&self, id: &str) -> Result<Option<Versioned>, StoreError> {
        let key = self.key(id);
        let mut cmd = redis::cmd(if self.ttl.is_some() { "GETEX" } else { "GET" });
        cmd.arg(&key);
        if self.ttl.is_some() {
            cmd.arg("EX").arg(self.ttl_secs());
        }
        let value = match self.query(&cmd).await.map_err(backend)? {
            Value::Nil => None,
            Value::BulkString(v) => Some(parse_value(&key, &v)?),
            other => {
                return Err(StoreError::backend(format!(
                    "redis: unexpected reply to reading `{key}`: {other:?}"
                )))
            }
        };
        self.cache.put(id, value.clone());
        Ok(value)
    }

    /// `SCAN` of the namespace's keys: on one server, or on each shard's primary of a
    /// cluster (a shard moving during the scan may be missed or seen twice: ids are
    /// deduplicated).
    async fn ids(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = match &self.conn {
            Conn::Single(_) => self.scan_node(None).await?,
            Conn::Cluster(_) => {
                let mut ids = Vec::new();
                for slot in self.shards().await? {
                    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                        Route::new(slot, SlotAddr::Master),
                    ));
                    ids.extend(self.scan_node(Some(route)).await?);
                }
                ids
            }
        };
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// Plain `GET`s (no `EX`: a look is not a use), 256 in flight at a time on the
    /// multiplexed connection.
    async fn peek(&self, ids: &[String]) -> Result<Vec<Option<Versioned>>, StoreError> {
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(256) {
            let reads = chunk.iter().map(|id| async move {
                let key = self.key(id);
                match self
                    .query(redis::cmd("GET").arg(&key))
                    .await
                    .map_err(backend)?
                {
                    Value::Nil => Ok(None),
                    Value::BulkString(v) => parse_value(&key, &v).map(Some),
                    other => Err(StoreError::backend(format!(
                        "redis: unexpected reply to reading `{key}`: {other:?}"
                    ))),
                }
            });
            found.extend(futures_util::future::try_join_all(reads).await?);
        }
        Ok(found)
    }

    async fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Option<u64>, StoreError> {
        let (expected, new) = match expected {
            Some(v) => (prefix(v), v.wrapping_add(1)),
            None => (String::new(), fresh_version()),
        };
        Ok(match self.cas(id, &expected, new, &bytes).await? {
            None => Some(new),
            Some(_) => None,
        })
    }

    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, StoreError> {
        let new = fresh_version();
        self.cas(id, "*", new, &bytes).await?;
        Ok(new)
    }

    fn cached(&self, id: &str) -> Option<Versioned> {
        self.cache.get(id)
    }

    /// The optimistic update, with this instance's own tasks taking turns per session
    /// first (see [`RedisStore`]).
    async fn update_with_limit<M, R>(
        &self,
        id: &str,
        max_attempts: u32,
        change: impl FnMut(&mut orch_runtime::Session<M>) -> R + Send,
    ) -> Result<crate::Updated<M, R>, StoreError>
    where
        M: orch_runtime::Machine,
        R: Send,
    {
        let lock = self.turns.lock_for(id);
        let result = {
            // A task that had to wait for its turn reads first: the session is busy, and
            // going at once with the version this instance just wrote would keep
            // winning against other instances (whose retries arrive later) and starve
            // them. An update with no queue is one round trip.
            let (turn, waited) = match lock.try_lock() {
                Ok(turn) => (turn, false),
                Err(_) => (lock.lock().await, true),
            };
            let result = crate::update_loop(self, id, max_attempts, !waited, change).await;
            drop(turn);
            result
        };
        self.turns.release(id, lock);
        result
    }

    /// A short random pause (up to 25 µs × the attempt, at most 400 µs). A conflict's
    /// reply already carries the current value, so the retry is as fresh as a read: a
    /// long backoff would only hand the session to the instance that just wrote it
    /// (whose next task goes at once) and starve the others.
    async fn backoff(&self, attempt: u32) {
        let base = 25u64 * u64::from(attempt.clamp(1, 16));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut x = u64::from(nanos) ^ (u64::from(attempt) << 32) ^ 0x9e37_79b9_7f4a_7c15;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        tokio::time::sleep(Duration::from_micros(x % base)).await;
    }

    async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        self.cache.put(id, None);
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.key(id));
        match self.query(&cmd).await.map_err(|e| written(id, e))? {
            Value::Int(n) => Ok(n > 0),
            other => Err(StoreError::backend(format!(
                "redis: unexpected reply to DEL: {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_match_redis() {
        // `CLUSTER KEYSLOT` of a real server.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"{}x"), 10595);
        assert_eq!(slot(b"user1000"), 3443);
    }

    #[test]
    fn fresh_versions_differ_and_count_from_one() {
        let a = fresh_version();
        let b = fresh_version();
        assert_ne!(a, b);
        assert_eq!(a & 0xffff_ffff, 1);
    }
}
