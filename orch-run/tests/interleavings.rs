//! Every interleaving of the run protocol's store writes across instances, with crashes
//! and lapsing leases, checked against a reference kept apart from the protocol's code.
//!
//! A run's record lives behind compare-and-set. Each instance drives its calls through
//! the protocol as `orch mcp` and `orch policy` do: *admit* (read the record, one look
//! with [`run::admit`], compare-and-set; a conflict reads again), the tool runs (its
//! result: ran, did not run, lost), *settle* (read, [`run::settle`], compare-and-set).
//! A gated call is asked about first, and its answer — possibly delivered to two
//! instances at once, a replayed answer — is a second call carrying the question's
//! ticket. The explorer tries, depth first, every order of every instance's reads and
//! writes, every result, a crash of any instance between any two of its store writes,
//! and time passing beyond any lease, then drains the run (every lease lapses, one more
//! call is made) and checks:
//!
//! - no call is admitted while another call's lease holds, or while the run is held;
//! - an approval admits at most one call;
//! - what the record holds is what the calls' fates say, per the template's
//!   `lostResults`: a call recorded ⇔ it ran and its own result settled it, or its
//!   result was lost (timed out, its instance crashed, its lease lapsed and another
//!   call's admission settled it) and its tool's rule is `ran`; a lost call of a `hold`
//!   tool leaves the run held.

use orch_agent::protocol::Question;
use orch_agent::{Gate, Policy};
use orch_run::{self as run, Admission, Ended, RunError, Settled};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::Call;
use orch_store::lease::Record;
use std::time::Duration;

/// `a` counts as run when lost, `b` is retried, `c` holds the run; `g` needs approval
/// (and holds when lost); `z` is the drain's call.
const TEMPLATE: &str = r#"{
  "agentId": "interleavings",
  "tools": ["a", "b", "c", "g", "z"],
  "orchestration": {
    "lostResults": {"ran": ["a"], "retry": ["b", "z"]},
    "steps": [{"name": "Any", "isDefault": true,
               "availableTools": {"approve": ["g"]}}]
  }
}"#;

/// How long a lease lasts unless the explorer lets time pass beyond it.
const LEASE: Duration = Duration::from_secs(3600);

/// What a lost result of `tool` means (the template's `lostResults`).
fn rule(tool: &str) -> Fate {
    match tool {
        "a" => Fate::Recorded,
        "b" | "z" => Fate::NotRecorded,
        _ => Fate::Held,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Recorded,
    NotRecorded,
    Held,
}

/// One call an instance makes.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A call of `tool`; a gated one is asked about.
    Call(&'static str),
    /// The answer to the latest question asked (approved), as the retried call.
    Answer,
}

/// What the tool's run came to, as the instance sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Result_ {
    Ran,
    NotRun,
    Lost,
}

#[derive(Clone, Debug)]
enum Pc {
    /// About to admit `steps[at]`, having read (`Some`) or not.
    Admit(Option<(u64, Record)>),
    /// Admitted under `token`: the tool runs.
    Running {
        token: u64,
        call: usize,
    },
    /// Settling `call` with `result`, having read or not.
    Settle {
        token: u64,
        call: usize,
        result: Result_,
        read: Option<(u64, Record)>,
    },
    Done,
}

#[derive(Clone, Debug)]
struct Instance {
    steps: Vec<Step>,
    at: usize,
    pc: Pc,
}

/// A call that ran (was admitted), and what became of it.
#[derive(Clone, Debug)]
struct Ran {
    tool: &'static str,
    token: u64,
    /// The ticket of the approval it was admitted on.
    ticket: Option<u64>,
    /// What its result was (`None`: its instance crashed before it settled).
    result: Option<Result_>,
    /// Settled by its own result (the lease was still its own).
    own: bool,
    /// Its lapsed lease was settled by another call's admission.
    by_other: bool,
    /// Time has passed beyond its lease.
    lapsed: bool,
}

#[derive(Clone, Debug)]
struct World {
    version: u64,
    record: Option<Record>,
    instances: Vec<Instance>,
    ran: Vec<Ran>,
    /// Questions asked, in order.
    questions: Vec<Question>,
    /// Was the run held when a call was admitted (a violation), or did two leases hold
    /// at once?
    violation: Option<String>,
}

struct Explorer<'m> {
    machine: &'m DynMachine,
    policy: Policy,
    finals: usize,
}

impl<'m> Explorer<'m> {
    fn restore(&self, snapshot: Option<&[u8]>) -> Result<DynSession<'m>, RunError> {
        run::restore(self.machine, &self.policy, snapshot)
    }

    /// Every action possible in `w`: (instance, choice) pairs, and lapses.
    fn explore(&mut self, w: World) {
        if let Some(v) = &w.violation {
            panic!("{v}\n{w:#?}");
        }
        let mut moved = false;
        for i in 0..w.instances.len() {
            // A crash matters only where a call is admitted and not settled: while it
            // runs, and between reading the record to settle it and writing it.
            let choices = match &w.instances[i].pc {
                Pc::Done => 0,
                Pc::Running { .. } => 4, // ran, not run, lost, crash
                Pc::Settle { read: Some(_), .. } => 2, // settle, crash
                Pc::Admit(_) | Pc::Settle { read: None, .. } => 1,
            };
            for choice in 0..choices {
                let mut next = w.clone();
                self.step(&mut next, i, choice);
                self.explore(next);
                moved = true;
            }
        }
        // Time passes beyond a lease that has not lapsed yet.
        for r in 0..w.ran.len() {
            let in_store = w
                .record
                .as_ref()
                .and_then(|rec| rec.lease.as_ref())
                .is_some_and(|l| l.token == w.ran[r].token && !l.held);
            if in_store && !w.ran[r].lapsed {
                let mut next = w.clone();
                lapse(&mut next, r);
                self.explore(next);
                moved = true;
            }
        }
        if !moved {
            self.drain_and_check(w);
        }
    }

    /// Instance `i` takes its next action (`choice`: which result, or a crash).
    fn step(&mut self, w: &mut World, i: usize, choice: usize) {
        let pc = w.instances[i].pc.clone();
        match pc {
            Pc::Settle { call, .. } if choice == 1 => {
                // Crashed between reading the record and settling: the result is lost.
                w.ran[call].result = None;
                w.instances[i].pc = Pc::Done;
            }
            Pc::Admit(None) | Pc::Settle { read: None, .. } => {
                let read = Some((w.version, w.record.clone().unwrap_or_default()));
                w.instances[i].pc = match pc {
                    Pc::Admit(_) => Pc::Admit(read),
                    Pc::Settle {
                        token,
                        call,
                        result,
                        ..
                    } => Pc::Settle {
                        token,
                        call,
                        result,
                        read,
                    },
                    _ => unreachable!(),
                };
            }
            Pc::Admit(Some((version, mut record))) => self.admit(w, i, version, &mut record),
            Pc::Running { token, call } => {
                let result = match choice {
                    0 => Result_::Ran,
                    1 => Result_::NotRun,
                    2 => Result_::Lost,
                    _ => {
                        w.ran[call].result = None;
                        w.instances[i].pc = Pc::Done;
                        return;
                    }
                };
                w.ran[call].result = Some(result);
                w.instances[i].pc = Pc::Settle {
                    token,
                    call,
                    result,
                    read: None,
                };
            }
            Pc::Settle {
                token,
                call,
                result,
                read: Some((version, mut record)),
            } => {
                let outcome = match result {
                    Result_::Ran => Ended::Ran,
                    Result_::NotRun => Ended::NotRun,
                    Result_::Lost => Ended::Lost,
                };
                let restore = |s: Option<&[u8]>| self.restore(s);
                let ((settled, write), _) = run::settle(
                    &mut record,
                    self.machine,
                    &self.policy,
                    restore,
                    Some(token),
                    outcome,
                    None,
                    false,
                )
                .expect("settles");
                if write && w.version != version {
                    // Conflict: read again.
                    w.instances[i].pc = Pc::Settle {
                        token,
                        call,
                        result,
                        read: None,
                    };
                    return;
                }
                if write {
                    commit(w, record);
                    w.ran[call].own = true;
                } else {
                    assert!(
                        matches!(settled, Settled::Lapsed | Settled::Held),
                        "{settled:?}"
                    );
                }
                self.next_call(w, i);
            }
            Pc::Done => {}
        }
    }

    fn next_call(&self, w: &mut World, i: usize) {
        let inst = &mut w.instances[i];
        inst.at += 1;
        inst.pc = match inst.at < inst.steps.len() {
            true => Pc::Admit(None),
            false => Pc::Done,
        };
    }

    /// One admission look at `record` (read at `version`) for instance `i`'s call.
    fn admit(&mut self, w: &mut World, i: usize, version: u64, record: &mut Record) {
        let step = w.instances[i].steps[w.instances[i].at];
        let (tool, gate, ticket) = match step {
            Step::Call(tool) => (
                tool,
                Gate::Ask {
                    run: "r",
                    ttl: LEASE,
                },
                None,
            ),
            Step::Answer => match w.questions.last() {
                None => {
                    // Nothing asked yet: nothing to answer.
                    self.next_call(w, i);
                    return;
                }
                Some(q) => (
                    leak(&q.tool),
                    Gate::Answer {
                        run: "r",
                        ticket: q.ticket(),
                        approved: true,
                    },
                    Some(q.nonce),
                ),
            },
        };
        let call = Call::of_text(tool, "{}");
        let before = record.clone();
        let restore = |s: Option<&[u8]>| self.restore(s);
        let (admission, write) = run::admit(
            record,
            self.machine,
            &self.policy,
            restore,
            tool,
            &call,
            gate,
            LEASE,
            None,
        )
        .expect("admits");
        if write && w.version != version {
            w.instances[i].pc = Pc::Admit(None);
            return;
        }
        if write {
            // The record as it stood when this look was committed: its lease, if any,
            // and whether it lapsed.
            if let Some(l) = &before.lease {
                if let Some(r) = w.ran.iter_mut().find(|r| r.token == l.token) {
                    let replaced = record.lease.as_ref().is_none_or(|n| n.token != l.token)
                        || record.lease.as_ref().is_some_and(|n| n.held);
                    if r.lapsed && replaced && !l.held {
                        r.by_other = true;
                    }
                }
            }
            commit(w, record.clone());
        }
        match admission {
            Admission::Admitted { token, .. } => {
                if let Some(l) = &before.lease {
                    if l.held {
                        w.violation = Some(format!("{tool} admitted while the run is held"));
                    } else if w.ran.iter().any(|r| r.token == l.token && !r.lapsed) {
                        w.violation = Some(format!(
                            "{tool} admitted while the lease of {} holds",
                            l.tool
                        ));
                    }
                }
                if let Some(t) = ticket {
                    if w.ran.iter().any(|r| r.ticket == Some(t)) {
                        w.violation = Some(format!("one approval admitted two calls of {tool}"));
                    }
                }
                w.ran.push(Ran {
                    tool,
                    token,
                    ticket,
                    result: None,
                    own: false,
                    by_other: false,
                    lapsed: false,
                });
                let call = w.ran.len() - 1;
                w.instances[i].pc = Pc::Running { token, call };
            }
            Admission::Refused { question, .. } => {
                if let Some(q) = question {
                    w.questions.push(q);
                }
                self.next_call(w, i);
            }
            Admission::Busy(_) => self.next_call(w, i),
        }
    }

    /// Every lease lapses; one more call (`z`, whose result does not come) is made, which
    /// settles any lapsed lease; then the record is checked against the calls' fates.
    fn drain_and_check(&mut self, mut w: World) {
        for r in 0..w.ran.len() {
            if !w.ran[r].lapsed && !w.ran[r].own {
                lapse(&mut w, r);
            }
        }
        w.instances = vec![Instance {
            steps: vec![Step::Call("z")],
            at: 0,
            pc: Pc::Admit(None),
        }];
        // Read and commit without interference.
        self.step(&mut w, 0, 0);
        self.step(&mut w, 0, 0);
        if let Pc::Admit(None) = w.instances[0].pc {
            panic!("the drain conflicted with nobody");
        }
        if let Pc::Running { .. } = w.instances[0].pc {
            // Its result does not count: released.
            self.step(&mut w, 0, 1);
            self.step(&mut w, 0, 0);
            self.step(&mut w, 0, 0);
        }
        if let Some(v) = &w.violation {
            panic!("{v}\n{w:#?}");
        }
        let mut want: Vec<&str> = Vec::new();
        let mut held = false;
        for r in &w.ran {
            if r.tool == "z" {
                continue;
            }
            let fate = match (r.own, r.result) {
                (true, Some(Result_::Ran)) => Fate::Recorded,
                (true, Some(Result_::NotRun)) => Fate::NotRecorded,
                (true, _) => rule(r.tool),
                (false, _) => {
                    assert!(
                        r.by_other,
                        "a call's lease was never settled: {r:?}\n{w:#?}"
                    );
                    rule(r.tool)
                }
            };
            match fate {
                Fate::Recorded => want.push(r.tool),
                Fate::NotRecorded => {}
                Fate::Held => held = true,
            }
        }
        let record = w.record.clone().unwrap_or_default();
        let session = self
            .restore(record.snapshot.as_deref())
            .expect("the record restores");
        let mut have: Vec<&str> = session.history().into_iter().flatten().collect();
        have.sort_unstable();
        want.sort_unstable();
        assert_eq!(have, want, "recorded ⇔ the calls' fates say so\n{w:#?}");
        assert_eq!(
            record.held().is_some(),
            held,
            "held ⇔ a lost call of a tool that holds\n{w:#?}"
        );
        self.finals += 1;
    }
}

/// Time passes beyond the lease of `w.ran[r]`: in the store and in every copy an
/// instance holds (time is the same for all).
fn lapse(w: &mut World, r: usize) {
    let token = w.ran[r].token;
    w.ran[r].lapsed = true;
    let expire = |rec: &mut Record| {
        if let Some(l) = rec.lease.as_mut().filter(|l| l.token == token) {
            l.expires_ms = 1;
        }
    };
    if let Some(rec) = w.record.as_mut() {
        expire(rec);
    }
    for inst in &mut w.instances {
        match &mut inst.pc {
            Pc::Admit(Some((_, rec)))
            | Pc::Settle {
                read: Some((_, rec)),
                ..
            } => expire(rec),
            _ => {}
        }
    }
}

fn commit(w: &mut World, record: Record) {
    w.version += 1;
    w.record = Some(record);
}

/// The template's own `'static` name for `name`.
fn leak(name: &str) -> &'static str {
    ["a", "b", "c", "g", "z"]
        .into_iter()
        .find(|t| *t == name)
        .expect("a template tool")
}

fn explore(programs: &[&[Step]]) -> usize {
    let machine = orch_codegen::compile_json(TEMPLATE, None)
        .to_machine()
        .expect("the template compiles");
    let mut explorer = Explorer {
        machine: &machine,
        policy: Policy::new(machine.tools().to_vec()),
        finals: 0,
    };
    let world = World {
        version: 0,
        record: None,
        instances: programs
            .iter()
            .map(|steps| Instance {
                steps: steps.to_vec(),
                at: 0,
                pc: Pc::Admit(None),
            })
            .collect(),
        ran: Vec::new(),
        questions: Vec::new(),
        violation: None,
    };
    explorer.explore(world);
    explorer.finals
}

#[test]
fn two_instances_calling_at_once_in_every_order_with_crashes_and_lapses() {
    use Step::Call;
    let mut total = 0;
    for (x, y) in [("a", "b"), ("b", "c"), ("c", "c")] {
        let t = std::time::Instant::now();
        let n = explore(&[&[Call(x)], &[Call(y)]]);
        eprintln!("{x} {y}: {n} in {:?}", t.elapsed());
        total += n;
    }
    eprintln!("{total} interleavings checked");
    assert!(total > 10_000, "only {total} interleavings");
}

#[test]
fn one_approval_delivered_to_two_instances_admits_one_call() {
    use Step::{Answer, Call};
    // One instance asks about `g`, then two instances answer it at once (a replayed
    // answer reaching another instance), in every order, with crashes and lapses.
    let n = explore(&[&[Call("g"), Answer], &[Answer]]);
    let m = explore(&[&[Call("g")], &[Answer], &[Answer]]);
    eprintln!("{} interleavings checked", n + m);
    assert!(n + m > 1_000, "only {} interleavings", n + m);
}
