//! The orchestration rules for a model-driven loop, in one place and independent of any
//! agent framework: per model call, which tools to offer and whether to force one; per
//! tool call, admit it or refuse it with a reason the model can act on; after a tool
//! ran, record it. [`Agent`](crate::Agent) uses it; so can an adapter for another
//! framework.

use crate::audit::{rule_admitting, rule_of, AuditEvent, Auditor, Position};
use crate::model::ToolChoice;
use crate::protocol::{Question, Ticket};
use orch_runtime::{Approval, Call, Verdict};
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod mode;
mod observe;
pub(crate) mod orchestrated;
mod questions;
pub(crate) mod refusal;

pub use mode::{Mode, UnknownMode};
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
    mode: Mode,
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
            mode: Mode::Enforce,
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

    /// The same rules in `mode`: [`Mode::Observe`] judges and records every call and
    /// refuses and asks nothing ([`Mode`]).
    #[must_use]
    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The policy's mode.
    pub fn mode(&self) -> Mode {
        self.mode
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
            auditor.emit_in(
                self.mode,
                session,
                before,
                event,
                ("message", None, None, None),
            );
        }
    }

    /// Resets the session (semantics §5), recorded by the auditor.
    pub fn reset<S: Orchestrated + ?Sized>(&self, session: &mut S) {
        let before = self.auditor.as_ref().map(|_| Position::of(session));
        session.reset_session();
        if let (Some(auditor), Some(before)) = (&self.auditor, before) {
            auditor.emit_in(
                self.mode,
                session,
                before,
                AuditEvent::Reset,
                ("reset", None, None, None),
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
            auditor.emit_in(self.mode, session, here, event, ("tools", None, None, None));
        }
    }

    /// The tools the session allows now, among the host's (in the host's order); in
    /// [`Mode::Observe`], every tool of the host.
    pub fn offered<S: Orchestrated + ?Sized>(&self, session: &S) -> Vec<String> {
        if self.mode == Mode::Observe {
            return self.host_tools.clone();
        }
        session.allowed_among(&self.host_tools)
    }

    /// What to offer the model for its next call.
    ///
    /// In [`Mode::Observe`] the model is offered every tool of the host and forced to
    /// none: it acts as it would without orch, and the calls it makes are judged.
    pub fn plan<S: Orchestrated + ?Sized>(&self, session: &S) -> RoundPlan {
        let offered = self.offered(session);
        let forced = match self.mode {
            Mode::Enforce => Self::forced_among(session, &offered),
            Mode::Observe => None,
        };
        let tool_choice = match forced {
            _ if offered.is_empty() => ToolChoice::None,
            Some(tool) => ToolChoice::Tool(tool.to_owned()),
            None => ToolChoice::Auto,
        };
        RoundPlan {
            offered,
            tool_choice,
        }
    }

    /// The tool the next model call must call, if any ([`Policy::forced_among`] the
    /// tools offered); none in [`Mode::Observe`].
    pub fn forced<S: Orchestrated + ?Sized>(&self, session: &S) -> Option<String> {
        match self.mode {
            Mode::Enforce => Self::forced_among(session, &self.offered(session)).map(str::to_owned),
            Mode::Observe => None,
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
    /// In [`Mode::Observe`], nothing is refused.
    pub fn admit<S: Orchestrated + ?Sized>(&self, session: &S, tool: &str) -> Result<(), Refusal> {
        if self.mode == Mode::Observe {
            return Ok(());
        }
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
    ///
    /// In [`Mode::Observe`] the call is judged and recorded the same way, and admitted
    /// whatever the judgement: a call the template would refuse or ask about is stored
    /// as it runs (its arguments remembered, its budgets charged) and recorded as what
    /// orch would have done.
    pub fn admit_call<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: &Call<'_>,
    ) -> Result<(), Refusal> {
        match self.mode {
            Mode::Enforce => self.enforce_call(session, tool, call),
            Mode::Observe => self.observe_call(session, tool, call),
        }
    }

    /// [`Policy::admit_call`] in [`Mode::Enforce`].
    fn enforce_call<S: Orchestrated + ?Sized>(
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
            let event = self.call_event(&*session, tool, call);
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
                    auditor.emit_in(
                        self.mode,
                        session,
                        before,
                        event,
                        ("admitted", Some(rule), None, None),
                    );
                }
                Err(refusal) => self.log_refusal(auditor, session, before, event, refusal),
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
        if self.mode == Mode::Observe {
            // Judged and recorded when it is admitted.
            return None;
        }
        let refusal = match self.known(session, tool) {
            Err(refusal) => refusal,
            Ok(()) => match session.check_call(tool, call) {
                Ok(()) => return None,
                Err(refusal) => self.refusal(session, tool, refusal),
            },
        };
        if let Some(auditor) = &self.auditor {
            let event = self.call_event(session, tool, call);
            self.log_refusal(auditor, session, Position::of(session), event, &refusal);
        }
        Some(refusal)
    }

    /// The record of a call presented: its arguments kept when a rule on arguments
    /// judges them (so that a replay judges them again), and by a policy in
    /// [`Mode::Observe`] always (so that a what-if replay can judge them under rules
    /// the template does not have yet).
    fn call_event<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        tool: &str,
        call: &Call<'_>,
    ) -> AuditEvent {
        AuditEvent::Call {
            tool: tool.to_owned(),
            call: call.digest,
            arguments: (self.mode == Mode::Observe || session.argument_rules_apply(tool))
                .then(|| call.arguments.to_owned()),
            at: call.at,
        }
    }

    /// The record of a refused call.
    fn log_refusal<S: Orchestrated + ?Sized>(
        &self,
        auditor: &Auditor,
        session: &S,
        before: Position,
        event: AuditEvent,
        refusal: &Refusal,
    ) {
        let rule = self.refusal_rule(session, refusal);
        self.log_refused(auditor, session, before, event, refusal, rule);
    }

    /// The rule that refused a call in `session` (judged before the call).
    fn refusal_rule<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        refusal: &Refusal,
    ) -> crate::audit::Rule {
        match &refusal.rule {
            Some(rule) => crate::audit::Rule::Argument {
                step: session.step_name().map(str::to_owned),
                name: rule.clone(),
            },
            None => rule_of(session, &refusal.tool, refusal.kind),
        }
    }

    /// The record of a call refused by `rule`.
    fn log_refused<S: Orchestrated + ?Sized>(
        &self,
        auditor: &Auditor,
        session: &S,
        before: Position,
        event: AuditEvent,
        refusal: &Refusal,
        rule: crate::audit::Rule,
    ) {
        let decision = match refusal.kind {
            RefusalKind::NeedsApproval => "needs_approval",
            RefusalKind::Rejected => "rejected",
            _ => "refused",
        };
        let (kind, message) = (refusal.kind.as_str().to_owned(), refusal.reason.clone());
        let decided = (decision, Some(rule), Some(kind), Some(message));
        auditor.emit_in(self.mode, session, before, event, decided);
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
        auditor.emit_in(
            self.mode,
            session,
            before,
            event,
            ("recorded", Some(rule), outcome_text, None),
        );
        outcome
    }

    /// "Allowed now: a, b. The sequence of step `S` expects `x` next."
    pub fn what_now<S: Orchestrated + ?Sized>(
        &self,
        session: &S,
        mention_sequence: bool,
    ) -> String {
        // What the template allows, in observe mode too: the words orch would send.
        let offered = session.allowed_among(&self.host_tools);
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
