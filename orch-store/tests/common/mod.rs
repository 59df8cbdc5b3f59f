//! Shared by the store tests: a machine, the concurrency check, and a real
//! `redis-server` started on a free loopback port.
#![allow(dead_code, unused_imports)]

pub use orch_test_support::cluster;

use orch_store::SessionStore;
use std::sync::Arc;

orch_macros::orchestration! {
    pub machine "store-test" {
        tools: [t00, t01, t02, t03, t04, t05, t06, t07, t08, t09, t10, t11, t12, t13, t14, t15, search, think];
        history: 50;
        default step Idle;
        step Research {
            when message_contains("research");
            sequence: [search, think];
            allow: [search, think];
        }
    }
}

pub use store_test::{Machine, Session, Tool};

pub const TASKS: usize = 16;
pub const RECORDS: usize = 500;

/// 16 tasks each record 500 tool uses and usage on one session through `update`, task
/// `i` through `stores[i % stores.len()]` (several instances stand for several servers,
/// which only the compare-and-set keeps apart); afterwards every count is exact.
pub async fn no_lost_updates<S: SessionStore + 'static>(stores: Vec<Arc<S>>, id: &str) {
    let store = stores[0].clone();
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let store = stores[task % stores.len()].clone();
        let id = id.to_owned();
        handles.push(tokio::spawn(async move {
            let tool = Tool::ALL[task];
            for _ in 0..RECORDS {
                store
                    .update::<Machine, _>(&id, |s| {
                        s.record(tool);
                        s.record_usage(1, 2);
                    })
                    .await
                    .expect("update");
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let loaded = store.get::<Machine>(id).await.unwrap().expect("stored");
    let s = loaded.session;
    let total = (TASKS * RECORDS) as u64;
    assert_eq!(s.usage().prompt, total, "every usage update landed");
    assert_eq!(s.usage().completion, 2 * total);
    assert_eq!(
        s.used().len(),
        TASKS,
        "every task's tool is in the used set"
    );
    assert_eq!(s.history().count(), 50, "the history is full (H = 50)");
}

/// The contract every store keeps: round trip by names, compare-and-set (exists,
/// stale, current), delete, and versions that are never reused. Leaves session `a`
/// stored.
pub async fn store_contract<S: SessionStore>(store: &S) {
    assert!(store.get::<Machine>("a").await.unwrap().is_none());
    let mut s = Session::new();
    s.on_user_message("research");
    s.record(Tool::Search);
    let v1 = store.put("a", &s).await.unwrap();
    let loaded = store.get::<Machine>("a").await.unwrap().unwrap();
    assert_eq!(loaded.session, s);
    assert_eq!(loaded.version, v1);
    assert!(loaded.report.is_exact());

    let v = store
        .compare_and_set("x", None, vec![1])
        .await
        .unwrap()
        .expect("created");
    assert_eq!(
        store.compare_and_set("x", None, vec![2]).await.unwrap(),
        None,
        "exists"
    );
    assert_eq!(
        store
            .compare_and_set("x", Some(v + 1), vec![2])
            .await
            .unwrap(),
        None,
        "stale"
    );
    assert!(store
        .compare_and_set("x", Some(v), vec![3])
        .await
        .unwrap()
        .is_some());
    assert_eq!(store.load("x").await.unwrap().unwrap().bytes, vec![3]);

    assert!(store.delete("a").await.unwrap());
    assert!(!store.delete("a").await.unwrap());
    assert!(store.get::<Machine>("a").await.unwrap().is_none());
    // Versions are never reused, even after a delete: a writer still holding the old
    // version cannot overwrite the re-created session.
    let v2 = store.put("a", &s).await.unwrap();
    assert_ne!(v2, v1);
    assert_eq!(
        store.compare_and_set("a", Some(v1), vec![9]).await.unwrap(),
        None,
        "an old writer after delete and re-create"
    );
    listing_contract(store).await;
}

/// Listing: every stored id is found (glob characters and colons included), values are
/// peeked in order without a version change, and a removed id is gone.
async fn listing_contract<S: SessionStore>(store: &S) {
    let odd = ["run:b*?[x]\\", "run:c:d", "run:é"];
    for (i, id) in odd.iter().enumerate() {
        store
            .store(id, vec![u8::try_from(i).unwrap()])
            .await
            .unwrap();
    }
    let ids = store.ids().await.unwrap();
    for id in odd.iter().chain(&["a", "x"]) {
        assert!(
            ids.iter().any(|found| found == id),
            "{id} listed in {ids:?}"
        );
    }
    let before = store.load("x").await.unwrap().unwrap().version;
    let asked: Vec<String> = ["x", "nothing here", "run:c:d"].map(String::from).to_vec();
    let peeked = store.peek(&asked).await.unwrap();
    assert_eq!(peeked.len(), 3);
    assert_eq!(peeked[0].as_ref().unwrap().bytes, vec![3]);
    assert_eq!(peeked[0].as_ref().unwrap().version, before);
    assert!(peeked[1].is_none());
    assert_eq!(peeked[2].as_ref().unwrap().bytes, vec![1]);
    for id in odd {
        assert!(store.remove(id).await.unwrap());
    }
    let ids = store.ids().await.unwrap();
    assert!(odd.iter().all(|id| !ids.iter().any(|f| f == id)), "{ids:?}");
}

pub use orch_test_support::redis::RedisServer;
