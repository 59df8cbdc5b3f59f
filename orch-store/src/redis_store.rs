//! A Redis-backed store (feature `redis`): namespaced keys, TTL with `EX` (refreshed on
//! every access), and compare-and-set as a Lua script, so concurrent servers never lose
//! each other's updates.

use crate::{SessionStore, StoreError, Versioned};
use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Script};
use std::time::Duration;

/// Width of the decimal version prefix of every stored value.
const VERSION_WIDTH: usize = 20;

/// Compare-and-set. KEYS[1] the session, KEYS[2] the namespace's version counter.
/// ARGV[1]: the expected version prefix, `""` for "must not exist", `"*"` for "any";
/// ARGV[2]: the snapshot bytes; ARGV[3]: TTL in seconds (0: none).
/// Returns the new version, or 0 on a conflict.
const CAS: &str = r"
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  if cur then return 0 end
elseif ARGV[1] ~= '*' then
  if (not cur) or string.sub(cur, 1, 20) ~= ARGV[1] then return 0 end
end
local v = redis.call('INCR', KEYS[2])
local value = string.format('%020d', v) .. ARGV[2]
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('SET', KEYS[1], value, 'EX', ttl)
else
  redis.call('SET', KEYS[1], value)
end
return v
";

/// Sessions in Redis, shared by every server that uses the same namespace.
///
/// ```no_run
/// # async fn f() -> Result<(), orch_store::StoreError> {
/// use std::time::Duration;
/// let store = orch_store::RedisStore::connect("redis://127.0.0.1:6379/")
///     .await?
///     .namespace("my-agent")
///     .ttl(Some(Duration::from_secs(3600)));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    namespace: String,
    ttl: Option<Duration>,
    cas: Script,
}

fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend(format!("redis: {e}"))
}

/// The error of a write: when the command may have reached the server (no answer in
/// time, the connection dropped while waiting), its outcome is unknown; when it
/// certainly did not (refused, could not connect) or the server answered with an
/// error, nothing was written.
fn written(id: &str, e: redis::RedisError) -> StoreError {
    if e.is_timeout()
        || e.is_connection_dropped()
        || (e.is_io_error() && !e.is_connection_refusal())
    {
        StoreError::OutcomeUnknown {
            id: id.to_owned(),
            why: format!("redis: {e}"),
        }
    } else {
        backend(e)
    }
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
        Ok(RedisStore {
            conn,
            namespace: "orch".to_owned(),
            ttl: Some(Duration::from_secs(30 * 60)),
            cas: Script::new(CAS),
        })
    }

    /// Keys are `<namespace>:session:<id>`.
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

    fn key(&self, id: &str) -> String {
        format!("{}:session:{id}", self.namespace)
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl.map_or(0, |t| t.as_secs().max(1))
    }

    async fn cas(&self, id: &str, expected: &str, bytes: Vec<u8>) -> Result<u64, StoreError> {
        let mut conn = self.conn.clone();
        self.cas
            .key(self.key(id))
            .key(format!("{}:version", self.namespace))
            .arg(expected)
            .arg(bytes)
            .arg(self.ttl_secs())
            .invoke_async(&mut conn)
            .await
            .map_err(|e| written(id, e))
    }
}

impl SessionStore for RedisStore {
    async fn load(&self, id: &str) -> Result<Option<Versioned>, StoreError> {
        let mut conn = self.conn.clone();
        let key = self.key(id);
        let value: Option<Vec<u8>> = match self.ttl_secs() {
            0 => conn.get(&key).await,
            secs => conn.get_ex(&key, redis::Expiry::EX(secs)).await,
        }
        .map_err(backend)?;
        let Some(value) = value else { return Ok(None) };
        let version = value
            .get(..VERSION_WIDTH)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                StoreError::Backend(format!(
                    "redis: the value of `{key}` is not an orch session"
                ))
            })?;
        Ok(Some(Versioned {
            bytes: value[VERSION_WIDTH..].to_vec(),
            version,
        }))
    }

    async fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Option<u64>, StoreError> {
        let expected = expected.map_or_else(String::new, |v| format!("{v:020}"));
        let v = self.cas(id, &expected, bytes).await?;
        Ok((v != 0).then_some(v))
    }

    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, StoreError> {
        self.cas(id, "*", bytes).await
    }

    /// Exponential backoff with jitter (50 µs doubling to about 3 ms), so that many
    /// servers updating one session do not keep colliding.
    async fn backoff(&self, attempt: u32) {
        let base = 50u64 << attempt.min(6);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut x = u64::from(nanos) ^ (u64::from(attempt) << 32) ^ 0x9e37_79b9_7f4a_7c15;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        tokio::time::sleep(Duration::from_micros(base / 2 + x % base)).await;
    }

    async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let n: u64 = conn.del(self.key(id)).await.map_err(backend)?;
        Ok(n > 0)
    }
}
