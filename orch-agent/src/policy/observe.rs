//! A policy in [`Mode::Observe`]: every call judged and recorded as in enforce mode, and
//! admitted all the same.

use super::{Mode, Orchestrated, Policy, Refusal};
use crate::audit::Position;
use orch_runtime::Call;

impl Policy {
    /// [`Policy::admit_call`] in [`Mode::Observe`]: the call is judged without changing
    /// the session; one the template admits is admitted as in enforce mode (an approval
    /// it passes on consumed); one it would refuse or ask about is stored as admitting
    /// it would store it — arguments remembered, budgets charged — and recorded as what
    /// orch would have done (the record's `mode` says it was not enforced), and counted
    /// in the `orch.would_refuse` counter (feature `otel`).
    pub(super) fn observe_call<S: Orchestrated + ?Sized>(
        &self,
        session: &mut S,
        tool: &str,
        call: &Call<'_>,
    ) -> Result<(), Refusal> {
        debug_assert_eq!(self.mode, Mode::Observe);
        let judged = self.known(session, tool).and_then(|()| {
            session
                .check_call(tool, call)
                .map_err(|refusal| self.refusal(session, tool, refusal))
        });
        let Err(refusal) = judged else {
            return self.enforce_call(session, tool, call);
        };
        let before = self.auditor.as_ref().map(|_| Position::of(session));
        let rule = self.refusal_rule(session, &refusal);
        let event = self
            .auditor
            .as_ref()
            .map(|_| self.call_event(session, tool, call));
        session.ran_call(tool, call);
        crate::telemetry::count_would_refuse(&rule, refusal.kind.as_str());
        if let (Some(auditor), Some(before), Some(event)) = (&self.auditor, before, event) {
            self.log_refused(auditor, session, before, event, &refusal, rule);
        }
        Ok(())
    }
}
