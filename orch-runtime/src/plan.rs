//! The incremental form of a machine's activation conditions.
//!
//! Conditions (semantics §7) are not re-evaluated over the history on every event. Each
//! distinct condition is an **atom** with one bit in a session's *holds* bitset, kept
//! up to date as events arrive; each step has the list of the atoms it needs, and a
//! second bitset says which steps have all of theirs (*eligible*). Step activation
//! (semantics §6) is then the lowest set bit of *eligible*.
//!
//! An event changes only the atoms it can change:
//!
//! - **message atoms** `0..flags` are the message flags themselves (atom `f` is flag
//!   `f`): a user message copies the flags that changed;
//! - **`tool_used` atoms**, one per tool some condition names: set when the tool is
//!   recorded;
//! - **`sequence_match` atoms**, one per step that has the condition: every such step's
//!   sequence is a run of bits in one shift-and bitset (semantics §7: the newest entries
//!   match the sequence position by position; a group is any of its tools). Recording
//!   entry `x` does `D = ((D << 1) | first) & positions(x)`; the step's atom is its last
//!   position's bit. Only the words where `x` appears at some position are stored;
//! - **`not_recently_used` atoms**, one per distinct `(tool, window)`: a saturating
//!   counter per tool says how many entries were recorded since its newest use; the
//!   atom holds when the counter has reached the window;
//! - **`budget` atoms**, one per budget test of a step condition: evaluated against the
//!   budgets' totals at the session's clock after each recorded call, user message and
//!   change of step (semantics §17). A machine with one has no transition table
//!   ([`crate::moves`]): its budgets are not part of a node.
//!
//! All of it is a function of the history, the used set, the message flags and the
//! budgets, so a restored session rebuilds it from them ([`crate::state::State::rebuild`]).
//!
//! A [`Plan`] is derived from the rest of the [`Tables`](crate::tables::Tables) by
//! [`OwnedPlan::derive`] (in `derive/plan.rs`, above the engine), for generated code
//! (which writes it out as literals) and for machines loaded at run time alike.

/// "No atom" / "no counter" in the per-tool maps of a [`Plan`].
pub const NONE: u32 = u32::MAX;

/// Flag of an [`Plan::atom_steps`] entry: the step needs this atom and no other.
pub const SOLE: u16 = 1 << 15;

compiled_form! {
    /// The incremental tables of a machine (borrowed form; see the module docs).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Plan<'a>;
    /// The owned form of [`Plan`] ([`OwnedPlan::derive`] builds it).
    #[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
    pub struct OwnedPlan;
    {
        /// Words of the *holds* bitset (one bit per atom).
        atom_words: value(u32),
        /// Words of the *eligible* bitset (one bit per step).
        step_words: value(u32),
        /// Words of the shift-and bitset of the sequences.
        seq_words: value(u32),
        /// Step `i`'s atoms: `step_atoms[step_atom_start[i] as usize..step_atom_start[i + 1] as usize]`.
        step_atom_start: slice(u32),
        /// See [`Plan::step_atom_start`].
        step_atoms: slice(u32),
        /// Steps activation may choose (with conditions, not the default): `step_words` words.
        candidates: slice(u64),
        /// The candidate steps that need atom `a`: `atom_steps[atom_step_start[a] as usize..atom_step_start[a + 1] as usize]`,
        /// each with [`SOLE`] set when the step needs no other atom.
        atom_step_start: slice(u32),
        /// See [`Plan::atom_step_start`].
        atom_steps: slice(u16),
        /// Per tool: its `tool_used` atom, or [`NONE`].
        used_atom: slice(u32),
        /// Bits of the first position of every tracked sequence (`seq_words` words).
        seq_first: slice(u64),
        /// Bits of the last position of every tracked sequence (`seq_words` words).
        seq_last: slice(u64),
        /// Per bit of the shift-and bitset: the atom of the sequence whose last position it
        /// is, else [`NONE`].
        seq_atom: slice(u32),
        /// Per tool, its span of [`Plan::seq_cells`]: `seq_tool_start[t]..seq_tool_start[t + 1]`.
        seq_tool_start: slice(u32),
        /// `(word, positions)`: the positions of the shift-and bitset, in word `word`, whose
        /// group contains the tool. Sorted by word within each tool's span.
        seq_cells: slice((u32, u64)),
        /// Per counter: `(tool, cap)`. The counter saturates at `cap`, the tool's largest window.
        counters: slice((u16, u16)),
        /// Per `not_recently_used` atom, `(counter, window)`; the `k`-th is atom `nru_atom_base + k`.
        nru_atoms: slice((u32, u16)),
        /// The atom of the first `not_recently_used` condition.
        nru_atom_base: value(u32),
        /// Per `budget` atom, its budget test (an index into the rules'
        /// `budget_conditions`); the `k`-th is atom `budget_atom_base + k`.
        budget_atoms: slice(u32),
        /// The atom of the first `budget` condition.
        budget_atom_base: value(u32),
        /// Per condition of the tables' pool: its atom ([`NONE`] for a step activation never
        /// chooses).
        cond_atom: slice(u32),
    }
}

impl<'a> Plan<'a> {
    /// The atoms step `step` needs (empty when out of range).
    #[inline]
    pub fn atoms_of(&self, step: usize) -> &'a [u32] {
        run(self.step_atom_start, self.step_atoms, step)
    }

    /// The candidate steps that need atom `atom`.
    #[inline]
    pub fn steps_of(&self, atom: usize) -> &'a [u16] {
        run(self.atom_step_start, self.atom_steps, atom)
    }

    /// The shift-and cells of tool `tool`.
    #[inline]
    pub fn cells_of(&self, tool: usize) -> &'a [(u32, u64)] {
        run(self.seq_tool_start, self.seq_cells, tool)
    }

    /// Words of a session's derived state: holds, eligible, shift-and.
    pub fn derived_words(&self) -> usize {
        (self.atom_words + self.step_words + self.seq_words) as usize
    }
}

/// Entry `i` of a list of runs: `items[starts[i]..starts[i + 1]]` (empty when out of
/// range).
#[inline]
fn run<'a, T>(starts: &[u32], items: &'a [T], i: usize) -> &'a [T] {
    match (starts.get(i), starts.get(i + 1)) {
        (Some(&a), Some(&b)) => items.get(a as usize..b as usize).unwrap_or(&[]),
        _ => &[],
    }
}
