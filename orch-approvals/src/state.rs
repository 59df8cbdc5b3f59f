//! What the API and the console serve ([`Approvals`]): the host's questions, who may see
//! and answer them, and where answers are announced.

use crate::auth::Approvers;
use crate::desk::Desk;
use crate::webhook::{Event, Webhook};
use orch_run::approvals::Posted;
use std::sync::Arc;

/// What the approvals API and the console serve: the host's questions, who may see and
/// answer them, and where answers are announced. Serve it with [`crate::serve`], or
/// mount [`Approvals::router`] beside a host's own routes.
#[derive(Clone)]
pub struct Approvals {
    desk: Arc<dyn Desk>,
    approvers: Arc<Approvers>,
    webhook: Option<Webhook>,
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
        }
    }

    /// The host's questions.
    pub(crate) fn desk(&self) -> &dyn Desk {
        self.desk.as_ref()
    }

    /// Who may call.
    pub(crate) fn approvers(&self) -> &Approvers {
        &self.approvers
    }

    /// Tells the webhook of an answer, if there is one.
    pub(crate) fn announce_answer(&self, answered: &Posted) {
        if let Some(webhook) = &self.webhook {
            webhook.announce(Event::Answered, answered);
        }
    }
}
