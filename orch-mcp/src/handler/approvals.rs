//! Questions put to approvers elsewhere (`Options::approvals`): a gated call's question
//! announced (the index of open questions, the webhook), the call waiting for the answer
//! (bounded), and the approvals API's side of the gateway ([`Desk`]).

use super::*;
use orch_approvals::desk::{Desk, Pending};
use orch_approvals::store::Reading;
use orch_run::approvals::{self as posting, Answer, NotAnswered, Posted, PostedState};
use tokio::sync::broadcast;

/// How often a waiting call looks at its run when no answer was told (an answer on an
/// instance without a bus, or a message the bus lost).
const ANSWER_POLL: Duration = Duration::from_secs(1);

impl<S: SessionStore + 'static> Shared<S> {
    /// Names the run of a question just posted in the index of open questions, and tells
    /// the webhook.
    pub(super) async fn announce(&self, run: &str, posted: &Posted) {
        let webhook = self.posting.as_ref().and_then(|p| p.webhook.as_ref());
        if let Err(e) = orch_approvals::desk::announce(&self.store, run, posted, webhook).await {
            orch_runtime::eprintln_printable!(
                "orch mcp: warning: question {} of run `{run}` is not listed for approvers: {e}",
                posted.id
            );
        }
    }

    /// Waits until the posted question of run `id` is answered (told by `answers`, or
    /// seen in the run's record), at most the posting's wait, and not past `ct`.
    pub(super) async fn await_answer(
        &self,
        id: &str,
        posted: &Posted,
        answers: &mut broadcast::Receiver<String>,
        ct: &CancellationToken,
    ) {
        let wait = self.posting.as_ref().map_or(Duration::ZERO, |p| p.wait);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let told = tokio::select! {
                told = answers.recv() => match told {
                    Ok(question) => question == posted.id,
                    // Fell behind or closed: look at the run.
                    Err(_) => true,
                },
                () = tokio::time::sleep(ANSWER_POLL) => true,
                () = tokio::time::sleep_until(deadline) => return,
                () = ct.cancelled() => return,
            };
            if told && !self.still_waits(id, posted).await {
                return;
            }
        }
    }

    /// Does run `id` still hold `posted` unanswered? (A failure to read says no: the
    /// call then looks at its run again, and that look reports the failure.)
    async fn still_waits(&self, id: &str, posted: &Posted) -> bool {
        let Ok(Some(record)) = self.record(id).await else {
            return false;
        };
        matches!(
            Posted::of(&record),
            Ok(Some(now)) if now.id == posted.id && now.state == PostedState::Pending
        )
    }

    /// The rules for answering in run `id`, recorded in the decision log.
    fn answering(&self, id: &str) -> Policy {
        let policy =
            Policy::new(self.tools().iter().map(|t| t.name.to_string())).in_mode(self.limits.mode);
        self.judge(policy, id)
    }
}

/// The refusal of a call whose posted question still waits for an approver.
pub(super) fn waiting(tool: &str, posted: &Posted, policy: &Policy) -> RefusalResult {
    let message = format!(
        "error: `{tool}` was not run: it needs an approver's answer.{}",
        posting::waiting_words(posted)
    );
    let mut refused = RefusalResult::new(tool, "needs_approval", message, None, policy);
    refused.detail["approval"] = serde_json::json!({
        "question": posted.id,
        "tool": posted.tool,
        "step": posted.step,
        "pending": true,
        "expiresMs": posted.expires_ms,
    });
    refused
}

impl<S: SessionStore + 'static> Desk for Shared<S> {
    fn questions(&self) -> Pending<'_, Vec<Posted>> {
        self.reading().questions()
    }

    fn answer<'a>(
        &'a self,
        run: &'a str,
        answer: Answer<'a>,
    ) -> Pending<'a, Result<Posted, NotAnswered>> {
        Box::pin(async move {
            let policy = self.answering(run);
            let outcome = posting::answer_key(&self.store, &self.machine, &policy, run, answer)
                .await
                .map_err(|e| e.to_string());
            self.log_attempt(&policy);
            if let Ok(Ok(posted)) = &outcome {
                self.relay.instances.answered(&posted.id).await;
            }
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

impl<S: SessionStore + 'static> Shared<S> {
    /// The runs as the approvals API reads them: restored with the upstream's tools.
    fn reading(&self) -> Reading<'_, S> {
        let policy =
            Policy::new(self.tools().iter().map(|t| t.name.to_string())).in_mode(self.limits.mode);
        Reading {
            store: &self.store,
            machine: &self.machine,
            policy: std::borrow::Cow::Owned(policy),
        }
    }
}
