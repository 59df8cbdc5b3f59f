//! [`OwnedPlan::derive`]: a machine's conditions as the incremental engine's atoms
//! (see [`crate::plan`]).

use crate::bits;
use crate::plan::{OwnedPlan, NONE, SOLE};
use crate::tables::{Condition, Tables};
use std::collections::HashMap;

impl OwnedPlan {
    /// The plan of `t`'s conditions (its own `plan` field is not read).
    pub fn derive<S: AsRef<str>>(t: &Tables<'_, S>) -> Self {
        let n_steps = t.steps.len();
        let flags = t.message_flags();
        let default = t.default_step.map(usize::from);
        let is_candidate = |i: usize| {
            Some(i) != default && t.steps.get(i).is_some_and(|s| !s.conditions.is_empty())
        };

        // Atoms, in order: message flags, tools used, sequences, not-recently-used.
        let mut n_atoms = flags as u32;
        let used_atom = tool_used_atoms(t, &is_candidate, &mut n_atoms);
        // Sequences: the steps with a `sequence_match` condition, in step order.
        let mut seq_atom_of_step = vec![NONE; n_steps];
        let mut seq_bits = 0usize;
        let mut tracked: Vec<(usize, usize, usize)> = Vec::new(); // (step, first bit, len)
        for i in (0..n_steps).filter(|&i| is_candidate(i)) {
            let len = t.steps[i].sequence.len as usize;
            let has = t
                .step_conditions(i)
                .iter()
                .any(|c| matches!(c, Condition::SequenceMatch));
            if has && len > 0 {
                seq_atom_of_step[i] = n_atoms;
                n_atoms += 1;
                tracked.push((i, seq_bits, len));
                seq_bits += len;
            }
        }
        let seq = sequence_cells(t, &tracked, seq_bits, &seq_atom_of_step);

        // Not recently used: a counter per tool, an atom per (tool, window).
        let nru_atom_base = n_atoms;
        let (counters, nru_atoms, nru_atom_of) = not_recently_used(t, &is_candidate, &mut n_atoms);

        // Budgets: an atom per budget test that a candidate step's condition reads.
        let budget_atom_base = n_atoms;
        let mut budget_atoms: Vec<u32> = Vec::new();
        for i in (0..n_steps).filter(|&i| is_candidate(i)) {
            for c in t.step_conditions(i) {
                if let Condition::Budget(k) = *c {
                    if !budget_atoms.contains(&u32::from(k)) {
                        budget_atoms.push(u32::from(k));
                        n_atoms += 1;
                    }
                }
            }
        }

        // Each candidate step's mask, and the inverse map. A step with a condition that
        // can never hold (`sequence_match` without a sequence, which the compiler
        // rejects) is never a candidate.
        let atom_words = (n_atoms as usize).div_ceil(64);
        let step_words = n_steps.div_ceil(64);
        let mut cond_atom = vec![NONE; t.conditions.len()];
        let mut step_atom_start = Vec::with_capacity(n_steps + 1);
        let mut step_atoms: Vec<u32> = Vec::new();
        let mut candidates = vec![0u64; step_words];
        let mut needs: Vec<Vec<u16>> = vec![Vec::new(); n_atoms as usize];
        for (i, &seq_atom) in seq_atom_of_step.iter().enumerate() {
            step_atom_start.push(step_atoms.len() as u32);
            if !is_candidate(i) {
                continue;
            }
            let mut atoms: Vec<u32> = t
                .step_conditions(i)
                .iter()
                .map(|c| match *c {
                    Condition::Message(f) if (f as usize) < flags => u32::from(f),
                    Condition::Message(_) => NONE,
                    Condition::ToolUsed(tool) => {
                        used_atom.get(tool as usize).copied().unwrap_or(NONE)
                    }
                    Condition::SequenceMatch => seq_atom,
                    Condition::NotRecentlyUsed { tool, window } => {
                        nru_atom_of.get(&(tool, window)).copied().unwrap_or(NONE)
                    }
                    Condition::Budget(k) => budget_atoms
                        .iter()
                        .position(|&b| b == u32::from(k))
                        .map_or(NONE, |at| budget_atom_base + at as u32),
                })
                .collect();
            if atoms.contains(&NONE) {
                continue;
            }
            if let Some(s) = t.steps.get(i) {
                for (k, atom) in atoms.iter().enumerate() {
                    if let Some(slot) = cond_atom.get_mut(s.conditions.start as usize + k) {
                        *slot = *atom;
                    }
                }
            }
            atoms.sort_unstable();
            atoms.dedup();
            bits::set(&mut candidates, i);
            step_atoms.extend_from_slice(&atoms);
            let entry = if atoms.len() == 1 && i < SOLE as usize {
                i as u16 | SOLE
            } else {
                i as u16
            };
            for atom in atoms {
                needs[atom as usize].push(entry);
            }
        }
        step_atom_start.push(step_atoms.len() as u32);
        let (atom_step_start, atom_steps) = runs_of(&needs);

        OwnedPlan {
            atom_words: atom_words as u32,
            step_words: step_words as u32,
            seq_words: seq.seq_words as u32,
            step_atom_start,
            step_atoms,
            candidates,
            atom_step_start,
            atom_steps,
            used_atom,
            seq_first: seq.seq_first,
            seq_last: seq.seq_last,
            seq_atom: seq.seq_atom,
            seq_tool_start: seq.seq_tool_start,
            seq_cells: seq.seq_cells,
            counters,
            nru_atoms,
            nru_atom_base,
            budget_atoms,
            budget_atom_base,
            cond_atom,
        }
    }
}

/// The atom of each tool a candidate step's `tool_used` condition names (`NONE` for the
/// others), numbered from `n_atoms` on.
fn tool_used_atoms<S: AsRef<str>>(
    t: &Tables<'_, S>,
    is_candidate: &dyn Fn(usize) -> bool,
    n_atoms: &mut u32,
) -> Vec<u32> {
    let n_steps = t.steps.len();
    let mut used_atom = vec![NONE; t.tools.len()];
    for i in (0..n_steps).filter(|&i| is_candidate(i)) {
        for c in t.step_conditions(i) {
            if let Condition::ToolUsed(tool) = *c {
                if let Some(slot) = used_atom.get_mut(tool as usize) {
                    if *slot == NONE {
                        *slot = *n_atoms;
                        *n_atoms += 1;
                    }
                }
            }
        }
    }
    used_atom
}

/// The shift-and state of the tracked sequences ([`OwnedPlan`]'s `seq_*` fields).
struct SequenceCells {
    seq_words: usize,
    seq_first: Vec<u64>,
    seq_last: Vec<u64>,
    seq_atom: Vec<u32>,
    seq_tool_start: Vec<u32>,
    seq_cells: Vec<(u32, u64)>,
}

/// The shift-and cells of the `tracked` sequences (step, first bit, length; `seq_bits`
/// bits in all): each sequence's first and last bit, the atom its last bit completes,
/// and per tool the positions it can fill.
fn sequence_cells<S: AsRef<str>>(
    t: &Tables<'_, S>,
    tracked: &[(usize, usize, usize)],
    seq_bits: usize,
    seq_atom_of_step: &[u32],
) -> SequenceCells {
    let n_tools = t.tools.len();
    let seq_words = seq_bits.div_ceil(64);
    let mut seq_first = vec![0u64; seq_words];
    let mut seq_last = vec![0u64; seq_words];
    // Per tool, the positions it can fill.
    let mut positions: Vec<Vec<u64>> = vec![Vec::new(); n_tools];
    for &(step, first, len) in tracked {
        bits::set(&mut seq_first, first);
        bits::set(&mut seq_last, first + len - 1);
        for pos in 0..len {
            for tool in bits::BitIter::new(t.group(step, pos)) {
                if let Some(p) = positions.get_mut(tool) {
                    if p.is_empty() {
                        p.resize(seq_words, 0);
                    }
                    bits::set(p, first + pos);
                }
            }
        }
    }
    let mut seq_atom = vec![NONE; seq_bits];
    for &(step, first, len) in tracked {
        seq_atom[first + len - 1] = seq_atom_of_step[step];
    }
    let mut seq_tool_start = Vec::with_capacity(n_tools + 1);
    let mut seq_cells = Vec::new();
    for p in &positions {
        seq_tool_start.push(seq_cells.len() as u32);
        for (w, m) in p.iter().enumerate() {
            if *m != 0 {
                seq_cells.push((w as u32, *m));
            }
        }
    }
    seq_tool_start.push(seq_cells.len() as u32);
    SequenceCells {
        seq_words,
        seq_first,
        seq_last,
        seq_atom,
        seq_tool_start,
        seq_cells,
    }
}

/// The not-recently-used state of the candidate steps' conditions: a counter per tool
/// (its largest window), an atom per (tool, window), numbered from `n_atoms` on.
#[allow(clippy::type_complexity)]
fn not_recently_used<S: AsRef<str>>(
    t: &Tables<'_, S>,
    is_candidate: &dyn Fn(usize) -> bool,
    n_atoms: &mut u32,
) -> (Vec<(u16, u16)>, Vec<(u32, u16)>, HashMap<(u16, u16), u32>) {
    let n_steps = t.steps.len();
    let mut counters: Vec<(u16, u16)> = Vec::new();
    let mut counter_of: HashMap<u16, usize> = HashMap::new();
    let mut nru_atoms: Vec<(u32, u16)> = Vec::new();
    let mut nru_atom_of: HashMap<(u16, u16), u32> = HashMap::new();
    for i in (0..n_steps).filter(|&i| is_candidate(i)) {
        for c in t.step_conditions(i) {
            if let Condition::NotRecentlyUsed { tool, window } = *c {
                let k = *counter_of.entry(tool).or_insert_with(|| {
                    counters.push((tool, 0));
                    counters.len() - 1
                });
                counters[k].1 = counters[k].1.max(window);
                nru_atom_of.entry((tool, window)).or_insert_with(|| {
                    nru_atoms.push((k as u32, window));
                    *n_atoms += 1;
                    *n_atoms - 1
                });
            }
        }
    }
    (counters, nru_atoms, nru_atom_of)
}

/// Lists as runs: the start of each (and the end of the last), and the items in order.
fn runs_of(lists: &[Vec<u16>]) -> (Vec<u32>, Vec<u16>) {
    let mut starts = Vec::with_capacity(lists.len() + 1);
    let mut items = Vec::new();
    for list in lists {
        starts.push(items.len() as u32);
        items.extend_from_slice(list);
    }
    starts.push(items.len() as u32);
    (starts, items)
}
