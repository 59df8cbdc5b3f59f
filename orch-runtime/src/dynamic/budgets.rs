//! What a loaded machine's sessions spend and remember beyond the steps: budgets
//! (semantics §17), and a call stored as admitting it would store it.

use super::DynSession;
use crate::approval::Call;
use crate::args::OwnedRules;
use crate::state::ToolRef;

impl<'m> DynSession<'m> {
    /// A call that ran without this session admitting it — a simulation, a host that
    /// observes calls rather than enforcing — stored as admitting it would store it: its
    /// arguments remembered where rules read them, its charges made to the budgets, the
    /// clock moved to its time. Nothing is judged; record it with [`DynSession::record`]
    /// as any call.
    pub fn ran_call(&mut self, name: &str, call: &Call<'_>) {
        let t = self.machine.tables.view();
        let tool = match t.tool_index(name) {
            Some(i) => ToolRef::Declared(i),
            None => ToolRef::Foreign(name),
        };
        self.state.ran_call(&t, tool, call, &self.machine.matchers);
    }

    /// Each budget's total now, by name: see [`crate::Session::budget_totals`].
    pub fn budget_totals(&self) -> Vec<(&'m str, String)> {
        let rules: &'m OwnedRules = &self.machine.tables.rules;
        rules.view().budget_totals(self.state.memory_words())
    }

    /// Does admitting a call of `name` change what the session remembers (its arguments,
    /// or a budget's clock and charges)? See [`crate::Session::admit_changes_memory`].
    pub fn admit_changes_memory(&self, name: &str) -> bool {
        let rules = self.machine.tables.rules.view();
        self.machine
            .tables
            .view()
            .tool_index(name)
            .is_some_and(|i| rules.admit_changes_memory(i))
    }

    /// Does refusing a call change the session (a budget counts refusals)? See
    /// [`crate::Session::refusal_changes_memory`].
    pub fn refusal_changes_memory(&self) -> bool {
        self.machine.tables.rules.view().counts_refusals()
    }

    /// The session's clock (ms since the Unix epoch): the newest time a call it stored
    /// carried; 0 without budgets. Verification plumbing.
    #[doc(hidden)]
    pub fn clock(&self) -> u64 {
        let rules = self.machine.tables.rules.view();
        crate::args::budget_view(&rules, self.state.memory_words()).clock()
    }

    /// Budget `b`'s total at the session's clock, in billionths (an index into the
    /// machine's budgets). Verification plumbing.
    #[doc(hidden)]
    pub fn budget_total(&self, b: usize) -> i128 {
        self.machine
            .tables
            .rules
            .view()
            .budget_total(self.state.memory.as_ref(), b)
    }
}
