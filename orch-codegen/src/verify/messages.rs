//! Which combinations of message conditions a single user message can satisfy, decided
//! exactly, each with a shortest witness message.
//!
//! A message is a sequence of characters; every condition is a small machine over it:
//!
//! - `message_contains n` (semantics §7: Unicode full case folding) is a KMP automaton over
//!   the *folded* characters of the message — each character feeds its whole folding
//!   (`ß` feeds `s`, `s`);
//! - all `message_regex` patterns together are one Thompson NFA (the `regex` crate's
//!   own compiler, so the syntax and semantics are the runtime's), simulated as a set
//!   of NFA states; look-around (`^`, `$`, `\b`, …) is decided by the `regex` crate's
//!   own look matcher on the actual neighbouring characters.
//!
//! The characters are grouped into classes that no condition can tell apart: two
//! characters are in one class when every character class of every pattern (with `\w`,
//! `\n` and `\r` for look-around) contains both or neither, and their foldings are the
//! same once characters that occur in no needle are blotted out. A breadth-first search
//! over (NFA states, previous character's class, KMP states, conditions matched so far),
//! one representative character per class, visits every state a message can lead to; at
//! each one the message may end, which decides the final combination. Breadth first
//! means the first witness found for a combination is a shortest one.
//!
//! The search is exhaustive unless it meets its state limit or runs out of work (units
//! counted, not time: an NFA state visited, a byte fed to one, a search state stored), in
//! which case the result says it is incomplete (and nothing may be concluded from a
//! combination's absence).

use orch_runtime::hash::HashMap;
use regex_automata::nfa::thompson::{State as NfaState, NFA};
use regex_automata::util::primitives::StateID;
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::{BTreeSet, VecDeque};

/// The message conditions of a template, in the order of the machine's message flags:
/// `contains` (already case-folded, as the tables store them), then `regexes`.
#[derive(Clone, Debug)]
pub struct MessageConditions<'a> {
    /// `message_contains` values, folded.
    pub contains: &'a [String],
    /// `message_regex` patterns.
    pub regexes: &'a [String],
}

/// One combination of message flags a single message can produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Combination {
    /// The flags (bit `i` = message condition `i` holds), `ceil(flags / 64)` words.
    pub flags: Vec<u64>,
    /// A shortest message that produces exactly these flags.
    pub witness: String,
}

/// What the analysis found.
#[derive(Clone, Debug)]
pub struct Combinations {
    /// Every combination found, the empty one (no condition holds) included when some
    /// message produces it.
    pub combinations: Vec<Combination>,
    /// Did the search visit every state? When `false`, a combination that is not listed
    /// may still be possible.
    pub complete: bool,
}

/// Why the analysis could not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// A pattern does not compile (the checks report it first).
    Regex(String),
    /// A pattern can match bytes that are not UTF-8 text (`(?-u:\xFF)`): messages are
    /// text, and this analysis works on characters.
    NotText(String),
}

/// The closing sentinel of a KMP state: the needle was found.
const FOUND: u32 = u32::MAX;

/// The character classes of an analysis: a representative per class, and each class's
/// folding signature.
struct Alphabet {
    /// Representative characters, one per class, with their full case folding.
    reps: Vec<(char, String)>,
}

impl<'a> MessageConditions<'a> {
    /// How many message flags there are.
    pub fn len(&self) -> usize {
        self.contains.len() + self.regexes.len()
    }

    /// Are there none?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every combination of these conditions that one message can satisfy, with a
    /// shortest witness each; at most `max_states` search states are visited, and at
    /// most `work` units spent (what is left stays in `work`).
    pub fn combinations(
        &self,
        max_states: usize,
        work: &mut u64,
    ) -> Result<Combinations, MessageError> {
        let nfa = if self.regexes.is_empty() {
            None
        } else {
            let mut hirs = Vec::new();
            for p in self.regexes {
                let hir =
                    regex_syntax::parse(p).map_err(|e| MessageError::Regex(format!("{p}: {e}")))?;
                if !hir.properties().is_utf8() {
                    return Err(MessageError::NotText(p.clone()));
                }
                hirs.push(hir);
            }
            let nfa = NFA::compiler()
                .configure(NFA::config().shrink(false))
                .build_many_from_hir(&hirs)
                .map_err(|e| MessageError::Regex(e.to_string()))?;
            Some((nfa, hirs))
        };
        let needles: Vec<Vec<char>> = self.contains.iter().map(|n| n.chars().collect()).collect();
        let alphabet = alphabet(
            nfa.as_ref().map(|(_, h)| h.as_slice()).unwrap_or(&[]),
            &needles,
        );
        let kmp: Vec<Vec<u32>> = needles.iter().map(|n| failure(n)).collect();
        let owner = nfa.as_ref().map_or_else(Vec::new, |(n, _)| owners(n));
        let canonical = canonical_prev(&alphabet);
        let mut search = Search {
            nfa: nfa.as_ref().map(|(n, _)| n),
            owner,
            canonical,
            memo: std::cell::RefCell::new(HashMap::default()),
            needles: &needles,
            kmp: &kmp,
            n_contains: self.contains.len(),
            words: self.len().div_ceil(64).max(1),
            work: std::cell::Cell::new(*work),
            scratch: std::cell::RefCell::default(),
            ends: std::cell::RefCell::default(),
        };
        let found = search.run(&alphabet, max_states);
        *work = search.work.get();
        Ok(found)
    }
}

/// A state of the search: what the message so far leaves behind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Node {
    /// NFA states reached by the last byte (before their epsilon closure).
    seeds: Vec<StateID>,
    /// The previous character (`None` at the start of the message).
    prev: Option<char>,
    /// KMP state per needle ([`FOUND`] once found).
    kmp: Vec<u32>,
    /// Flags already decided true (needles found, patterns matched).
    matched: Vec<u64>,
}

/// See [`Search::memo`].
type Memo = HashMap<(Vec<StateID>, Option<char>, char), (Vec<StateID>, Vec<u64>)>;

struct Search<'s> {
    nfa: Option<&'s NFA>,
    /// Per NFA state, the pattern it belongs to (`None`: the shared unanchored prefix).
    owner: Vec<Option<usize>>,
    /// Per look-around context of a previous character, the character standing for
    /// every character with that context (look-around reads nothing else of it).
    canonical: HashMap<u8, char>,
    /// The patterns' step: (seeds, previous character, character) → (seeds, patterns
    /// that matched on the way).
    memo: std::cell::RefCell<Memo>,
    needles: &'s [Vec<char>],
    kmp: &'s [Vec<u32>],
    n_contains: usize,
    words: usize,
    /// Work units left.
    work: std::cell::Cell<u64>,
    /// What [`Search::closure`] reuses from call to call.
    scratch: std::cell::RefCell<Scratch>,
    /// [`Search::at_end`]'s memo: previous character, then seeds → (patterns that
    /// match at the end, work it took).
    ends: std::cell::RefCell<Ends>,
}

/// See [`Search::ends`].
type Ends = HashMap<Option<char>, HashMap<Vec<StateID>, (Vec<u64>, usize)>>;

/// The closure's working memory: per NFA state, the call that last visited it (a call
/// is a new generation, so nothing is cleared between calls), and its stack.
#[derive(Default)]
struct Scratch {
    visited: Vec<u32>,
    generation: u32,
    stack: Vec<StateID>,
}

impl Search<'_> {
    /// Spends `units` of work; `false` once there are not enough left.
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

    fn run(&mut self, alphabet: &Alphabet, max_states: usize) -> Combinations {
        let start = Node {
            seeds: self
                .nfa
                .map(|n| vec![n.start_unanchored()])
                .unwrap_or_default(),
            prev: None,
            kmp: self
                .needles
                .iter()
                .map(|n| if n.is_empty() { FOUND } else { 0 })
                .collect(),
            matched: self.initial_matched(),
        };
        let mut seen: HashMap<Node, ()> = HashMap::default();
        let mut queue: VecDeque<(Node, String)> = VecDeque::new();
        let mut found: Vec<Combination> = Vec::new();
        let mut combos: BTreeSet<Vec<u64>> = BTreeSet::new();
        seen.insert(start.clone(), ());
        queue.push_back((start, String::new()));
        let mut complete = true;
        while let Some((node, text)) = queue.pop_front() {
            if self.work.get() == 0 {
                complete = false;
                break;
            }
            // The message may end here.
            let flags = self.at_end(&node);
            if combos.insert(flags.clone()) {
                found.push(Combination {
                    flags,
                    witness: text.clone(),
                });
            }
            for (c, folded) in &alphabet.reps {
                let c = *c;
                let next = self.step(&node, c, folded);
                if seen.contains_key(&next) {
                    continue;
                }
                if seen.len() >= max_states {
                    complete = false;
                    continue;
                }
                // Storing a state costs what it holds.
                if !self.spend(next.seeds.len() + next.kmp.len() + next.matched.len() + text.len())
                {
                    complete = false;
                    break;
                }
                seen.insert(next.clone(), ());
                let mut t = text.clone();
                t.push(c);
                queue.push_back((next, t));
            }
        }
        Combinations {
            combinations: found,
            complete,
        }
    }

    fn initial_matched(&self) -> Vec<u64> {
        let mut m = vec![0u64; self.words];
        for (i, n) in self.needles.iter().enumerate() {
            if n.is_empty() {
                m[i / 64] |= 1 << (i % 64);
            }
        }
        m
    }

    /// The flags if the message ends after `node`.
    fn at_end(&self, node: &Node) -> Vec<u64> {
        let mut flags = node.matched.clone();
        if let Some(nfa) = self.nfa {
            // Memoized like a step, its work spent again on a hit (so a search stops
            // where it would have without the memo).
            let known = self.ends.borrow().get(&node.prev).and_then(|by_seeds| {
                by_seeds.get(node.seeds.as_slice()).map(|(hits, units)| {
                    for (f, h) in flags.iter_mut().zip(hits) {
                        *f |= h;
                    }
                    *units
                })
            });
            if let Some(units) = known {
                self.spend(units);
                return flags;
            }
            let mut hay = Vec::new();
            if let Some(p) = node.prev {
                push_utf8(&mut hay, p);
            }
            let at = hay.len();
            let before = self.work.get();
            let mut hits = vec![0u64; flags.len()];
            self.closure(nfa, &node.seeds, &hay, at, &mut hits);
            let units = usize::try_from(before - self.work.get()).unwrap_or(usize::MAX);
            for (f, h) in flags.iter_mut().zip(&hits) {
                *f |= h;
            }
            self.ends
                .borrow_mut()
                .entry(node.prev)
                .or_default()
                .insert(node.seeds.clone(), (hits, units));
        }
        flags
    }

    /// The node after character `c`.
    fn step(&self, node: &Node, c: char, folded: &str) -> Node {
        let mut matched = node.matched.clone();
        self.spend(node.kmp.len() * folded.len().max(1));
        // Needles: feed the folding of `c`.
        let mut kmp = node.kmp.clone();
        for (i, state) in kmp.iter_mut().enumerate() {
            if *state == FOUND {
                continue;
            }
            let needle = &self.needles[i];
            let fail = &self.kmp[i];
            let mut j = *state as usize;
            for x in folded.chars() {
                while j > 0 && needle[j] != x {
                    j = fail[j - 1] as usize;
                }
                if needle[j] == x {
                    j += 1;
                }
                if j == needle.len() {
                    break;
                }
            }
            if j == needle.len() {
                *state = FOUND;
                matched[i / 64] |= 1 << (i % 64);
            } else {
                *state = j as u32;
            }
        }
        // Patterns: the closure at the boundary before `c`, then `c`'s bytes.
        let seeds = match self.nfa {
            None => Vec::new(),
            Some(nfa) => {
                // The patterns' part moves independently of the needles': memoized.
                let memo_key = (node.seeds.clone(), node.prev, c);
                let known = self.memo.borrow().get(&memo_key).cloned();
                if let Some((seeds, hits)) = known {
                    for (m, h) in matched.iter_mut().zip(&hits) {
                        *m |= h;
                    }
                    seeds
                } else {
                    let mut hits = vec![0u64; matched.len()];
                    let mut hay = Vec::new();
                    if let Some(p) = node.prev {
                        push_utf8(&mut hay, p);
                    }
                    let at = hay.len();
                    push_utf8(&mut hay, c);
                    let mut current = self.closure(nfa, &node.seeds, &hay, at, &mut hits);
                    for pos in at..hay.len() {
                        let byte = hay[pos];
                        self.spend(current.len());
                        let mut next: Vec<StateID> = Vec::new();
                        for &s in &current {
                            if let Some(t) = byte_step(nfa, s, byte) {
                                next.push(t);
                            }
                        }
                        next.sort_unstable();
                        next.dedup();
                        if pos + 1 < hay.len() {
                            current = self.closure(nfa, &next, &hay, pos + 1, &mut hits);
                        } else {
                            current = next;
                        }
                    }
                    for (m, h) in matched.iter_mut().zip(&hits) {
                        *m |= h;
                    }
                    self.memo
                        .borrow_mut()
                        .insert(memo_key, (current.clone(), hits));
                    current
                }
            }
        };
        // States of patterns that have matched can change nothing any more.
        let seeds: Vec<StateID> = seeds
            .into_iter()
            .filter(|s| match self.owner.get(s.as_usize()).copied().flatten() {
                Some(pid) => {
                    let i = self.n_contains + pid;
                    matched.get(i / 64).is_none_or(|w| w >> (i % 64) & 1 == 0)
                }
                None => true,
            })
            .collect();
        let prev = self.canonical.get(&look_context(c)).copied().unwrap_or(c);
        Node {
            seeds,
            prev: Some(prev),
            kmp,
            matched,
        }
    }

    /// The epsilon closure of `seeds` at position `at` of `hay` (look-around decided on
    /// it): the byte-consuming states, sorted. Patterns whose match state is reached are
    /// marked in `matched`.
    fn closure(
        &self,
        nfa: &NFA,
        seeds: &[StateID],
        hay: &[u8],
        at: usize,
        matched: &mut [u64],
    ) -> Vec<StateID> {
        let mut out = Vec::new();
        let mut scratch = self.scratch.borrow_mut();
        let Scratch {
            visited,
            generation,
            stack,
        } = &mut *scratch;
        if visited.len() != nfa.states().len() {
            *visited = vec![0; nfa.states().len()];
            *generation = 0;
        }
        *generation = generation.wrapping_add(1);
        if *generation == 0 {
            visited.fill(0);
            *generation = 1;
        }
        let generation = *generation;
        stack.clear();
        stack.extend_from_slice(seeds);
        while let Some(s) = stack.pop() {
            match visited.get_mut(s.as_usize()) {
                Some(v) if *v == generation => continue,
                Some(v) => *v = generation,
                None => continue,
            }
            self.spend(1);
            match nfa.state(s) {
                NfaState::ByteRange { .. } | NfaState::Sparse(_) | NfaState::Dense(_) => {
                    out.push(s)
                }
                NfaState::Look { look, next } => {
                    if nfa.look_matcher().matches(*look, hay, at) {
                        stack.push(*next);
                    }
                }
                NfaState::Union { alternates } => stack.extend(alternates.iter().rev()),
                NfaState::BinaryUnion { alt1, alt2 } => {
                    stack.push(*alt2);
                    stack.push(*alt1);
                }
                NfaState::Capture { next, .. } => stack.push(*next),
                NfaState::Fail => {}
                NfaState::Match { pattern_id } => {
                    let i = self.n_contains + pattern_id.as_usize();
                    if let Some(w) = matched.get_mut(i / 64) {
                        *w |= 1 << (i % 64);
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// Per NFA state, the pattern whose anchored start reaches it (the unanchored prefix
/// belongs to none).
fn owners(nfa: &NFA) -> Vec<Option<usize>> {
    let mut owner = vec![None; nfa.states().len()];
    for pid in 0..nfa.pattern_len() {
        let Some(start) = regex_automata::PatternID::new(pid)
            .ok()
            .and_then(|p| nfa.start_pattern(p))
        else {
            continue;
        };
        let mut stack = vec![start];
        while let Some(s) = stack.pop() {
            let slot = &mut owner[s.as_usize()];
            if slot.is_some() {
                continue;
            }
            *slot = Some(pid);
            match nfa.state(s) {
                NfaState::ByteRange { trans } => stack.push(trans.next),
                NfaState::Sparse(t) => stack.extend(t.transitions.iter().map(|t| t.next)),
                NfaState::Dense(t) => stack.extend(t.transitions.iter().copied()),
                NfaState::Look { next, .. } | NfaState::Capture { next, .. } => stack.push(*next),
                NfaState::Union { alternates } => stack.extend(alternates.iter().copied()),
                NfaState::BinaryUnion { alt1, alt2 } => stack.extend([*alt1, *alt2]),
                NfaState::Fail | NfaState::Match { .. } => {}
            }
        }
    }
    owner
}

/// What look-around can see of a character: Unicode and ASCII word character, `\n`,
/// `\r`.
fn look_context(c: char) -> u8 {
    let word_u = regex_syntax::is_word_character(c);
    let word_a = c.is_ascii_alphanumeric() || c == '_';
    u8::from(word_u) | u8::from(word_a) << 1 | u8::from(c == '\n') << 2 | u8::from(c == '\r') << 3
}

/// The first representative of each look-around context.
fn canonical_prev(alphabet: &Alphabet) -> HashMap<u8, char> {
    let mut map = HashMap::default();
    for (c, _) in &alphabet.reps {
        map.entry(look_context(*c)).or_insert(*c);
    }
    map
}

/// The state a byte-consuming NFA state moves to on `byte`.
fn byte_step(nfa: &NFA, s: StateID, byte: u8) -> Option<StateID> {
    match nfa.state(s) {
        NfaState::ByteRange { trans } => trans.matches_byte(byte).then_some(trans.next),
        NfaState::Sparse(t) => t.matches_byte(byte),
        NfaState::Dense(t) => t.matches_byte(byte),
        _ => None,
    }
}

fn push_utf8(out: &mut Vec<u8>, c: char) {
    out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes());
}

/// KMP failure function of `needle`.
fn failure(needle: &[char]) -> Vec<u32> {
    let mut f = vec![0u32; needle.len()];
    let mut k = 0usize;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = f[k - 1] as usize;
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        f[i] = k as u32;
    }
    f
}

/// The character sets a pattern distinguishes: each character class (all its ranges
/// together: what matters is being in the class or not) and each literal character.
fn class_sets(hir: &Hir, out: &mut Vec<Vec<(char, char)>>) {
    match hir.kind() {
        HirKind::Literal(lit) => {
            if let Ok(s) = std::str::from_utf8(&lit.0) {
                out.extend(s.chars().map(|c| vec![(c, c)]));
            }
        }
        HirKind::Class(Class::Unicode(cls)) => {
            out.push(cls.ranges().iter().map(|r| (r.start(), r.end())).collect())
        }
        HirKind::Class(Class::Bytes(cls)) => out.push(
            cls.ranges()
                .iter()
                .filter(|r| r.start() < 0x80)
                .map(|r| (char::from(r.start()), char::from(r.end().min(0x7f))))
                .collect(),
        ),
        HirKind::Repetition(r) => class_sets(&r.sub, out),
        HirKind::Capture(c) => class_sets(&c.sub, out),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().for_each(|h| class_sets(h, out)),
        HirKind::Empty | HirKind::Look(_) => {}
    }
}

/// The character classes of the search.
fn alphabet(hirs: &[Hir], needles: &[Vec<char>]) -> Alphabet {
    // Sets each character's membership depends on: the patterns' classes and literals,
    // the word classes and line terminators that look-around reads.
    let mut sets: Vec<Vec<(char, char)>> = Vec::new();
    for hir in hirs {
        class_sets(hir, &mut sets);
    }
    for extra in [r"\w", r"(?-u:\w)"] {
        if let Ok(hir) = regex_syntax::parse(extra) {
            class_sets(&hir, &mut sets);
        }
    }
    sets.sort();
    sets.dedup();
    sets.push(vec![('\n', '\n')]);
    sets.push(vec![('\r', '\r')]);
    // Characters whose folding holds a needle character are told apart one by one.
    let needle_chars: BTreeSet<char> = needles.iter().flatten().copied().collect();
    let mut special: BTreeSet<char> = needle_chars.clone();
    for (c, folded) in foldings() {
        if folded.chars().any(|x| needle_chars.contains(&x)) {
            special.insert(*c);
        }
    }
    // Cut the code points where any membership changes.
    let mut cuts: BTreeSet<u32> = BTreeSet::new();
    cuts.insert(0);
    for set in &sets {
        for (a, b) in set {
            cuts.insert(*a as u32);
            cuts.insert(*b as u32 + 1);
        }
    }
    for c in &special {
        cuts.insert(*c as u32);
        cuts.insert(*c as u32 + 1);
    }
    let cuts: Vec<u32> = cuts.into_iter().filter(|c| *c <= 0x10FFFF).collect();
    // Each interval's signature; intervals with equal signatures are one class.
    let mut classes: HashMap<(Vec<bool>, String), char> = HashMap::default();
    let mut order: Vec<(Vec<bool>, String)> = Vec::new();
    for (k, &lo) in cuts.iter().enumerate() {
        let hi = cuts.get(k + 1).map_or(0x10FFFF, |n| n - 1);
        // A representative: the first scalar value of the interval, printable if one is.
        let Some(rep) = representative(lo, hi) else {
            continue;
        };
        let membership: Vec<bool> = sets.iter().map(|set| in_set(set, rep)).collect();
        let fold_sig = if special.contains(&rep) {
            let folded = orch_runtime::compiled::fold_case(rep.encode_utf8(&mut [0u8; 4]));
            folded
                .chars()
                .map(|x| if needle_chars.contains(&x) { x } else { '\0' })
                .collect()
        } else {
            "\0".to_owned()
        };
        let key = (membership, fold_sig);
        if !classes.contains_key(&key) {
            classes.insert(key.clone(), rep);
            order.push(key);
        }
    }
    Alphabet {
        reps: order
            .iter()
            .map(|k| {
                let c = classes[k];
                (
                    c,
                    orch_runtime::compiled::fold_case(c.encode_utf8(&mut [0u8; 4])),
                )
            })
            .collect(),
    }
}

/// Is `c` in the set (ranges sorted by start, as the `regex` crate keeps them)?
fn in_set(set: &[(char, char)], c: char) -> bool {
    let i = set.partition_point(|(a, _)| *a <= c);
    i > 0 && set[i - 1].1 >= c
}

/// Every character whose full case folding is not itself, with its folding (computed
/// once per process; no character past U+1F000 has one).
fn foldings() -> &'static [(char, String)] {
    static TABLE: std::sync::OnceLock<Vec<(char, String)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0u32..0x1F000)
            .filter_map(char::from_u32)
            .filter_map(|c| {
                let mut buf = [0u8; 4];
                let folded = orch_runtime::compiled::fold_case(c.encode_utf8(&mut buf));
                (folded.chars().ne(std::iter::once(c))).then_some((c, folded))
            })
            .collect()
    })
}

/// The first scalar value in `lo..=hi`, preferring a printable one (not a control
/// character, not whitespace other than a space) to make witnesses readable.
fn representative(lo: u32, hi: u32) -> Option<char> {
    let scan_end = hi.min(lo.saturating_add(256));
    let mut first = None;
    for v in lo..=scan_end {
        if let Some(c) = char::from_u32(v) {
            if first.is_none() {
                first = Some(c);
            }
            if !c.is_control() && (c == ' ' || !c.is_whitespace()) {
                return Some(c);
            }
        }
    }
    // Past the scanned part (surrogates, long control runs), any scalar value.
    first.or_else(|| (scan_end..=hi).find_map(char::from_u32))
}
