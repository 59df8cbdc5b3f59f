//! The auditor a policy writes to: the sinks (a callback, JSON lines, any
//! [`DecisionSink`]), chaining and signed checkpoints, and the rule a decision names.

use super::record::{
    AuditEvent, CheckpointRecord, CheckpointSignature, CheckpointSigner, DecisionRecord, Position,
    Rule, RECORD_VERSION,
};
use crate::policy::mode::Mode;
use crate::policy::orchestrated::Orchestrated;
use crate::policy::refusal::RefusalKind;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// Where records go. Implemented for any `Fn(&DecisionRecord) + Send + Sync` (a
/// callback) and by [`JsonLines`].
pub trait DecisionSink: Send + Sync {
    /// Takes one record. A sink that fails says why; the decision stands either way (the
    /// auditor reports the failure to stderr once per failure streak).
    fn write(&self, record: &DecisionRecord) -> Result<(), String>;

    /// Takes one signed checkpoint ([`Auditor::signed`]). A sink that keeps no
    /// checkpoints says so (the default).
    fn write_checkpoint(&self, checkpoint: &CheckpointRecord) -> Result<(), String> {
        let _ = checkpoint;
        Err("this sink keeps no checkpoints".into())
    }
}

impl<F: Fn(&DecisionRecord) + Send + Sync> DecisionSink for F {
    fn write(&self, record: &DecisionRecord) -> Result<(), String> {
        self(record);
        Ok(())
    }
}

/// JSON lines appended to a file, each flushed as it is written.
pub struct JsonLines {
    file: Mutex<std::fs::File>,
}

impl JsonLines {
    /// Appends to `path` (created if missing).
    pub fn append(path: impl AsRef<std::path::Path>) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(JsonLines {
            file: Mutex::new(file),
        })
    }
}

impl JsonLines {
    fn line(&self, mut line: String) -> Result<(), String> {
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| e.to_string())
    }
}

impl DecisionSink for JsonLines {
    fn write(&self, record: &DecisionRecord) -> Result<(), String> {
        self.line(record.to_json())
    }

    fn write_checkpoint(&self, checkpoint: &CheckpointRecord) -> Result<(), String> {
        self.line(checkpoint.to_json())
    }
}

/// Writes the decisions of one run to a sink, numbering (and optionally chaining) them.
pub struct Auditor {
    sink: Arc<dyn DecisionSink>,
    run: String,
    chained: bool,
    state: Mutex<Chain>,
    /// Set for a buffered auditor: where its records wait.
    buffer: Option<Buffer>,
    /// Set for a signing auditor ([`Auditor::signed`]).
    signing: Option<Signing>,
}

/// When and with what a signing auditor writes checkpoints.
struct Signing {
    signer: Arc<dyn CheckpointSigner>,
    every_records: u64,
    every: std::time::Duration,
}

#[derive(Default)]
struct Chain {
    seq: u64,
    prev: Option<String>,
    /// The host's tools last written, per run.
    tools: std::collections::HashMap<String, Vec<String>>,
    failing: bool,
    /// Records written since the last checkpoint, and when that was.
    pending: u64,
    last_checkpoint: Option<std::time::Instant>,
}

/// Records kept back until the host knows they happened ([`Auditor::buffered`]).
pub type Buffer = Arc<Mutex<Vec<DecisionRecord>>>;

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auditor")
            .field("run", &self.run)
            .field("chained", &self.chained)
            .finish_non_exhaustive()
    }
}

impl Auditor {
    /// An auditor of the run `run`, writing to `sink`.
    pub fn new(sink: impl DecisionSink + 'static, run: impl Into<String>) -> Self {
        Auditor {
            sink: Arc::new(sink),
            run: run.into(),
            chained: false,
            state: Mutex::default(),
            buffer: None,
            signing: None,
        }
    }

    /// Chains the records: each carries the hash of the one before and its own.
    #[must_use]
    pub fn chained(mut self) -> Self {
        self.chained = true;
        self
    }

    /// Continues a chained log that ends with `last` (after a restart): numbering and
    /// chaining go on from it.
    #[must_use]
    pub fn continuing(self, last: &DecisionRecord) -> Self {
        self.continuing_after(last.seq, last.hash.clone())
    }

    /// Continues a chained log whose last line (a record or a checkpoint, see
    /// [`super::last_link`]) has number `seq` and hash `hash`.
    #[must_use]
    pub fn continuing_after(self, seq: u64, hash: Option<String>) -> Self {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.seq = seq;
            state.prev = hash;
        }
        self
    }

    /// Chains the records and signs checkpoints with `signer`: one after every
    /// `every_records` records, one after the first record written `every` or more
    /// after the last checkpoint, and one when [`Auditor::checkpoint`] is called or the
    /// auditor is dropped (a host's shutdown) — each only when records were written
    /// since the last. A host with a timer calls [`Auditor::checkpoint_if_due`] on it.
    #[must_use]
    pub fn signed(
        mut self,
        signer: Arc<dyn CheckpointSigner>,
        every_records: u64,
        every: std::time::Duration,
    ) -> Self {
        self.chained = true;
        self.signing = Some(Signing {
            signer,
            every_records: every_records.max(1),
            every,
        });
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_checkpoint = Some(std::time::Instant::now());
        self
    }

    /// Writes a signed checkpoint now, if records were written since the last (a
    /// signing auditor; otherwise nothing).
    pub fn checkpoint(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.checkpoint_locked(&mut state);
    }

    /// Writes a signed checkpoint if records wait and the interval has passed since the
    /// last (for a host's timer).
    pub fn checkpoint_if_due(&self) {
        let Some(signing) = &self.signing else { return };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state
            .last_checkpoint
            .is_none_or(|at| at.elapsed() >= signing.every)
        {
            self.checkpoint_locked(&mut state);
        }
    }

    /// Signs and writes a checkpoint when records wait.
    fn checkpoint_locked(&self, state: &mut Chain) {
        let Some(signing) = &self.signing else { return };
        if state.pending == 0 {
            return;
        }
        let Some(seq) = state.seq.checked_add(1) else {
            return;
        };
        let mut checkpoint = CheckpointRecord {
            v: RECORD_VERSION,
            seq,
            time: now_rfc3339(),
            checkpoint: CheckpointSignature {
                key: signing.signer.key_id(),
                sig: None,
            },
            prev: state.prev.clone(),
            hash: None,
        };
        checkpoint.checkpoint.sig = Some(signing.signer.sign(&checkpoint.signed_message()));
        let hash = checkpoint.digest();
        checkpoint.hash = Some(hash.clone());
        match self.sink.write_checkpoint(&checkpoint) {
            Ok(()) => {
                state.seq = seq;
                state.prev = Some(hash);
                state.pending = 0;
                state.last_checkpoint = Some(std::time::Instant::now());
            }
            Err(why) => orch_runtime::eprintln_printable!(
                "orch: warning: the decision log's checkpoint could not be written ({why}); decisions go on (run `{}`)",
                self.run
            ),
        }
    }

    /// An auditor of the run `run` that keeps its records in a [`Buffer`] instead of
    /// writing them: a host that decides inside a compare-and-set loop (an attempt may be
    /// retried) clears the buffer before each attempt and relays what the successful
    /// one recorded ([`Auditor::relay`]).
    pub fn buffered(run: impl Into<String>) -> Self {
        let buffer: Buffer = Arc::default();
        let sink = Arc::clone(&buffer);
        let mut auditor = Auditor::new(
            move |r: &DecisionRecord| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(r.clone());
            },
            run,
        );
        auditor.buffer = Some(buffer);
        auditor
    }

    /// The records a buffered auditor kept, taken out of it (none for another auditor).
    pub fn take_buffered(&self) -> Vec<DecisionRecord> {
        match &self.buffer {
            Some(b) => std::mem::take(&mut *b.lock().unwrap_or_else(PoisonError::into_inner)),
            None => Vec::new(),
        }
    }

    /// Writes records made elsewhere (by a buffered auditor), numbering and chaining
    /// them in this log; a record of the host's tools is skipped when its run's tools
    /// were written already.
    pub fn relay(&self, records: impl IntoIterator<Item = DecisionRecord>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for record in records {
            self.write_locked(&mut state, record);
        }
    }

    /// Writes the record of `event`, which took `session` from `before` to where it
    /// stands now, decided by a policy that enforces its decisions.
    #[allow(clippy::too_many_arguments)]
    pub fn emit<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        before: Position,
        event: AuditEvent,
        decision: &str,
        rule: Option<Rule>,
        outcome: Option<String>,
        message: Option<String>,
    ) {
        let decided = (decision, rule, outcome, message);
        self.emit_in(Mode::Enforce, session, before, event, decided);
    }

    /// [`Auditor::emit`] by a policy in `mode`: the record says the mode when it is
    /// [`Mode::Observe`] (its decision was recorded, not enforced). `decided` is the
    /// decision, the rule, the outcome and orch's message.
    pub fn emit_in<S: Orchestrated + ?Sized>(
        &self,
        mode: Mode,
        session: &S,
        before: Position,
        event: AuditEvent,
        decided: (&str, Option<Rule>, Option<String>, Option<String>),
    ) {
        let (decision, rule, outcome, message) = decided;
        let record = DecisionRecord {
            v: RECORD_VERSION,
            seq: 0,
            time: now_rfc3339(),
            run: self.run.clone(),
            fingerprint: format!("{:016x}", session.fingerprint()),
            event,
            before,
            after: Position::of(session),
            decision: decision.to_owned(),
            rule,
            outcome,
            message,
            mode,
            prev: None,
            hash: None,
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.write_locked(&mut state, record);
    }

    /// Numbers, chains and writes one record.
    fn write_locked(&self, state: &mut Chain, mut record: DecisionRecord) {
        if let AuditEvent::Tools { names } = &record.event {
            if state.tools.get(&record.run) == Some(names) {
                return;
            }
            state.tools.insert(record.run.clone(), names.clone());
        }
        // A log continued from a record numbered u64::MAX cannot number another.
        let Some(seq) = state.seq.checked_add(1) else {
            if !state.failing {
                state.failing = true;
                orch_runtime::eprintln_printable!(
                    "orch: warning: the decision log's record numbers are used up (the last is {}); decisions go on unrecorded (run `{}`)",
                    state.seq, record.run
                );
            }
            return;
        };
        state.seq = seq;
        record.seq = state.seq;
        record.prev = None;
        record.hash = None;
        if self.chained {
            record.prev = state.prev.take();
            let hash = record.digest();
            record.hash = Some(hash.clone());
            state.prev = Some(hash);
        }
        match self.sink.write(&record) {
            Ok(()) => {
                state.failing = false;
                if let Some(signing) = &self.signing {
                    state.pending = state.pending.saturating_add(1);
                    let late = state
                        .last_checkpoint
                        .is_some_and(|at| at.elapsed() >= signing.every);
                    if state.pending >= signing.every_records || late {
                        self.checkpoint_locked(state);
                    }
                }
            }
            Err(why) if !state.failing => {
                state.failing = true;
                orch_runtime::eprintln_printable!(
                    "orch: warning: the decision log could not be written ({why}); decisions go on (run `{}`)",
                    record.run
                );
            }
            Err(_) => {}
        }
    }
}

impl Drop for Auditor {
    /// A signing auditor's last checkpoint: the records since the one before are
    /// anchored at shutdown.
    fn drop(&mut self) {
        self.checkpoint();
    }
}

/// The rule behind a call's refusal of `kind` in `session` (judged before the call).
pub fn rule_of<S: Orchestrated + ?Sized>(session: &S, tool: &str, kind: RefusalKind) -> Rule {
    let step = session.step_name().map(str::to_owned);
    match (kind, step) {
        (RefusalKind::UnknownTool | RefusalKind::Unavailable, _) => Rule::Host,
        (RefusalKind::NeedsApproval | RefusalKind::Rejected, step) => Rule::Gate { step },
        (RefusalKind::OutOfSequence, Some(step)) => Rule::Sequence {
            step,
            position: session.sequence_index(),
            expected: session
                .expected_tools()
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        },
        (_, Some(step)) => Rule::Step {
            pattern: session.deny_pattern(tool).map(str::to_owned),
            step,
        },
        (_, None) => Rule::NoStep,
    }
}

/// The rule that admitted a call in `session` (judged before the call).
pub fn rule_admitting<S: Orchestrated + ?Sized>(session: &S) -> Rule {
    match session.step_name() {
        None => Rule::NoStep,
        Some(step) => match session.expected_tools() {
            Some(expected) => Rule::Sequence {
                step: step.to_owned(),
                position: session.sequence_index(),
                expected: expected.into_iter().map(str::to_owned).collect(),
            },
            None => Rule::Step {
                step: step.to_owned(),
                pattern: None,
            },
        },
    }
}

/// Now, in RFC 3339 UTC with milliseconds (`2026-11-24T07:45:00.123Z`).
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(now.as_millis() as i64)
}

/// Milliseconds since the Unix epoch in RFC 3339 UTC.
fn rfc3339(ms: i64) -> String {
    let (secs, ms) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_795_505_100_000), "2026-11-24T07:25:00.000Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }
}
