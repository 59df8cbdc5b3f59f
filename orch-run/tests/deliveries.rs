//! Deliveries through the run protocol's gateway half ([`orch_run`]): a call its
//! caller names (`orch mcp`: a JSON-RPC request id in an MCP session) delivered again is
//! answered with what it came to and never runs twice — whatever way the first delivery
//! ended: it ran, was refused, its result was lost (each `lostResults` rule), or an
//! operator resolved its held run. The record goes through its bytes between every two
//! looks, as a store keeps it.

use orch_agent::{Gate, Policy, RefusalKind};
use orch_run::{self as run, Admission, Ended, Resolution, RunError, Settled};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::{Call, CallDigest};
use orch_store::lease::{Delivery, Record};
use std::time::Duration;

/// `a` counts as run when lost, `b` is retried, `c` holds the run; `x` is allowed only
/// after `a` ran.
const TEMPLATE: &str = r#"{
  "agentId": "deliveries",
  "tools": ["a", "b", "c", "x"],
  "orchestration": {
    "lostResults": {"ran": ["a"], "retry": ["b"], "hold": ["c"]},
    "steps": [
      {"name": "Start", "isDefault": true, "availableTools": {"allowed": ["a", "b", "c"]}},
      {"name": "Later", "conditions": [{"type": "tool_used", "value": "a"}],
       "availableTools": {"allowed": ["a", "b", "c", "x"]}}
    ]
  }
}"#;

struct Run {
    machine: DynMachine,
    policy: Policy,
    /// The record as stored.
    bytes: Vec<u8>,
}

/// What one delivery came to.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    /// Admitted: the lease's token.
    Admitted(u64),
    Refused(RefusalKind, String),
}

impl Run {
    fn new() -> Run {
        let machine = orch_codegen::compile_json(TEMPLATE, None)
            .to_machine()
            .expect("the template compiles");
        let policy = Policy::new(machine.tools().to_vec());
        Run {
            machine,
            policy,
            bytes: Record::default().encode(),
        }
    }

    fn delivery(id: &str, tool: &str, args: &str) -> Delivery {
        let call = CallDigest::of_text(tool, args);
        Delivery::new(&format!("session\u{1f}{id}"), call)
    }

    fn deliver(&mut self, id: &str, tool: &str, args: &str) -> Got {
        let mut record = Record::decode(&self.bytes).expect("a record");
        let delivery = Run::delivery(id, tool, args);
        let call = Call::of_text(tool, args);
        let restore = |s: Option<&[u8]>| run::restore(&self.machine, &self.policy, s);
        let (admission, write) = run::admit::<RunError>(
            &mut record,
            &self.machine,
            &self.policy,
            restore,
            tool,
            &call,
            Gate::Refuse,
            Duration::from_secs(3600),
            Some((id, &delivery)),
        )
        .expect("a look");
        let got = match admission {
            Admission::Admitted { token, .. } => Got::Admitted(token),
            Admission::Refused { refusal, .. } => Got::Refused(refusal.kind, refusal.reason),
            Admission::Busy(tool) => panic!("busy with {tool}"),
        };
        if write {
            self.bytes = record.encode();
        }
        got
    }

    fn settle(&mut self, token: u64, outcome: Ended) -> Settled {
        let mut record = Record::decode(&self.bytes).expect("a record");
        let restore = |s: Option<&[u8]>| run::restore(&self.machine, &self.policy, s);
        let ((settled, write), _) = run::settle::<RunError>(
            &mut record,
            &self.machine,
            &self.policy,
            restore,
            Some(token),
            outcome,
            None,
            false,
        )
        .expect("a look");
        if write {
            self.bytes = record.encode();
        }
        settled
    }

    fn admitted(&mut self, id: &str, tool: &str, args: &str) -> u64 {
        match self.deliver(id, tool, args) {
            Got::Admitted(token) => token,
            other => panic!("{tool} ({id}) not admitted: {other:?}"),
        }
    }

    fn refused(&mut self, id: &str, tool: &str, args: &str) -> (RefusalKind, String) {
        match self.deliver(id, tool, args) {
            Got::Refused(kind, reason) => (kind, reason),
            other => panic!("{tool} ({id}) not refused: {other:?}"),
        }
    }
}

#[test]
fn a_delivery_that_ran_never_runs_again() {
    let mut run = Run::new();
    let token = run.admitted("1", "b", "{}");
    assert_eq!(
        run.settle(token, Ended::Ran),
        Settled::Recorded { changed: false }
    );
    let (kind, reason) = run.refused("1", "b", "{}");
    assert_eq!(kind, RefusalKind::AlreadyRan);
    assert!(
        reason.contains("`1`") && reason.contains("ran already"),
        "{reason}"
    );
    assert!(reason.contains("Allowed now: a, b, c."), "{reason}");
    // The same arguments written otherwise are the same call.
    assert_eq!(run.refused("1", "b", r#"{ }"#).0, RefusalKind::AlreadyRan);
    // Another call under the id is judged as its own, and a new id is a new call.
    run.admitted("1", "b", r#"{"n": 2}"#);
}

#[test]
fn a_delivery_refused_for_good_is_refused_so_again_without_being_judged() {
    let mut run = Run::new();
    assert_eq!(run.refused("7", "x", "{}").0, RefusalKind::NotAllowed);
    let token = run.admitted("8", "a", "{}");
    run.settle(token, Ended::Ran);
    // `x` is allowed now, but this delivery was refused.
    let (kind, reason) = run.refused("7", "x", "{}");
    assert_eq!(kind, RefusalKind::NotAllowed);
    assert!(
        reason.contains("delivered before and refused (`not_allowed`)"),
        "{reason}"
    );
    run.admitted("9", "x", "{}");
}

#[test]
fn a_delivery_whose_call_did_not_run_may_be_delivered_again() {
    let mut run = Run::new();
    let token = run.admitted("1", "b", "{}");
    assert_eq!(run.settle(token, Ended::NotRun), Settled::Released);
    let token = run.admitted("1", "b", "{}");
    // Its result lost, and `b`'s lost results are retried: it may run again.
    assert_eq!(run.settle(token, Ended::Lost), Settled::Released);
    let token = run.admitted("1", "b", "{}");
    run.settle(token, Ended::Ran);
    assert_eq!(run.refused("1", "b", "{}").0, RefusalKind::AlreadyRan);
}

#[test]
fn a_lost_result_that_counts_as_run_or_is_resolved_so_is_a_delivery_that_ran() {
    let mut run = Run::new();
    let token = run.admitted("1", "a", "{}");
    assert!(matches!(
        run.settle(token, Ended::Lost),
        Settled::Recorded { .. }
    ));
    assert_eq!(run.refused("1", "a", "{}").0, RefusalKind::AlreadyRan);

    let token = run.admitted("2", "c", "{}");
    assert_eq!(run.settle(token, Ended::Lost), Settled::Held);
    // Held: the same delivery, like every call, waits for the operator.
    assert_eq!(run.refused("2", "c", "{}").0, RefusalKind::OutcomeUnknown);
    let mut record = Record::decode(&run.bytes).expect("a record");
    let restore = |s: Option<&[u8]>| run::restore(&run.machine, &run.policy, s);
    let resolved = run::resolve::<RunError>(&mut record, &run.policy, restore, Resolution::Ran);
    assert_eq!(resolved.expect("resolved").as_deref(), Some("c"));
    run.bytes = record.encode();
    assert_eq!(run.refused("2", "c", "{}").0, RefusalKind::AlreadyRan);
    run.admitted("3", "c", "{}");
}
