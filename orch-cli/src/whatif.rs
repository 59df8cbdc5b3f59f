//! What-if replay (`orch replay LOG --template NEW.json`): a recorded decision log's
//! calls judged again under another template, call by call, as the runs actually went —
//! and what would have changed.
//!
//! Each run of the log gets a session of the new template. Every event is applied as
//! the host applied it: the host's tools, the user's messages, the questions asked and
//! answered, the tools recorded with the results the log kept. A call is judged by the
//! new template where the log judged it, against the state the calls *that ran* left:
//! a call the log admitted (or observed: a record with `"mode":"observe"` ran whatever it
//! says) is stored as it ran whatever the new template says, and a call the log refused
//! did not run, whatever the new template would have said. So a difference is exactly
//! "this call, in this run as it went, would now be decided otherwise".
//!
//! Memory stays flat in the length of the log: it is read a line at a time, and what is
//! kept is one session per run (a few hundred bytes each).

use orch_agent::audit::{rule_of, AuditEvent, Rule};
use orch_agent::{Mode, Orchestrated, Policy, Refusal, RefusalKind};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, CallDigest};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What a what-if reads of one decision record (a line of a decision log): the run, the
/// event, and what was decided — the rest (time, positions, hashes) is skipped unread.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Logged<'a> {
    /// The run.
    #[serde(borrow)]
    pub run: Cow<'a, str>,
    /// What happened.
    pub event: AuditEvent,
    /// What was decided.
    #[serde(borrow)]
    pub decision: Cow<'a, str>,
    /// The rule that decided a call.
    #[serde(default)]
    pub rule: Option<Rule>,
    /// The refusal kind, or a record's outcome.
    #[serde(default)]
    pub outcome: Option<String>,
    /// The mode of the policy that decided.
    #[serde(default)]
    pub mode: Mode,
}

/// How a call was, or would be, decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; for what happened, the call ran (admitted, recorded in observe mode, or
    /// run in a transcript).
    Admitted,
    /// Refused: the refusal kind (`not_allowed`, `out_of_sequence`, `broken_rule`, ...)
    /// and the rule in a few words ([`Rule::label`]).
    Refused {
        /// The refusal kind.
        kind: String,
        /// The rule.
        rule: String,
    },
    /// Put to a human (`needs_approval`), by the rule (a gate, or a conditional
    /// approval on arguments).
    Asked {
        /// The rule.
        rule: String,
    },
    /// Not judged: the log did not keep the call's arguments and the new template has
    /// rules on this tool's arguments.
    Unjudged,
    /// A transcript's call that did not run, or a log decision orch does not know.
    Other(String),
}

impl Verdict {
    /// `admitted`, `refused`, `asked`, `unjudged`, or the word itself.
    pub fn word(&self) -> &str {
        match self {
            Verdict::Admitted => "admitted",
            Verdict::Refused { .. } => "refused",
            Verdict::Asked { .. } => "asked",
            Verdict::Unjudged => "unjudged",
            Verdict::Other(word) => word,
        }
    }

    fn json(&self) -> Value {
        match self {
            Verdict::Refused { kind, rule } => {
                json!({"decision": "refused", "refusal": kind, "rule": rule})
            }
            Verdict::Asked { rule } => json!({"decision": "asked", "rule": rule}),
            other => json!({"decision": other.word()}),
        }
    }

    /// What the verdict was in words: "admitted", "refused (broken_rule, argument
    /// known-recipient)", "asked (gate Paid)".
    pub fn describe(&self) -> String {
        match self {
            Verdict::Refused { kind, rule } => format!("refused ({kind}, {rule})"),
            Verdict::Asked { rule } => format!("asked ({rule})"),
            other => other.word().to_owned(),
        }
    }
}

/// One call decided otherwise under the new template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The log's line (from 1), or the transcript's event (from 1).
    pub line: usize,
    /// The run.
    pub run: String,
    /// The tool called.
    pub tool: String,
    /// The new template's active step when the call came.
    pub step: Option<String>,
    /// What the log decided (or what happened, for a transcript).
    pub before: Verdict,
    /// What the new template decides.
    pub after: Verdict,
    /// The new template's words for a refusal or a question.
    pub message: Option<String>,
}

impl Change {
    /// The change as one JSON object.
    pub fn json(&self) -> Value {
        json!({
            "line": self.line, "run": self.run, "tool": self.tool, "step": self.step,
            "before": self.before.json(), "after": self.after.json(), "message": self.message,
        })
    }
}

/// The totals of a what-if replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Calls judged.
    pub calls: u64,
    /// Runs seen.
    pub runs: u64,
    /// Calls decided as before.
    pub unchanged: u64,
    /// Calls that ran (or were admitted) and would now be refused, by rule.
    pub would_refuse: BTreeMap<String, u64>,
    /// Calls that ran and would now be put to a human, by rule.
    pub would_ask: BTreeMap<String, u64>,
    /// Calls refused or asked about before that would now be admitted.
    pub would_allow: u64,
    /// Calls refused or asked about before and decided otherwise now (another kind,
    /// refused instead of asked, ...).
    pub otherwise: u64,
    /// Calls that could not be judged ([`Verdict::Unjudged`]).
    pub unjudged: u64,
}

impl Totals {
    /// How many calls that ran would now be refused.
    pub fn refused(&self) -> u64 {
        self.would_refuse.values().sum()
    }

    /// How many calls that ran would now be put to a human.
    pub fn asked(&self) -> u64 {
        self.would_ask.values().sum()
    }

    /// Would the new template stop (refuse or ask about) any call the log let run?
    pub fn stops_any(&self) -> bool {
        self.refused() + self.asked() > 0
    }

    /// The totals as one JSON object.
    pub fn json(&self) -> Value {
        json!({
            "calls": self.calls, "runs": self.runs, "unchanged": self.unchanged,
            "would_refuse": {"total": self.refused(), "by_rule": self.would_refuse},
            "would_ask": {"total": self.asked(), "by_rule": self.would_ask},
            "would_allow": self.would_allow, "otherwise": self.otherwise,
            "unjudged": self.unjudged,
        })
    }

    /// "NEW would refuse 12 of 40,312 calls: 9 by rule `argument known-recipient`, 3 by
    /// `sequence Checkout`; 4 more would be asked (...); 2 refused before would run".
    pub fn sentence(&self, name: &str) -> String {
        let by = |m: &BTreeMap<String, u64>| {
            let mut parts: Vec<(&String, &u64)> = m.iter().collect();
            parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            parts
                .iter()
                .map(|(rule, n)| format!("{} by `{rule}`", thousands(**n)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut s = format!(
            "{name} would refuse {} of {} calls",
            thousands(self.refused()),
            thousands(self.calls)
        );
        if self.refused() > 0 {
            s.push_str(&format!(": {}", by(&self.would_refuse)));
        }
        match self.asked() {
            0 => s.push_str("; none more would be asked"),
            n => s.push_str(&format!(
                "; {} more would be asked: {}",
                thousands(n),
                by(&self.would_ask)
            )),
        }
        if self.would_allow > 0 {
            s.push_str(&format!(
                "; {} refused or asked about before would run",
                thousands(self.would_allow)
            ));
        }
        if self.otherwise > 0 {
            s.push_str(&format!(
                "; {} refused before would be refused otherwise",
                thousands(self.otherwise)
            ));
        }
        if self.unjudged > 0 {
            s.push_str(&format!(
                "; {} not judged (their arguments were not recorded; record them with observe mode)",
                thousands(self.unjudged)
            ));
        }
        s.push_str(&format!(
            " ({} runs, {} unchanged)",
            thousands(self.runs),
            thousands(self.unchanged)
        ));
        s
    }
}

/// `12345` as `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One run, replayed under the new template.
struct Run<'m> {
    session: DynSession<'m>,
    /// The rules for its host's tools (shared by the runs of the same tools).
    policy: Arc<Policy>,
}

/// A what-if replay under one template.
pub struct WhatIf<'m> {
    machine: &'m DynMachine,
    runs: HashMap<String, Run<'m>>,
    /// The rules for each set of host tools seen (a few: runs share them).
    policies: Vec<Arc<Policy>>,
    totals: Totals,
}

impl<'m> WhatIf<'m> {
    /// A replay under `machine` (the new template).
    pub fn new(machine: &'m DynMachine) -> Self {
        WhatIf {
            machine,
            runs: HashMap::new(),
            policies: Vec::new(),
            totals: Totals::default(),
        }
    }

    /// The totals so far.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// The rules for a host of `tools` (made once per set of tools).
    fn policy(&mut self, tools: &[String]) -> Arc<Policy> {
        if let Some(p) = self.policies.iter().find(|p| p.host_tools() == tools) {
            return Arc::clone(p);
        }
        let policy = Arc::new(Policy::new(tools.iter().cloned()));
        // A log of ever-changing tool lists keeps only the latest few.
        if self.policies.len() >= 16 {
            self.policies.remove(0);
        }
        self.policies.push(Arc::clone(&policy));
        policy
    }

    fn run(&mut self, name: &str) -> &mut Run<'m> {
        if !self.runs.contains_key(name) {
            let tools = self.machine.tools().to_vec();
            let policy = self.policy(&tools);
            let mut session = self.machine.session();
            policy.prepare(&mut session);
            self.runs.insert(name.to_owned(), Run { session, policy });
            self.totals.runs += 1;
        }
        // Inserted above when missing.
        self.runs.get_mut(name).expect("the run was just made")
    }

    /// Applies one record of the log (at `line`): a call is judged, and its
    /// [`Change`] returned when the new template decides it otherwise.
    pub fn record(&mut self, line: usize, record: &Logged<'_>) -> Option<Change> {
        if let AuditEvent::Tools { names } = &record.event {
            let policy = self.policy(names);
            let run = self.run(&record.run);
            run.policy = policy;
            run.policy.prepare(&mut run.session);
            return None;
        }
        let run = self.run(&record.run);
        match &record.event {
            AuditEvent::Tools { .. } => None,
            AuditEvent::Message { text } => {
                run.policy.message(&mut run.session, text);
                None
            }
            AuditEvent::Reset => {
                run.policy.reset(&mut run.session);
                None
            }
            AuditEvent::Ask {
                tool,
                call,
                question,
            } => {
                run.policy
                    .ask_call(&mut run.session, tool, *call, *question);
                None
            }
            AuditEvent::Answer {
                tool,
                call,
                question,
                approved,
                ..
            } => {
                let session = &mut run.session;
                run.policy
                    .answer_call(session, tool, *call, *question, *approved, None);
                None
            }
            AuditEvent::Record { tool, result } => {
                match result {
                    Some(result) => run.policy.record_result(&mut run.session, tool, result),
                    None => run.policy.record(&mut run.session, tool),
                };
                None
            }
            AuditEvent::Call {
                tool,
                call,
                arguments,
                at,
            } => {
                // What happened: a call recorded in observe mode ran, whatever its record
                // says orch would have done.
                let before = match record.mode {
                    Mode::Observe => Verdict::Admitted,
                    Mode::Enforce => logged_verdict(record),
                };
                let ran = before == Verdict::Admitted;
                let call = Judged {
                    tool,
                    digest: *call,
                    arguments: arguments.as_deref(),
                    at: *at,
                };
                self.judge(line, &record.run, call, before, ran)
            }
        }
    }

    /// Judges `call` in `run`: `before` is what happened to it, `ran` whether it ran.
    fn judge(
        &mut self,
        line: usize,
        run_name: &str,
        call: Judged<'_>,
        before: Verdict,
        ran: bool,
    ) -> Option<Change> {
        let run = self.run(run_name);
        let step = run.session.step_name().map(str::to_owned);
        let unjudged = call.arguments.is_none() && run.session.argument_rules_apply(call.tool);
        let arguments = call.arguments.unwrap_or("");
        let mut checked = Call::new(call.digest, arguments);
        checked.at = call.at;
        let (after, message) = if unjudged {
            (Verdict::Unjudged, None)
        } else {
            match run.policy.refusal_of(&run.session, call.tool, &checked) {
                None => (Verdict::Admitted, None),
                Some(refusal) => {
                    let verdict = verdict_of(&run.session, &refusal);
                    (verdict, Some(refusal.reason))
                }
            }
        };
        if ran {
            // As it ran: admitted by the new template (an approval it passes on
            // consumed, its budgets charged), or stored as running whatever it says.
            if after == Verdict::Admitted {
                let _ = run.policy.admit_call(&mut run.session, call.tool, &checked);
            } else {
                run.session.ran_call(call.tool, &checked);
            }
        }
        self.totals.calls += 1;
        if before == after {
            self.totals.unchanged += 1;
            return None;
        }
        match (&after, ran) {
            (Verdict::Unjudged, _) => self.totals.unjudged += 1,
            (Verdict::Refused { rule, .. }, true) => {
                *self.totals.would_refuse.entry(rule.clone()).or_default() += 1
            }
            (Verdict::Asked { rule }, true) => {
                *self.totals.would_ask.entry(rule.clone()).or_default() += 1
            }
            (Verdict::Admitted, _) => self.totals.would_allow += 1,
            _ => self.totals.otherwise += 1,
        }
        Some(Change {
            line,
            run: run_name.to_owned(),
            tool: call.tool.to_owned(),
            step,
            before,
            after,
            message,
        })
    }

    /// Replays a transcript (one run, `run`): each call that ran was let run; each is
    /// judged by the new template as the calls before it left the run.
    pub fn transcript(&mut self, run: &str, events: &[crate::trace::TraceEvent]) -> Vec<Change> {
        use crate::trace::TraceEvent;
        let ran = crate::trace::ran_ids(events);
        let tools = crate::trace::host_tools(self.machine, events);
        {
            let policy = self.policy(&tools);
            let r = self.run(run);
            r.policy = policy;
            r.policy.prepare(&mut r.session);
        }
        let mut changes = Vec::new();
        for (i, e) in events.iter().enumerate() {
            match e {
                TraceEvent::Message(text) => {
                    let r = self.run(run);
                    r.policy.message(&mut r.session, text);
                }
                TraceEvent::Approved(call) => self.run(run).session.approve(*call),
                // A call that ran is recorded with its judgement (as `check-trace` does).
                TraceEvent::Ran(_) => {}
                TraceEvent::Call {
                    id,
                    tool,
                    call,
                    arguments,
                    at,
                } => {
                    let did_run = ran.contains(id.as_str());
                    let before = match did_run {
                        true => Verdict::Admitted,
                        false => Verdict::Other("not run".into()),
                    };
                    let judged = Judged {
                        tool,
                        digest: *call,
                        arguments: Some(arguments),
                        at: *at,
                    };
                    if let Some(change) = self.judge(i + 1, run, judged, before, did_run) {
                        changes.push(change);
                    }
                    if did_run {
                        let r = self.run(run);
                        r.policy.record(&mut r.session, tool);
                    }
                }
            }
        }
        changes
    }
}

/// A call to judge.
struct Judged<'a> {
    tool: &'a str,
    digest: CallDigest,
    arguments: Option<&'a str>,
    at: Option<u64>,
}

/// What a record of a call says was decided.
fn logged_verdict(record: &Logged<'_>) -> Verdict {
    let rule = record.rule.as_ref().map(Rule::label).unwrap_or_default();
    match record.decision.as_ref() {
        "admitted" => Verdict::Admitted,
        "needs_approval" => Verdict::Asked { rule },
        "refused" | "rejected" => Verdict::Refused {
            kind: record
                .outcome
                .clone()
                .unwrap_or_else(|| record.decision.to_string()),
            rule,
        },
        other => Verdict::Other(other.to_owned()),
    }
}

/// The verdict of a refusal in `session`.
fn verdict_of<S: Orchestrated + ?Sized>(session: &S, refusal: &Refusal) -> Verdict {
    let rule = match &refusal.rule {
        Some(name) => Rule::Argument {
            step: session.step_name().map(str::to_owned),
            name: name.clone(),
        },
        None => rule_of(session, &refusal.tool, refusal.kind),
    }
    .label();
    match refusal.kind {
        RefusalKind::NeedsApproval => Verdict::Asked { rule },
        kind => Verdict::Refused {
            kind: kind.as_str().to_owned(),
            rule,
        },
    }
}
