//! Questions posted for approvers elsewhere (`orch_run::approvals`), on a store as the
//! gateways keep runs: a gated call asked with `Gate::AskOnce` posts its question in the
//! run's record; the agent's retry is the same question; an answer applies once, only to
//! the question the run still holds, before its expiry, never from the run's own caller;
//! the approved retry runs once; the index lists what is open and forgets what is gone.

use orch_agent::{Gate, Policy, RefusalKind};
use orch_run::approvals::{self as posting, Answer, NotAnswered, Posted, PostedState};
use orch_run::{self as run, Admission};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::{Call, CallDigest};
use orch_store::lease::{Change, Record};
use orch_store::MemoryStore;
use std::time::Duration;

const TEMPLATE: &str = r#"{
  "agentId": "payments",
  "tools": ["look", "pay"],
  "orchestration": {
    "steps": [{"name": "Pay", "isDefault": true,
               "availableTools": {"allowed": ["look", "pay"], "approve": ["pay"]}}]
  }
}"#;

const ARGS: &str = r#"{"to": "bob", "amount": 12.50}"#;

fn machine() -> DynMachine {
    orch_codegen::compile_json(TEMPLATE, None)
        .to_machine()
        .expect("a valid template")
}

/// What a call of `tool` with `arguments` came to in run `key`, asked with `AskOnce`
/// (the question posted as a gateway posts it, by `asked_by`).
async fn call(
    store: &MemoryStore,
    machine: &DynMachine,
    key: &str,
    tool: &str,
    arguments: &str,
    ttl: Duration,
    asked_by: Option<&str>,
) -> Result<u64, (RefusalKind, Option<Posted>)> {
    let policy = Policy::new(machine.tools().to_vec());
    let digest = CallDigest::of_text(tool, arguments);
    let (decided, _) = run::modify(store, key, None, |record| {
        let mut record = record.unwrap_or_default();
        let (admission, mut write) = run::admit(
            &mut record,
            machine,
            &policy,
            |s| run::restore(machine, &policy, s),
            tool,
            &Call::new(digest, arguments),
            Gate::AskOnce { run: key, ttl },
            Duration::from_secs(60),
            None,
        )?;
        let decided = match admission {
            Admission::Admitted { token, .. } => Ok(token),
            Admission::Busy(other) => panic!("busy with {other}"),
            Admission::Refused {
                refusal, question, ..
            } => {
                let posted = match question {
                    Some(q) => {
                        let posted = Posted::new(&q, machine.name(), arguments, asked_by, 1);
                        posted.put(&mut record);
                        write = true;
                        Some(posted)
                    }
                    None => Posted::of(&record)?.filter(|p| p.state == PostedState::Pending),
                };
                Err((refusal.kind, posted))
            }
        };
        Ok(match write {
            true => Change::Write(record, decided),
            false => Change::Keep(decided),
        })
    })
    .await
    .expect("the store answers");
    if let Err((_, Some(_))) = &decided {
        orch_store::index::add(store, posting::OPEN, key)
            .await
            .unwrap();
    }
    decided
}

/// Settles the admitted call `token` of `key` as having run.
async fn ran(store: &MemoryStore, machine: &DynMachine, key: &str, token: u64) {
    let policy = Policy::new(machine.tools().to_vec());
    run::modify(store, key, None, |record| {
        let mut record: Record = record.expect("a record");
        let ((_, write), _) = run::settle(
            &mut record,
            machine,
            &policy,
            |s| run::restore(machine, &policy, s),
            Some(token),
            run::Ended::Ran,
            None,
            false,
        )?;
        Ok(match write {
            true => Change::Write(record, ()),
            false => Change::Keep(()),
        })
    })
    .await
    .expect("the store answers");
}

fn answer<'a>(id: &'a str, approved: bool, by: &'a str) -> Answer<'a> {
    Answer {
        id,
        approved,
        by,
        reason: Some("checked"),
        now_ms: orch_agent::protocol::now_ms(),
    }
}

#[tokio::test]
async fn an_approval_elsewhere_runs_the_retry_once_and_a_second_answer_applies_to_nothing() {
    let (store, machine) = (MemoryStore::new(), machine());
    let policy = Policy::new(machine.tools().to_vec());
    let day = Duration::from_secs(86_400);
    let Err((kind, Some(posted))) =
        call(&store, &machine, "run:a", "pay", ARGS, day, Some("agent-a")).await
    else {
        panic!("the call is not asked about")
    };
    assert_eq!(kind, RefusalKind::NeedsApproval);
    assert_eq!(
        (posted.tool.as_str(), posted.arguments.as_str()),
        ("pay", ARGS)
    );
    assert_eq!(posted.step.as_deref(), Some("Pay"));
    assert!(
        posted.id.starts_with("q-") && posted.id.len() == 18,
        "{}",
        posted.id
    );

    // The agent retrying is the same question, not a new one.
    let Err((_, Some(again))) =
        call(&store, &machine, "run:a", "pay", ARGS, day, Some("agent-a")).await
    else {
        panic!("the retry is not refused with its question")
    };
    assert_eq!(again.id, posted.id);
    let open = posting::questions(&store, &machine, &policy, orch_agent::protocol::now_ms())
        .await
        .unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].state, PostedState::Pending);

    // The run's own caller may not answer; an unknown id applies to nothing.
    let own = posting::answer_key(
        &store,
        &machine,
        &policy,
        "run:a",
        answer(&posted.id, true, "agent-a"),
    )
    .await
    .unwrap();
    assert_eq!(own, Err(NotAnswered::OwnRun));
    let unknown = posting::answer_key(
        &store,
        &machine,
        &policy,
        "run:a",
        answer("q-0000000000000000", true, "finance"),
    )
    .await
    .unwrap();
    assert_eq!(unknown, Err(NotAnswered::Unknown));

    // Approved once; a second answer is told who answered.
    let approved = posting::answer_key(
        &store,
        &machine,
        &policy,
        "run:a",
        answer(&posted.id, true, "finance"),
    )
    .await
    .unwrap()
    .expect("applied");
    assert_eq!(approved.state, PostedState::Approved);
    assert_eq!(
        approved.answer.as_ref().map(|a| a.by.as_str()),
        Some("finance")
    );
    let twice = posting::answer_key(
        &store,
        &machine,
        &policy,
        "run:a",
        answer(&posted.id, false, "boss"),
    )
    .await
    .unwrap();
    let Err(NotAnswered::Settled(settled)) = twice else {
        panic!("{twice:?}")
    };
    assert_eq!(settled.state, PostedState::Approved);
    assert!(NotAnswered::Settled(settled)
        .to_string()
        .contains("approved already, by finance"));

    // The retry runs once: the approval is spent by it.
    let token = call(&store, &machine, "run:a", "pay", ARGS, day, None)
        .await
        .expect("admitted");
    ran(&store, &machine, "run:a", token).await;
    let Err((kind, _)) = call(&store, &machine, "run:a", "pay", ARGS, day, None).await else {
        panic!("the approval admitted a second call")
    };
    assert_eq!(kind, RefusalKind::NeedsApproval);
}

#[tokio::test]
async fn a_question_the_run_moved_past_or_that_expired_takes_no_answer() {
    let (store, machine) = (MemoryStore::new(), machine());
    let policy = Policy::new(machine.tools().to_vec());
    let day = Duration::from_secs(86_400);
    // Asked about, then the run moves on: `look` runs (an event clears the question).
    let Err((_, Some(posted))) = call(&store, &machine, "run:b", "pay", ARGS, day, None).await
    else {
        panic!("not asked")
    };
    let token = call(&store, &machine, "run:b", "look", "{}", day, None)
        .await
        .expect("admitted");
    ran(&store, &machine, "run:b", token).await;
    let now = orch_agent::protocol::now_ms();
    let listed = posting::questions(&store, &machine, &policy, now)
        .await
        .unwrap();
    assert_eq!(listed[0].state, PostedState::Closed, "{listed:?}");
    let stale = posting::answer_key(
        &store,
        &machine,
        &policy,
        "run:b",
        answer(&posted.id, true, "finance"),
    )
    .await
    .unwrap();
    assert!(matches!(stale, Err(NotAnswered::Stale(_))), "{stale:?}");
    // Nothing was approved: the call is asked about anew.
    let Err((_, Some(anew))) = call(&store, &machine, "run:b", "pay", ARGS, day, None).await else {
        panic!("not asked anew")
    };
    assert_ne!(anew.id, posted.id);

    // A question past its expiry: listed no more, answered never.
    let Err((_, Some(short))) = call(
        &store,
        &machine,
        "run:c",
        "pay",
        ARGS,
        Duration::from_millis(1),
        None,
    )
    .await
    else {
        panic!("not asked")
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let late = posting::answer_key(
        &store,
        &machine,
        &policy,
        "run:c",
        answer(&short.id, true, "finance"),
    )
    .await
    .unwrap();
    let Err(NotAnswered::Settled(expired)) = late else {
        panic!("{late:?}")
    };
    assert_eq!(expired.state, PostedState::Expired);
    let now = orch_agent::protocol::now_ms();
    let listed = posting::questions(&store, &machine, &policy, now)
        .await
        .unwrap();
    assert!(listed.iter().all(|q| q.run != "run:c"), "{listed:?}");
    let index = orch_store::index::members(&store, posting::OPEN)
        .await
        .unwrap();
    assert!(!index.contains(&"run:c".to_owned()), "{index:?}");
}

#[test]
fn a_posted_question_that_cannot_be_read_is_an_error_not_a_guess() {
    let record = Record {
        question: Some(b"{not json".to_vec()),
        ..Record::default()
    };
    let error = Posted::of(&record).unwrap_err();
    assert!(
        error.to_string().contains("posted question cannot be read"),
        "{error}"
    );
}
