//! Replaying a decision log: the events alone re-derive every decision, and the first
//! record that does not follow is named.

use super::auditor::Auditor;
use super::line::is_checkpoint;
use super::record::{AuditEvent, DecisionRecord};
use serde::Serialize;
use std::sync::{Arc, Mutex, PoisonError};

/// The first record of a log that its events do not re-derive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The 1-based line of the record.
    pub line: usize,
    /// Its sequence number, when it parsed.
    pub seq: Option<u64>,
    /// The field that differs (`fingerprint`, `decision`, `rule`, `outcome`, `message`,
    /// `before`, `after`), or `record` when the line is not a decision record.
    pub field: String,
    /// What the log says.
    pub logged: String,
    /// What the template and the events before it derive.
    pub derived: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(seq) = self.seq {
            write!(f, " (record {seq})")?;
        }
        write!(
            f,
            ": `{}` is {}, the template derives {}",
            self.field, self.logged, self.derived
        )
    }
}

/// What a replay went through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Records re-derived exactly.
    pub records: usize,
    /// Runs (distinct `run` names) among them.
    pub runs: usize,
}

/// Re-derives every decision of `log` (JSON lines of [`DecisionRecord`]s) from its events
/// alone, on fresh sessions of `machine` (one per run), and compares: the first record
/// that does not follow — another template, a changed engine, a tampered log — is the
/// `Err`. Time, numbering and hashes are not compared (`verify_chain` checks those).
pub fn replay(machine: &orch_runtime::DynMachine, log: &str) -> Result<Replayed, Divergence> {
    use crate::policy::Policy;
    use std::collections::HashMap;
    struct Run<'m> {
        session: orch_runtime::DynSession<'m>,
        policy: Policy,
        derived: Arc<Mutex<Vec<DecisionRecord>>>,
    }
    let mut runs: HashMap<String, Run<'_>> = HashMap::new();
    let mut report = Replayed::default();
    for (i, line) in log.lines().enumerate() {
        let line_no = i + 1;
        // Checkpoints sign the log; they are no event.
        if line.trim().is_empty() || is_checkpoint(line) {
            continue;
        }
        let logged: DecisionRecord = serde_json::from_str(line).map_err(|e| Divergence {
            line: line_no,
            seq: None,
            field: "record".into(),
            logged: format!("not a decision record ({e})"),
            derived: "a decision record".into(),
        })?;
        let seq = logged.seq;
        let diverge = |field: &str, logged: String, derived: String| Divergence {
            line: line_no,
            seq: Some(seq),
            field: field.into(),
            logged,
            derived,
        };
        let expected = format!("{:016x}", machine.fingerprint());
        if logged.fingerprint != expected {
            return Err(diverge(
                "fingerprint",
                logged.fingerprint.clone(),
                format!("{expected} (the template is not the one the log was written with)"),
            ));
        }
        let run = runs.entry(logged.run.clone()).or_insert_with(|| {
            let derived: Arc<Mutex<Vec<DecisionRecord>>> = Arc::default();
            let sink = Arc::clone(&derived);
            let auditor = Auditor::new(
                move |r: &DecisionRecord| {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(r.clone())
                },
                logged.run.clone(),
            );
            Run {
                session: machine.session(),
                policy: Policy::default().audited(Arc::new(auditor)),
                derived,
            }
        });
        let Run {
            session,
            policy,
            derived,
        } = run;
        // A run may be switched between enforcing and observing: each record is derived
        // in the mode it was decided in.
        if policy.mode() != logged.mode {
            *policy = std::mem::take(policy).in_mode(logged.mode);
        }
        apply(policy, session, &logged.event);
        let derived = derived.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let Some(derived) = derived else {
            return Err(diverge(
                "decision",
                logged.decision.clone(),
                "no record (the host's tools did not change)".into(),
            ));
        };
        let fields: [(&str, String, String); 7] = [
            (
                "decision",
                logged.decision.clone(),
                derived.decision.clone(),
            ),
            ("rule", show(&logged.rule), show(&derived.rule)),
            ("outcome", show(&logged.outcome), show(&derived.outcome)),
            ("message", show(&logged.message), show(&derived.message)),
            ("before", show(&logged.before), show(&derived.before)),
            ("after", show(&logged.after), show(&derived.after)),
            ("mode", show(&logged.mode), show(&derived.mode)),
        ];
        if let Some((field, l, d)) = fields.into_iter().find(|(_, l, d)| l != d) {
            return Err(diverge(field, l, d));
        }
        report.records += 1;
    }
    report.runs = runs.len();
    Ok(report)
}

/// Applies a logged event to a replayed run, as the host that wrote it did.
fn apply(
    policy: &mut crate::policy::Policy,
    session: &mut orch_runtime::DynSession<'_>,
    event: &AuditEvent,
) {
    match event {
        AuditEvent::Tools { names } => {
            let auditor = policy.auditor().cloned();
            *policy = crate::policy::Policy::new(names.iter().cloned()).in_mode(policy.mode());
            if let Some(auditor) = auditor {
                *policy = policy.clone().audited(auditor);
            }
            policy.prepare(session);
        }
        AuditEvent::Message { text } => policy.message(session, text),
        AuditEvent::Call {
            tool,
            call,
            arguments,
            at,
        } => {
            let arguments = arguments.as_deref().unwrap_or("");
            let mut checked = orch_runtime::Call::new(*call, arguments);
            checked.at = *at;
            let _ = policy.admit_call(session, tool, &checked);
        }
        AuditEvent::Record { tool, result } => match result {
            Some(result) => {
                policy.record_result(session, tool, result);
            }
            None => {
                policy.record(session, tool);
            }
        },
        AuditEvent::Ask {
            tool,
            call,
            question,
        } => policy.ask_call(session, tool, *call, *question),
        AuditEvent::Answer {
            tool,
            call,
            question,
            approved,
            reason,
            by: _,
        } => {
            let reason = reason.as_deref();
            policy.answer_call(session, tool, *call, *question, *approved, reason);
        }
        AuditEvent::Reset => policy.reset(session),
    }
}

/// A field as compact JSON, for a divergence.
fn show<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
