//! Where values came from (semantics §16): a rule may require that an argument be a
//! value an earlier result of a named tool held ("the recipient must be one that
//! `get_contacts` returned"), one the user wrote, one an earlier call was given, or one a
//! trusted tool returned. The session remembers those values — not as text but as
//! 128-bit keys (SHA-256 of the source and the value's normal form, truncated), two
//! words each, in a ring of fixed size (the template's `rememberedValues`, 64 unless it
//! says), the newest kept and every value the ring forgot counted — so it stays `Copy`
//! and of fixed size, and its snapshots carry no result text. Values seen only in
//! untrusted text have a ring of their own, so that a long web page never pushes the
//! user's or a trusted tool's values out.

use super::json::{Doc, Kind};
use super::provenance::normal_form;
use super::scalar::{decimal_key, is_number};

/// The values a session remembers unless the template says otherwise.
pub const MEMORY_VALUES: usize = 64;
/// The words a ring of [`MEMORY_VALUES`] values takes: one for the ring's cursor, two per
/// value. A template that reads no values takes none.
pub const MEMORY_WORDS: usize = 1 + 2 * MEMORY_VALUES;
/// The most values a template may ask a session to remember in each ring: two full
/// rings (512 KiB) leave a snapshot well within its bound
/// ([`MAX_SNAPSHOT_BYTES`](crate::snapshot::MAX_SNAPSHOT_BYTES), 1 MiB).
pub const MAX_MEMORY_VALUES: usize = 16_384;

/// The words of a ring of `values` values.
pub(crate) const fn ring_words(values: usize) -> usize {
    1 + 2 * values
}

/// Prefix of every hashed value.
const DOMAIN: &[u8] = b"orch.result.v1\0";

/// A hasher for a value of `source`.
fn hasher(source: u32) -> hmac_sha256::Hash {
    let mut h = hmac_sha256::Hash::new();
    h.update(DOMAIN);
    h.update(source.to_le_bytes());
    h
}

/// The key a finished hash gives.
fn finish(h: hmac_sha256::Hash) -> [u64; 2] {
    let d = h.finalize();
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[i..i + 8]);
        u64::from_le_bytes(b)
    };
    [word(0), word(8)]
}

/// The key of the string `s` (already in its normal form) as a value of `source`.
pub(crate) fn string_key(source: u32, s: &str) -> [u64; 2] {
    let mut h = hasher(source);
    h.update(b"s");
    h.update(s.as_bytes());
    finish(h)
}

/// The key of a number written `raw` as a value of `source` (by exact decimal value).
pub(crate) fn number_key(source: u32, raw: &str) -> Option<[u64; 2]> {
    let mut h = hasher(source);
    h.update(b"n");
    h.update(decimal_key(raw)?.as_bytes());
    Some(finish(h))
}

/// The keys of a value `v` read from a text (already in its normal form): as a string,
/// and as a number when it is written as one.
pub(crate) fn text_keys(source: u32, v: &str, visit: &mut dyn FnMut([u64; 2])) {
    visit(string_key(source, v));
    if is_number(v) {
        if let Some(k) = number_key(source, v) {
            visit(k);
        }
    }
}

/// The key of the scalar node `n` of `doc` as a value of source `source`: `None` for an
/// array or an object (only scalars are remembered and compared). Strings by their
/// decoded text in its [`normal_form`], numbers by their exact decimal value (`1.0` is
/// `1`), so an argument written differently from the result still matches.
pub(crate) fn key(source: u32, doc: &Doc<'_>, n: usize) -> Option<[u64; 2]> {
    match doc.nodes.get(n)?.kind {
        Kind::String { .. } => Some(string_key(source, &normal_form(&doc.string(n)?))),
        Kind::Number => number_key(source, doc.raw(n)),
        kind => {
            let mut h = hasher(source);
            h.update(match kind {
                Kind::True => b"t",
                Kind::False => b"f",
                Kind::Null => b"z",
                _ => return None,
            });
            Some(finish(h))
        }
    }
}

/// Does `live` (live entries, two words each) hold `key`?
pub(crate) fn knows(live: &[u64], key: &[u64; 2]) -> bool {
    live.chunks_exact(2).any(|e| e == key)
}

/// A ring of remembered values: word 0 is the cursor (the next slot in its low 16 bits,
/// the live count in the next 16, the count of values forgotten to make room in the high
/// 32), then two words per slot. Empty: nothing is kept.
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

/// How many values a ring forgot to make room for newer ones (saturating).
pub(crate) fn forgotten(words: &[u64]) -> u32 {
    (words.first().copied().unwrap_or(0) >> 32) as u32
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

/// How many of the newest values [`Memory::remember`] compares a new one with.
pub(crate) const RECENT: usize = 64;

impl Memory<'_> {
    /// Is `key` among the [`RECENT`] newest values?
    fn recently(&self, key: &[u64; 2]) -> bool {
        let (next, len) = cursor(self.0);
        let n = slots(self.0);
        (1..=len.min(RECENT)).any(|back| {
            let slot = (next + n - back) % n;
            self.0.get(1 + 2 * slot..3 + 2 * slot) == Some(&key[..])
        })
    }

    /// Forgets everything and holds `keys` (oldest first; the newest kept when they are
    /// more than the slots, the others counted as forgotten, after the `forgotten`
    /// already counted).
    pub fn load(&mut self, keys: &[[u64; 2]], forgotten: u32) {
        self.0.fill(0);
        if let Some(c) = self.0.first_mut() {
            *c = u64::from(forgotten) << 32;
        }
        for k in keys {
            self.remember(*k);
        }
    }

    /// Remembers `key` (nothing when it is among the [`RECENT`] newest already): the
    /// oldest value makes room. Only the newest are compared, so that remembering costs
    /// the same whatever the ring's size; a value seen again after many others may take
    /// a second slot.
    pub fn remember(&mut self, key: [u64; 2]) {
        let n = slots(self.0);
        if n == 0 || self.recently(&key) {
            return;
        }
        let (next, len) = cursor(self.0);
        let mut lost = forgotten(self.0);
        if len == n {
            lost = lost.saturating_add(1);
        }
        let at = 1 + 2 * next;
        self.0[at] = key[0];
        self.0[at + 1] = key[1];
        let (next, len) = ((next + 1) % n, (len + 1).min(n));
        self.0[0] = next as u64 | ((len as u64) << 16) | (u64::from(lost) << 32);
    }
}
