//! Which foreign tool names a step admits, decided exactly.
//!
//! A foreign tool is any name the template does not declare. A step admits one when its
//! `allowed` is empty or one of its `allowed` patterns matches it, and none of its
//! `denied` patterns does (semantics §8). Every foreign name acts alike on a session once
//! recorded, so for the exploration the only question per step is whether *some* name is
//! admitted, and which one to show.
//!
//! The admitted names are a regular language: the union of the allow globs, minus the
//! union of the deny globs and of the declared names. A breadth-first search over the
//! product of the globs' automata (a glob with `*` is a small NFA: a position per literal
//! character, a `*` looping) finds a shortest member or proves there is none. Characters
//! that occur in no pattern and no declared name behave alike, so one fresh character
//! stands for all of them. The search counts its work and gives up past a budget (the
//! caller then says "undecided").

use orch_runtime::hash::HashMap;
use std::collections::VecDeque;

/// A glob as the automaton sees it: `None` is `*`.
type Glob = Vec<Option<char>>;

/// A search state: the positions reached in every glob, as `(glob, position)`, sorted.
type Positions = Vec<(u32, u32)>;

/// The search ran out of work units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Undecided;

/// Work units left to a search (each unit is one glob position carried over one
/// character), shared by the searches of one verification.
#[derive(Clone, Copy, Debug)]
pub struct Budget(pub u64);

/// The globs of one question: the allow globs first, then the deny globs and the
/// declared names (globs without `*`), then the required globs (each must match).
struct Product {
    globs: Vec<Glob>,
    n_allow: usize,
    /// Where the required globs start.
    n_refuse_end: usize,
    allow_all: bool,
}

impl Product {
    /// Positions after every `*` at them may also be skipped (a `*` matches nothing too).
    fn close(&self, positions: &mut Positions) {
        let mut i = 0;
        while i < positions.len() {
            let (g, p) = positions[i];
            if self.globs[g as usize].get(p as usize) == Some(&None) {
                positions.push((g, p + 1));
            }
            i += 1;
        }
        positions.sort_unstable();
        positions.dedup();
    }

    fn start(&self) -> Positions {
        let mut positions: Positions = (0..self.globs.len() as u32).map(|g| (g, 0)).collect();
        self.close(&mut positions);
        positions
    }

    fn step(&self, positions: &Positions, c: char) -> Positions {
        let mut next = Vec::with_capacity(positions.len());
        for &(g, p) in positions {
            match self.globs[g as usize].get(p as usize) {
                Some(None) => next.push((g, p)),
                Some(Some(x)) if *x == c => next.push((g, p + 1)),
                _ => {}
            }
        }
        self.close(&mut next);
        next
    }

    /// Does some glob in `range` accept here?
    fn accepts(&self, positions: &Positions, range: std::ops::Range<usize>) -> bool {
        positions.iter().any(|&(g, p)| {
            range.contains(&(g as usize)) && self.globs[g as usize].len() == p as usize
        })
    }

    /// Is a name that ends here admitted?
    fn admitted(&self, positions: &Positions) -> bool {
        (self.allow_all || self.accepts(positions, 0..self.n_allow))
            && !self.accepts(positions, self.n_allow..self.n_refuse_end)
            && (self.n_refuse_end..self.globs.len()).all(|g| self.accepts(positions, g..g + 1))
    }

    /// Can no continuation be admitted (no allow glob is alive, or a required one is
    /// dead)?
    fn dead(&self, positions: &Positions) -> bool {
        let alive = |g: usize| positions.iter().any(|&(x, _)| x as usize == g);
        (!self.allow_all
            && positions
                .first()
                .is_none_or(|&(g, _)| (g as usize) >= self.n_allow))
            || !(self.n_refuse_end..self.globs.len()).all(alive)
    }
}

fn glob(pattern: &str) -> Glob {
    pattern.chars().map(|c| (c != '*').then_some(c)).collect()
}

/// A character that occurs in none of `used`, preferring readable ones.
fn fresh(used: &[char]) -> char {
    "xyzqjkwvabcdefghilmnoprstu0123456789_"
        .chars()
        .chain(('\u{c0}'..='\u{24f}').filter(|c| c.is_alphabetic()))
        .chain(('\u{4e00}'..='\u{9fff}').take(used.len() + 1))
        .find(|c| !used.contains(c))
        .unwrap_or('\u{e000}')
}

/// A shortest name, not one of `declared`, that `allow_all` or some pattern of `allow`
/// matches and no pattern of `deny` matches (`*` globs, semantics §2): `Ok(None)` when
/// there is none, `Err` when `budget` ran out first.
pub fn witness(
    allow: &[&str],
    allow_all: bool,
    deny: &[&str],
    declared: &[&str],
    budget: &mut Budget,
) -> Result<Option<String>, Undecided> {
    witness_matching(allow, allow_all, deny, declared, &[], budget)
}

/// [`witness`] of a name that every pattern of `require` matches too (a property's
/// tools, semantics §14).
pub fn witness_matching(
    allow: &[&str],
    allow_all: bool,
    deny: &[&str],
    declared: &[&str],
    require: &[&str],
    budget: &mut Budget,
) -> Result<Option<String>, Undecided> {
    let mut globs: Vec<Glob> = allow.iter().map(|p| glob(p)).collect();
    let n_allow = globs.len();
    if n_allow == 0 && !allow_all {
        return Ok(None);
    }
    globs.extend(deny.iter().chain(declared).map(|p| glob(p)));
    let n_refuse_end = globs.len();
    globs.extend(require.iter().map(|p| glob(p)));
    let product = Product {
        globs,
        n_allow,
        n_refuse_end,
        allow_all,
    };
    let mut alphabet: Vec<char> = product.globs.iter().flatten().flatten().copied().collect();
    alphabet.sort_unstable();
    alphabet.dedup();
    let other = fresh(&alphabet);
    alphabet.insert(0, other);

    let start = product.start();
    // Visited states, each with its parent and the character that led to it.
    let mut nodes: Vec<(usize, char)> = vec![(usize::MAX, other)];
    let mut index: HashMap<Positions, usize> = HashMap::default();
    let mut queue: VecDeque<(usize, Positions)> = VecDeque::new();
    index.insert(start.clone(), 0);
    queue.push_back((0, start));
    while let Some((at, positions)) = queue.pop_front() {
        // The empty name is no tool name.
        if at != 0 && product.admitted(&positions) {
            let mut name = Vec::new();
            let mut node = at;
            while node != 0 {
                name.push(nodes[node].1);
                node = nodes[node].0;
            }
            return Ok(Some(name.into_iter().rev().collect()));
        }
        let cost = (positions.len() as u64 + 1) * alphabet.len() as u64;
        budget.0 = budget.0.checked_sub(cost).ok_or(Undecided)?;
        for &c in &alphabet {
            let next = product.step(&positions, c);
            // A state equal to the start's is not the start: its name is not empty.
            if product.dead(&next) || (at != 0 && index.contains_key(&next)) {
                continue;
            }
            index.entry(next.clone()).or_insert(nodes.len());
            nodes.push((at, c));
            queue.push_back((nodes.len() - 1, next));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use orch_runtime::compiled::glob_match;

    fn admitted(
        name: &str,
        allow: &[&str],
        allow_all: bool,
        deny: &[&str],
        declared: &[&str],
    ) -> bool {
        !name.is_empty()
            && !declared.contains(&name)
            && (allow_all || allow.iter().any(|p| glob_match(p, name)))
            && !deny.iter().any(|p| glob_match(p, name))
    }

    fn decide(allow: &[&str], allow_all: bool, deny: &[&str], declared: &[&str]) -> Option<String> {
        witness(allow, allow_all, deny, declared, &mut Budget(u64::MAX)).expect("decided")
    }

    #[test]
    fn the_case_the_two_fills_missed() {
        // `z*` minus `*foreign` and `*\u{1}`: filling the star with a word or a control
        // character is denied, yet `zq` (and `z`) are admitted.
        let w = decide(&["z*"], false, &["*foreign", "*\u{1}"], &[]).expect("a name");
        assert!(
            admitted(&w, &["z*"], false, &["*foreign", "*\u{1}"], &[]),
            "{w:?}"
        );
        assert_eq!(w, "z");
        let w = decide(&["z*"], false, &["*foreign", "*\u{1}"], &["z"]).expect("a name");
        assert_eq!(w.chars().count(), 2, "{w:?}");
        // Refusal everything the allow admits: none, proven.
        assert_eq!(decide(&["a*"], false, &["*"], &[]), None);
        assert_eq!(decide(&["ab*"], false, &["a*"], &[]), None);
        assert_eq!(decide(&["tool"], false, &[], &["tool"]), None);
        assert_eq!(decide(&[], false, &[], &[]), None);
        assert!(decide(&[], true, &[], &["x", "y"]).is_some());
    }

    #[test]
    fn the_budget_bounds_the_work() {
        let deny: Vec<String> = (0..40)
            .map(|i| format!("*{}*", char::from(b'a' + (i % 26) as u8)))
            .collect();
        let deny: Vec<&str> = deny.iter().map(String::as_str).collect();
        assert_eq!(
            witness(&["*"], false, &deny, &[], &mut Budget(100)),
            Err(Undecided)
        );
    }

    /// Every name over `{a, b, c}` up to `max` characters, shortest first.
    fn names(max: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..max {
            let mut next = Vec::new();
            for n in &frontier {
                for c in ['a', 'b', 'c'] {
                    next.push(format!("{n}{c}"));
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    }

    #[test]
    fn agrees_with_enumerating_every_short_name() {
        // Globs over {a, b, *} of up to three characters; `c` stands for every other
        // character. A small deterministic generator, so the test repeats exactly.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let all = names(7);
        for _ in 0..3_000 {
            let pattern = |n: &mut dyn FnMut() -> u64| {
                let len = 1 + (n() % 3) as usize;
                (0..len)
                    .map(|_| ['a', 'b', '*'][(n() % 3) as usize])
                    .collect::<String>()
            };
            let allow: Vec<String> = (0..next() % 3).map(|_| pattern(&mut next)).collect();
            let deny: Vec<String> = (0..next() % 4).map(|_| pattern(&mut next)).collect();
            let declared: Vec<String> = (0..next() % 3)
                .map(|_| pattern(&mut next).replace('*', "a"))
                .collect();
            let allow_all = next() % 4 == 0;
            let require: Vec<String> = (0..next() % 3).map(|_| pattern(&mut next)).collect();
            let (allow, deny, declared, require): (Vec<&str>, Vec<&str>, Vec<&str>, Vec<&str>) = (
                allow.iter().map(String::as_str).collect(),
                deny.iter().map(String::as_str).collect(),
                declared.iter().map(String::as_str).collect(),
                require.iter().map(String::as_str).collect(),
            );
            // Admitted, and matched by every required pattern.
            let admitted =
                |n: &str, allow: &[&str], allow_all, deny: &[&str], declared: &[&str]| {
                    admitted(n, allow, allow_all, deny, declared)
                        && require.iter().all(|p| glob_match(p, n))
                };
            let shortest = all
                .iter()
                .find(|n| admitted(n, &allow, allow_all, &deny, &declared));
            let found = witness_matching(
                &allow,
                allow_all,
                &deny,
                &declared,
                &require,
                &mut Budget(u64::MAX),
            )
            .expect("decided");
            let case = format!(
                "allow {allow:?} (all: {allow_all}) deny {deny:?} declared {declared:?} require {require:?}"
            );
            match (&found, shortest) {
                (Some(w), Some(s)) => {
                    assert!(
                        admitted(w, &allow, allow_all, &deny, &declared),
                        "{case}: {w:?}"
                    );
                    assert_eq!(
                        w.chars().count(),
                        s.chars().count(),
                        "{case}: {w:?} vs {s:?}"
                    );
                }
                (None, None) => {}
                (Some(w), None) => {
                    // Longer than the enumeration: it must still be admitted.
                    assert!(
                        admitted(w, &allow, allow_all, &deny, &declared),
                        "{case}: {w:?}"
                    );
                    assert!(w.chars().count() > 7, "{case}: {w:?}");
                }
                (None, Some(s)) => panic!("{case}: none found, but {s:?} is admitted"),
            }
        }
    }
}
