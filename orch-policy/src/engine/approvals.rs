//! Questions posted for approvers elsewhere (`Options::approvals`): a gated call's
//! question kept in the run's record for the approvals API, the run named in the index of
//! open questions, the webhook told; and the API's side of the engine ([`Desk`]).

use super::prelude::*;
use super::reading::Call;
use super::state::Engine;
use orch_approvals::desk::{Desk, Pending};
use orch_approvals::store::Reading;
use orch_run::approvals::{self as posting, Answer, NotAnswered, Posted, PostedState};

impl<S: SessionStore + 'static> Engine<S> {
    /// The question a refusal leaves for approvers, when the server posts questions: one
    /// just asked (kept in `record`: `true`), or the one the run holds about this very
    /// call, still waiting (`false`).
    pub(super) fn post(
        &self,
        record: &mut Record,
        refusal: &Refusal,
        question: Option<&Question>,
        call: &Call,
        now_ms: u64,
    ) -> Result<Option<(Posted, bool)>, RunError> {
        if self.options.approvals.is_none() {
            return Ok(None);
        }
        if let Some(question) = question {
            let posted = Posted::new(question, self.machine.name(), &call.arguments, None, now_ms);
            posted.put(record);
            return Ok(Some((posted, true)));
        }
        if refusal.kind != RefusalKind::NeedsApproval {
            return Ok(None);
        }
        let standing = Posted::of(record)?.filter(|p| {
            p.state_at(now_ms) == PostedState::Pending
                && p.tool == call.tool
                && p.arguments == call.arguments
        });
        Ok(standing.map(|p| (p, false)))
    }

    /// Names the run of a question just posted in the index of open questions, and tells
    /// the webhook.
    pub(super) async fn announce(&self, run: &str, posted: &Posted) {
        let webhook = self
            .options
            .approvals
            .as_ref()
            .and_then(|a| a.webhook.as_ref());
        if let Err(e) = orch_approvals::desk::announce(&self.store, run, posted, webhook).await {
            orch_runtime::eprintln_printable!(
                "orch policy: warning: question {} of run `{run}` is not listed for approvers: {e}",
                posted.id
            );
        }
    }
}

/// Says in a refusal which question waits for an approver: its id in the data's
/// `approval`, and a sentence in the reason.
pub(super) fn tell_waiting(reason: &mut String, data: &mut Value, posted: &Posted) {
    reason.push_str(&posting::waiting_words(posted));
    if !data["approval"].is_object() {
        data["approval"] = json!({
            "tool": posted.tool,
            "step": posted.step,
            "pending": true,
            "expiresMs": posted.expires_ms,
        });
    }
    data["approval"]["question"] = json!(posted.id);
}

impl<S: SessionStore + 'static> Desk for Engine<S> {
    fn questions(&self) -> Pending<'_, Vec<Posted>> {
        self.reading().questions()
    }

    fn answer<'a>(
        &'a self,
        run: &'a str,
        answer: Answer<'a>,
    ) -> Pending<'a, Result<Posted, NotAnswered>> {
        Box::pin(async move {
            // The decision log records the answer, with who gave it.
            let tool = self.machine.tools().first().map_or("", String::as_str);
            let policy = self.policy_for(run, tool);
            let outcome = posting::answer_key(&self.store, &self.machine, &policy, run, answer)
                .await
                .map_err(|e| e.to_string());
            self.log_attempt(&policy);
            outcome
        })
    }

    fn runs(&self) -> Pending<'_, Vec<orch_run::runs::RunRow>> {
        self.reading().runs()
    }

    fn run<'a>(&'a self, id: &'a str) -> Pending<'a, Option<orch_run::runs::RunView>> {
        self.reading().run(id)
    }
}

impl<S: SessionStore + 'static> Engine<S> {
    /// The runs as the approvals API reads them: restored with the template's tools.
    fn reading(&self) -> Reading<'_, S> {
        Reading {
            store: &self.store,
            machine: &self.machine,
            policy: std::borrow::Cow::Borrowed(&self.declared),
        }
    }
}
