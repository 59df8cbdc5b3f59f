//! MemoryStore: round trips, compare-and-set, TTL from last access (with a manual
//! clock), LRU eviction, and no lost updates under 16 concurrent writers.

mod common;

use common::{Machine, Session, Tool};
use orch_store::{MemoryStore, SessionStore, StoreError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn manual_clock() -> (Arc<AtomicU64>, orch_store::MemoryStoreBuilder) {
    let now = Arc::new(AtomicU64::new(0));
    let n = now.clone();
    (
        now,
        MemoryStore::builder().clock(Arc::new(move || {
            Duration::from_secs(n.load(Ordering::SeqCst))
        })),
    )
}

#[tokio::test]
async fn the_store_contract() {
    common::store_contract(&MemoryStore::new()).await;
}

#[tokio::test]
async fn ttl_counts_from_last_access() {
    let (now, builder) = manual_clock();
    let store = builder.ttl(Duration::from_secs(60)).build();
    store.put("a", &Session::new()).await.unwrap();
    store.put("b", &Session::new()).await.unwrap();
    now.store(50, Ordering::SeqCst);
    assert!(
        store.get::<Machine>("a").await.unwrap().is_some(),
        "a accessed at 50"
    );
    now.store(100, Ordering::SeqCst);
    assert!(
        store.get::<Machine>("b").await.unwrap().is_none(),
        "b expired at 60"
    );
    assert!(
        store.get::<Machine>("a").await.unwrap().is_some(),
        "a lives until 110"
    );
    now.store(200, Ordering::SeqCst);
    assert_eq!(
        store.len(),
        0,
        "expired entries are dropped without a background thread"
    );
}

#[tokio::test]
async fn lru_eviction_at_the_maximum() {
    let store = MemoryStore::builder().max_sessions(3).no_ttl().build();
    for id in ["a", "b", "c"] {
        store.put(id, &Session::new()).await.unwrap();
    }
    store.get::<Machine>("a").await.unwrap(); // a is now the most recently used
    store.put("d", &Session::new()).await.unwrap();
    assert_eq!(store.len(), 3);
    assert!(
        store.get::<Machine>("b").await.unwrap().is_none(),
        "b was the least recently used"
    );
    for id in ["a", "c", "d"] {
        assert!(store.get::<Machine>(id).await.unwrap().is_some(), "{id}");
    }
}

#[tokio::test]
async fn corrupt_data_is_an_error_not_a_panic() {
    let store = MemoryStore::new();
    store
        .store("bad", b"not a snapshot".to_vec())
        .await
        .unwrap();
    let err = store.get::<Machine>("bad").await.unwrap_err();
    assert!(matches!(err, StoreError::Snapshot { .. }), "{err}");
    assert!(
        err.to_string().contains("session `bad` cannot be restored"),
        "{err}"
    );
    let err = store.update::<Machine, _>("bad", |_| ()).await.unwrap_err();
    assert!(matches!(err, StoreError::Snapshot { .. }));
}

/// A store where every compare-and-set loses (another writer always got there first).
struct AlwaysConflicting(MemoryStore);

impl SessionStore for AlwaysConflicting {
    async fn load(&self, id: &str) -> Result<Option<orch_store::Versioned>, StoreError> {
        self.0.load(id).await
    }
    async fn compare_and_set(
        &self,
        _: &str,
        _: Option<u64>,
        _: Vec<u8>,
    ) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }
    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, StoreError> {
        self.0.store(id, bytes).await
    }
    async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        self.0.remove(id).await
    }
}

#[tokio::test]
async fn bounded_retries_give_a_clear_error() {
    let store = AlwaysConflicting(MemoryStore::new());
    let mut calls = 0;
    let err = store
        .update_with_limit::<Machine, _>("hot", 3, |s| {
            calls += 1;
            s.record(Tool::T00);
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "could not update session `hot`: 3 attempts conflicted with concurrent updates"
    );
    assert_eq!(calls, 3, "one change per attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_lost_updates_with_16_writers() {
    common::no_lost_updates(vec![Arc::new(MemoryStore::new())], "shared").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_time_sessions_update_through_the_one_loop() {
    let template = r#"{"name": "dyn", "tools": ["a", "b"],
        "orchestration": {"steps": [{"name": "S", "isDefault": true}]}}"#;
    let machine = Arc::new(
        orch_codegen::compile_json(template, None)
            .to_machine()
            .expect("a machine"),
    );
    let store = Arc::new(orch_store::MemoryStore::new());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (machine, store) = (Arc::clone(&machine), Arc::clone(&store));
            tokio::spawn(async move {
                for _ in 0..25 {
                    store
                        .update_dyn(&machine, "run", |s| s.record_usage(1, 0))
                        .await
                        .expect("updated");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("a task");
    }
    let done = store
        .update_dyn(&machine, "run", |s| s.usage().prompt)
        .await
        .expect("read");
    assert_eq!(done.value, 200, "no update lost");
    assert_eq!(done.session.usage().prompt, 200);
}

#[tokio::test]
async fn modify_decides_to_keep_only_on_what_it_read() {
    use orch_store::{modify, Change, Versioned};
    let store = orch_store::MemoryStore::new();
    let v1 = store.store("k", b"stored".to_vec()).await.unwrap();
    // A stale belief: the first look keeps, so it reads and looks again.
    let stale = Versioned {
        bytes: b"believed".to_vec(),
        version: v1 + 100,
    };
    let mut seen = Vec::new();
    let done = modify(&store, "k", 5, Some(stale), |current| {
        seen.push(current.map(|v| v.bytes.clone()));
        Ok::<_, ()>(Change::Keep(current.map(|v| v.bytes.clone())))
    })
    .await
    .unwrap();
    assert_eq!(seen, [Some(b"believed".to_vec()), Some(b"stored".to_vec())]);
    assert_eq!(done.value, Some(b"stored".to_vec()));
    assert!(done.written.is_none());
    // A write against a stale version conflicts, then succeeds on what it read.
    let stale = Versioned {
        bytes: b"old".to_vec(),
        version: v1 + 100,
    };
    let done = modify(&store, "k", 5, Some(stale), |_| {
        Ok::<_, ()>(Change::Write(b"new".to_vec(), ()))
    })
    .await
    .unwrap();
    assert_eq!(done.attempts, 2);
    assert_eq!(store.load("k").await.unwrap().unwrap().bytes, b"new");
    // The change's own error stops the loop.
    let err = modify(&store, "k", 5, None, |_| Err::<Change<()>, _>("no"))
        .await
        .unwrap_err();
    assert!(matches!(err, orch_store::ModifyError::Change("no")));
}
