//! Decision records kept in a store (feature `store`): [`StoreLog`] is a
//! [`DecisionSink`] that writes each record of an auditor under its own key,
//! `PREFIX:SEQ` (the sequence number zero-padded to 20 digits), in any
//! [`SessionStore`] — memory, Redis, a Redis Cluster — and [`read_log`] reads a log
//! back, in order, as JSON lines `orch audit verify` and `orch replay` take.
//!
//! Writes happen on a task of their own, so an auditor never waits for the store; they
//! are retried three times, and a record that still cannot be written is reported on
//! stderr. A log ends at its first missing record: give each writer (each gateway
//! instance) its own prefix, as numbering is per auditor.

use super::{CheckpointRecord, DecisionRecord, DecisionSink};
use orch_store::{SessionStore, StoreError};
use std::sync::Arc;
use tokio::sync::mpsc;

/// How many records may wait for the store before `write` says the log is behind.
pub const QUEUE: usize = 65_536;

/// A decision sink writing to a store (see the module docs).
pub struct StoreLog {
    /// Each line's number and JSON.
    queue: mpsc::Sender<(u64, String)>,
}

impl StoreLog {
    /// A sink writing under `prefix` in `store`, and the task that writes (spawn on the
    /// current tokio runtime; it ends once the sink is dropped and every queued record
    /// was written).
    pub fn spawn<S: SessionStore + 'static>(
        store: Arc<S>,
        prefix: impl Into<String>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (queue, mut records) = mpsc::channel::<(u64, String)>(QUEUE);
        let prefix = prefix.into();
        let task = tokio::spawn(async move {
            while let Some((seq, json)) = records.recv().await {
                let key = key(&prefix, seq);
                let bytes = json.into_bytes();
                let mut last = None;
                for attempt in 0..3u64 {
                    match store.store(&key, bytes.clone()).await {
                        Ok(_) => {
                            last = None;
                            break;
                        }
                        Err(e) => {
                            last = Some(e);
                            tokio::time::sleep(std::time::Duration::from_millis(50 << attempt))
                                .await;
                        }
                    }
                }
                if let Some(e) = last {
                    orch_runtime::eprintln_printable!(
                        "orch: warning: decision record `{key}` could not be written: {e}"
                    );
                }
            }
        });
        (StoreLog { queue }, task)
    }
}

impl StoreLog {
    fn queue(&self, seq: u64, json: String) -> Result<(), String> {
        self.queue.try_send((seq, json)).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                format!("the store is {QUEUE} records behind; this record is lost")
            }
            mpsc::error::TrySendError::Closed(_) => "the store's writer has stopped".into(),
        })
    }
}

impl DecisionSink for StoreLog {
    fn write(&self, record: &DecisionRecord) -> Result<(), String> {
        self.queue(record.seq, record.to_json())
    }

    /// A signed checkpoint goes under its own number like a record.
    fn write_checkpoint(&self, checkpoint: &CheckpointRecord) -> Result<(), String> {
        self.queue(checkpoint.seq, checkpoint.to_json())
    }
}

fn key(prefix: &str, seq: u64) -> String {
    format!("{prefix}:{seq:020}")
}

/// The log under `prefix`, from record 1 to the first missing one, as JSON lines.
pub async fn read_log<S: SessionStore>(store: &S, prefix: &str) -> Result<String, StoreError> {
    let mut out = String::new();
    for seq in 1.. {
        let Some(v) = store.load(&key(prefix, seq)).await? else {
            break;
        };
        out.push_str(&String::from_utf8_lossy(&v.bytes));
        out.push('\n');
    }
    Ok(out)
}
