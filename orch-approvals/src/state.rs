//! What the API and the console serve ([`Approvals`]): the host's questions, who may see
//! and answer them, and where answers are announced.

use crate::auth::Approvers;
use crate::desk::Desk;
use crate::report::{DecisionLog, TemplateReport};
use crate::webhook::{Event, Webhook};
use orch_run::approvals::{Answer, NotAnswered, Posted};
use std::sync::Arc;

/// What the approvals API and the console serve: the host's questions, who may see and
/// answer them, and where answers are announced. Serve it with [`crate::serve`], or
/// mount [`Approvals::router`] beside a host's own routes.
#[derive(Clone)]
pub struct Approvals {
    desk: Arc<dyn Desk>,
    approvers: Arc<Approvers>,
    webhook: Option<Webhook>,
    templates: Arc<Vec<TemplateReport>>,
    log: Option<Arc<DecisionLog>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("approvers", &self.approvers)
            .field("webhook", &self.webhook)
            .finish_non_exhaustive()
    }
}

impl Approvals {
    /// The API over `desk`, for the callers `approvers` lets in, announcing answers to
    /// `webhook` when given.
    pub fn new(desk: Arc<dyn Desk>, approvers: Arc<Approvers>, webhook: Option<Webhook>) -> Self {
        Approvals {
            desk,
            approvers,
            webhook,
            templates: Arc::default(),
            log: None,
        }
    }

    /// The console's template pages: each template's diagram, diagnostics and `orch
    /// verify` findings (the run pages draw their diagram from the run's template's).
    #[must_use]
    pub fn with_templates(mut self, templates: Vec<TemplateReport>) -> Self {
        self.templates = Arc::new(templates);
        self
    }

    /// The console's decision log page: the log checked on each look (chain, anchor,
    /// signatures), its last records, and each run's decisions on its run page.
    #[must_use]
    pub fn with_decision_log(mut self, log: DecisionLog) -> Self {
        self.log = Some(Arc::new(log));
        self
    }

    /// The templates' reports.
    pub(crate) fn templates(&self) -> &[TemplateReport] {
        &self.templates
    }

    /// The decision log, if one is shown.
    pub(crate) fn decision_log(&self) -> Option<&DecisionLog> {
        self.log.as_deref()
    }

    /// The host's questions.
    pub(crate) fn desk(&self) -> &dyn Desk {
        self.desk.as_ref()
    }

    /// Who may call.
    pub(crate) fn approvers(&self) -> &Approvers {
        &self.approvers
    }

    /// Answers the question `id` as `by`, for the API and the console alike: its run found
    /// among the host's questions, the answer applied (once), the webhook told.
    /// `Ok(Err(NotAnswered::Unknown))`: no such question; `Err`: the host's failure.
    pub(crate) async fn answer(
        &self,
        id: &str,
        approved: bool,
        by: &str,
        reason: Option<&str>,
    ) -> Result<Result<Posted, NotAnswered>, String> {
        let questions = self.desk.questions().await?;
        let Some(question) = questions.into_iter().find(|q| q.id == id) else {
            return Ok(Err(NotAnswered::Unknown));
        };
        let given = Answer {
            id,
            approved,
            by,
            reason,
            now_ms: orch_agent::protocol::now_ms(),
        };
        let outcome = self.desk.answer(&question.run, given).await?;
        if let (Ok(answered), Some(webhook)) = (&outcome, &self.webhook) {
            webhook.announce(Event::Answered, answered);
        }
        Ok(outcome)
    }
}
