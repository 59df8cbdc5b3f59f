//! A state made, cleared, reset and rebuilt (semantics §4), and the values results held.

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
    /// A fresh state over the given (zeroed) storage: derived state built, activation
    /// evaluated (semantics §5: a session starts by evaluating activation).
    pub fn fresh<S: AsRef<str>>(
        t: &Tables<'_, S>,
        used: U,
        flags: F,
        hist: H,
        derived: D,
        counters: C,
        memory: R,
    ) -> Self {
        let mut state = State {
            step: NO_STEP,
            index: 0,
            hist_next: 0,
            used,
            flags,
            hist,
            usage: Usage::default(),
            derived,
            counters,
            approval: None,
            memory,
            node: Node::UNKNOWN,
        };
        state.reset(t);
        state
    }

    /// Back to a blank state, keeping the storage; the derived state is stale until
    /// [`State::rebuild`].
    pub fn clear(&mut self) {
        self.step = NO_STEP;
        self.index = 0;
        self.hist_next = 0;
        self.used.as_mut().fill(0);
        self.flags.as_mut().fill(0);
        self.hist.as_mut().fill(EMPTY);
        self.usage = Usage::default();
        self.approval = None;
        self.memory.as_mut().fill(0);
    }

    /// The session's memory words (semantics §16; empty when nothing is remembered).
    pub fn memory_words(&self) -> &[u64] {
        self.memory.as_ref()
    }

    /// How many remembered values the session forgot to make room for newer ones.
    pub fn forgotten<S: AsRef<str>>(&self, t: &Tables<'_, S>) -> u32 {
        crate::args::memory::forgotten(t.rules.rings(self.memory.as_ref()).0)
    }

    /// Remembers the values a result of the declared tool `tool` holds, for the sources
    /// that read that tool's results (semantics §16); `true` when one does.
    pub fn remember_result<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        tool: usize,
        text: &str,
    ) -> bool {
        t.rules.remember_result(self.memory.as_mut(), tool, text)
    }

    /// Back to a fresh session (semantics §5 "reset"), activation evaluated.
    pub fn reset<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        self.clear();
        self.rebuild(t);
        self.activate(t);
        if !t.moves.is_empty() {
            self.node = Node(t.moves.fresh);
        }
    }

    /// Recomputes the derived state from the history, the used set, the message flags
    /// and the budgets (after [`State::clear`], or when a snapshot was restored).
    pub fn rebuild<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        let p = &t.plan;
        self.node = Node::UNKNOWN;
        self.derived.as_mut().fill(0);
        for (c, (_, cap)) in self.counters.as_mut().iter_mut().zip(p.counters) {
            *c = *cap;
        }
        let len = self.hist_len();
        for k in (0..len).rev() {
            let entry = self.recent(k);
            let (_, _, seq) = split(self.derived.as_mut(), p);
            shift_sequences(seq, p, entry, |_, _| {});
            self.count(p, entry);
        }
        let (holds, eligible, seq) = split(self.derived.as_mut(), p);
        let n_flags = t.message_flags();
        for (w, (f, h)) in self.flags.as_ref().iter().zip(holds.iter_mut()).enumerate() {
            *h = f & flag_mask(n_flags, w);
        }
        for (tool, atom) in p.used_atom.iter().enumerate() {
            if *atom != NONE && bits::test(self.used.as_ref(), tool) {
                bits::set(holds, *atom as usize);
            }
        }
        for (w, d) in seq.iter().enumerate() {
            let mut ends = d & p.seq_last.get(w).copied().unwrap_or(0);
            while ends != 0 {
                let bit = ends.trailing_zeros();
                ends &= ends - 1;
                let atom = seq_atom(p, w, bit);
                if atom != NONE {
                    bits::set(holds, atom as usize);
                }
            }
        }
        for (k, (counter, window)) in p.nru_atoms.iter().enumerate() {
            if self
                .counters
                .as_ref()
                .get(*counter as usize)
                .copied()
                .unwrap_or(0)
                >= *window
            {
                bits::set(holds, (p.nru_atom_base as usize) + k);
            }
        }
        for (k, &cond) in p.budget_atoms.iter().enumerate() {
            if t.rules
                .budget_condition_holds(self.memory.as_ref(), cond as usize)
            {
                bits::set(holds, (p.budget_atom_base as usize) + k);
            }
        }
        for step in bits::BitIter::new(p.candidates) {
            if covers(holds, p.atoms_of(step)) {
                bits::set(eligible, step);
            }
        }
    }
}
