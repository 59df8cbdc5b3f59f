//! A policy's side of the questions put to a human about gated calls: asking, and
//! applying an answer once (semantics §13.1).

use super::{ApprovalRequest, Decision, HumanAnswer, Orchestrated, Policy, Refusal, RefusalKind};
use crate::audit::{AuditEvent, Position};
use crate::model::ToolCall;
use crate::protocol::{self, Ticket, Unanswered};
use orch_runtime::{CallDigest, QuestionId};

impl Policy {
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
            auditor.emit_in(
                self.mode,
                session,
                before,
                event,
                ("asked", None, None, message),
            );
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
            auditor.emit_in(
                self.mode,
                session,
                before,
                event,
                (outcome, None, None, None),
            );
        }
        applied
    }
}
