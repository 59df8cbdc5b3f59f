//! "Did you mean …?" for many unknown names against many known ones, without comparing
//! every pair.
//!
//! A suggestion is the known name at the smallest Levenshtein distance, at most
//! `max(2, n / 3)` for a name of `n` characters, the first in declaration order among
//! equals ([`super::closest`] on one name). With thousands of both, comparing every pair
//! is quadratic; here each query looks only at names that can be that close:
//!
//! - of a length within the distance;
//! - sharing enough character pairs (bigrams): one edit destroys at most two of a name's
//!   distinct bigrams, so a name within distance `k` shares all but `2k` of the query's
//!   (counted per name over the bigrams' lists of names);
//! - then a Levenshtein distance computed only in the band of width `2k + 1` and
//!   abandoned once it exceeds `k`.
//!
//! A query whose names are too short to filter (fewer than `2k + 1` distinct bigrams)
//! compares the names of fitting lengths. Identical queries are answered once. All of it
//! counts its work against a budget proportional to the input; past it, the remaining
//! unknown names get no suggestion (the errors themselves are unaffected).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Work units a suggester may spend per character of its names and queries (a unit is
/// one cell of a distance table or one entry of a bigram list read).
const WORK_PER_CHAR: u64 = 4_096;

/// Known names, indexed for [`Suggester::closest`].
pub(crate) struct Suggester<'a> {
    names: Vec<&'a str>,
    chars: Vec<Vec<char>>,
    /// Bigram → the names (indices, ascending) that contain it.
    grams: HashMap<(char, char), Vec<u32>>,
    /// Length in characters → the names of that length (ascending).
    by_len: HashMap<usize, Vec<u32>>,
    memo: RefCell<HashMap<String, Option<u32>>>,
    /// Per name, the query's bigrams it shares (zero between queries).
    counts: RefCell<Vec<u16>>,
    /// Work units left.
    work: Cell<u64>,
}

/// The distinct bigrams of `chars`.
fn bigrams(chars: &[char]) -> Vec<(char, char)> {
    let mut grams: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
    grams.sort_unstable();
    grams.dedup();
    grams
}

impl<'a> Suggester<'a> {
    /// Indexes `names` (in declaration order).
    pub(crate) fn new(names: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.into_iter().collect();
        let chars: Vec<Vec<char>> = names.iter().map(|n| n.chars().collect()).collect();
        let mut grams: HashMap<(char, char), Vec<u32>> = HashMap::new();
        let mut by_len: HashMap<usize, Vec<u32>> = HashMap::new();
        for (i, c) in chars.iter().enumerate() {
            for g in bigrams(c) {
                grams.entry(g).or_default().push(i as u32);
            }
            by_len.entry(c.len()).or_default().push(i as u32);
        }
        let size: usize = chars.iter().map(Vec::len).sum();
        let counts = RefCell::new(vec![0; chars.len()]);
        Suggester {
            names,
            chars,
            grams,
            by_len,
            memo: RefCell::new(HashMap::new()),
            counts,
            work: Cell::new(WORK_PER_CHAR * (size as u64 + 64)),
        }
    }

    /// Spends `units`; `false` once the budget is gone.
    fn spend(&self, units: usize) -> bool {
        match self.work.get().checked_sub(units as u64) {
            Some(left) => {
                self.work.set(left);
                true
            }
            None => {
                self.work.set(0);
                false
            }
        }
    }

    /// The known name closest to `name`, if close enough to suggest (and the budget
    /// lasts).
    pub(crate) fn closest(&self, name: &str) -> Option<&'a str> {
        if let Some(found) = self.memo.borrow().get(name) {
            return found.map(|i| self.names[i as usize]);
        }
        let query: Vec<char> = name.chars().collect();
        // Each query adds its own length to the budget: the work stays linear in the
        // input however many unknown names there are.
        self.work.set(
            self.work
                .get()
                .saturating_add(WORK_PER_CHAR * (query.len() as u64 + 1)),
        );
        let found = self.search(&query);
        self.memo.borrow_mut().insert(name.to_owned(), found);
        found.map(|i| self.names[i as usize])
    }

    fn search(&self, query: &[char]) -> Option<u32> {
        let n = query.len();
        let limit = (n / 3).max(2);
        let fits = |i: u32| self.chars[i as usize].len().abs_diff(n) <= limit;
        let mut candidates: Vec<u32> = Vec::new();
        let grams = bigrams(query);
        if grams.len() > 2 * limit {
            // A name within `limit` shares all but `2 * limit` of the query's bigrams:
            // count them per name, over every list.
            let need = (grams.len() - 2 * limit) as u16;
            let mut counts = self.counts.borrow_mut();
            for g in &grams {
                let list = self.grams.get(g).map_or(&[][..], Vec::as_slice);
                if !self.spend(list.len()) {
                    for &i in &candidates {
                        counts[i as usize] = 0;
                    }
                    return None;
                }
                for &i in list {
                    let c = &mut counts[i as usize];
                    if *c == 0 {
                        candidates.push(i);
                    }
                    *c = c.saturating_add(1);
                }
            }
            candidates.retain(|&i| {
                let keep = counts[i as usize] >= need && fits(i);
                counts[i as usize] = 0;
                keep
            });
            candidates.sort_unstable();
        } else {
            for len in n.saturating_sub(limit)..=n + limit {
                let list = self.by_len.get(&len).map_or(&[][..], Vec::as_slice);
                if !self.spend(list.len()) {
                    return None;
                }
                candidates.extend_from_slice(list);
            }
            candidates.sort_unstable();
        }
        let mut best: Option<(usize, u32)> = None;
        for i in candidates {
            let bound = best.map_or(limit, |(d, _)| d.min(limit));
            let other = &self.chars[i as usize];
            if !self.spend(other.len().min(n + limit) * (2 * bound + 1)) {
                return None;
            }
            if let Some(d) = bounded_levenshtein(query, other, bound) {
                // Ascending indices: a tie keeps the earlier name.
                if best.is_none_or(|(b, _)| d < b) {
                    best = Some((d, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }
}

/// The Levenshtein distance between `a` and `b` if it is at most `bound`.
pub(crate) fn bounded_levenshtein(a: &[char], b: &[char], bound: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > bound {
        return None;
    }
    let big = bound + 1;
    // Row `i` holds distances of a[..i] to b[..j] for j within the band around i.
    let mut prev: Vec<usize> = (0..=b.len()).map(|j| j.min(big)).collect();
    let mut row = vec![big; b.len() + 1];
    for i in 1..=a.len() {
        let lo = i.saturating_sub(bound).max(1);
        let hi = (i + bound).min(b.len());
        row.iter_mut().for_each(|c| *c = big);
        row[0] = i.min(big);
        let mut row_min = row[0];
        for j in lo..=hi {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let d = (prev[j - 1] + cost).min(prev[j] + 1).min(row[j - 1] + 1);
            row[j] = d.min(big);
            row_min = row_min.min(row[j]);
        }
        if row_min > bound {
            return None;
        }
        std::mem::swap(&mut prev, &mut row);
    }
    let d = prev[b.len()];
    (d <= bound).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    fn random_name(seed: &mut u64, alphabet: &[char]) -> String {
        let len = 1 + (xorshift(seed) % 12) as usize;
        (0..len)
            .map(|_| alphabet[(xorshift(seed) % alphabet.len() as u64) as usize])
            .collect()
    }

    #[test]
    fn bounded_distance_is_the_distance_when_within_the_bound() {
        let mut seed = 7u64;
        let alphabet: Vec<char> = "abcé_1".chars().collect();
        for _ in 0..20_000 {
            let a = random_name(&mut seed, &alphabet);
            let b = random_name(&mut seed, &alphabet);
            let d = strsim::levenshtein(&a, &b);
            let (ac, bc): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
            for bound in 0..6 {
                let expected = (d <= bound).then_some(d);
                assert_eq!(
                    bounded_levenshtein(&ac, &bc, bound),
                    expected,
                    "{a:?} {b:?} {bound}"
                );
            }
        }
    }

    #[test]
    fn suggests_what_comparing_every_pair_suggests() {
        let mut seed = 99u64;
        for alphabet in ["ab", "abcdefgh_", "abcdefghijklmnopqrstuvwxyz0123456789_é"] {
            let alphabet: Vec<char> = alphabet.chars().collect();
            let known: Vec<String> = (0..300)
                .map(|_| random_name(&mut seed, &alphabet))
                .collect();
            let suggester = Suggester::new(known.iter().map(String::as_str));
            for _ in 0..600 {
                let unknown = random_name(&mut seed, &alphabet);
                assert_eq!(
                    suggester.closest(&unknown),
                    super::super::closest(&unknown, known.iter().map(String::as_str)),
                    "{unknown:?}"
                );
            }
        }
    }

    #[test]
    fn thousands_against_thousands_are_answered_within_the_budget() {
        // 4,000 known names and 4,000 unknown ones, most a few edits from a known one:
        // the filters keep the work far below the linear budget (it is never the reason
        // for a missing suggestion), and a sample agrees with comparing every pair.
        let mut seed = 4242u64;
        let alphabet: Vec<char> = "abcdefghijklmnopqrstuvwxyz0123456789_".chars().collect();
        let known: Vec<String> = (0..4_000)
            .map(|_| {
                let mut n = random_name(&mut seed, &alphabet);
                while n.chars().count() < 8 {
                    n.push(alphabet[(xorshift(&mut seed) % 36) as usize]);
                }
                n
            })
            .collect();
        let suggester = Suggester::new(known.iter().map(String::as_str));
        let unknown: Vec<String> = (0..4_000)
            .map(|i| {
                let mut n: Vec<char> = known[i].chars().collect();
                for _ in 0..1 + xorshift(&mut seed) % 3 {
                    let at = (xorshift(&mut seed) % n.len() as u64) as usize;
                    n[at] = alphabet[(xorshift(&mut seed) % 36) as usize];
                }
                n.into_iter().collect()
            })
            .collect();
        let answers: Vec<Option<&str>> = unknown.iter().map(|u| suggester.closest(u)).collect();
        assert!(suggester.work.get() > 0, "the budget ran out");
        for (u, answer) in unknown.iter().zip(&answers).step_by(20) {
            assert_eq!(
                *answer,
                super::super::closest(u, known.iter().map(String::as_str)),
                "{u:?}"
            );
        }
        assert!(answers.iter().filter(|a| a.is_some()).count() > 3_000);
        assert_eq!(
            Suggester::new(["search", "fetch"]).closest("serch"),
            Some("search")
        );
    }
}
