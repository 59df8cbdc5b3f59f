//! A session for a host that drives it by tool names from another language: the
//! session owns its machine (shared by every session of the template), carries the
//! [`Policy`] of the host's tools, and answers in plain Rust values. The Python and
//! JavaScript bindings wrap it; nothing here allocates on the hot path (`check`,
//! `record`, `on_user_message`, the allowed set).

use crate::policy::{Mode, RefusalKind};
use crate::run_host::{Answered, Begin, Finished, OnGate, RunHost};
use crate::{Policy, Refusal};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, CallDigest, QuestionId, Snapshot, Verdict};
use std::sync::Arc;
use std::time::Duration;

self_cell::self_cell!(
    /// A session and the machine it runs on, owned together.
    pub(crate) struct Live {
        owner: Arc<DynMachine>,
        #[covariant]
        dependent: DynSession,
    }
);

/// A session that owns its machine, with the host's tools.
pub struct HostedSession {
    pub(crate) live: Live,
    pub(crate) policy: Policy,
    /// The allowed set, computed in place.
    scratch: Vec<u64>,
    /// The life of this run's calls ([`crate::run_host`]).
    pub(crate) host: RunHost,
}

/// Why [`HostedSession::restore`] could not restore a session.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostedRestoreError {
    /// The bytes are not a snapshot (or a corrupt one).
    Read(orch_runtime::RestoreError),
    /// The snapshot does not fit this machine.
    Restore(orch_runtime::RestoreError),
}

impl std::fmt::Display for HostedRestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostedRestoreError::Read(e) => write!(f, "the snapshot cannot be read: {e}"),
            HostedRestoreError::Restore(e) => write!(f, "the snapshot cannot be restored: {e}"),
        }
    }
}

impl std::error::Error for HostedRestoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HostedRestoreError::Read(e) | HostedRestoreError::Restore(e) => Some(e),
        }
    }
}

impl HostedSession {
    /// A fresh session. `available`: the host's tools (default: every declared tool).
    pub fn new(machine: Arc<DynMachine>, available: Option<Vec<String>>) -> HostedSession {
        HostedSession::with(Live::new(machine, |m| DynSession::new(m)), available)
    }

    /// A session restored from snapshot bytes (the binary format every front end
    /// shares). `Err` says why the bytes cannot be read or restored.
    pub fn restore(
        machine: Arc<DynMachine>,
        snapshot: &[u8],
        available: Option<Vec<String>>,
    ) -> Result<HostedSession, HostedRestoreError> {
        let parsed = Snapshot::from_bytes(snapshot).map_err(HostedRestoreError::Read)?;
        // The run host's ledger, kept with the snapshot: a call delivered again after
        // the restore gets what it got before.
        let host = RunHost::decode(&parsed.host).map_err(|why| {
            HostedRestoreError::Read(orch_runtime::RestoreError::Malformed(format!(
                "the run host's calls in it cannot be read: {why}"
            )))
        })?;
        let live = Live::try_new(machine, |m| {
            DynSession::restore(m, &parsed).map(|(session, _report)| session)
        })
        .map_err(HostedRestoreError::Restore)?;
        let mut hosted = HostedSession::with(live, available);
        hosted.host = host;
        Ok(hosted)
    }

    fn with(mut live: Live, available: Option<Vec<String>>) -> HostedSession {
        let host = match available {
            Some(names) => names,
            None => live.borrow_owner().tools().to_vec(),
        };
        let policy = Policy::new(host);
        live.with_dependent_mut(|_, session| policy.prepare(session));
        HostedSession {
            live,
            policy,
            scratch: Vec::new(),
            host: RunHost::default(),
        }
    }

    /// The session, to read where it is (step, sequence index, expected tools, history,
    /// snapshot).
    pub fn session(&self) -> &DynSession<'_> {
        self.live.borrow_dependent()
    }

    /// The machine it runs on.
    pub fn machine(&self) -> &Arc<DynMachine> {
        self.live.borrow_owner()
    }

    /// Calls `f` with each tool allowed now, in declaration order (its index among the
    /// declared tools, `None` for a foreign tool), then allowed foreign tools.
    /// In observe mode ([`HostedSession::set_mode`]), every tool of the host.
    pub fn for_each_allowed(&mut self, mut f: impl FnMut(Option<usize>, &str)) {
        if self.policy.mode() == Mode::Observe {
            let machine = self.live.borrow_owner();
            for name in self.policy.host_tools() {
                f(machine.tools().iter().position(|t| t == name), name);
            }
            return;
        }
        self.live
            .borrow_dependent()
            .for_each_allowed(&mut self.scratch, f);
    }

    /// The tool the next model call must call, if any: the run protocol's one rule
    /// ([`Policy::forced_among`]), which every adapter asks instead of deciding itself.
    pub fn forced_tool(&self) -> Option<String> {
        self.policy.forced(self.session())
    }

    /// `None` when `tool` may run now, else why not.
    pub fn check(&self, tool: &str) -> Option<Refusal> {
        self.policy.admit(self.session(), tool).err()
    }

    /// [`check`](Self::check) for this exact call (`arguments`: its JSON text): a gated
    /// tool passes on a held approval of this call. Changes nothing. Judged at this
    /// machine's clock ([`check_call_at`](Self::check_call_at) takes the host's).
    pub fn check_call(&self, tool: &str, arguments: &str) -> Option<Refusal> {
        self.check_call_at(tool, arguments, crate::protocol::now_ms())
    }

    /// [`check_call`](Self::check_call) at `now_ms` (milliseconds since the Unix epoch,
    /// the host's clock): budgets with a window judge by it (semantics §17).
    pub fn check_call_at(&self, tool: &str, arguments: &str, now_ms: u64) -> Option<Refusal> {
        let call = Call::of_text(tool, arguments).at(now_ms);
        self.policy.refusal_of(self.session(), tool, &call)
    }

    /// Admits this exact call before the host runs it: an approval it passes on is
    /// consumed, and budgets charge it. `None` when it may run. Judged at this machine's
    /// clock ([`admit_at`](Self::admit_at) takes the host's).
    pub fn admit(&mut self, tool: &str, arguments: &str) -> Option<Refusal> {
        self.admit_at(tool, arguments, crate::protocol::now_ms())
    }

    /// [`admit`](Self::admit) at `now_ms` (milliseconds since the Unix epoch, the
    /// host's clock): budgets with a window judge and charge by it (semantics §17).
    pub fn admit_at(&mut self, tool: &str, arguments: &str, now_ms: u64) -> Option<Refusal> {
        let call = Call::of_text(tool, arguments).at(now_ms);
        let policy = &self.policy;
        self.live
            .with_dependent_mut(|_, session| policy.admit_call(session, tool, &call).err())
    }

    /// This exact call was put to a human: the session holds the question, with a new
    /// random identity, which is returned: [`answer`](Self::answer) needs it.
    pub fn ask(&mut self, tool: &str, arguments: &str) -> QuestionId {
        let call = CallDigest::of_text(tool, arguments);
        let policy = &self.policy;
        let question = QuestionId::random();
        self.live
            .with_dependent_mut(|_, session| policy.ask_call(session, tool, call, question));
        question
    }

    /// A human's answer to the question `question` about this exact call: applied only
    /// while the session holds that very question (once; not after an event, another
    /// question, or an answer already given). `false`: nothing changed.
    pub fn answer(
        &mut self,
        tool: &str,
        arguments: &str,
        question: QuestionId,
        approved: bool,
    ) -> bool {
        let call = CallDigest::of_text(tool, arguments);
        let policy = &self.policy;
        self.live.with_dependent_mut(|_, session| {
            policy.answer_call(session, tool, call, question, approved, None)
        })
    }

    /// A human approved this exact call: the session holds the approval.
    pub fn approve(&mut self, tool: &str, arguments: &str) {
        let call = CallDigest::of_text(tool, arguments);
        self.live
            .with_dependent_mut(|_, session| session.approve(call));
    }

    /// A human rejected this exact call: the session holds the rejection.
    pub fn reject(&mut self, tool: &str, arguments: &str) {
        let call = CallDigest::of_text(tool, arguments);
        self.live
            .with_dependent_mut(|_, session| session.reject(call));
    }

    /// The verdict held on a call, if any: the call's digest (hex) and `pending`,
    /// `approved` or `rejected`.
    pub fn approval(&self) -> Option<(String, &'static str)> {
        self.session().approval().map(|a| {
            let verdict = match a.verdict {
                Verdict::Pending => "pending",
                Verdict::Approved => "approved",
                Verdict::Rejected => "rejected",
            };
            (a.call.to_string(), verdict)
        })
    }

    /// Records that `tool` ran: the outcome's word (`advanced`, `completed`, `free`,
    /// `out_of_sequence`, `not_allowed`).
    pub fn record(&mut self, tool: &str) -> &'static str {
        self.record_outcome(tool).as_str()
    }

    /// Records that `tool` ran: the outcome.
    pub fn record_outcome(&mut self, tool: &str) -> orch_runtime::dynamic::DynOutcome {
        self.live
            .with_dependent_mut(|_, session| session.record(tool))
    }

    /// Records that the declared tool `index` (its position in the machine's tools) ran:
    /// [`record_outcome`](Self::record_outcome) without the name's lookup. `None`
    /// (nothing recorded) when the machine has no tool at `index`.
    pub fn record_index(&mut self, index: usize) -> Option<orch_runtime::dynamic::DynOutcome> {
        self.live
            .with_dependent_mut(|_, session| session.record_index(index))
    }

    /// [`record_index`](Self::record_index), the outcome's kind only (no names built
    /// for an out-of-sequence record).
    pub fn record_index_kind(&mut self, index: usize) -> Option<orch_runtime::OutcomeKind> {
        self.live
            .with_dependent_mut(|_, session| session.record_index_kind(index))
    }

    /// The allowed set's declared tools as bits (bit `i`: the machine's `i`-th tool) in
    /// `out`; `true` when a foreign host tool is allowed too.
    ///
    /// In observe mode, every tool of the host.
    pub fn allowed_bits(&self, out: &mut Vec<u64>) -> bool {
        if self.policy.mode() == Mode::Observe {
            let tools = self.machine().tools();
            out.clear();
            out.resize(tools.len().div_ceil(64).max(1), 0);
            let mut foreign = false;
            for name in self.policy.host_tools() {
                match tools.iter().position(|t| t == name) {
                    Some(i) => out[i / 64] |= 1 << (i % 64),
                    None => foreign = true,
                }
            }
            return foreign;
        }
        self.session().allowed_bits(out)
    }

    /// Records that `tool` ran and returned `result` (its text): the outcome's word,
    /// and the values rules on arguments read from this tool's results are remembered
    /// (semantics §16).
    pub fn record_result(&mut self, tool: &str, result: &str) -> &'static str {
        self.record_result_outcome(tool, result).as_str()
    }

    /// [`record_result`](Self::record_result): the outcome.
    pub fn record_result_outcome(
        &mut self,
        tool: &str,
        result: &str,
    ) -> orch_runtime::dynamic::DynOutcome {
        self.live
            .with_dependent_mut(|_, session| session.record_result(tool, result))
    }

    /// A user message: message conditions and sequence resets are evaluated.
    pub fn on_user_message(&mut self, text: &str) {
        self.live
            .with_dependent_mut(|_, session| session.on_user_message(text));
    }

    /// The host's tools change.
    pub fn set_available(&mut self, tools: Vec<String>) {
        self.policy = Policy::new(tools).in_mode(self.policy.mode());
        let policy = &self.policy;
        self.live
            .with_dependent_mut(|_, session| policy.prepare(session));
    }

    /// Enforce the template's decisions, or only judge and record them ([`Mode`]):
    /// in [`Mode::Observe`] every call is admitted and nothing is asked, every tool of
    /// the host is offered and none forced, and each decision is still taken (and
    /// recorded, when the host keeps a decision log) as in enforce mode.
    pub fn set_mode(&mut self, mode: Mode) {
        self.policy = std::mem::take(&mut self.policy).in_mode(mode);
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.policy.mode()
    }

    /// Back to a fresh session's state (the host's tools are kept).
    pub fn reset(&mut self) {
        self.live.with_dependent_mut(|_, session| session.reset());
    }

    /// The session as snapshot bytes, with the run host's ledger of calls in it (what
    /// each call delivered here came to, so that [`HostedSession::restore`] answers a
    /// call delivered again as this host would have).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.snapshot_into(&mut out);
        out
    }

    /// The same bytes as [`HostedSession::snapshot`], written into `out` (cleared
    /// first).
    pub fn snapshot_into(&self, out: &mut Vec<u8>) {
        let mut calls = Vec::new();
        self.host.encode(&mut calls);
        self.session().snapshot_with_host_into(&calls, out);
    }
}

impl HostedSession {
    /// How long a question asked by [`begin`](Self::begin) stays answerable (24 hours
    /// unless set).
    pub fn set_question_ttl(&mut self, ttl: Duration) {
        self.host.set_question_ttl(ttl);
    }

    /// [`RunHost::begin`] on this session.
    pub fn begin(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        on_gate: OnGate,
        now_ms: u64,
    ) -> Begin {
        let HostedSession {
            live, policy, host, ..
        } = self;
        live.with_dependent_mut(|_, session| {
            host.begin(policy, session, call_id, tool, arguments, on_gate, now_ms)
        })
    }

    /// [`RunHost::answer_call`] on this session.
    pub fn answer_call(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        approved: bool,
        now_ms: u64,
    ) -> Answered {
        let HostedSession {
            live, policy, host, ..
        } = self;
        live.with_dependent_mut(|_, session| {
            host.answer_call(
                policy, session, call_id, tool, arguments, approved, None, now_ms,
            )
        })
    }

    /// [`RunHost::finish`] on this session.
    pub fn finish(
        &mut self,
        call_id: &str,
        tool: &str,
        ran: bool,
        result: Option<&str>,
    ) -> Finished {
        let HostedSession {
            live, policy, host, ..
        } = self;
        live.with_dependent_mut(|_, session| {
            host.finish(policy, session, call_id, tool, ran, result)
        })
    }

    /// The refusal of a call whose answer applies to no question the run holds — for a
    /// host that knows an answer predates the question it would match (an answer that
    /// came with a request, for a question asked anew while serving that request).
    pub fn stale_answer(&self, tool: &str) -> Refusal {
        crate::run_host::stale(&self.policy, self.session(), tool)
    }

    /// The refusal of a call whose arguments are not JSON (`why`: the parser's words),
    /// before anything else is judged: the words every adapter sends.
    pub fn malformed_arguments(&self, tool: &str, why: &str) -> Refusal {
        Refusal {
            tool: tool.to_owned(),
            kind: RefusalKind::NotAllowed,
            reason: format!(
                "error: `{tool}` was not run: its arguments are not JSON ({why}); call it again with a JSON object."
            ),
            rule: None,
        }
    }

    /// The refusal of a call of a tool the host does not have: the session's own
    /// refusal when it has one, else "there is no tool" with what is allowed now.
    pub fn no_such_tool(&self, tool: &str) -> Refusal {
        match self.check(tool) {
            Some(refusal) => refusal,
            None => Refusal {
                tool: tool.to_owned(),
                kind: RefusalKind::UnknownTool,
                reason: format!(
                    "error: there is no tool `{tool}`. {}",
                    self.policy.what_now(self.session(), true)
                ),
                rule: None,
            },
        }
    }

    /// The refusal of a call whose id another call of the same model response has too
    /// ([`crate::protocol::shared_id_refusal`]).
    pub fn shared_id(&self, tool: &str, call_id: &str) -> Refusal {
        crate::protocol::shared_id_refusal(tool, call_id)
    }
}
