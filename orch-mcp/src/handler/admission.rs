//! A call's hold on its session: reserve (admit the call and write its lease in one
//! compare-and-set, or wait for the call in flight), settle (record what ran, drop the
//! lease), and the guard that settles a lease whose request went away.

use super::*;
use orch_run::approvals::{Posted, PostedState};

/// What one look at a session decided for a tool call.
pub(super) enum Admission<'m> {
    /// The lease with this token was written; the session as admitted (what the lease's
    /// record holds), so that recording the result need not restore it again.
    Reserved(u64, DynSession<'m>),
    /// The orchestration refuses the call.
    Refused(RefusalResult),
    /// Another call of the session is in flight: its tool.
    Busy(String),
    /// The call is gated: the run now holds this question for a human.
    Asked(Question),
    /// The call is gated and its question is posted for approvers elsewhere (`true`: by
    /// this look).
    Posted(Posted, bool),
}

/// What reserving a session for a call came to.
// Made once per call and matched at once: boxing the reservation would add an
// allocation to every call's path to save stack bytes nobody keeps.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Reserved<'m> {
    /// The call may go upstream.
    Go(Reservation<'m>),
    /// The call is answered without going upstream.
    Refused(RefusalResult),
    /// The call waits for a human; the run holds this question.
    Asked(Question),
    /// The call waits for an approver elsewhere; the run holds this posted question
    /// (`true`: posted by this call).
    Posted(Posted, bool),
}

/// A tool call as it came: the tool, the call as judged, and the delivery it came as
/// (its request id in its MCP session, where the revision has sessions).
#[derive(Clone, Copy)]
pub(crate) struct Incoming<'a> {
    pub(super) tool: &'a str,
    pub(super) call: &'a Call<'a>,
    pub(super) delivery: Option<(&'a str, &'a Delivery)>,
    /// The arguments as the client sent them, for a question posted for approvers.
    pub(super) shown: &'a str,
    /// Who asks: the client as it named itself ([`asked_by`]), if it did.
    pub(super) asked_by: Option<&'a str>,
}

/// A call's hold on its session: the lease's token, the version and record the lease was
/// written with (so that recording the result can skip a read), and the session as
/// admitted (so that it need not be restored again while nobody wrote meanwhile).
pub(crate) struct Reservation<'m> {
    pub(super) token: u64,
    pub(super) written: Option<(u64, Record)>,
    pub(super) session: Option<DynSession<'m>>,
}

impl<S: SessionStore + 'static> Shared<S> {
    /// One look at session `id` for the call `incoming`: refuse it, find it busy, or
    /// admit it and write its lease in the same compare-and-set.
    pub(super) async fn try_reserve(
        &self,
        id: &str,
        policy: &Policy,
        incoming: Incoming<'_>,
        gate: Gate<'_>,
        may_create: bool,
    ) -> Result<(Admission<'_>, Option<(u64, Record)>), McpError> {
        let lease_for = self.limits.call_timeout + LEASE_MARGIN;
        let tried = self
            .modify_from(id, None, |record| {
                Self::forget_attempt(policy);
                let mut record = match record {
                    Some(record) => record,
                    None if may_create => Record::default(),
                    // An HTTP session's record is made at its handshake: none means it
                    // ended (DELETE, TTL) meanwhile. Do not bring it back.
                    None => return Err(RunError::Ended),
                };
                let (admission, mut write) = run::admit(
                    &mut record,
                    &self.machine,
                    policy,
                    |snapshot| run::restore(&self.machine, policy, snapshot),
                    incoming.tool,
                    incoming.call,
                    gate,
                    lease_for,
                    incoming.delivery,
                )?;
                let admission = match admission {
                    run::Admission::Admitted { token, session } => {
                        Admission::Reserved(token, session)
                    }
                    run::Admission::Busy(tool) => Admission::Busy(tool),
                    run::Admission::Refused {
                        question: Some(question),
                        ..
                    } => match &self.posting {
                        Some(_) => {
                            let now = protocol::now_ms();
                            let name = self.machine.name();
                            let by = incoming.asked_by;
                            let posted = Posted::new(&question, name, incoming.shown, by, now);
                            posted.put(&mut record);
                            write = true;
                            Admission::Posted(posted, true)
                        }
                        None => Admission::Asked(question),
                    },
                    run::Admission::Refused {
                        refusal, session, ..
                    } if self.posting.is_some() && refusal.kind == RefusalKind::NeedsApproval => {
                        // The run holds a question about this very call: it still waits.
                        let now = protocol::now_ms();
                        match Posted::of(&record)?.filter(|p| {
                            p.state_at(now) == PostedState::Pending
                                && p.tool == incoming.tool
                                && p.arguments == incoming.shown
                        }) {
                            Some(posted) => Admission::Posted(posted, false),
                            None => Admission::Refused(RefusalResult::by_workflow(
                                policy, &session, refusal,
                            )),
                        }
                    }
                    run::Admission::Refused {
                        refusal, session, ..
                    } => {
                        if refusal.kind == RefusalKind::OutcomeUnknown && write {
                            orch_runtime::eprintln_printable!(
                                "orch mcp: a call in workflow run `{id}` lapsed without its result and its tool must not run twice: the run is held until an operator resolves it (`orch resolve TEMPLATE {id} --ran|--not-run`)"
                            );
                        }
                        Admission::Refused(RefusalResult::by_workflow(policy, &session, refusal))
                    }
                };
                Ok(match write {
                    true => Change::Write(record, admission),
                    false => Change::Keep(admission),
                })
            })
            .await;
        if tried.is_ok() {
            self.log_attempt(policy);
        }
        tried
    }

    /// Reserves session `id` for the call `incoming`: the lease's token, or the refusal.
    /// While another call of the session is in flight this waits (at most the call
    /// timeout, and not past `ct`'s cancellation), then looks again: the second call is
    /// judged against the state the first one left.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn reserve(
        &self,
        id: &str,
        policy: &Policy,
        incoming: Incoming<'_>,
        gate: Gate<'_>,
        may_create: bool,
        ct: &CancellationToken,
    ) -> Result<Reserved<'_>, McpError> {
        let wait = run::BusyWait {
            limit: self.limits.call_timeout,
            first_pause: Duration::from_millis(1),
            max_pause: MAX_WAIT_PAUSE,
            jitter: Duration::from_millis(1),
        };
        let look = || async {
            Ok::<_, McpError>(
                match self
                    .try_reserve(id, policy, incoming, gate, may_create)
                    .await?
                {
                    (Admission::Reserved(token, session), written) => {
                        run::Look::Decided(Reserved::Go(Reservation {
                            token,
                            written,
                            session: Some(session),
                        }))
                    }
                    (Admission::Refused(reason), _) => {
                        run::Look::Decided(Reserved::Refused(reason))
                    }
                    (Admission::Asked(question), _) => {
                        run::Look::Decided(Reserved::Asked(question))
                    }
                    (Admission::Posted(posted, new), _) => {
                        run::Look::Decided(Reserved::Posted(posted, new))
                    }
                    (Admission::Busy(other), _) => run::Look::Busy(other),
                },
            )
        };
        match run::reserve(wait, look, ct.cancelled()).await? {
            run::Reserved::Decided(reserved) => Ok(reserved),
            run::Reserved::Busy { other } => Ok(Reserved::Refused(RefusalResult::new(
                incoming.tool,
                RefusalKind::Busy.as_str(),
                run::busy_reason(incoming.tool, &other, wait.limit),
                None,
                policy,
            ))),
            run::Reserved::Cancelled => Err(cancelled(incoming.tool)),
        }
    }

    /// Settles the call holding lease `token` of session `id` with what the gateway knows
    /// of its `outcome` ([`run::settle`]): recorded, released, or — a lost result — what
    /// the template's `lostResults` says. `admitted`: the session as admitted, used when
    /// the record is still the one the lease was written with (no restore). A session
    /// deleted meanwhile stays deleted.
    pub(crate) async fn settle(
        &self,
        id: &str,
        policy: &Policy,
        reservation: Reservation<'_>,
        outcome: run::Ended,
        result: Option<&str>,
    ) -> Result<run::Settled, McpError> {
        let Reservation {
            token,
            written,
            session: mut admitted,
        } = reservation;
        let admitted_from = written.as_ref().map(|(_, r)| r.snapshot.clone());
        let settled = self.modify_from(id, written, |record| {
            Self::forget_attempt(policy);
            let Some(mut record) = record else {
                return Ok(Change::Keep(run::Settled::Lapsed));
            };
            let same = admitted_from.as_ref() == Some(&record.snapshot);
            let admitted = admitted.take();
            let restore = |snapshot: Option<&[u8]>| match admitted {
                Some(session) if same => Ok(session),
                _ => run::restore(&self.machine, policy, snapshot),
            };
            let ((settled, write), _) = run::settle(
                &mut record,
                &self.machine,
                policy,
                restore,
                Some(token),
                outcome,
                result,
                true,
            )?;
            if settled == run::Settled::Held {
                orch_runtime::eprintln_printable!(
                    "orch mcp: the result of a call in workflow run `{id}` was lost and its tool must not run twice: the run is held until an operator resolves it (`orch resolve TEMPLATE {id} --ran|--not-run`)"
                );
            }
            Ok(match write {
                true => Change::Write(record, settled),
                false => Change::Keep(settled),
            })
        });
        let settled = settled.await;
        if settled.is_ok() {
            self.log_attempt(policy);
        }
        settled.map(|(settled, _)| settled)
    }

    /// Settles lease `token` of session `id` with no session at hand (`outcome`:
    /// [`run::Ended::NotRun`] releases it, [`run::Ended::Lost`] applies the tool's
    /// lost rule).
    pub(crate) async fn settle_token(
        &self,
        id: &str,
        token: u64,
        outcome: run::Ended,
    ) -> Result<run::Settled, McpError> {
        let policy =
            Policy::new(self.tools().iter().map(|t| t.name.to_string())).in_mode(self.limits.mode);
        let policy = self.judge(policy, id);
        let reservation = Reservation {
            token,
            written: None,
            session: None,
        };
        self.settle(id, &policy, reservation, outcome, None).await
    }
}

/// Holds a session's lease while a call is forwarded: dropped without
/// [`LeaseGuard::disarm`] (the request's task was dropped: the client went away, the
/// gateway stops), the call's result is lost, and a task of its own settles the lease by
/// the tool's lost rule.
pub(super) struct LeaseGuard<S: SessionStore + 'static> {
    pub(super) shared: Arc<Shared<S>>,
    pub(super) id: String,
    pub(super) token: u64,
    pub(super) armed: bool,
}

impl<S: SessionStore + 'static> LeaseGuard<S> {
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Settles the lease with what the gateway knows of the call's outcome.
    pub(super) async fn settle(mut self, outcome: run::Ended) {
        self.armed = false;
        if let Err(e) = self
            .shared
            .settle_token(&self.id, self.token, outcome)
            .await
        {
            orch_runtime::eprintln_printable!(
                "orch mcp: warning: the lease of session `{}` could not be settled ({}); it lapses by itself, and the template's lostResults decides what that means",
                self.id, e.message
            );
        }
    }
}

impl<S: SessionStore + 'static> Drop for LeaseGuard<S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (shared, id, token) = (Arc::clone(&self.shared), self.id.clone(), self.token);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = shared.settle_token(&id, token, run::Ended::Lost).await;
            });
        }
    }
}

/// Who asked, as an approver sees it: the MCP client `name` `version` as it named itself
/// (`mcp-client:NAME VERSION`, at most 200 characters; the prefix keeps a client from
/// taking an approver's identity, which would bar that approver from answering).
pub(super) fn asked_by(name: &str, version: &str) -> String {
    let said: String = format!("{name} {version}")
        .trim()
        .chars()
        .take(200)
        .collect();
    format!("mcp-client:{said}")
}

#[cfg(test)]
mod tests {
    use super::asked_by;

    #[test]
    fn who_asked_is_the_client_never_an_approver() {
        assert_eq!(
            asked_by("token:finance", "1.0"),
            "mcp-client:token:finance 1.0"
        );
        assert_eq!(
            asked_by(&"x".repeat(500), "").len(),
            "mcp-client:".len() + 200
        );
    }
}
