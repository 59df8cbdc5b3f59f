//! RedisStore against a real `redis-server` started on a free loopback port: round
//! trips, namespaces, TTL with EX, compare-and-set, no lost updates under 16 concurrent
//! writers, a session that survives from one store instance (server) to another, and a
//! missing server reported as an error.

mod common;

use common::{Machine, RedisServer, Session, Tool};
use orch_store::{RedisStore, SessionStore, StoreError};
use std::sync::Arc;
use std::time::Duration;

#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn redis_store_against_a_real_server() {
    let server = RedisServer::start();

    // Round trip, compare-and-set, delete, versions.
    let store = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("t1");
    common::store_contract(&store).await;

    // A namespace's listing is its own, even when its name is a glob pattern that
    // another namespace's keys would match.
    let globbed = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("g*?");
    let matching = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("g*x");
    globbed.store("mine", vec![1]).await.unwrap();
    matching.store("theirs", vec![2]).await.unwrap();
    assert_eq!(globbed.ids().await.unwrap(), vec!["mine".to_owned()]);
    assert_eq!(matching.ids().await.unwrap(), vec!["theirs".to_owned()]);

    // Namespaces keep stores apart.
    let other_ns = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("t2");
    assert!(other_ns.get::<Machine>("a").await.unwrap().is_none());

    // No namespace and id make another's key: `a` + `b:session:c` and `a:session:b` +
    // `c` were both `a:session:b:session:c` once.
    let plain = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("a");
    let colons = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("a:session:b");
    plain.store("b:session:c", b"plain".to_vec()).await.unwrap();
    assert!(colons.load("c").await.unwrap().is_none());
    colons.store("c", b"colons".to_vec()).await.unwrap();
    assert_eq!(
        plain.load("b:session:c").await.unwrap().unwrap().bytes,
        b"plain"
    );
    assert_eq!(colons.load("c").await.unwrap().unwrap().bytes, b"colons");
    let percent = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("a%3Asession%3Ab");
    assert!(percent.load("c").await.unwrap().is_none());

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

    // A server without replicas cannot confirm `WAIT 1`: the write is applied, and the
    // update says it may not be durable instead of succeeding silently.
    let durable = RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("durable")
        .wait_for_replicas(1, Duration::from_millis(50));
    match durable
        .update::<Machine, _>("d", |s| s.record(Tool::Search))
        .await
    {
        Err(StoreError::NotDurable {
            id,
            replicas: 0,
            wanted: 1,
            ..
        }) => assert_eq!(id, "d"),
        other => panic!("expected NotDurable, got {other:?}"),
    }
    let err = durable
        .put("d", &Session::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("may not be durable"), "{err}");
    assert!(
        durable.get::<Machine>("d").await.unwrap().is_some(),
        "the write itself was applied"
    );

    // Foreign data under our key is an error, not a panic.
    let _: () = redis::cmd("SET")
        .arg("t1:session:junk")
        .arg("hello")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        store.get::<Machine>("junk").await,
        Err(StoreError::Backend { .. })
    ));

    // No lost updates: 16 tasks through 4 store instances (as 4 servers would), so
    // instances meet in the compare-and-set and tasks of one instance take turns.
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(Arc::new(
            RedisStore::connect(&server.url)
                .await
                .unwrap()
                .namespace("hammer"),
        ));
    }
    common::no_lost_updates(stores, "shared").await;
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
    assert!(matches!(err, StoreError::Backend { .. }));
    assert!(err.to_string().contains("redis"), "{err}");
    assert!(matches!(
        RedisStore::connect("not a url").await,
        Err(StoreError::Backend { .. })
    ));
}

/// A write sent while the server stalls: the answer does not come in time, so the
/// store cannot know whether it was applied — and it was. The error must say the
/// outcome is unknown, not that the update failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn a_write_whose_answer_never_came_is_reported_as_unknown_not_failed() {
    let server = RedisServer::start();
    let store = RedisStore::connect_with_timeouts(
        &server.url,
        Duration::from_secs(2),
        Duration::from_millis(300),
    )
    .await
    .unwrap()
    .namespace("stall");
    store.put("s", &Session::new()).await.unwrap();
    let before = store.load("s").await.unwrap().unwrap();
    let mut admin = redis::Client::open(server.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Every other client waits 1.5 s for its next command.
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("ALL")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    let bytes = Session::new().snapshot().to_bytes();
    let err = store
        .compare_and_set("s", Some(before.version), bytes)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::OutcomeUnknown { .. }), "{err}");
    assert!(
        err.to_string().contains("may or may not have been applied"),
        "{err}"
    );
    // Once the server goes on, the write turns out to have been applied.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let mut after = None;
    for _ in 0..3 {
        match store.load("s").await {
            Ok(v) => {
                after = v;
                break;
            }
            // The connection that timed out may be re-established first.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let after = after.expect("the session is there");
    assert_ne!(
        after.version, before.version,
        "the unconfirmed write was applied"
    );

    // The server goes away. A write on the connection that was open may have been
    // sent in part (unknown); once the connection is refused, nothing can have been
    // sent, and that is a plain failure.
    drop(server);
    let mut refused = false;
    for _ in 0..5 {
        match store
            .compare_and_set("s", Some(after.version), Vec::new())
            .await
            .unwrap_err()
        {
            StoreError::Backend { .. } => {
                refused = true;
                break;
            }
            StoreError::OutcomeUnknown { .. } => {}
            other => panic!("{other}"),
        }
    }
    assert!(refused, "a refused connection is reported as a failure");
}

/// The bus: what one publishes after others subscribed reaches each of them, in order,
/// and only the subscribers of its channel; a subscriber's receiver ends when its
/// connection is lost; a missing server is an error, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn a_bus_reaches_every_subscriber_of_its_channel() {
    let server = RedisServer::start();
    let a = orch_store::RedisBus::connect(&server.url, "deploy:bus")
        .await
        .unwrap();
    let b = orch_store::RedisBus::connect(&server.url, "deploy:bus")
        .await
        .unwrap();
    let other = orch_store::RedisBus::connect(&server.url, "other:bus")
        .await
        .unwrap();
    assert_eq!(a.channel(), "deploy:bus");
    let mut to_a = a.subscribe().await.unwrap();
    let mut to_b = b.subscribe().await.unwrap();
    let mut to_other = other.subscribe().await.unwrap();
    assert_eq!(
        a.publish(b"one").await.unwrap(),
        2,
        "both subscribers of the channel"
    );
    b.publish(b"two").await.unwrap();
    for rx in [&mut to_a, &mut to_b] {
        let first = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        let second = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        assert_eq!(
            (first.as_deref(), second.as_deref()),
            (Some(&b"one"[..]), Some(&b"two"[..]))
        );
    }
    other.publish(b"elsewhere").await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), to_other.recv())
        .await
        .unwrap();
    assert_eq!(got.as_deref(), Some(&b"elsewhere"[..]));
    assert!(
        to_a.try_recv().is_err(),
        "another channel's message reached this one"
    );

    // The server goes away: the subscriptions end (to be made again by their owner).
    drop(server);
    let ended = tokio::time::timeout(Duration::from_secs(10), to_a.recv())
        .await
        .unwrap();
    assert_eq!(ended, None);

    // No server: an error within the connection limit.
    let missing = tokio::time::timeout(
        Duration::from_secs(10),
        orch_store::RedisBus::connect("redis://127.0.0.1:1/", "x"),
    )
    .await
    .expect("no hang");
    assert!(missing.is_err());
}
