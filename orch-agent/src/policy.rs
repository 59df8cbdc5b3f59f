//! The orchestration rules for a model-driven loop, in one place and independent of any
//! agent framework: per model call, which tools to offer and whether to force one; per
//! tool call, admit it or refuse it with a reason the model can act on; after a tool
//! ran, record it. [`Agent`](crate::Agent) uses it; so can an adapter for another
//! framework.

use crate::audit::{rule_admitting, rule_of, AuditEvent, Auditor, Position};
use crate::model::{ToolCall, ToolChoice};
use crate::protocol::{self, Question, Ticket, Unanswered};
use orch_runtime::{Approval, Call, CallDigest, QuestionId, Verdict};
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod orchestrated;
pub(crate) mod refusal;

pub use orchestrated::Orchestrated;
pub use refusal::{ApprovalRequest, Decision, Refusal, RefusalKind, REMINDER_PREFIX};

/// What to offer the model for its next call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundPlan {
    /// The tools the session allows now, among the host's (in the host's order).
    pub offered: Vec<String>,
    /// `None` when nothing is offered; the one tool when the sequence position allows
    /// exactly one; `Auto` otherwise.
    pub tool_choice: ToolChoice,
}

/// The rules for one host: the names of the tools it can run.
///
/// ```
/// # orch_runtime::__doc_machine!();
/// use orch_agent::{Policy, ToolChoice};
/// let policy = Policy::new(["search", "think", "reflect"]);
/// let mut session = demo::Session::new();
/// policy.prepare(&mut session);
/// session.on_user_message("research this");
/// let plan = policy.plan(&session);
/// assert_eq!(plan.offered, ["search"]);
/// assert_eq!(plan.tool_choice, ToolChoice::Tool("search".into()));
/// let refused = policy.admit(&session, "think").unwrap_err();
/// assert!(refused.reason.contains("expects `search`"));
/// assert!(policy.admit(&session, "search").is_ok());
/// assert_eq!(policy.record(&mut session, "search"), "advanced");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Policy {
    host_tools: Vec<String>,
    auditor: Option<Arc<Auditor>>,
}

/// What a host that asks humans itself does about a gated call ([`Policy::admit_gated`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate<'a> {
    /// The human cannot be asked: a gated call is refused (as needing approval).
    Refuse,
    /// Ask: a gated call is refused for now, and the run holds a new [`Question`] about it.
    Ask {
        /// The run the question is asked in ([`Question::run`]).
        run: &'a str,
        /// How long the question stays answerable.
        ttl: Duration,
    },
    /// Ask an approver elsewhere: as [`Gate::Ask`], except that a call the run already
    /// holds an open question about is refused for now and the question stands (the
    /// caller retrying is not a new question: asking anew would make an approver's
    /// answer to the standing one apply to nothing).
    AskOnce {
        /// The run the question is asked in ([`Question::run`]).
        run: &'a str,
        /// How long the question stays answerable.
        ttl: Duration,
    },
    /// The human answered a question: `ticket` is what the answer carried back. It
    /// applies only if the run still holds that very question; otherwise the call is
    /// refused as [`RefusalKind::StaleAnswer`] and nothing is asked.
    Answer {
        /// The run the answer came in.
        run: &'a str,
        /// The question's ticket, as the answer carried it.
        ticket: Ticket,
        /// Approved (`true`) or rejected.
        approved: bool,
    },
}

/// A human's answer to a question ([`Policy::answer_call_as`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HumanAnswer<'a> {
    /// Approved (`true`) or rejected.
    pub approved: bool,
    /// The human's reason, if given.
    pub reason: Option<&'a str>,
    /// Who answered, when the host knows (an approver's identity).
    pub by: Option<&'a str>,
}

/// What [`Policy::admit_gated`] came to.
// Returned once per call and matched at once: boxing the refusal would cost an
// allocation on every refused call to save stack bytes nobody keeps.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gated {
    /// The call may run; `changed`: an approval was consumed (store the session).
    Admitted {
        /// Did the session change?
        changed: bool,
    },
    /// The call may not run (now).
    Refused {
        /// Why, in the words the model is sent.
        refusal: Refusal,
        /// The call is gated and the run now holds this question about it: put it to the
        /// human.
        question: Option<Question>,
        /// Did the session change (a question held, a rejection applied)?
        changed: bool,
    },
}

impl Policy {
    /// The rules for a host that can run `host_tools`.
    pub fn new<S: Into<String>>(host_tools: impl IntoIterator<Item = S>) -> Self {
        Policy {
            host_tools: host_tools.into_iter().map(Into::into).collect(),
            auditor: None,
        }
    }

    /// The same rules, writing a decision record of every event it applies to a session
    /// (the host's tools, messages, calls presented, tools recorded, questions put to a
    /// human and their answers, resets) to `auditor` ([`crate::audit`]).
    #[must_use]
    pub fn audited(mut self, auditor: Arc<Auditor>) -> Self {
        self.auditor = Some(auditor);
        self
    }

    /// The auditor, if the policy has one.
    pub fn auditor(&self) -> Option<&Arc<Auditor>> {
        self.auditor.as_ref()
    }

    /// A user message (semantics §5), recorded by the auditor.
    pub fn message<S: Orchestrated + ?Sized>(&self, session: &mut S, text: &str) {
        let before = self.auditor.as_ref().map(|_| Position::of(session));
        session.user_message(text);
        if let (Some(auditor), Some(before)) = (&self.auditor, before) {
            let event = AuditEvent::Message {
                text: text.to_owned(),
            };
            auditor.emit(session, before, event, "message", None, None, None);
        }
    }

    /// Resets the session (semantics §5), recorded by the auditor.
    pub fn reset<S: Orchestrated + ?Sized>(&self, session: &mut S) {
        let before = self.auditor.as_ref().map(|_| Position::of(session));
        session.reset_session();
        if let (Some(auditor), Some(before)) = (&self.auditor, before) {
            auditor.emit(
                session,
                before,
                AuditEvent::Reset,
                "reset",
                None,
                None,
                None,
            );
        }
    }

    /// The host's tools.
    pub fn host_tools(&self) -> &[String] {
        &self.host_tools
    }

    /// Tells the session which of its tools the host has (its available set), before a
    /// turn.
    pub fn prepare<S: Orchestrated + ?Sized>(&self, session: &mut S) {
        session.set_host_tools(&self.host_tools);
        if let Some(auditor) = &self.auditor {
            let event = AuditEvent::Tools {
                names: self.host_tools.clone(),
            };
            let here = Position::of(session);
            // Written when the tools differ from the last ones written.
            auditor.emit(session, here, event, "tools", None, None, None);
        }
    }

    /// The tools the session allows now, among the host's (in the host's order).
    pub fn offered<S: Orchestrated + ?Sized>(&self, session: &S) -> Vec<String> {
        session.allowed_among(&self.host_tools)
    }

    /// What to offer the model for its next call.
    pub fn plan<S: Orchestrated + ?Sized>(&self, session: &S) -> RoundPlan {
        let offered = self.offered(session);
        let tool_choice = match Self::forced_among(session, &offered) {
            _ if offered.is_empty() => ToolChoice::None,
            Some(tool) => ToolChoice::Tool(tool.to_owned()),
            None => ToolChoice::Auto,
        };
        RoundPlan {
            offered,
            tool_choice,
        }
    }

    /// The tool the next model call must call, if any (the run protocol's one rule, every
    /// host's): the one an unfinished sequence expects, when it is the only tool `offered`
    /// — and no human's question or rejection is held, since the model must then be free
    /// to answer instead of calling the gated tool again.
    pub fn forced_among<'t, S: Orchestrated + ?Sized>(
        session: &S,
        offered: &'t [String],
    ) -> Option<&'t str> {
        let waiting = session
            .approval()
            .is_some_and(|a| a.verdict != Verdict::Approved);
        match offered {
            [only] if !waiting && session.expected_tools().is_some() => Some(only),
            _ => None,
        }
    }

    /// Admits a call of `tool`, or refuses it with the reason: the host has no such
    /// tool, or the orchestration does not allow it now (not in the step, out of
    /// sequence, unavailable). Changes nothing.
    pub fn admit<S: Orchestrated + ?Sized>(&self, session: &S, tool: &str) -> Result<(), Refusal> {
        self.known(session, tool)?;
        session
            .check_tool(tool)
            .map_err(|refusal| self.refusal(session, tool, refusal))
    }

    /// Admits this exact call of `tool` before it runs (semantics §13, §16):
    /// [`Policy::admit`], then the template's rules on the call's arguments (a broken one
    /// refuses it as [`RefusalKind::BrokenRule`]; a conditional `approve` that holds
    /// gates it), and a gated tool passes on a human's approval of this call held by the
    /// session — consuming it, so one approval runs one call — and is refused as
    /// [`RefusalKind::Rejected`] on a held rejection. `call` is
    /// [`Call::of_text`]`(tool, arguments)`.
    pub fn admit_call<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: &Call<'_>,
    ) -> Result<(), Refusal> {
        // What the record needs of the state before the call (nothing without a log).
        let audit = self.auditor.as_ref().map(|auditor| {
            let before = Position::of(session);
            (auditor, before, session.approval(), rule_admitting(session))
        });
        let result = self.known(session, tool).and_then(|()| {
            session
                .admit_call(tool, call)
                .map_err(|refusal| self.refusal(session, tool, refusal))
        });
        if let Some((auditor, before, held, admitting)) = audit {
            let event = Self::call_event(&*session, tool, call);
            match &result {
                Ok(()) => {
                    // An approval consumed: the gate decided, with the human.
                    let rule = if session.approval() != held {
                        crate::audit::Rule::Gate {
                            step: before.step.clone(),
                        }
                    } else {
                        admitting
                    };
                    auditor.emit(session, before, event, "admitted", Some(rule), None, None);
                }
                Err(refusal) => Self::log_refusal(auditor, session, before, event, refusal),
            }
        }
        result
    }

    /// Admits this exact call of `tool` for a host that asks a human about gated calls
    /// itself (an MCP gateway, a policy server): [`Policy::admit_call`], with the human's
    /// side of `gate` applied first — an answer to the question the session holds, or,
    /// for a gated call with no answer, the question put and held
    /// ([`Policy::ask_call`]). What came of it says whether the session changed (the
    /// host then stores it with whatever else it writes).
    pub fn admit_gated<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: &Call<'_>,
        gate: Gate<'_>,
    ) -> Gated {
        let held = session.approval();
        if let Gate::Answer {
            run,
            ticket,
            approved,
        } = gate
        {
            if let Err(why) =
                self.answer_ticket(session, run, tool, &call.digest, &ticket, approved)
            {
                return Gated::Refused {
                    refusal: self.unanswered(session, tool, why),
                    question: None,
                    changed: false,
                };
            }
        }
        match self.admit_call(session, tool, call) {
            Ok(()) => Gated::Admitted {
                // An approval consumed, or arguments remembered and budgets charged.
                changed: session.approval() != held || session.admit_changes_memory(tool),
            },
            Err(refusal) => {
                let standing = |held: Option<Approval>| {
                    held.is_some_and(|a| a.call == call.digest && a.verdict == Verdict::Pending)
                };
                let question = match gate {
                    Gate::AskOnce { .. } if standing(held) => None,
                    Gate::Ask { run, ttl } | Gate::AskOnce { run, ttl }
                        if refusal.kind == RefusalKind::NeedsApproval =>
                    {
                        let mut question = Question::new(
                            run,
                            session.step_name(),
                            tool,
                            call.digest,
                            session.fingerprint(),
                            ttl,
                        );
                        question.origins = session.origins(tool, call.arguments);
                        self.ask_call(session, tool, call.digest, question.id());
                        Some(question)
                    }
                    _ => None,
                };
                // A budget that counts refusals charged this one.
                let counted =
                    refusal.kind != RefusalKind::NeedsApproval && session.refusal_changes_memory();
                Gated::Refused {
                    refusal,
                    question,
                    changed: session.approval() != held || counted,
                }
            }
        }
    }

    /// Applies a human's answer that carried back `ticket` to the call `call` of `tool`
    /// in `run`: only while the run holds the very question the ticket was issued for —
    /// same run, step, tool, call, template and expiry, not expired, not answered — and
    /// otherwise why not, changing nothing.
    pub fn answer_ticket<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        run: &str,
        tool: &str,
        call: &CallDigest,
        ticket: &Ticket,
        approved: bool,
    ) -> Result<(), Unanswered> {
        let answer = HumanAnswer {
            approved,
            reason: None,
            by: None,
        };
        self.answer_ticket_as(session, run, tool, call, ticket, answer)
    }

    /// [`Policy::answer_ticket`] for an answer whose giver and reason the host knows
    /// (an approver who is not the run's user): the auditor records both.
    pub fn answer_ticket_as<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        run: &str,
        tool: &str,
        call: &CallDigest,
        ticket: &Ticket,
        answer: HumanAnswer<'_>,
    ) -> Result<(), Unanswered> {
        if ticket.call != *call {
            return Err(Unanswered::OtherCall);
        }
        if protocol::now_ms() >= ticket.expires_ms {
            return Err(Unanswered::Expired);
        }
        let id = ticket.question_id(run, session.step_name(), tool, session.fingerprint());
        match self.answer_call_as(session, tool, *call, id, answer) {
            true => Ok(()),
            false => Err(Unanswered::Stale),
        }
    }

    /// The refusal of a call whose answer applied to nothing.
    pub fn unanswered<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        tool: &str,
        why: Unanswered,
    ) -> Refusal {
        Refusal {
            tool: tool.to_owned(),
            kind: RefusalKind::StaleAnswer,
            reason: format!(
                "error: `{tool}` was not run: {why}. Nothing was asked; call it again to put a new question to the human. {}",
                self.what_now(session, true)
            ),
            rule: None,
        }
    }

    /// The refusal [`Policy::admit_call`] would answer for this call, without admitting
    /// anything (no approval is consumed); a refusal is recorded by the auditor as
    /// `admit_call` records it. For a host that refuses a call on its own grounds too
    /// (rig, for a call outside the tools it offered) and must say orch's reason when
    /// there is one.
    pub fn refusal_of<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        tool: &str,
        call: &Call<'_>,
    ) -> Option<Refusal> {
        let refusal = match self.known(session, tool) {
            Err(refusal) => refusal,
            Ok(()) => match session.check_call(tool, call) {
                Ok(()) => return None,
                Err(refusal) => self.refusal(session, tool, refusal),
            },
        };
        if let Some(auditor) = &self.auditor {
            let event = Self::call_event(session, tool, call);
            Self::log_refusal(auditor, session, Position::of(session), event, &refusal);
        }
        Some(refusal)
    }

    /// The record of a call presented: its arguments kept only when a rule on
    /// arguments judges them (so that a replay judges them again).
    fn call_event<S: Orchestrated + ?Sized>(
        session: &S,
        tool: &str,
        call: &Call<'_>,
    ) -> AuditEvent {
        AuditEvent::Call {
            tool: tool.to_owned(),
            call: call.digest,
            arguments: session
                .argument_rules_apply(tool)
                .then(|| call.arguments.to_owned()),
            at: call.at,
        }
    }

    /// The record of a refused call.
    fn log_refusal<S: Orchestrated + ?Sized>(
        auditor: &Auditor,
        session: &S,
        before: Position,
        event: AuditEvent,
        refusal: &Refusal,
    ) {
        let decision = match refusal.kind {
            RefusalKind::NeedsApproval => "needs_approval",
            RefusalKind::Rejected => "rejected",
            _ => "refused",
        };
        let rule = match &refusal.rule {
            Some(rule) => crate::audit::Rule::Argument {
                step: session.step_name().map(str::to_owned),
                name: rule.clone(),
            },
            None => rule_of(session, &refusal.tool, refusal.kind),
        };
        let (kind, message) = (refusal.kind.as_str().to_owned(), refusal.reason.clone());
        auditor.emit(
            session,
            before,
            event,
            decision,
            Some(rule),
            Some(kind),
            Some(message),
        );
    }

    /// Puts the gated `call` to a human: the session holds the question (so that only
    /// the answer to it, in this state, applies), and the request says what to show.
    /// `reason` is the session's own words for the gate.
    pub fn ask<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        call: ToolCall,
        reason: String,
    ) -> ApprovalRequest {
        let digest = CallDigest::of_text(&call.name, &call.arguments);
        let question = QuestionId::random();
        self.ask_call(session, &call.name, digest, question);
        ApprovalRequest {
            step: session.step_name().map(str::to_owned),
            origins: session.origins(&call.name, &call.arguments),
            call,
            reason,
            digest,
            question,
        }
    }

    /// Applies a human's `decision` on `request` to the session: `false`, changing
    /// nothing, when the session no longer holds that question (an event since, the
    /// question answered already — a decision submitted twice applies once —, another
    /// question asked since, even about the same call, or a request altered since it was
    /// made — its call must still have its digest).
    pub fn answer<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        request: &ApprovalRequest,
        decision: &Decision,
    ) -> bool {
        // An altered request is not the question the human was asked: nothing applies.
        let digest = CallDigest::of_text(&request.call.name, &request.call.arguments);
        if digest != request.digest {
            return false;
        }
        let (approves, reason) = (decision.approves(), decision.reason());
        let question = request.question;
        self.answer_call(
            session,
            &request.call.name,
            digest,
            question,
            approves,
            reason,
        )
    }

    /// Holds the question `question` about the call `call` of `tool` in the session (the
    /// gate's wording is the question's), recorded by the auditor.
    pub fn ask_call<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: CallDigest,
        question: QuestionId,
    ) {
        let before = self.auditor.as_ref().map(|_| Position::of(session));
        session.ask_approval(call, question);
        if let (Some(auditor), Some(before)) = (&self.auditor, before) {
            let message = session.check_tool(tool).err().map(|r| r.reason);
            let event = AuditEvent::Ask {
                tool: tool.to_owned(),
                call,
                question,
            };
            auditor.emit(session, before, event, "asked", None, None, message);
        }
    }

    /// Applies a human's answer to the question `question` about the call `call` of
    /// `tool`: `false`, changing nothing, when the session no longer holds that question.
    /// Recorded by the auditor (`approved`, `denied_by_human`, or `stale`), with the
    /// human's reason.
    pub fn answer_call<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: CallDigest,
        question: QuestionId,
        approved: bool,
        reason: Option<&str>,
    ) -> bool {
        let answer = HumanAnswer {
            approved,
            reason,
            by: None,
        };
        self.answer_call_as(session, tool, call, question, answer)
    }

    /// [`Policy::answer_call`] for an answer whose giver the host knows (an approver
    /// who is not the run's user): the auditor records who answered.
    pub fn answer_call_as<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: CallDigest,
        question: QuestionId,
        answer: HumanAnswer<'_>,
    ) -> bool {
        let HumanAnswer {
            approved,
            reason,
            by,
        } = answer;
        let before = self.auditor.as_ref().map(|_| Position::of(session));
        let applied = session.answer_approval(call, question, approved);
        if let (Some(auditor), Some(before)) = (&self.auditor, before) {
            let event = AuditEvent::Answer {
                tool: tool.to_owned(),
                call,
                question,
                approved,
                reason: reason.map(str::to_owned),
                by: by.map(str::to_owned),
            };
            let outcome = match (applied, approved) {
                (false, _) => "stale",
                (true, true) => "approved",
                (true, false) => "denied_by_human",
            };
            auditor.emit(session, before, event, outcome, None, None, None);
        }
        applied
    }

    /// The facts of a refusal as data, for a client beside the model's text (what an MCP
    /// gateway or policy server sends with a refused call): `{"refusal": {"tool",
    /// "reason", "step", "expected", "allowed", "message"}}`; without a session (a call
    /// refused for another cause than the workflow) step, expected and allowed are null.
    pub fn refusal_data<S: Orchestrated + ?Sized>(
        &self,
        tool: &str,
        reason: &str,
        message: &str,
        session: Option<&S>,
    ) -> serde_json::Value {
        let step = session.and_then(|s| s.step_name().map(str::to_owned));
        let expected = session.and_then(|s| s.expected_tools()).map(|names| {
            names
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<String>>()
        });
        let allowed = session.map(|s| self.offered(s));
        serde_json::json!({
            "refusal": {
                "tool": tool,
                "reason": reason,
                "step": step,
                "expected": expected,
                "allowed": allowed,
                "message": message,
            }
        })
    }

    /// [`Policy::refusal_data`] of a refusal by the workflow: its kind as the reason, its
    /// words as the message, and — for a broken rule on arguments — the rule's name as
    /// `"rule"` (absent otherwise).
    pub fn workflow_refusal_data<S: Orchestrated + ?Sized>(
        &self,
        refusal: &Refusal,
        session: Option<&S>,
    ) -> serde_json::Value {
        let kind = refusal.kind.as_str();
        let mut data = self.refusal_data(&refusal.tool, kind, &refusal.reason, session);
        if let Some(rule) = &refusal.rule {
            data["refusal"]["rule"] = serde_json::json!(rule);
        }
        data
    }

    /// The model's text for a call a human rejected, with the human's reason.
    pub fn rejected(refusal: Refusal, decision: Option<&Decision>) -> String {
        match decision.and_then(Decision::reason) {
            Some(reason) => format!("{} The human said: {reason}", refusal.reason),
            None => refusal.reason,
        }
    }

    /// Refuses a tool the host does not have.
    fn known<S: Orchestrated + ?Sized>(&self, session: &S, tool: &str) -> Result<(), Refusal> {
        if self.host_tools.iter().any(|h| h == tool) {
            return Ok(());
        }
        Err(Refusal {
            tool: tool.to_owned(),
            kind: RefusalKind::UnknownTool,
            reason: format!(
                "error: there is no tool `{tool}`. {}",
                self.what_now(session, true)
            ),
            rule: None,
        })
    }

    /// The session's refusal of `tool` in the words the model is sent.
    fn refusal<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        tool: &str,
        refusal: Refusal,
    ) -> Refusal {
        Refusal {
            tool: tool.to_owned(),
            kind: refusal.kind,
            // A sequence refusal already names what the sequence expects.
            reason: format!(
                "error: `{tool}` was not run: {}. {}",
                refusal.reason,
                self.what_now(session, refusal.kind != RefusalKind::OutOfSequence)
            ),
            rule: refusal.rule,
        }
    }

    /// Records that `tool` ran (whatever it returned): the outcome (`advanced`,
    /// `completed`, `free`, `out_of_sequence`, `not_allowed`). A host that has the
    /// result calls [`Policy::record_result`] instead, so that rules on arguments that
    /// read it (semantics §16) see its values.
    pub fn record<S: Orchestrated + ?Sized>(&self, session: &mut S, tool: &str) -> &'static str {
        self.record_with(session, tool, None)
    }

    /// Records that `tool` ran and returned `result` (its text as the host got it, a
    /// JSON value for the values to be read): [`Policy::record`], and the values rules
    /// on arguments read from this tool's results are remembered in the session. The
    /// decision log keeps the result only when a rule reads it.
    pub fn record_result<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        result: &str,
    ) -> &'static str {
        self.record_with(session, tool, Some(result))
    }

    fn record_with<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        result: Option<&str>,
    ) -> &'static str {
        let record = |session: &mut S| match result {
            Some(result) => session.record_tool_result(tool, result),
            None => session.record_tool(tool),
        };
        let Some(auditor) = &self.auditor else {
            return record(session);
        };
        let before = Position::of(session);
        let rule = rule_admitting(session);
        let kept = result.filter(|_| session.reads_results_of(tool));
        let outcome = record(session);
        let event = AuditEvent::Record {
            tool: tool.to_owned(),
            result: kept.map(str::to_owned),
        };
        let outcome_text = Some(outcome.to_owned());
        auditor.emit(
            session,
            before,
            event,
            "recorded",
            Some(rule),
            outcome_text,
            None,
        );
        outcome
    }

    /// "Allowed now: a, b. The sequence of step `S` expects `x` next."
    pub fn what_now<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        mention_sequence: bool,
    ) -> String {
        let offered = self.offered(session);
        let mut s = if offered.is_empty() {
            "No tool is allowed now.".to_owned()
        } else {
            format!("Allowed now: {}.", offered.join(", "))
        };
        if let (true, Some(step), Some(expected)) = (
            mention_sequence,
            session.step_name(),
            session.expected_tools(),
        ) {
            s.push_str(&format!(
                " The sequence of step `{step}` expects `{}` next.",
                expected.join("` or `")
            ));
        }
        s
    }

    /// The text to send when a forced tool was answered with text instead: the one
    /// wording every surface sends (the bindings expose it, so no adapter writes its
    /// own).
    pub fn forced_reminder(tool: &str) -> String {
        format!("{REMINDER_PREFIX}`{tool}` now; call it instead of answering.")
    }
}
