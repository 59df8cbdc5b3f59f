//! A message bus over Redis `PUBLISH`/`SUBSCRIBE`: how processes that share one Redis
//! (gateway instances behind a load balancer) reach each other.
//!
//! Every message published on a bus's channel reaches every subscriber of that channel
//! at that moment, at most once; a subscriber that is not connected misses it (Redis
//! keeps no pub/sub history). On a Redis Cluster, `PUBLISH` on any node reaches the
//! subscribers of every node, so one node serves the whole bus.

use crate::StoreError;
use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use std::time::Duration;

/// How many received messages wait for their reader before the oldest are dropped.
const BACKLOG: usize = 1_024;

/// A channel on a Redis server that processes publish to and subscribe to.
///
/// ```no_run
/// # async fn f() -> Result<(), orch_store::StoreError> {
/// let bus = orch_store::RedisBus::connect("redis://127.0.0.1:6379/", "my-agent:bus").await?;
/// let mut messages = bus.subscribe().await?;
/// bus.publish(b"hello").await?;
/// assert_eq!(messages.recv().await.as_deref(), Some(&b"hello"[..]));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisBus {
    client: redis::Client,
    publisher: ConnectionManager,
    channel: String,
    connect_timeout: Duration,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl RedisBus {
    /// Connects to the server at `url` (`redis://host:port/db`; on a Redis Cluster, any
    /// one node) for the bus `channel`. A server that cannot be reached is an error
    /// within two seconds, not a hang.
    pub async fn connect(url: &str, channel: &str) -> Result<Self, StoreError> {
        let connect_timeout = Duration::from_secs(2);
        let client = redis::Client::open(url).map_err(backend)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(connect_timeout)
            .set_response_timeout(Duration::from_secs(5))
            .set_number_of_retries(1);
        let publisher = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(backend)?;
        Ok(RedisBus {
            client,
            publisher,
            channel: channel.to_owned(),
            connect_timeout,
        })
    }

    /// The channel's name.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Publishes `message`; returns how many subscribers received it (on a cluster, the
    /// subscribers of the node published to).
    pub async fn publish(&self, message: &[u8]) -> Result<u64, StoreError> {
        redis::cmd("PUBLISH")
            .arg(&self.channel)
            .arg(message)
            .query_async(&mut self.publisher.clone())
            .await
            .map_err(backend)
    }

    /// Subscribes on a connection of its own: every message published after this
    /// returns arrives on the receiver, in the order the server relayed them. The
    /// receiver ends when the connection is lost (subscribe again to go on; what was
    /// published meanwhile is missed). A reader that falls more than 1,024 messages
    /// behind loses the newest.
    pub async fn subscribe(&self) -> Result<tokio::sync::mpsc::Receiver<Vec<u8>>, StoreError> {
        let subscribed = async {
            let mut pubsub = self.client.get_async_pubsub().await.map_err(backend)?;
            pubsub.subscribe(&self.channel).await.map_err(backend)?;
            Ok::<_, StoreError>(pubsub)
        };
        let pubsub = tokio::time::timeout(self.connect_timeout, subscribed)
            .await
            .map_err(|_| {
                StoreError::backend(format!(
                    "redis: no subscription to `{}` within {} s",
                    self.channel,
                    self.connect_timeout.as_secs_f64()
                ))
            })??;
        let (tx, rx) = tokio::sync::mpsc::channel(BACKLOG);
        let mut messages = pubsub.into_on_message();
        tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                let Ok(payload) = message.get_payload::<Vec<u8>>() else {
                    continue;
                };
                match tx.try_send(payload) {
                    Ok(()) | Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {}
                    Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return,
                }
            }
        });
        Ok(rx)
    }
}

fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend {
        why: format!("redis: {e}"),
        source: Some(Box::new(e)),
    }
}
