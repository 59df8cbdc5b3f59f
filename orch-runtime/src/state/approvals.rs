//! Calls judged with their arguments, and the approval verdict a state holds (semantics
//! §13.1).

use super::*;

impl<U, F, H, D, C, R> State<U, F, H, D, C, R>
where
    U: AsRef<[u64]> + AsMut<[u64]>,
    F: AsRef<[u64]> + AsMut<[u64]>,
    H: AsRef<[u16]> + AsMut<[u16]>,
    D: AsRef<[u64]> + AsMut<[u64]>,
    C: AsRef<[u16]> + AsMut<[u16]>,
    R: AsRef<[u64]> + AsMut<[u64]>,
{
    /// [`State::check`] of one exact call: first the rules on arguments that apply to
    /// the tool in the active step (semantics §16) — a broken required rule refuses it,
    /// a conditional `approve` that holds gates it —, then a gated tool passes when the
    /// session holds an approval of this call, and is refused as rejected when it holds
    /// a rejection of it. `Ok(true)` when the call passes on an approval (which
    /// admitting consumes). `matchers` holds the machine's compiled argument regexes.
    #[inline]
    pub fn check_call<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
        call: &Call<'_>,
        matchers: &Matchers,
    ) -> Result<bool, RawRefusal> {
        self.permit(t, available, tool)?;
        let mut gated = false;
        if let ToolRef::Declared(i) = tool {
            if !t.rules.is_empty() {
                let memory = self.memory.as_ref();
                match t.rules.judge(
                    i,
                    self.step,
                    call.arguments,
                    matchers.arguments(),
                    memory,
                    call.at,
                ) {
                    Judged::Free => {}
                    Judged::Gated(_) => gated = true,
                    Judged::Broken(broken) => return Err(RawRefusal::Broken(self.step, broken)),
                }
            }
        }
        if !(gated || self.gated(t, tool)) {
            return Ok(false);
        }
        let step = self.step;
        match self.approval {
            Some(a) if a.call == call.digest => match a.verdict {
                Verdict::Approved => Ok(true),
                Verdict::Rejected => Err(RawRefusal::Rejected(step)),
                Verdict::Pending => Err(RawRefusal::NeedsApproval(step)),
            },
            _ => Err(RawRefusal::NeedsApproval(step)),
        }
    }

    /// [`State::check_call`], consuming the approval the call passes on: one approval
    /// admits one call.
    pub fn admit_call<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
        call: &Call<'_>,
        matchers: &Matchers,
    ) -> Result<(), RawRefusal> {
        match self.check_call(t, available, tool, call, matchers) {
            Ok(consumed) => {
                if consumed {
                    self.approval = None;
                }
                self.ran_call(t, tool, call, matchers);
                Ok(())
            }
            Err(refusal) => {
                if !matches!(refusal, RawRefusal::NeedsApproval(_)) && t.rules.counts_refusals() {
                    cold();
                    self.refused_call(t, tool, call, matchers);
                }
                Err(refusal)
            }
        }
    }

    /// A call the session refused to admit (not one it asks about), charged to the
    /// budgets that count refusals (semantics §17); a step condition that reads one is
    /// evaluated, and activation runs, as after any event.
    fn refused_call<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        tool: ToolRef<'_>,
        call: &Call<'_>,
        matchers: &Matchers,
    ) {
        self.charge(t, tool, call, matchers, true);
        if !t.plan.budget_atoms.is_empty() {
            self.sync_budget_atoms(t);
            self.activate(t);
        }
    }

    /// What admitting `call` stores, without judging it: its arguments remembered and
    /// its charges to the budgets made (semantics §16, §17).
    pub fn ran_call<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        tool: ToolRef<'_>,
        call: &Call<'_>,
        matchers: &Matchers,
    ) {
        if let ToolRef::Declared(i) = tool {
            t.rules
                .remember_arguments(self.memory.as_mut(), i, call.arguments);
        }
        self.charge(t, tool, call, matchers, false);
    }

    /// Charges `call` to the budgets that count admitted calls, or, with `refused`, to
    /// those that count refusals.
    fn charge<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        tool: ToolRef<'_>,
        call: &Call<'_>,
        matchers: &Matchers,
        refused: bool,
    ) {
        if let ToolRef::Declared(i) = tool {
            t.rules.charge_budgets(
                self.memory.as_mut(),
                i,
                call.arguments,
                matchers.arguments(),
                call.at,
                refused,
            );
        }
    }

    /// Holds a verdict on `call` (semantics §13) in answer to `question`, replacing any
    /// held.
    pub fn hold(&mut self, call: CallDigest, verdict: Verdict, question: QuestionId) {
        self.approval = Some(Approval {
            call,
            verdict,
            question,
        });
    }

    /// Answers the question `question` held about `call` (a [`Verdict::Pending`]
    /// verdict): `false`, changing nothing, when the session holds no such question (none,
    /// another call's, another question about the same call, or answered already).
    pub fn answer(&mut self, call: CallDigest, question: QuestionId, approved: bool) -> bool {
        if !self.holds_question(call, question) {
            return false;
        }
        let verdict = if approved {
            Verdict::Approved
        } else {
            Verdict::Rejected
        };
        self.hold(call, verdict, question);
        true
    }

    /// Closes the question `question` held about `call` without an answer (it expired,
    /// or the human dismissed it): the session then holds no verdict. `false`, changing
    /// nothing, when the session holds no such question.
    pub fn dismiss(&mut self, call: CallDigest, question: QuestionId) -> bool {
        if !self.holds_question(call, question) {
            return false;
        }
        self.approval = None;
        true
    }

    /// Does the session hold the question `question` about `call`, unanswered?
    pub(super) fn holds_question(&self, call: CallDigest, question: QuestionId) -> bool {
        self.approval
            == Some(Approval {
                call,
                verdict: Verdict::Pending,
                question,
            })
    }
}
