//! The runs of a store, with no gateway in front ([`StoreDesk`]): what `orch console`
//! serves over the Redis server or Redis Cluster that `orch mcp` or `orch policy`
//! instances keep their runs in.
//!
//! An answer given here is the same compare-and-set of the run's record as one given
//! through a gateway's own approvals address (who answered, when and why are kept in the
//! record, announced by the webhook, and recorded in the desk's own decision log when it
//! has one: [`StoreDesk::audited`]); the gateway sees it at its next look at the run — a
//! waiting `orch mcp` call within a second, a retried `orch policy` call at once.

use crate::desk::{Desk, Pending};
use orch_agent::audit::Auditor;
use orch_agent::Policy;
use orch_run::approvals::{self as posting, Answer, NotAnswered, Posted};
use orch_run::runs::{self, RunRow, RunView};
use orch_runtime::dynamic::DynMachine;
use orch_store::SessionStore;
use std::borrow::Cow;
use std::sync::Arc;

/// The runs of one template kept in `store`, as a [`Desk`].
pub struct StoreDesk<S> {
    store: S,
    machine: DynMachine,
    policy: Policy,
    audit: Option<Arc<Auditor>>,
}

impl<S> std::fmt::Debug for StoreDesk<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreDesk")
            .field("template", &self.machine.name())
            .finish_non_exhaustive()
    }
}

impl<S: SessionStore + 'static> StoreDesk<S> {
    /// The runs of the template `machine` in `store` (the namespace its gateways use).
    pub fn new(store: S, machine: DynMachine) -> Self {
        let policy = Policy::new(machine.tools().iter().cloned());
        StoreDesk {
            store,
            machine,
            policy,
            audit: None,
        }
    }

    /// The mode the template's gateways run in (`--mode`): each run's view says it, and
    /// the tools it may call now are the ones those gateways allow (every tool, in
    /// observe mode).
    #[must_use]
    pub fn in_mode(mut self, mode: orch_agent::Mode) -> Self {
        self.policy = self.policy.in_mode(mode);
        self
    }

    /// Records each answer given here in `audit` (an `answer` event with who, why and
    /// the decision), as a gateway records those given through its own address. Give it
    /// a log of its own: two writers make one chained log unverifiable.
    #[must_use]
    pub fn audited(mut self, audit: Arc<Auditor>) -> Self {
        self.audit = Some(audit);
        self
    }
}

/// The reading half of a store-backed [`Desk`], written once for every host that keeps
/// its runs in a store (`orch mcp`, `orch policy`, [`StoreDesk`]): the questions, the runs
/// and one run of the template `machine` in `store`, as `policy` sees them.
pub struct Reading<'a, S: ?Sized> {
    /// Where the runs are.
    pub store: &'a S,
    /// Their template.
    pub machine: &'a DynMachine,
    /// The rules their sessions are restored with (the host's tools).
    pub policy: Cow<'a, Policy>,
}

impl<'a, S: SessionStore + ?Sized + 'a> Reading<'a, S> {
    /// [`Desk::questions`].
    pub fn questions(self) -> Pending<'a, Vec<Posted>> {
        Box::pin(async move {
            let now = orch_agent::protocol::now_ms();
            posting::questions(self.store, self.machine, &self.policy, now)
                .await
                .map_err(|e| e.to_string())
        })
    }

    /// [`Desk::runs`].
    pub fn runs(self) -> Pending<'a, Vec<RunRow>> {
        Box::pin(async move {
            let now = orch_agent::protocol::now_ms();
            runs::list(self.store, self.machine, &self.policy, now)
                .await
                .map_err(|e| e.to_string())
        })
    }

    /// [`Desk::run`].
    pub fn run(self, id: &'a str) -> Pending<'a, Option<RunView>> {
        Box::pin(async move {
            let now = orch_agent::protocol::now_ms();
            runs::view(self.store, self.machine, &self.policy, id, now)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

impl<S: SessionStore + 'static> StoreDesk<S> {
    fn reading(&self) -> Reading<'_, S> {
        Reading {
            store: &self.store,
            machine: &self.machine,
            policy: Cow::Borrowed(&self.policy),
        }
    }
}

impl<S: SessionStore + 'static> Desk for StoreDesk<S> {
    fn questions(&self) -> Pending<'_, Vec<Posted>> {
        self.reading().questions()
    }

    fn answer<'a>(
        &'a self,
        run: &'a str,
        answer: Answer<'a>,
    ) -> Pending<'a, Result<Posted, NotAnswered>> {
        Box::pin(async move {
            let policy = match &self.audit {
                Some(_) => self
                    .policy
                    .clone()
                    .audited(Arc::new(Auditor::buffered(run))),
                None => self.policy.clone(),
            };
            let outcome = posting::answer_key(&self.store, &self.machine, &policy, run, answer)
                .await
                .map_err(|e| e.to_string());
            if let (Some(audit), Some(buffered)) = (&self.audit, policy.auditor()) {
                audit.relay(buffered.take_buffered());
            }
            outcome
        })
    }

    fn runs(&self) -> Pending<'_, Vec<RunRow>> {
        self.reading().runs()
    }

    fn run<'a>(&'a self, id: &'a str) -> Pending<'a, Option<RunView>> {
        self.reading().run(id)
    }
}
