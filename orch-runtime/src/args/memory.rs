//! Values from earlier results (semantics §16): a rule may require that an argument be a
//! value an earlier result of a named tool held ("the recipient must be one that
//! `get_contacts` returned"). The session remembers those values — not as text but as
//! 128-bit keys (SHA-256 of the source and the value's canonical form, truncated), two
//! words each, at most [`MEMORY_VALUES`] of them, the newest kept — so it stays `Copy`
//! and of fixed size, and its snapshots carry no result text.

use super::json::{Doc, Kind};
use super::scalar::decimal_key;

/// The most values a session remembers (the newest are kept).
pub const MEMORY_VALUES: usize = 64;
/// The words a session's memory takes when its template reads results: one for the
/// ring's cursor, two per value. A template that reads no results takes none.
pub const MEMORY_WORDS: usize = 1 + 2 * MEMORY_VALUES;

/// The most values one result may add (a larger result adds its first ones).
pub(crate) const PER_RESULT: usize = MEMORY_VALUES;

/// Prefix of every hashed value.
const DOMAIN: &[u8] = b"orch.result.v1\0";

/// The key of the scalar node `n` of `doc` as a value of source `source`: `None` for an
/// array or an object (only scalars are remembered and compared). Strings by their
/// decoded text, numbers by their exact decimal value (`1.0` is `1`), so an argument
/// written differently from the result still matches.
pub(crate) fn key(source: u32, doc: &Doc<'_>, n: usize) -> Option<[u64; 2]> {
    let mut h = hmac_sha256::Hash::new();
    h.update(DOMAIN);
    h.update(source.to_le_bytes());
    match doc.nodes.get(n)?.kind {
        Kind::String { .. } => {
            h.update(b"s");
            h.update(doc.string(n)?.as_bytes());
        }
        Kind::Number => {
            h.update(b"n");
            h.update(decimal_key(doc.raw(n))?.as_bytes());
        }
        Kind::True => h.update(b"t"),
        Kind::False => h.update(b"f"),
        Kind::Null => h.update(b"z"),
        Kind::Array | Kind::Object => return None,
    }
    let d = h.finalize();
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[i..i + 8]);
        u64::from_le_bytes(b)
    };
    Some([word(0), word(8)])
}

/// Does `live` (live entries, two words each) hold `key`?
pub(crate) fn knows(live: &[u64], key: &[u64; 2]) -> bool {
    live.chunks_exact(2).any(|e| e == key)
}

/// A session's memory words: word 0 is the cursor (the next slot in its low 16 bits,
/// the live count in the next 16), then two words per slot. Empty: nothing is kept.
pub(crate) struct Memory<'m>(pub &'m mut [u64]);

/// The slots of a memory of `words` words.
fn slots(words: &[u64]) -> usize {
    words.len().saturating_sub(1) / 2
}

/// `(next, live)` of a memory.
fn cursor(words: &[u64]) -> (usize, usize) {
    let c = words.first().copied().unwrap_or(0);
    let n = slots(words);
    (
        ((c & 0xffff) as usize) % n.max(1),
        (((c >> 16) & 0xffff) as usize).min(n),
    )
}

/// The live entries of a memory (two words each, in slot order).
pub(crate) fn live(words: &[u64]) -> &[u64] {
    let (_, len) = cursor(words);
    words.get(1..1 + 2 * len).unwrap_or(&[])
}

/// The live keys of a memory, oldest first.
pub(crate) fn oldest_first(words: &[u64]) -> Vec<[u64; 2]> {
    let (next, len) = cursor(words);
    let n = slots(words);
    let first = if len == n { next } else { 0 };
    (0..len)
        .map(|k| {
            let at = 1 + 2 * ((first + k) % n.max(1));
            [words[at], words[at + 1]]
        })
        .collect()
}

impl Memory<'_> {
    /// Forgets everything and holds `keys` (oldest first; the newest kept when they are
    /// more than the slots).
    pub fn load(&mut self, keys: &[[u64; 2]]) {
        self.0.fill(0);
        let n = slots(self.0);
        for k in keys.iter().skip(keys.len().saturating_sub(n)) {
            self.remember(*k);
        }
    }

    /// Remembers `key` (nothing when it is known already): the oldest value makes room.
    pub fn remember(&mut self, key: [u64; 2]) {
        let n = slots(self.0);
        if n == 0 || knows(live(self.0), &key) {
            return;
        }
        let (next, len) = cursor(self.0);
        let at = 1 + 2 * next;
        self.0[at] = key[0];
        self.0[at + 1] = key[1];
        let (next, len) = ((next + 1) % n, (len + 1).min(n));
        self.0[0] = next as u64 | ((len as u64) << 16);
    }
}
