//! The life of one gated call under an instruction counter: what the run host costs on
//! top of the decision. Build it in release and count each probed function's
//! instructions with callgrind (docs/performance.md, "A gated call"):
//!
//! ```sh
//! cargo build --release -p orch-agent --example gated_probe
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/gated.out \
//!   --toggle-collect='*gated_probe::by_*' target/release/examples/gated_probe
//! callgrind_annotate /tmp/gated.out | grep by_
//! ```
//!
//! Each function is one gated call of `pay {"order": 7}` from its delivery to its
//! recorded end, on a `DynSession` (what the gateways, the bindings and every framework
//! adapter run):
//!
//! - `by_policy`: the decision alone — `Policy::admit_call` refuses it as needing
//!   approval, `ask_call` holds a question (an id the host made), `answer_call` approves
//!   it, `admit_call` admits it on the approval, `record` records it;
//! - `by_run_host`: the same call through the run host — `begin` asks (the question's
//!   identity bound to the call's id: SHA-256), `answer_call`, `begin` admits, `finish`
//!   records — with the ledger that makes a re-delivery harmless;
//! - `ungated_by_run_host`: an ungated call through the run host (`begin`, `finish`).
//!
//! `CALLS` calls of each; the call ids are made before, outside the counted functions.

use orch_agent::run_host::{Begin, Finished, OnGate, RunHost};
use orch_agent::Policy;
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, CallDigest, QuestionId};
use std::hint::black_box;

/// How many calls each probed function is called for.
const CALLS: usize = 1_000;

const TEMPLATE: &str = r#"{
  "agentId": "gated-shop",
  "tools": ["pay", "browse"],
  "orchestration": {
    "steps": [{"name": "Shop", "isDefault": true,
      "availableTools": {"allowed": ["pay", "browse"], "approve": ["pay"]}}]
  }
}"#;

const PAY: &str = r#"{"order": 7}"#;

/// One gated call, decided by the policy alone.
#[inline(never)]
fn by_policy(policy: &Policy, session: &mut DynSession<'_>, question: QuestionId) {
    let digest = CallDigest::of_text("pay", PAY);
    let call = Call::new(digest, PAY);
    let refused = policy.admit_call(session, "pay", &call);
    black_box(&refused);
    policy.ask_call(session, "pay", digest, question);
    black_box(policy.answer_call(session, "pay", digest, question, true, None));
    black_box(policy.admit_call(session, "pay", &call).is_ok());
    black_box(policy.record(session, "pay"));
}

/// One gated call through the run host.
#[inline(never)]
fn by_run_host(host: &mut RunHost, policy: &Policy, session: &mut DynSession<'_>, id: &str) {
    let asked = host.begin(policy, session, id, "pay", PAY, OnGate::Ask, 1_000);
    black_box(matches!(asked, Begin::Ask { .. }));
    black_box(host.answer_call(policy, session, id, "pay", PAY, true, None, 1_001));
    black_box(host.begin(policy, session, id, "pay", PAY, OnGate::Ask, 1_002) == Begin::Run);
    black_box(host.finish(policy, session, id, "pay", true, None));
}

/// One ungated call through the run host.
#[inline(never)]
fn ungated_by_run_host(
    host: &mut RunHost,
    policy: &Policy,
    session: &mut DynSession<'_>,
    id: &str,
) {
    black_box(host.begin(policy, session, id, "browse", "{}", OnGate::Ask, 1_000) == Begin::Run);
    black_box(host.finish(policy, session, id, "browse", true, None));
}

fn main() {
    let machine: DynMachine = match orch_codegen::compile_json(TEMPLATE, None).to_machine() {
        Some(machine) => machine,
        None => {
            eprintln!("gated_probe: the template does not compile");
            std::process::exit(1);
        }
    };
    let policy = Policy::new(machine.tools().to_vec());
    let new_session = || {
        let mut session = DynSession::new(&machine);
        policy.prepare(&mut session);
        session
    };
    let ids: Vec<String> = (0..2 * CALLS + 2).map(|i| format!("call_{i}")).collect();

    // What is counted is the whole life of the call: checked once, uncounted.
    let mut session = new_session();
    let mut host = RunHost::new();
    let life = [
        host.begin(&policy, &mut session, "c", "pay", PAY, OnGate::Ask, 1_000)
            .as_str(),
        host.answer_call(&policy, &mut session, "c", "pay", PAY, true, None, 1_001)
            .as_str(),
        host.begin(&policy, &mut session, "c", "pay", PAY, OnGate::Ask, 1_002)
            .as_str(),
    ];
    let finished = host.finish(&policy, &mut session, "c", "pay", true, None);
    if life != ["ask", "applied", "run"] || !matches!(finished, Finished::Recorded(_)) {
        eprintln!("gated_probe: the call's life was {life:?}, then {finished:?}");
        std::process::exit(1);
    }

    let mut session = new_session();
    for i in 0..=CALLS {
        by_policy(&policy, &mut session, QuestionId::new(i as u64 + 1));
    }
    let mut session = new_session();
    let mut host = RunHost::new();
    for id in &ids[..=CALLS] {
        by_run_host(&mut host, &policy, &mut session, id);
    }
    let mut session = new_session();
    let mut host = RunHost::new();
    for id in &ids[CALLS + 1..] {
        ungated_by_run_host(&mut host, &policy, &mut session, id);
    }
    let recorded = session.history().iter().flatten().count();
    println!("calls={CALLS} (+1 warm-up each) ungated recorded={recorded}");
}
