//! Decision records kept in a store (`orch_agent::audit::store::StoreLog`): written by an
//! audited policy, read back in order, the chain verifies and the events replay — in
//! memory and in a real `redis-server`.

use orch_agent::audit::store::{read_log, StoreLog};
use orch_agent::audit::{replay, verify_chain, Auditor};
use orch_agent::Policy;
use orch_runtime::Call;
use orch_store::{MemoryStore, SessionStore};
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../../examples/agents/refund-desk/template.json");

/// Writes 9 records of a refund with an approval under `prefix`, then reads them back.
async fn round_trip<S: SessionStore + 'static>(store: Arc<S>, prefix: &str) -> String {
    let machine = orch_codegen::compile_json(TEMPLATE, None)
        .to_machine()
        .unwrap();
    let (sink, writer) = StoreLog::spawn(Arc::clone(&store), prefix);
    {
        let auditor = Auditor::new(sink, "run-1").chained();
        let policy =
            Policy::new(["lookup_order", "issue_refund", "send_email"]).audited(Arc::new(auditor));
        let mut s = machine.session();
        policy.prepare(&mut s);
        policy.message(&mut s, "refund A-1");
        let lookup = Call::of_text("lookup_order", "{}");
        policy.admit_call(&mut s, "lookup_order", &lookup).unwrap();
        policy.record(&mut s, "lookup_order");
        let refund = Call::of_text("issue_refund", "{}");
        assert!(policy.admit_call(&mut s, "issue_refund", &refund).is_err());
        let question = orch_runtime::QuestionId::new(0x51);
        policy.ask_call(&mut s, "issue_refund", refund.digest, question);
        assert!(policy.answer_call(&mut s, "issue_refund", refund.digest, question, true, None));
        policy.admit_call(&mut s, "issue_refund", &refund).unwrap();
        policy.record(&mut s, "issue_refund");
    }
    // The sink is dropped with the policy: the writer ends once everything is written.
    writer.await.unwrap();
    let log = read_log(&*store, prefix).await.unwrap();
    assert_eq!(verify_chain(&log), Ok(9), "{log}");
    let replayed = replay(&machine, &log).unwrap();
    assert_eq!(replayed.records, 9);
    log
}

#[tokio::test]
async fn a_log_in_memory_reads_back_verifies_and_replays() {
    let store = Arc::new(MemoryStore::builder().no_ttl().build());
    round_trip(Arc::clone(&store), "audit:a").await;
    // Another prefix is another log.
    assert_eq!(read_log(&*store, "audit:b").await.unwrap(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: `cargo xtask test` installs it and runs this"]
async fn a_log_in_redis_reads_back_verifies_and_replays() {
    let server = orch_test_support::redis::RedisServer::start();
    let store = orch_store::RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("audit-test");
    let log = round_trip(Arc::new(store), "decisions").await;
    // Read again through another connection: the log is the store's.
    let again = orch_store::RedisStore::connect(&server.url)
        .await
        .unwrap()
        .namespace("audit-test");
    assert_eq!(read_log(&again, "decisions").await.unwrap(), log);
}

/// A signing auditor's checkpoints go into the store under their own numbers, like
/// records: the log read back verifies with the public key, every record anchored (the
/// last checkpoint is written when the auditor is dropped).
#[tokio::test]
async fn a_signed_log_in_a_store_verifies_with_its_key() {
    use orch_agent::audit::sign::{PublicKeys, SigningKey};
    use orch_agent::audit::{verify_signed, Anchor};
    let store = Arc::new(MemoryStore::builder().no_ttl().build());
    let machine = orch_codegen::compile_json(TEMPLATE, None)
        .to_machine()
        .unwrap();
    let key = SigningKey::generate().unwrap();
    let keys = PublicKeys(vec![key.public_key()]);
    let (sink, writer) = StoreLog::spawn(Arc::clone(&store), "audit:signed");
    {
        let auditor = Auditor::new(sink, "run-1").signed(
            Arc::new(key),
            2,
            std::time::Duration::from_secs(3600),
        );
        let policy = Policy::new(["lookup_order"]).audited(Arc::new(auditor));
        let mut s = machine.session();
        policy.prepare(&mut s);
        policy.message(&mut s, "refund A-1");
        let lookup = Call::of_text("lookup_order", "{}");
        policy.admit_call(&mut s, "lookup_order", &lookup).unwrap();
        policy.record(&mut s, "lookup_order");
    }
    writer.await.unwrap();
    let log = read_log(&*store, "audit:signed").await.unwrap();
    let v = verify_signed(&log, &Anchor::default(), Some(&keys)).unwrap();
    assert_eq!((v.records, v.checkpoints, v.unanchored), (4, 2, 0), "{log}");
    assert_eq!(replay(&machine, &log).unwrap().records, 4);
}
