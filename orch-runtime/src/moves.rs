//! A small machine's tool records as one table lookup.
//!
//! Everything a session's future depends on is its *behaviour key* (the step, the
//! sequence index, the derived condition state and the `not_recently_used` counters;
//! see [`crate::state::State::behaviour_key`]): two states with equal keys answer every
//! event alike. When a machine's sessions can only ever be in a few thousand such
//! states, [`OwnedMoves::derive`] enumerates them all — from a fresh session, every
//! declared tool recorded, a foreign tool recorded, and a user message satisfying every
//! combination of the message conditions — and tabulates, for each state (a *node*) and
//! each tool, the node recording it leads to and what the record says. Recording a
//! declared tool is then: look the cell up, copy the next node's key into the state,
//! add the tool to the used set and the history. The result is the same state the
//! incremental engine computes (a node's key *is* that state), so nothing else — not
//! a snapshot, not a decision — can tell the two paths apart;
//! `tests/moves_match_engine.rs` checks it event by event on random templates.
//!
//! A session remembers its node as a hint ([`Node`]). A user message takes the next
//! node from the table too (per node, one per combination of message conditions), a
//! reset the fresh session's; a restore forgets it, and the next record finds it again
//! by binary search over the sorted keys. A state the table does not hold (a snapshot
//! edited by hand, or of another version of the template) records by the engine. A
//! machine with more states than the bounds below, or more message conditions than
//! [`MAX_FLAGS`], gets an empty table, and its sessions use the incremental engine
//! alone.

use core::cmp::Ordering;
use core::hash::{Hash, Hasher};

/// At most this many nodes are tabulated.
pub const MAX_NODES: usize = 4096;
/// At most this many words (8 bytes each) are tabulated: per node, its key, its
/// allowed tools, a cell per tool, and its message cells (`u16`s, four to a word). (A
/// node is known by its row's offset, a `u16` below `Node::MISSING`.)
pub const MAX_WORDS: usize = 32_768;
// A node's row, and every cell, is below the sentinels.
const _: () = assert!(MAX_WORDS < Node::MISSING.0 as usize);
/// Machines with more message conditions than this get no table (a message can set
/// any combination of them: `2^flags` messages from every node).
pub const MAX_FLAGS: usize = 6;

/// The outcome kinds of a cell (bits 16..24).
pub(crate) mod kind {
    /// `Advanced`, the new index in bits 32..48.
    pub const ADVANCED: u64 = 0;
    /// `Completed`.
    pub const COMPLETED: u64 = 1;
    /// `Free` when the host has the tool, `NotAllowed` when it does not.
    pub const FREE: u64 = 2;
    /// `NotAllowed`.
    pub const NOT_ALLOWED: u64 = 3;
    /// `OutOfSequence`, the expected group's offset in bits 32..64.
    pub const OUT_OF_SEQUENCE: u64 = 4;
}

compiled_form! {
    /// The transition table of a small machine (borrowed form; see the module docs).
    /// Empty (`width == 0`) when the machine's states exceed the bounds.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Moves<'a>;
    /// The owned form of [`Moves`] ([`OwnedMoves::derive`] builds it).
    #[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
    pub struct OwnedMoves;
    {
        /// Cells per node: the declared tools, then one for a foreign tool. 0: no table.
        width: value(u32),
        /// Words of a node's key.
        key_words: value(u32),
        /// Words of a tool set (the tables' `words`).
        set_words: value(u32),
        /// One row per node, sorted by key (a node is known by its row's offset): its key
        /// (`key_words`), the tools it allows when the host has them all (`set_words`),
        /// and `width` cells — bits 0..16 the next node's row, 16..24 the outcome's kind,
        /// 32..64 the new index of an advancing record or the expected group of an
        /// out-of-sequence one (a foreign tool's cell holds only the next node's row).
        rows: slice(u64),
        /// The row of a fresh session's node.
        fresh: value(u16),
        /// Messages per node: `2^flags`, one per combination of the message conditions a
        /// message can satisfy.
        messages: value(u32),
        /// Per node (in row order) and combination `c`: the row of the node a message
        /// satisfying exactly the conditions of `c`'s bits leads to.
        after_message: slice(u16),
    }
}

/// The node a session's state is at, as far as the session knows: a cache, so equal
/// states compare equal (and hash alike) whatever their hints.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node(pub u16);

impl Node {
    /// Not known: found by search at the next record.
    pub const UNKNOWN: Node = Node(u16::MAX);
    /// Searched for and not in the table (a state no event sequence reaches, such as a
    /// snapshot of another version of the template): the incremental engine records.
    pub const MISSING: Node = Node(u16::MAX - 1);
}

impl PartialEq for Node {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Node {}
impl Hash for Node {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl<'a> Moves<'a> {
    /// Is there a table?
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.width == 0
    }

    /// Words of a row.
    #[inline(always)]
    fn row_words(&self) -> usize {
        (self.key_words + self.set_words + self.width) as usize
    }

    /// Number of nodes (a node is known by the offset of its row in [`Moves::rows`]).
    pub fn nodes(&self) -> usize {
        match self.row_words() {
            0 => 0,
            r => self.rows.len() / r,
        }
    }

    /// The key of node `node`.
    #[inline(always)]
    pub(crate) fn key(&self, node: usize) -> Option<&'a [u64]> {
        self.rows.get(node..node + self.key_words as usize)
    }

    /// The tools node `node` allows, of those the host has.
    #[inline(always)]
    pub(crate) fn allowed(&self, node: usize) -> Option<&'a [u64]> {
        let at = node + self.key_words as usize;
        self.rows.get(at..at + self.set_words as usize)
    }

    /// The cell of `column` (a declared tool's index, or `width - 1` for a foreign
    /// tool) at node `node`.
    #[inline(always)]
    pub(crate) fn cell(&self, node: usize, column: usize) -> Option<u64> {
        let at = node + (self.key_words + self.set_words) as usize + column;
        self.rows.get(at).copied()
    }

    /// The node a user message that satisfied the message conditions of `flags` (their
    /// bits) leads to from node `node`.
    #[inline(always)]
    pub(crate) fn message_node(&self, node: usize, flags: u64) -> Option<Node> {
        let rank = node / self.row_words().max(1);
        let at = rank * self.messages as usize + flags as usize;
        self.after_message.get(at).map(|&n| Node(n))
    }

    /// The node whose key is `key()` (its words in order), by binary search.
    pub(crate) fn find<I: Iterator<Item = u64>>(&self, key: impl Fn() -> I) -> Node {
        // Short keys (all the common ones) are compared as slices, from a copy on the
        // stack; longer ones word by word, from a new iterator each time.
        let mut short = [0u64; 16];
        let mut len = 0;
        let mut words = key();
        for (slot, word) in short.iter_mut().zip(&mut words) {
            *slot = word;
            len += 1;
        }
        if len < short.len() || words.next().is_none() {
            let short = &short[..len];
            return self.search(|k| short.cmp(k));
        }
        self.search(|k| key().cmp(k.iter().copied()))
    }

    /// Binary search of the rows by key: `order(k)` orders the sought key against `k`.
    fn search(&self, order: impl Fn(&[u64]) -> Ordering) -> Node {
        let (mut lo, mut hi) = (0usize, self.nodes());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let node = mid * self.row_words();
            let Some(k) = self.key(node) else {
                return Node::MISSING;
            };
            match order(k) {
                Ordering::Equal => return Node(node as u16),
                Ordering::Less => hi = mid,
                Ordering::Greater => lo = mid + 1,
            }
        }
        Node::MISSING
    }
}

/// The next node of a cell.
#[inline(always)]
pub(crate) fn next_of(cell: u64) -> u16 {
    cell as u16
}

/// A record's outcome in one word, as a cell holds it: bits 16..24 the kind, 32..64
/// the new index (advanced) or the expected group's offset (out of sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packed(pub u64);

impl Packed {
    /// What the cell `cell` records. Its kind is `FREE` for a tool the node allows:
    /// [`Packed::resolve`] makes it `NOT_ALLOWED` when the host lacks the tool.
    #[inline(always)]
    pub fn of_cell(cell: u64) -> Packed {
        Packed(cell & !0xffff)
    }

    /// This outcome for a tool the host has (`available()`) or not: `FREE` becomes
    /// `NOT_ALLOWED` (`FREE + 1`) when it does not.
    #[inline(always)]
    pub fn resolve(self, available: impl FnOnce() -> bool) -> Packed {
        if self.kind() == kind::FREE && !available() {
            Packed(self.0 + (1 << 16))
        } else {
            self
        }
    }

    /// The outcome's kind (one of [`kind`]).
    #[inline(always)]
    pub fn kind(self) -> u64 {
        (self.0 >> 16) & 0xff
    }

    /// The new index (`Advanced`) or the expected group's offset (`OutOfSequence`).
    #[inline(always)]
    pub fn payload(self) -> u32 {
        (self.0 >> 32) as u32
    }
}
