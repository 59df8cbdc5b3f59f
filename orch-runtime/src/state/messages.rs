//! A user message (semantics §5): message conditions, `resetSequenceOn`, activation.

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
    /// User message (semantics §5): evaluate message conditions, apply `resetSequenceOn`,
    /// evaluate activation. `matchers` is the compiled form of `t.contains` and
    /// `t.regexes`.
    pub fn on_message<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        matchers: &Matchers,
        message: &str,
    ) {
        let flags = self.flags.as_mut();
        flags.fill(0);
        matchers.match_message(message, t.contains.len(), flags);
        t.rules.remember_user(self.memory.as_mut(), message);
        self.after_message(t);
    }

    /// A user message that satisfied exactly the message conditions whose flags are set
    /// in `flags` (bits past the machine's flags are ignored): the rest of semantics §5
    /// "user message" — the flags are stored, `resetSequenceOn` applies, activation
    /// runs. What [`State::on_message`] does once it has matched the message.
    pub fn on_message_flags<S: AsRef<str>>(&mut self, t: &Tables<'_, S>, flags: &[u64]) {
        let n_flags = t.message_flags();
        for (w, f) in self.flags.as_mut().iter_mut().enumerate() {
            *f = flags.get(w).copied().unwrap_or(0) & flag_mask(n_flags, w);
        }
        self.after_message(t);
    }

    /// The end of a user message, its flags stored.
    pub(super) fn after_message<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        self.approval = None;
        if !t.rules.budgets.is_empty() {
            // A new turn: budgets over the latest message start again.
            cold();
            t.rules
                .clear_budgets(self.memory.as_mut(), crate::args::Per::Message);
            self.sync_budget_atoms(t);
        }
        if !t.moves.is_empty() {
            // The table knows where this message leads (a machine with a table has at
            // most `MAX_FLAGS` message conditions: one word of flags).
            let flags = self.flags.as_ref().first().copied().unwrap_or(0);
            self.node = t
                .moves
                .message_node(self.node.0 as usize, flags)
                .unwrap_or(Node::UNKNOWN);
        }
        let n_contains = t.contains.len();
        self.sync_message_atoms(t);
        if let Some(step) = self.active() {
            let rules = t.steps.get(step).map_or(0, |s| s.reset);
            let mut reset_now = rules & reset::USER_MESSAGE != 0;
            if !reset_now && rules & (reset::MESSAGE_CONTAINS | reset::MESSAGE_REGEX) != 0 {
                reset_now = t.step_conditions(step).iter().any(|c| match *c {
                    Condition::Message(f) if bits::test(self.flags.as_ref(), f as usize) => {
                        let kind = if (f as usize) < n_contains {
                            reset::MESSAGE_CONTAINS
                        } else {
                            reset::MESSAGE_REGEX
                        };
                        rules & kind != 0
                    }
                    _ => false,
                });
            }
            if reset_now {
                self.index = 0;
            }
        }
        self.activate(t);
    }
}
