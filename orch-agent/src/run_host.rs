//! The run host for hosts that run their tools themselves — the bindings and every
//! framework adapter on them (Pydantic AI, the OpenAI Agents SDK, LangGraph, the AI SDK):
//! the whole life of one call, written once, so that an adapter only maps its
//! framework's objects onto four calls.
//!
//! | call | what it does |
//! | --- | --- |
//! | [`HostedSession::begin`](crate::hosted::HostedSession::begin) | judges the call and admits it ([`Begin::Run`]), refuses it, or asks a question about it whose identity is bound to the call's id ([`Begin::Ask`]) |
//! | [`HostedSession::answer_call`](crate::hosted::HostedSession::answer_call) | applies one answer to the question asked about that call id, once; a repeated, late, foreign or unknown answer gets its own [`Answered`] and changes nothing |
//! | [`HostedSession::finish`](crate::hosted::HostedSession::finish) | the tool's end: recorded only when it ran ([`Finished`]) |
//! | the same call delivered again | gets what it got the first time ([`Begin::Again`]): a call that ran is never run a second time, whatever the framework replays |
//!
//! **Questions are bound to the call's id.** The question's identity is a digest of the
//! call id, the tool, the exact arguments ([`CallDigest`]), the active step and the
//! template's fingerprint ([`question_for`]), and the session holds it (it survives
//! snapshots). So a host restored from a snapshot between the question and its answer —
//! a web app serving each request afresh — still answers its own question, and an answer
//! replayed after the call ran (a retried request, a second tab, a run resumed twice)
//! finds no question and is refused as `stale_answer`: one approval runs one call.
//!
//! **The ledger** remembers the last [`LEDGER_CALLS`] calls of this host by id: what each
//! came to, and when each question expires. A question past its expiry is closed when
//! its answer comes ([`Answered::Late`]); the session then holds no verdict, so nothing
//! waits on it. The ledger travels with the session's snapshot
//! ([`HostedSession::snapshot`](crate::hosted::HostedSession::snapshot), the snapshot's host section): a host restored from it
//! answers a re-delivery as the first host would, records a call that was running when
//! the snapshot was taken, and knows each question's expiry. A session restored from
//! bytes without a ledger starts with an empty one; the session's held question is then
//! the only guard, and it is enough for the promise above.

use crate::model::ToolCall;
use crate::policy::{ApprovalRequest, Decision, Orchestrated, RefusalKind};
use crate::protocol::{classify_text, NotRun, ToolResult, Unanswered};
use crate::Policy;
use crate::Refusal;
use ledger::{Entry, Ledger, Stage};
use orch_runtime::{Call, CallDigest, QuestionId, Verdict};
use std::time::Duration;

mod ledger;

/// How many calls a host's ledger remembers (the oldest is forgotten first).
pub const LEDGER_CALLS: usize = 1024;

/// Prefix of every question bound to a call id, so its identity is never the digest of
/// anything else.
const DOMAIN: &[u8] = b"orch.call-question.v1\0";

/// The identity of the question about the call `call_id` (`tool`, exactly `call`) asked
/// in `step` of the template `fingerprint`: SHA-256 over all of it, its first eight bytes
/// (never 0). The same call asked about in another step, another template, or under
/// another id is another question.
pub fn question_for(
    call_id: &str,
    tool: &str,
    call: CallDigest,
    step: Option<&str>,
    fingerprint: u64,
) -> QuestionId {
    let mut h = hmac_sha256::Hash::new();
    h.update(DOMAIN);
    for part in [
        call_id.as_bytes(),
        tool.as_bytes(),
        step.unwrap_or("").as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.update([u8::from(step.is_some())]);
    h.update(call.as_bytes());
    h.update(fingerprint.to_le_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    QuestionId::new(u64::from_le_bytes(first).max(1))
}

/// What to show a human about `call`, which [`RunHost::begin`] asked `question` about
/// in `session`: the call, the step, orch's `reason`, the call's digest and the question.
pub fn approval_request<S: Orchestrated + ?Sized>(
    session: &S,
    call: ToolCall,
    reason: String,
    question: QuestionId,
) -> ApprovalRequest {
    ApprovalRequest {
        step: session.step_name().map(str::to_owned),
        digest: CallDigest::of_text(&call.name, &call.arguments),
        origins: session.origins(&call.name, &call.arguments),
        call,
        reason,
        question,
    }
}

/// What [`HostedSession::begin`](crate::hosted::HostedSession::begin) does with a call that needs a human's approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnGate {
    /// Ask: the session holds a question about the call ([`Begin::Ask`]).
    Ask,
    /// Refuse it as `needs_approval`, asking nothing: for a host whose framework asks
    /// at another moment (the AI SDK's `toolApproval`, the OpenAI Agents SDK's
    /// `needs_approval`) and runs only calls it already put to a human.
    Refuse,
}

/// What [`HostedSession::begin`](crate::hosted::HostedSession::begin) came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begin {
    /// Run the tool now, then [`HostedSession::finish`](crate::hosted::HostedSession::finish) it.
    Run,
    /// Not run: why, in the words the model is sent.
    Refused(Refusal),
    /// The call needs a human's approval: the session holds this question about it (put
    /// it to the human; their answer goes to [`HostedSession::answer_call`](crate::hosted::HostedSession::answer_call) with the same
    /// call id). `refusal` is what the model is told meanwhile.
    Ask {
        /// The question's identity.
        question: QuestionId,
        /// The `needs_approval` refusal, in orch's words.
        refusal: Refusal,
    },
    /// The same call was delivered again (the same id, tool and arguments): not run
    /// again; what the model is told. A call that ran is refused as `already_ran`; one
    /// that was refused gets the same refusal; one whose question is open, its
    /// `needs_approval` refusal (nothing is asked again).
    Again(Refusal),
}

impl Begin {
    /// A stable name: `run`, `refused`, `ask`, `again`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Begin::Run => "run",
            Begin::Refused(_) => "refused",
            Begin::Ask { .. } => "ask",
            Begin::Again(_) => "again",
        }
    }

    /// What the model is told when the call does not run; `None` for [`Begin::Run`].
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Begin::Run => None,
            Begin::Refused(r) | Begin::Ask { refusal: r, .. } | Begin::Again(r) => Some(r),
        }
    }

    /// The question asked ([`Begin::Ask`] only).
    pub fn question(&self) -> Option<QuestionId> {
        match self {
            Begin::Ask { question, .. } => Some(*question),
            _ => None,
        }
    }
}

/// What [`HostedSession::answer_call`](crate::hosted::HostedSession::answer_call) came to. Only [`Answered::Applied`] changed
/// anything; every other answer is refused as it is, and nothing is asked on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    /// The answer applied to the question asked about that call: approved (the call
    /// now [`Begin::Run`]s, once) or rejected (it is refused as `rejected`).
    Applied {
        /// Was it an approval?
        approved: bool,
    },
    /// The question was answered already (a double submit, a replay): this answer is
    /// ignored; `refusal` is what a delivery of the call on it is told.
    Repeated(Refusal),
    /// The question expired before the answer came: it is closed (the session holds no
    /// verdict on it any more), and the call did not run.
    Late(Refusal),
    /// The answer names a call id this host asked about, but another call (another tool
    /// or other arguments): it applies to nothing.
    Foreign(Refusal),
    /// No question the run holds matches (never asked, or the run changed since: an
    /// event, another question, a restore of an older state): it applies to nothing.
    Unknown(Refusal),
}

impl Answered {
    /// The refusal a call delivered on this answer is told; `None` when it applied.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Answered::Applied { .. } => None,
            Answered::Repeated(r)
            | Answered::Late(r)
            | Answered::Foreign(r)
            | Answered::Unknown(r) => Some(r),
        }
    }

    /// A stable name: `applied`, `repeated`, `late`, `foreign`, `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Answered::Applied { .. } => "applied",
            Answered::Repeated(_) => "repeated",
            Answered::Late(_) => "late",
            Answered::Foreign(_) => "foreign",
            Answered::Unknown(_) => "unknown",
        }
    }
}

/// What [`HostedSession::finish`](crate::hosted::HostedSession::finish) came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finished {
    /// The tool ran and is recorded: the record's outcome word (`advanced`,
    /// `completed`, `free`, `out_of_sequence`, `not_allowed`).
    Recorded(&'static str),
    /// The result says the tool did not run (an error, a task, a request for input,
    /// something malformed): nothing recorded; the model may call it again.
    NotRun(NotRun),
    /// The call id was not admitted by [`HostedSession::begin`](crate::hosted::HostedSession::begin) (or finished already):
    /// nothing recorded.
    NotAdmitted,
}

/// The life of calls for one run, on any session ([`Orchestrated`]: a typed
/// `Session<M>` or a [`HostedSession`](crate::hosted::HostedSession)'s dynamic one) and the [`Policy`] of its host's
/// tools: the ledger of calls by id and how long a question stays answerable. It holds
/// nothing of the session; each call takes the session it works on, so a host keeps one
/// `RunHost` beside each run's session (a [`HostedSession`](crate::hosted::HostedSession) keeps its own).
#[derive(Clone, Debug)]
pub struct RunHost {
    ledger: Ledger,
    question_ttl: Duration,
}

impl Default for RunHost {
    fn default() -> Self {
        RunHost {
            ledger: Ledger::default(),
            question_ttl: crate::protocol::DEFAULT_QUESTION_TTL,
        }
    }
}

impl RunHost {
    /// A run host that has seen no call; questions stay answerable 24 hours.
    pub fn new() -> RunHost {
        RunHost::default()
    }

    /// The ledger's bytes (what goes in a snapshot's host section).
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.ledger.encode(out);
    }

    /// A run host with the ledger `bytes` hold ([`RunHost::encode`]); empty bytes are an
    /// empty ledger. `Err` says why the bytes cannot be read.
    pub fn decode(bytes: &[u8]) -> Result<RunHost, String> {
        Ok(RunHost {
            ledger: Ledger::decode(bytes)?,
            ..RunHost::default()
        })
    }

    /// How long a question asked by [`begin`](Self::begin) stays answerable (24 hours
    /// unless set).
    pub fn set_question_ttl(&mut self, ttl: Duration) {
        self.question_ttl = ttl;
    }

    /// How long a question stays answerable.
    pub fn question_ttl(&self) -> Duration {
        self.question_ttl
    }

    /// The call `call_id` of `tool` with `arguments` (JSON text) is about to run in
    /// `session`: judge it, admit it, or (`on_gate`) ask about it. `now_ms`: the host's
    /// clock (milliseconds since the Unix epoch; [`crate::protocol::now_ms`]), for the
    /// question's expiry.
    #[allow(clippy::too_many_arguments)]
    pub fn begin<S: Orchestrated + ?Sized>(
        &mut self,
        policy: &Policy,
        session: &mut S,
        call_id: &str,
        tool: &str,
        arguments: &str,
        on_gate: OnGate,
        now_ms: u64,
    ) -> Begin {
        let (entry, call) = self.ledger.look(call_id, tool, arguments);
        // The question this host saw answered about this very call, if any.
        let mut answered = None;
        if let Some(entry) = entry {
            if entry.tool != tool || entry.call != call {
                return Begin::Refused(crate::protocol::shared_id_refusal(tool, call_id));
            }
            match &entry.stage {
                Stage::Ran => return Begin::Again(already_ran(policy, session, tool, call_id)),
                Stage::Refused(refusal) => return Begin::Again(refusal.clone()),
                Stage::Running => {
                    let refusal = refusal(
                        policy,
                        session,
                        tool,
                        RefusalKind::Busy,
                        format!("error: `{tool}` was not run again: this call (`{call_id}`) is running now, and one call runs once."),
                    );
                    return Begin::Again(refusal);
                }
                Stage::Answered { question } => answered = *question,
                Stage::Asked { .. } => {}
            }
        }
        // An approval the run holds was given in answer to one question, about one
        // delivery: another delivery of the same call (another id) does not run on it,
        // and does not replace it with a question of its own.
        // (In observe mode nothing is refused: the call is judged and runs.)
        if policy.mode() == crate::policy::Mode::Enforce
            && holds_approval_for_another(session, call_id, tool, call, answered)
        {
            return Begin::Refused(refusal(
                policy,
                session,
                tool,
                RefusalKind::NeedsApproval,
                format!("error: `{tool}` was not run: the human approved this exact call for another delivery of it, not this one (`{call_id}`), and one approval runs one call."),
            ));
        }
        // The digest is taken once (canonical JSON and SHA-256 are most of a call's cost).
        // The host's clock is the call's time: budgets with a window judge by it.
        let checked = Call::new(call, arguments).at(now_ms);
        match policy.admit_call(session, tool, &checked) {
            Ok(()) => {
                self.ledger.put(call_id, tool, call, Stage::Running);
                Begin::Run
            }
            Err(refusal) if refusal.kind == RefusalKind::NeedsApproval => {
                let question = question_about(session, call_id, tool, call);
                // Asked already (the same call delivered again while its question is
                // open, here or before a restore): the human has the question; nothing
                // is asked again.
                let asked_here = match self.ledger.find(call_id) {
                    Some(Entry {
                        stage: Stage::Asked { question, .. },
                        ..
                    }) => Some(*question),
                    _ => None,
                };
                if [asked_here, Some(question)]
                    .into_iter()
                    .flatten()
                    .any(|q| holds_pending(session, call, q))
                {
                    return Begin::Again(refusal);
                }
                if on_gate == OnGate::Refuse {
                    return Begin::Refused(refusal);
                }
                policy.ask_call(session, tool, call, question);
                let ttl = u64::try_from(self.question_ttl.as_millis()).unwrap_or(u64::MAX);
                let expires_ms = now_ms.saturating_add(ttl);
                self.ledger.put(
                    call_id,
                    tool,
                    call,
                    Stage::Asked {
                        question,
                        expires_ms,
                    },
                );
                // Its answer and the admission after it come with the same bytes: kept,
                // so that their digest is not taken again.
                self.ledger.keep_text(call_id, arguments);
                Begin::Ask { question, refusal }
            }
            Err(refusal) => {
                self.ledger
                    .put(call_id, tool, call, Stage::Refused(refusal.clone()));
                Begin::Refused(refusal)
            }
        }
    }

    /// A human's answer about the call `call_id` (`tool` with `arguments`, as the call
    /// was shown): applied once, to the question [`begin`](Self::begin) asked about that
    /// very call, before it expires, while the run still holds it. `reason`: what the
    /// human said, if anything (kept in the decision log).
    #[allow(clippy::too_many_arguments)]
    pub fn answer_call<S: Orchestrated + ?Sized>(
        &mut self,
        policy: &Policy,
        session: &mut S,
        call_id: &str,
        tool: &str,
        arguments: &str,
        approved: bool,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Answered {
        let (entry, call) = self.ledger.look(call_id, tool, arguments);
        let question = match entry {
            Some(entry) if entry.tool != tool || entry.call != call => {
                return Answered::Foreign(stale(policy, session, tool));
            }
            Some(entry) => match entry.stage {
                Stage::Asked {
                    question,
                    expires_ms,
                } => {
                    if now_ms >= expires_ms {
                        session.dismiss_question(call, question);
                        self.ledger.forget(call_id);
                        return Answered::Late(late(policy, session, tool, self.question_ttl));
                    }
                    question
                }
                Stage::Answered { .. } | Stage::Running | Stage::Ran | Stage::Refused(_) => {
                    return Answered::Repeated(repeated(policy, session, tool, call_id));
                }
            },
            // Not in the ledger (a host restored from a snapshot, or never asked here):
            // the question the session would hold had this call been asked about.
            None => question_about(session, call_id, tool, call),
        };
        if policy.answer_call(session, tool, call, question, approved, reason) {
            let question = Some(question);
            self.ledger
                .put(call_id, tool, call, Stage::Answered { question });
            self.ledger.keep_text(call_id, arguments);
            Answered::Applied { approved }
        } else {
            self.ledger.forget(call_id);
            Answered::Unknown(stale(policy, session, tool))
        }
    }

    /// Closes the question [`begin`](Self::begin) asked about the call `call_id` (`tool`
    /// with `arguments`) without an answer — it expired while the host waited, or the
    /// human dismissed it: the run no longer holds it (nothing waits on it), nothing is
    /// recorded, and an answer to it that comes later applies to nothing. The same call
    /// delivered again is a new call, and asks anew. `false`: no question about that call
    /// was open.
    pub fn close_question<S: Orchestrated + ?Sized>(
        &mut self,
        session: &mut S,
        call_id: &str,
        tool: &str,
        arguments: &str,
    ) -> bool {
        let (entry, call) = self.ledger.look(call_id, tool, arguments);
        let question = match entry {
            Some(Entry {
                tool: asked,
                call: digest,
                stage: Stage::Asked { question, .. },
                ..
            }) if asked == tool && *digest == call => *question,
            Some(_) => return false,
            None => question_about(session, call_id, tool, call),
        };
        self.ledger.forget(call_id);
        session.dismiss_question(call, question)
    }

    /// A human's `decision` on `request` (what [`approval_request`] made when
    /// [`begin`](Self::begin) asked): [`answer_call`](Self::answer_call) on the call as
    /// the request shows it; a request altered since (its call no longer has its digest)
    /// is not the question the human was asked, and applies to nothing.
    pub fn answer_request<S: Orchestrated + ?Sized>(
        &mut self,
        policy: &Policy,
        session: &mut S,
        request: &ApprovalRequest,
        decision: &Decision,
        now_ms: u64,
    ) -> Answered {
        let call = &request.call;
        if CallDigest::of_text(&call.name, &call.arguments) != request.digest {
            return Answered::Unknown(stale(policy, session, &call.name));
        }
        self.answer_call(
            policy,
            session,
            &call.id,
            &call.name,
            &call.arguments,
            decision.approves(),
            decision.reason(),
            now_ms,
        )
    }

    /// The call `call_id` that [`begin`](Self::begin) admitted has ended: `ran` says
    /// whether the tool ran (it returned rather than failed), `result` is what it
    /// returned (JSON text): read by the run protocol's one rule
    /// ([`crate::protocol::classify`]) when it is a tool result in MCP's shape, and by
    /// rules on arguments that read this tool's results. Recorded only when it ran.
    pub fn finish<S: Orchestrated + ?Sized>(
        &mut self,
        policy: &Policy,
        session: &mut S,
        call_id: &str,
        tool: &str,
        ran: bool,
        result: Option<&str>,
    ) -> Finished {
        match self.ledger.find(call_id) {
            Some(entry) if entry.stage == Stage::Running && entry.tool == tool => {}
            _ => return Finished::NotAdmitted,
        }
        if !ran {
            self.ledger.forget(call_id);
            return Finished::NotRun(NotRun::Error);
        }
        if let Some(text) = result {
            if let ToolResult::NotRun(why) = mcp_result(text) {
                self.ledger.forget(call_id);
                return Finished::NotRun(why);
            }
        }
        let outcome = match result {
            Some(text) if session.reads_results_of(tool) => {
                policy.record_result(session, tool, text)
            }
            _ => policy.record(session, tool),
        };
        if let Some(entry) = self.ledger.find(call_id) {
            entry.stage = Stage::Ran;
        }
        Finished::Recorded(outcome)
    }
}

/// The identity of the question about this call in the run's state now.
fn question_about<S: Orchestrated + ?Sized>(
    session: &S,
    call_id: &str,
    tool: &str,
    call: CallDigest,
) -> QuestionId {
    question_for(
        call_id,
        tool,
        call,
        session.step_name(),
        session.fingerprint(),
    )
}

/// Does the session hold an approval of `call` given in answer to a question about
/// another delivery than `call_id`? (An approval held without a question — the
/// `approve` of a host that asks elsewhere — is for any delivery of the call.)
///
/// `answered`: the question this host saw answered about `call_id`, when its ledger
/// knows it (else the question's identity is taken again).
fn holds_approval_for_another<S: Orchestrated + ?Sized>(
    session: &S,
    call_id: &str,
    tool: &str,
    call: CallDigest,
    answered: Option<QuestionId>,
) -> bool {
    let Some(a) = session.approval() else {
        return false;
    };
    if a.call != call || a.verdict != Verdict::Approved || a.question.is_none() {
        return false;
    }
    if answered == Some(a.question) {
        return false;
    }
    a.question != question_about(session, call_id, tool, call)
}

/// Does the session hold `question` about `call`, unanswered?
fn holds_pending<S: Orchestrated + ?Sized>(
    session: &S,
    call: CallDigest,
    question: QuestionId,
) -> bool {
    session
        .approval()
        .is_some_and(|a| a.call == call && a.question == question && a.verdict == Verdict::Pending)
}

fn refusal<S: Orchestrated + ?Sized>(
    policy: &Policy,
    session: &S,
    tool: &str,
    kind: RefusalKind,
    text: String,
) -> Refusal {
    Refusal {
        tool: tool.to_owned(),
        kind,
        reason: format!("{text} {}", policy.what_now(session, true)),
        rule: None,
    }
}

/// The refusal of a call of `tool` delivered again under an id (`id`) it came under
/// before: `refused_as` `None` — it ran, and one call runs once (`already_ran`); else the
/// kind it was refused as the first time, which it is refused as again without being
/// judged afresh. The workflow's words on what is allowed now follow.
pub fn delivered_again<S: Orchestrated + ?Sized>(
    policy: &Policy,
    session: &S,
    tool: &str,
    id: &str,
    refused_as: Option<RefusalKind>,
) -> Refusal {
    let (kind, text) = match refused_as {
        None => (
            RefusalKind::AlreadyRan,
            format!("error: `{tool}` was not run again: this call (`{id}`) ran already, and one call runs once."),
        ),
        Some(kind) => (
            kind,
            format!(
                "error: `{tool}` was not run: this call (`{id}`) was delivered before and refused (`{}`); a delivery is judged once — make a new call to try again.",
                kind.as_str()
            ),
        ),
    };
    Refusal {
        tool: tool.to_owned(),
        kind,
        reason: format!("{text} {}", policy.what_now(session, true)),
        rule: None,
    }
}

fn already_ran<S: Orchestrated + ?Sized>(
    policy: &Policy,
    session: &S,
    tool: &str,
    call_id: &str,
) -> Refusal {
    delivered_again(policy, session, tool, call_id, None)
}

fn repeated<S: Orchestrated + ?Sized>(
    policy: &Policy,
    session: &S,
    tool: &str,
    call_id: &str,
) -> Refusal {
    refusal(
        policy,
        session,
        tool,
        RefusalKind::StaleAnswer,
        format!("error: `{tool}` was not run on this answer: the question about this call (`{call_id}`) was answered already, and one answer applies once."),
    )
}

fn late<S: Orchestrated + ?Sized>(
    policy: &Policy,
    session: &S,
    tool: &str,
    ttl: Duration,
) -> Refusal {
    let hours = ttl.as_secs_f64() / 3600.0;
    refusal(
        policy,
        session,
        tool,
        RefusalKind::StaleAnswer,
        format!("error: `{tool}` was not run: the question about it expired ({hours} h after it was asked) before the answer came, and is closed. Nothing was asked; call it again to put a new question to the human."),
    )
}

pub(crate) fn stale<S: Orchestrated + ?Sized>(policy: &Policy, session: &S, tool: &str) -> Refusal {
    policy.unanswered(session, tool, Unanswered::Stale)
}

/// A result in MCP's `CallToolResult` shape read by [`classify_text`]; any other text
/// (what a framework's tool returned: a string, a number, an object of its own) is a
/// tool that returned, so it ran.
fn mcp_result(text: &str) -> ToolResult {
    let shaped = serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| {
        v.as_object().is_some_and(|o| {
            o.contains_key("content") || o.contains_key("resultType") || o.contains_key("isError")
        })
    });
    match shaped {
        true => classify_text(text),
        false => ToolResult::Ran,
    }
}
