//! The run host's fault-injecting corpus for the bindings: random templates (steps,
//! sequences, gates, rules on arguments and conditional approvals) and random streams of
//! the life of calls on **two runs** of each — calls begun (asking, or refusing without
//! asking), answered, finished with results of every kind — with the faults a framework
//! or a network inflicts: the same call delivered again after it ran, was refused, or
//! while it runs; an approval replayed, answered twice, answered after its expiry,
//! answered for the same id with other arguments, answered on the other run; a result
//! delivered twice or for a call never begun; the host restored from its snapshot between
//! any two phases (a process killed and started again); time passing; user messages.
//!
//! Each step carries what the Rust run host (`HostedSession`) decided and where the run
//! stands after it. The corpus is written to `orch-py/tests/fixtures/run-host.json`; the
//! Python package (`test_run_host.py`) and the npm package (`run-host.test.mjs`, native
//! and WebAssembly) replay it and must decide every step alike. This test keeps the file
//! true (`ORCH_BLESS=1` writes it afresh) and checks the promise on it, apart from the
//! host's own code:
//!
//! - an answer applies only to the question asked about exactly that delivery, on that
//!   run, before it expired;
//! - an approval runs at most one call, the call it was given for, with exactly the
//!   arguments shown;
//! - a call refused (other than "needs approval") never runs under that delivery;
//! - a delivery that ran never runs again;
//! - recorded ⇔ ran: a run's history holds exactly the calls finished as run;
//! - nothing done on one run changes the other.

#[path = "common/corpus_templates.rs"]
mod corpus_templates;

use corpus_templates::{compiling, keep_true, TOOLS};
use orch_agent::hosted::HostedSession;
use orch_agent::run_host::{Answered, Begin, Finished, OnGate};
use orch_agent::RefusalKind;
use orch_runtime::dynamic::DynMachine;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

const CASES: usize = 40;
/// The first instant of every stream (ms since the Unix epoch).
const START_MS: u64 = 1_800_000_000_000;
/// How long a question stays answerable in the corpus.
const TTL_MS: u64 = 60_000;

/// One generated step, before it is made concrete against what the stream did so far.
#[derive(Clone, Debug)]
enum Raw {
    /// A new delivery (`id` 0..6) of `tool` with `args` on `run`; `ask`: a question may
    /// be asked.
    Begin {
        run: usize,
        id: u8,
        tool: usize,
        args: usize,
        ask: bool,
    },
    /// A delivery seen before, delivered again as it was.
    Again {
        pick: usize,
    },
    /// An answer about a call asked before (`pick`), `fault` applied.
    Answer {
        pick: usize,
        approved: bool,
        fault: Fault,
    },
    /// A running (or any, `stray`) call's end with `result`.
    Finish {
        pick: usize,
        stray: bool,
        result: usize,
    },
    Wait(u32),
    Restore {
        run: usize,
    },
    Message {
        run: usize,
        refund: bool,
    },
}

/// What is wrong with an answer.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// The same id, other arguments.
    OtherArgs,
    /// Sent to the other run.
    OtherRun,
}

const ARGS: [&str; 4] = [r#"{"n": 1}"#, r#"{"n":1}"#, r#"{"n": 2}"#, r#"{"n": 3}"#];

/// The results a finished call may carry: none, a success with values, a bare success,
/// an error, a request for input, a task, something malformed.
fn results() -> [Option<Value>; 7] {
    [
        None,
        Some(
            json!({"content": [{"type": "text", "text": "{\"v\": [1, 2]}"}], "structuredContent": {"v": [1, 2]}}),
        ),
        Some(json!({"content": [{"type": "text", "text": "done"}]})),
        Some(json!({"content": [], "isError": true})),
        Some(json!({"resultType": "input_required", "inputRequests": {}})),
        Some(json!({"content": [], "task": {"taskId": "t"}})),
        Some(json!({"foo": 1})),
    ]
}

fn raw() -> impl Strategy<Value = Raw> {
    let fault = prop_oneof![
        6 => Just(Fault::None),
        1 => Just(Fault::OtherArgs),
        1 => Just(Fault::OtherRun),
    ];
    prop_oneof![
        6 => (0..2usize, 0..6u8, 0..4usize, 0..4usize, prop::bool::weighted(0.85)).prop_map(
            |(run, id, tool, args, ask)| Raw::Begin { run, id, tool, args, ask }
        ),
        2 => any::<usize>().prop_map(|pick| Raw::Again { pick }),
        4 => (any::<usize>(), prop::bool::weighted(0.75), fault)
            .prop_map(|(pick, approved, fault)| Raw::Answer { pick, approved, fault }),
        4 => (any::<usize>(), prop::bool::weighted(0.1), 0..7usize)
            .prop_map(|(pick, stray, result)| Raw::Finish { pick, stray, result }),
        2 => prop_oneof![Just(1_000u32), Just(70_000u32)].prop_map(Raw::Wait),
        1 => (0..2usize).prop_map(|run| Raw::Restore { run }),
        1 => (0..2usize, any::<bool>()).prop_map(|(run, refund)| Raw::Message { run, refund }),
    ]
}

/// A delivery: the run, its id, tool and arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Delivery {
    run: usize,
    id: String,
    tool: &'static str,
    args: &'static str,
}

/// The stream's runs and what the checker knows of them.
struct Stream<'a> {
    machine: &'a Arc<DynMachine>,
    hosts: [HostedSession; 2],
    now: u64,
    /// Every delivery begun, in order.
    begun: Vec<Delivery>,
    /// Deliveries asked about, and when each was last asked.
    asked: Vec<Delivery>,
    asked_at: HashMap<Delivery, u64>,
    /// Deliveries admitted and not finished.
    running: Vec<Delivery>,
    /// Approvals applied and not yet used by a run.
    approvals: HashSet<Delivery>,
    /// Deliveries that ran (recorded) or were refused for good.
    ran: HashSet<Delivery>,
    refused: HashSet<Delivery>,
    /// Calls recorded per run.
    recorded: [usize; 2],
}

impl Stream<'_> {
    fn begin(&mut self, d: Delivery, ask: bool) -> Result<(Value, String), String> {
        let on_gate = if ask { OnGate::Ask } else { OnGate::Refuse };
        let gated = self.gated(&d);
        // Another call delivered under the same id before: a refusal may be for the id
        // (taken), not the call, and lasts only while the id is.
        let shared = self
            .begun
            .iter()
            .any(|b| b.run == d.run && b.id == d.id && (b.tool, b.args) != (d.tool, d.args));
        let begun = self.hosts[d.run].begin(&d.id, d.tool, d.args, on_gate, self.now);
        let op = json!({"op": "begin", "run": d.run, "id": d.id, "tool": d.tool,
                        "args": d.args, "ask": ask, "now": self.now});
        if !self.begun.contains(&d) {
            self.begun.push(d.clone());
        }
        match &begun {
            Begin::Run => {
                if self.ran.contains(&d) {
                    return Err(format!("{d:?} ran twice"));
                }
                if self.refused.contains(&d) {
                    return Err(format!("{d:?} ran after it was refused"));
                }
                // A gated call runs only on an approval of exactly this delivery; the
                // approval is used up.
                let approved = self.approvals.remove(&d);
                if gated && !approved {
                    return Err(format!("{d:?} needs approval and ran without one"));
                }
                self.running.push(d);
            }
            Begin::Ask { .. } => {
                self.asked_at.insert(d.clone(), self.now);
                if !self.asked.contains(&d) {
                    self.asked.push(d);
                }
            }
            Begin::Refused(r) | Begin::Again(r) => {
                if r.kind != RefusalKind::NeedsApproval && !shared && !self.running.contains(&d) {
                    self.refused.insert(d);
                }
            }
        }
        let kind = begun.refusal().map(|r| r.kind.as_str()).unwrap_or("");
        Ok((op, format!("{}:{kind}", begun.as_str())))
    }

    /// Does `d` need a human's approval in its run's state now (whatever verdict the run
    /// holds)? Judged by the engine on a copy of the run without its verdict, apart from
    /// the run host.
    fn gated(&self, d: &Delivery) -> bool {
        let mut snapshot = self.hosts[d.run].session().snapshot();
        snapshot.approval = None;
        let Ok((mut copy, _)) = orch_runtime::dynamic::DynSession::restore(self.machine, &snapshot)
        else {
            return false;
        };
        let policy = orch_agent::Policy::new(TOOLS);
        policy.prepare(&mut copy);
        let call = orch_runtime::Call::of_text(d.tool, d.args);
        matches!(policy.admit_call(&mut copy, d.tool, &call), Err(r) if r.kind == RefusalKind::NeedsApproval)
    }

    fn answer(
        &mut self,
        d: Delivery,
        on: usize,
        approved: bool,
    ) -> Result<(Value, String), String> {
        let answered = self.hosts[on].answer_call(&d.id, d.tool, d.args, approved, self.now);
        let op = json!({"op": "answer", "run": on, "id": d.id, "tool": d.tool, "args": d.args,
                        "approved": approved, "now": self.now});
        let answered_on = Delivery { run: on, ..d };
        if let Answered::Applied { approved: yes } = answered {
            // An answer applies only to a question asked about exactly this delivery, on
            // this run, before it expired.
            let Some(at) = self.asked_at.get(&answered_on) else {
                return Err(format!(
                    "an answer applied to {answered_on:?}, never asked about"
                ));
            };
            if self.now >= at + TTL_MS {
                return Err(format!(
                    "an answer applied to {answered_on:?} after its question expired"
                ));
            }
            if yes {
                self.approvals.insert(answered_on);
            }
        }
        let kind = answered.refusal().map(|r| r.kind.as_str()).unwrap_or("");
        Ok((op, format!("{}:{kind}", answered.as_str())))
    }

    fn finish(&mut self, d: Delivery, result: Option<Value>) -> Result<(Value, String), String> {
        // Keys in canonical order, whether or not serde_json keeps insertion order in
        // this build (a feature another crate of the workspace may turn on).
        let text = result.as_ref().map(|r| {
            orch_runtime::approval::canonical_json(&r.to_string()).expect("a result is JSON")
        });
        let finished = self.hosts[d.run].finish(&d.id, d.tool, true, text.as_deref());
        let op = json!({"op": "finish", "run": d.run, "id": d.id, "tool": d.tool, "result": text});
        let was_running = self.running.iter().position(|r| *r == d);
        let word = match &finished {
            Finished::Recorded(word) => {
                let Some(at) = was_running else {
                    return Err(format!("{d:?} was recorded but never admitted"));
                };
                self.running.remove(at);
                self.ran.insert(d.clone());
                self.recorded[d.run] += 1;
                (*word).to_owned()
            }
            Finished::NotRun(_) => {
                if let Some(at) = was_running {
                    self.running.remove(at);
                }
                "not_run".to_owned()
            }
            Finished::NotAdmitted => "not_admitted".to_owned(),
        };
        Ok((op, word))
    }

    /// Where `run` stands: the tools allowed, the history, the step.
    fn stands(&mut self, run: usize) -> Value {
        let host = &mut self.hosts[run];
        let mut allowed = Vec::new();
        host.for_each_allowed(|_, name| allowed.push(name.to_owned()));
        json!({
            "allowed": allowed,
            "history": host.session().history(),
            "step": host.session().step(),
        })
    }

    /// One raw step made concrete, applied, checked: the step for the corpus, or `None`
    /// when it has nothing to act on yet.
    fn apply(&mut self, raw: &Raw) -> Result<Option<Value>, String> {
        let other = |run: usize| 1 - run;
        let before: Vec<Vec<u8>> = self.hosts.iter().map(HostedSession::snapshot).collect();
        let (op, decision, touched) = match raw {
            Raw::Begin {
                run,
                id,
                tool,
                args,
                ask,
            } => {
                let d = Delivery {
                    run: *run,
                    id: format!("call_{id}"),
                    tool: TOOLS[*tool],
                    args: ARGS[*args],
                };
                let (op, decision) = self.begin(d, *ask)?;
                (op, decision, *run)
            }
            Raw::Again { pick } => {
                let Some(d) = pick_of(&self.begun, *pick).cloned() else {
                    return Ok(None);
                };
                let run = d.run;
                let (op, decision) = self.begin(d, true)?;
                (op, decision, run)
            }
            Raw::Answer {
                pick,
                approved,
                fault,
            } => {
                let Some(mut d) = pick_of(&self.asked, *pick).cloned() else {
                    return Ok(None);
                };
                let mut on = d.run;
                match fault {
                    Fault::None => {}
                    Fault::OtherArgs => {
                        d.args =
                            ARGS[(ARGS.iter().position(|a| *a == d.args).unwrap_or(0) + 2) % 4];
                    }
                    Fault::OtherRun => on = other(d.run),
                }
                let (op, decision) = self.answer(d, on, *approved)?;
                (op, decision, on)
            }
            Raw::Finish {
                pick,
                stray,
                result,
            } => {
                let pool = if *stray { &self.begun } else { &self.running };
                let Some(d) = pick_of(pool, *pick).cloned() else {
                    return Ok(None);
                };
                let run = d.run;
                let result = results()[*result].clone();
                let (op, decision) = self.finish(d, result)?;
                (op, decision, run)
            }
            Raw::Wait(ms) => {
                self.now += u64::from(*ms);
                (json!({"op": "wait", "ms": ms}), "ok".to_owned(), 0)
            }
            Raw::Restore { run } => {
                let bytes = self.hosts[*run].snapshot();
                let mut restored =
                    HostedSession::restore(Arc::clone(self.machine), &bytes, None)
                        .map_err(|e| format!("a host's own snapshot does not restore: {e}"))?;
                restored.set_question_ttl(Duration::from_millis(TTL_MS));
                self.hosts[*run] = restored;
                (json!({"op": "restore", "run": run}), "ok".to_owned(), *run)
            }
            Raw::Message { run, refund } => {
                let text = if *refund { "please refund it" } else { "hello" };
                self.hosts[*run].on_user_message(text);
                // An event: the held verdicts are cleared.
                self.approvals.retain(|d| d.run != *run);
                (
                    json!({"op": "message", "run": run, "text": text}),
                    "ok".to_owned(),
                    *run,
                )
            }
        };
        // Nothing done on one run changes the other.
        let untouched = other(touched);
        if !matches!(raw, Raw::Wait(_)) && self.hosts[untouched].snapshot() != before[untouched] {
            return Err(format!("{op} changed the other run"));
        }
        // Recorded ⇔ ran.
        for run in 0..2 {
            let held = self.hosts[run].session().history().iter().flatten().count();
            if held != self.recorded[run] {
                return Err(format!(
                    "run {run} holds {held} recorded calls, {} ran",
                    self.recorded[run]
                ));
            }
        }
        let mut step = op;
        step["decision"] = json!(decision);
        step["after"] = self.stands(touched);
        Ok(Some(step))
    }
}

fn pick_of<T>(pool: &[T], pick: usize) -> Option<&T> {
    match pool.len() {
        0 => None,
        n => pool.get(pick % n),
    }
}

/// The corpus steps of `raws` on `machine`, or the first broken promise.
fn stream(machine: &Arc<DynMachine>, raws: &[Raw]) -> Result<Vec<Value>, String> {
    let host = || {
        let mut h = HostedSession::new(Arc::clone(machine), None);
        h.set_question_ttl(Duration::from_millis(TTL_MS));
        h
    };
    let mut s = Stream {
        machine,
        hosts: [host(), host()],
        now: START_MS,
        begun: Vec::new(),
        asked: Vec::new(),
        asked_at: HashMap::new(),
        running: Vec::new(),
        approvals: HashSet::new(),
        ran: HashSet::new(),
        refused: HashSet::new(),
        recorded: [0, 0],
    };
    let mut steps = Vec::new();
    for raw in raws {
        s.now += 1;
        if let Some(step) = s.apply(raw)? {
            steps.push(step);
        }
    }
    Ok(steps)
}

fn corpus() -> Value {
    let mut runner = TestRunner::deterministic();
    let mut cases = Vec::new();
    while cases.len() < CASES {
        let (text, machine) = compiling(&mut runner);
        let machine = Arc::new(machine);
        let raws = proptest::collection::vec(raw(), 10..40)
            .new_tree(&mut runner)
            .expect("a stream")
            .current();
        match stream(&machine, &raws) {
            Ok(steps) => cases.push(json!({"template": text, "steps": steps})),
            Err(broken) => panic!("{broken}\ntemplate: {text}\nstream: {raws:?}"),
        }
    }
    cases.push(fixed_case());
    json!({
        "about": "Written by orch-agent/tests/run_host_corpus.rs (ORCH_BLESS=1): what the Rust run host decides on two runs with faults; the bindings' tests replay it.",
        "questionTtlSeconds": TTL_MS / 1000,
        "cases": cases,
    })
}

/// A fixed stream every binding replays whatever the random ones reach: an approval of
/// one delivery is not used by another delivery of the same call; a call that ran,
/// delivered again after a restore, is not run again; a running call's end reaches the
/// restored host; the other run's question is not answered here.
fn fixed_case() -> Value {
    let text = r#"{"agentId":"fixed","orchestration":{"steps":[{"availableTools":{"approve":["c"]},"isDefault":true,"name":"Start"}]},"tools":["a","b","c","d"]}"#;
    let machine = Arc::new(
        orch_codegen::compile_json(text, None)
            .to_machine()
            .expect("the fixed template compiles"),
    );
    let begin = |run: usize, id: u8, tool: usize, args: usize| Raw::Begin {
        run,
        id,
        tool,
        args,
        ask: true,
    };
    let answer = |pick: usize, fault: Fault| Raw::Answer {
        pick,
        approved: true,
        fault,
    };
    let finish = |pick: usize| Raw::Finish {
        pick,
        stray: false,
        result: 2,
    };
    let raws = [
        begin(0, 1, 2, 2),          // c, call_1: asked
        answer(0, Fault::None),     // approved
        begin(0, 2, 2, 2),          // c again, call_2: not on call_1's approval
        begin(0, 1, 2, 2),          // call_1 runs
        finish(0),                  // recorded
        Raw::Restore { run: 0 },    // a restart
        Raw::Again { pick: 0 },     // call_1 again: already ran
        begin(0, 3, 0, 2),          // a, call_3 runs
        Raw::Restore { run: 0 },    // a restart while it runs
        finish(0),                  // its end reaches the new host
        begin(1, 5, 2, 2),          // run 1 asks about its own call_5
        answer(1, Fault::OtherRun), // answered on run 0: applies to nothing there
        answer(1, Fault::None),     // answered on run 1: applied
        Raw::Wait(70_000),
        begin(1, 4, 2, 3), // another call of c: asked
        Raw::Wait(70_000),
        answer(2, Fault::None), // late
    ];
    let steps = stream(&machine, &raws).unwrap_or_else(|broken| panic!("{broken}"));
    let decisions: Vec<&str> = steps
        .iter()
        .filter(|s| !matches!(s["op"].as_str(), Some("restore" | "wait")))
        .map(|s| s["decision"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        decisions,
        [
            "ask:needs_approval",
            "applied:",
            "refused:needs_approval",
            "run:",
            "free",
            "again:already_ran",
            "run:",
            "free",
            "ask:needs_approval",
            "unknown:stale_answer",
            "applied:",
            "ask:needs_approval",
            "late:stale_answer",
        ],
        "the fixed case decides as written"
    );
    json!({"template": text, "steps": steps})
}

#[test]
fn the_bindings_run_host_corpus_is_what_the_run_host_decides() {
    let fresh = keep_true(
        "../orch-py/tests/fixtures/run-host.json",
        &corpus(),
        "the run host's decisions changed: write the corpus afresh with ORCH_BLESS=1 (the bindings' tests replay it)",
    );
    // The corpus reaches every outcome and every fault.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for needed in [
        "\"run:\"",
        "\"ask:needs_approval\"",
        "\"refused:needs_approval\"",
        "\"again:already_ran\"",
        "\"again:busy\"",
        "\"again:needs_approval\"",
        "\"applied:\"",
        "\"repeated:stale_answer\"",
        "\"late:stale_answer\"",
        "\"foreign:stale_answer\"",
        "\"unknown:stale_answer\"",
        "\"not_run\"",
        "\"not_admitted\"",
        "\"op\": \"restore\"",
    ] {
        let n = fresh.matches(needed).count();
        assert!(n > 0, "the corpus never decides {needed}");
        seen.insert(needed, n);
    }
    eprintln!("run host corpus: {seen:?}");
}
