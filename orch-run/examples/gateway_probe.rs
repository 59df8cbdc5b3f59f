//! One gateway call's look at its run record under an instruction counter: what the run
//! protocol costs a gateway per call, and what remembering deliveries adds. Build it in
//! release and count each probed function's instructions with callgrind
//! (docs/performance.md, "MCP gateways"):
//!
//! ```sh
//! cargo build --release -p orch-run --example gateway_probe
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/gateway.out \
//!   --toggle-collect='*gateway_probe::call_*' target/release/examples/gateway_probe
//! callgrind_annotate /tmp/gateway.out | grep call_
//! ```
//!
//! Each function is one allowed call of `browse {"page": N}` as `orch mcp` and `orch
//! policy` make it inside their compare-and-sets: the record's bytes decoded,
//! `run::admit` (restore, judge, lease), the record encoded; then decoded again,
//! `run::settle` (restore, record, release), encoded. Store round trips are not
//! counted: they are the store's.
//!
//! - `call_unnamed`: a call without a delivery (`orch policy`, `orch mcp` on 2026-07-28);
//! - `call_delivered`: a call named by its delivery (`orch mcp` on a handshake
//!   revision: the delivery's key taken of its id, SHA-256), its record holding the 32
//!   deliveries it keeps at most.
//!
//! `CALLS` calls of each, over a run whose history grows with them.

use orch_agent::{Gate, Policy};
use orch_run::{self as run, Admission, Ended, RunError, Settled};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::Call;
use orch_store::lease::{Delivery, Record};
use std::hint::black_box;
use std::time::Duration;

/// How many calls each probed function is called for.
const CALLS: usize = 1_000;

const TEMPLATE: &str = r#"{
  "agentId": "probe-shop",
  "tools": ["pay", "browse"],
  "orchestration": {
    "steps": [{"name": "Shop", "isDefault": true,
      "availableTools": {"allowed": ["pay", "browse"]}}]
  }
}"#;

/// One call's two looks at the record stored as `bytes`; the bytes stored after.
fn life(
    machine: &DynMachine,
    policy: &Policy,
    bytes: &[u8],
    call: &Call<'_>,
    delivery: Option<(&str, &Delivery)>,
) -> Result<Vec<u8>, String> {
    let mut record = Record::decode(bytes).map_err(|e| e.to_string())?;
    let restore = |s: Option<&[u8]>| run::restore(machine, policy, s);
    let lease = Duration::from_secs(60);
    let (admission, _) = run::admit::<RunError>(
        &mut record,
        machine,
        policy,
        restore,
        "browse",
        call,
        Gate::Refuse,
        lease,
        delivery,
    )
    .map_err(|e| e.to_string())?;
    let Admission::Admitted { token, .. } = admission else {
        return Err(format!("not admitted: {admission:?}"));
    };
    let stored = record.encode();
    let mut record = Record::decode(&stored).map_err(|e| e.to_string())?;
    let restore = |s: Option<&[u8]>| run::restore(machine, policy, s);
    let ran = Ended::Ran;
    let ((settled, _), _) = run::settle::<RunError>(
        &mut record,
        machine,
        policy,
        restore,
        Some(token),
        ran,
        None,
        false,
    )
    .map_err(|e| e.to_string())?;
    if !matches!(settled, Settled::Recorded { .. }) {
        return Err(format!("not recorded: {settled:?}"));
    }
    Ok(record.encode())
}

#[inline(never)]
fn call_unnamed(machine: &DynMachine, policy: &Policy, bytes: &[u8], args: &str) -> Vec<u8> {
    let call = Call::of_text("browse", args);
    black_box(life(machine, policy, bytes, &call, None)).unwrap_or_default()
}

#[inline(never)]
fn call_delivered(
    machine: &DynMachine,
    policy: &Policy,
    bytes: &[u8],
    args: &str,
    id: &str,
) -> Vec<u8> {
    let call = Call::of_text("browse", args);
    let delivery = Delivery::new(id, call.digest);
    black_box(life(machine, policy, bytes, &call, Some(("7", &delivery)))).unwrap_or_default()
}

fn main() {
    let Some(machine) = orch_codegen::compile_json(TEMPLATE, None).to_machine() else {
        eprintln!("gateway_probe: the template does not compile");
        std::process::exit(1);
    };
    let policy = Policy::new(machine.tools().to_vec());
    let args: Vec<String> = (0..=CALLS).map(|i| format!(r#"{{"page": {i}}}"#)).collect();
    let ids: Vec<String> = (0..=CALLS)
        .map(|i| format!("2f6c1a0e-5d7b-4c1e-9a51-8f3a3b0c9d11\u{1f}{i}"))
        .collect();

    let mut bytes = Record::default().encode();
    for a in &args {
        bytes = call_unnamed(&machine, &policy, &bytes, a);
    }
    let unnamed = bytes.len();
    let mut bytes = Record::default().encode();
    for (a, id) in args.iter().zip(&ids) {
        bytes = call_delivered(&machine, &policy, &bytes, a, id);
    }
    let record = Record::decode(&bytes).unwrap_or_default();
    if record.delivered.len() != orch_store::lease::DELIVERIES {
        eprintln!("gateway_probe: {} deliveries kept", record.delivered.len());
        std::process::exit(1);
    }
    println!(
        "calls={CALLS} (+1 warm-up each); record bytes after: unnamed {unnamed}, delivered {}",
        bytes.len()
    );
}
