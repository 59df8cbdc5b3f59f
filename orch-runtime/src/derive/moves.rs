//! [`OwnedMoves::derive`]: every behaviour state of a small machine, explored from a
//! fresh session, as one transition table (see [`crate::moves`]).

use crate::moves::{OwnedMoves, Packed, MAX_FLAGS, MAX_NODES, MAX_WORDS};
use crate::state::{State, ToolRef};
use crate::tables::Tables;
use std::collections::VecDeque;

/// One state of the exploration, in owned storage.
type Explored = State<Vec<u64>, Vec<u64>, Vec<u16>, Vec<u64>, Vec<u16>, Vec<u64>>;

impl OwnedMoves {
    /// The table of `t`'s machine (its own `moves` field is not read; its `plan` is), or
    /// an empty one when its states exceed [`MAX_NODES`] or [`MAX_WORDS`], or it has more
    /// than [`MAX_FLAGS`] message conditions, or a step condition reads a budget (whose
    /// totals are not part of a node).
    pub fn derive<S: AsRef<str>>(t: &Tables<'_, S>) -> Self {
        let tools = t.tools.len();
        let flags = t.message_flags();
        let width = tools + 1;
        if tools == 0
            || flags > MAX_FLAGS
            || tools >= u16::MAX as usize
            || !t.plan.budget_atoms.is_empty()
        {
            return OwnedMoves::default();
        }
        let fresh: Explored = State::fresh(
            t,
            vec![0; t.words],
            vec![0; flags.div_ceil(64)],
            vec![0; t.history],
            vec![0; t.plan.derived_words()],
            vec![0; t.plan.counters.len()],
            Vec::new(),
        );
        // A node's row (its key as the state's own key says, its allowed set, its cells)
        // and its message cells (`u16`s, four to a word).
        let node_words =
            fresh.key_words().count() + t.words + width + (1usize << flags).div_ceil(4);
        let max_nodes = MAX_NODES.min(MAX_WORDS / node_words);
        let all = {
            let mut all = vec![0u64; t.words];
            (0..tools).for_each(|i| crate::bits::set(&mut all, i));
            all
        };
        // Breadth first from a fresh session; ids in discovery order until sorted.
        let mut ids: std::collections::HashMap<Vec<u64>, usize> = Default::default();
        let mut keys: Vec<Vec<u64>> = Vec::new();
        let mut cells: Vec<u64> = Vec::new();
        let mut allowed: Vec<u64> = Vec::new();
        let mut messages: Vec<usize> = Vec::new();
        let mut queue: VecDeque<Explored> = VecDeque::new();
        let mut key = Vec::new();
        let mut admit = |s: Explored,
                         key: &mut Vec<u64>,
                         queue: &mut VecDeque<Explored>,
                         keys: &mut Vec<Vec<u64>>|
         -> Option<usize> {
            s.behaviour_key(key);
            if let Some(&id) = ids.get(key.as_slice()) {
                return Some(id);
            }
            if keys.len() >= max_nodes {
                return None;
            }
            let id = keys.len();
            ids.insert(key.clone(), id);
            keys.push(key.clone());
            queue.push_back(s);
            Some(id)
        };
        if admit(fresh, &mut key, &mut queue, &mut keys).is_none() {
            return OwnedMoves::default();
        }
        while let Some(s) = queue.pop_front() {
            let at = allowed.len();
            allowed.resize(at + t.words, 0);
            s.allowed_into(t, &all, &mut allowed[at..]);
            for column in 0..width {
                let mut next = s.clone();
                let tool = if column < tools {
                    ToolRef::Declared(column)
                } else {
                    ToolRef::Foreign("")
                };
                let cell = Packed::of(next.record_engine(t, &all, tool)).0;
                let Some(id) = admit(next, &mut key, &mut queue, &mut keys) else {
                    return OwnedMoves::default();
                };
                cells.push(cell | id as u64);
            }
            for combination in 0..1u64 << flags {
                let mut next = s.clone();
                next.on_message_flags(t, &[combination]);
                let Some(id) = admit(next, &mut key, &mut queue, &mut keys) else {
                    return OwnedMoves::default();
                };
                messages.push(id);
            }
        }
        // Ids by rank of key, so that a key is found by binary search.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        let key_words = keys.first().map_or(0, Vec::len);
        let row_words = key_words + t.words + width;
        let mut row = vec![0u64; keys.len()];
        for (r, &id) in order.iter().enumerate() {
            row[id] = (r * row_words) as u64;
        }
        let mut moves = OwnedMoves {
            width: width as u32,
            key_words: key_words as u32,
            set_words: t.words as u32,
            rows: Vec::with_capacity(keys.len() * (key_words + t.words + width)),
            fresh: row.first().map_or(0, |&r| r as u16),
            messages: 1 << flags,
            after_message: Vec::with_capacity(messages.len()),
        };
        for &id in &order {
            moves.rows.extend_from_slice(&keys[id]);
            moves
                .rows
                .extend_from_slice(&allowed[id * t.words..(id + 1) * t.words]);
            moves.rows.extend(
                cells[id * width..(id + 1) * width]
                    .iter()
                    .map(|c| c & !0xffff | row[(c & 0xffff) as usize]),
            );
            let combinations = 1usize << flags;
            moves.after_message.extend(
                messages[id * combinations..(id + 1) * combinations]
                    .iter()
                    .map(|&n| row[n] as u16),
            );
        }
        moves
    }
}
