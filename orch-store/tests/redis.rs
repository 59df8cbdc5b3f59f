//! RedisStore against a real `redis-server` started on a free loopback port: round
//! trips, namespaces, TTL with EX, compare-and-set, no lost updates under 16 concurrent
//! writers, a session that survives from one store instance (server) to another, and a
//! missing server reported as an error.

mod common;

use common::{Machine, RedisServer, Session, Tool};
use orch_store::{RedisStore, SessionStore, StoreError};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_store_against_a_real_server() {
    let Some(server) = RedisServer::start() else {
        return;
    };

    // Round trip, compare-and-set, delete, versions.
    let store = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("t1");
    common::store_contract(&store).await;

    // Namespaces keep stores apart.
    let other_ns = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("t2");
    assert!(other_ns.get::<Machine>("a").await.unwrap().is_none());

    // Two store instances (two servers) share sessions.
    let server_a = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("shared");
    let server_b = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("shared");
    server_a
        .update::<Machine, _>("chat-1", |s| {
            s.on_user_message("research the topic");
            s.record(Tool::Search)
        })
        .await
        .unwrap();
    let continued = server_b
        .update::<Machine, _>("chat-1", |s| s.record(Tool::Think))
        .await
        .unwrap();
    assert_eq!(
        continued.value,
        orch_runtime::Outcome::Completed,
        "server B continued server A's sequence"
    );
    assert_eq!(
        server_a
            .get::<Machine>("chat-1")
            .await
            .unwrap()
            .unwrap()
            .session
            .sequence_index(),
        2
    );

    // TTL with EX, refreshed on access.
    let short = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("ttl")
        .ttl(Some(Duration::from_secs(1)));
    short.put("brief", &Session::new()).await.unwrap();
    let mut conn = redis::Client::open(server.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let ttl: i64 = redis::cmd("TTL")
        .arg("ttl:session:brief")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((0..=1).contains(&ttl), "EX set: {ttl}");
    let none: i64 = redis::cmd("TTL")
        .arg("shared:session:chat-1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(none > 1000, "default TTL is 30 minutes: {none}");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(
        short.get::<Machine>("brief").await.unwrap().is_none(),
        "expired"
    );

    // Delete.
    assert!(store.delete("a").await.unwrap());
    assert!(!store.delete("a").await.unwrap());

    // Foreign data under our key is an error, not a panic.
    let _: () = redis::cmd("SET")
        .arg("t1:session:junk")
        .arg("hello")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        store.get::<Machine>("junk").await,
        Err(StoreError::Backend(_))
    ));

    // No lost updates.
    let store = Arc::new(
        RedisStore::connect(&server.url)
            .await
            .unwrap()
            .namespace("hammer"),
    );
    common::no_lost_updates(store, "shared").await;
}

#[tokio::test]
async fn a_missing_server_is_an_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = match RedisStore::connect(&format!("redis://127.0.0.1:{port}/")).await {
        Err(e) => e,
        Ok(_) => panic!("connected to a port nobody listens on"),
    };
    assert!(matches!(err, StoreError::Backend(_)));
    assert!(err.to_string().contains("redis"), "{err}");
    assert!(matches!(
        RedisStore::connect("not a url").await,
        Err(StoreError::Backend(_))
    ));
}
