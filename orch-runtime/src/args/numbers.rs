//! Numbers results returned (semantics §16): the newest number a tool's result held at a
//! path, kept exactly, that a `range` bound compares an argument with — "the amount at
//! most the balance `get_balance` returned".

use super::budget::bound;
use super::json::{Doc, Kind};
use super::rules::Rules;
use super::source::Source;

/// Words per held number: whether one is held, and its value in billionths (two words).
pub const NUMBER_WORDS: usize = 3;

impl<'a> Rules<'a> {
    /// The words of the numbers' area: [`NUMBER_WORDS`] per number a bound reads.
    pub fn number_area_words(&self) -> usize {
        self.numbers.len() * NUMBER_WORDS
    }

    /// Where the numbers' area starts in a session's memory words: after the rings.
    fn number_start(&self) -> usize {
        let (main, untrusted) = self.ring_sizes();
        main + untrusted
    }

    /// The numbers' area of a session's memory words (empty without numbers).
    pub(crate) fn number_area<'m>(&self, words: &'m [u64]) -> &'m [u64] {
        let start = self.number_start();
        words
            .get(start..start + self.number_area_words())
            .unwrap_or(&[])
    }

    /// The number `k` of [`Rules::numbers`] holds, in billionths: the one the newest
    /// result of its tool held at its path; `None` when that result held none (or no
    /// result came yet). `area`: the numbers' area.
    pub(crate) fn held_number(area: &[u64], k: usize) -> Option<i128> {
        let w = area.get(k * NUMBER_WORDS..(k + 1) * NUMBER_WORDS)?;
        (w[0] == 1).then(|| (u128::from(w[1]) | u128::from(w[2]) << 64) as i128)
    }

    /// The number `k` of [`Rules::numbers`] a session holds (`memory`: its memory words).
    pub fn number(&self, memory: &[u64], k: usize) -> Option<i128> {
        Self::held_number(self.number_area(memory), k)
    }

    /// Sets number `k` of a session (`memory`: its memory words).
    pub(crate) fn set_number(&self, memory: &mut [u64], k: usize, value: Option<i128>) {
        let start = self.number_start() + k * NUMBER_WORDS;
        let Some(w) = memory.get_mut(start..start + NUMBER_WORDS) else {
            return;
        };
        match value {
            Some(v) => {
                let v = v as u128;
                w[0] = 1;
                w[1] = v as u64;
                w[2] = (v >> 64) as u64;
            }
            None => w.fill(0),
        }
    }

    /// The numbers bounds read from the results of the declared tool `tool`, with
    /// their indices.
    pub(crate) fn numbers_of(&self, tool: usize) -> impl Iterator<Item = (usize, &Source)> + '_ {
        self.numbers
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.tool as usize == tool)
    }

    /// Keeps, for every number a bound reads from `tool`'s results, the number this
    /// result `text` holds at its path — exactly, up to nine decimal places. A result
    /// without one there (not JSON, not a number, more precise) holds none: a bound that
    /// reads it then does not hold. `true` when a bound reads `tool`'s results.
    pub fn remember_numbers(&self, memory: &mut [u64], tool: usize, text: &str) -> bool {
        let mut numbers = self.numbers_of(tool).peekable();
        if numbers.peek().is_none() {
            return false;
        }
        let doc = Doc::parse(text).ok();
        let found: Vec<(usize, Option<i128>)> = numbers
            .map(|(k, source)| {
                let value = doc.as_ref().and_then(|doc| {
                    let n = doc.pointer(0, self.text_of(source.path))?;
                    (doc.nodes[n].kind == Kind::Number)
                        .then(|| bound(doc.raw(n)))
                        .flatten()
                });
                (k, value)
            })
            .collect();
        for (k, value) in found {
            self.set_number(memory, k, value);
        }
        true
    }

    /// Every number a session holds: its tool (an index into the machine's tools), its
    /// path, its value in billionths — for snapshots, by name.
    pub fn held_numbers(&self, memory: &[u64]) -> Vec<(u16, &'a str, i128)> {
        let area = self.number_area(memory);
        self.numbers
            .iter()
            .enumerate()
            .filter_map(|(k, s)| {
                Self::held_number(area, k).map(|v| (s.tool, self.text_of(s.path), v))
            })
            .collect()
    }

    /// The index of the number read from `tool`'s results at `path`.
    pub fn number_index(&self, tool: usize, path: &str) -> Option<usize> {
        self.numbers_of(tool)
            .find(|(_, s)| self.text_of(s.path) == path)
            .map(|(k, _)| k)
    }
}
