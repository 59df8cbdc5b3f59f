//! `message_regex` matching without allocation.
//!
//! A pattern is compiled to a fully built forward DFA when it fits (the usual case for
//! the short keyword patterns of templates): searching a DFA needs no scratch space, so
//! matching a message never allocates. Unicode `\b` is handled by the DFA's ASCII
//! heuristic; on a message where that heuristic gives up (a non-ASCII letter next to a
//! `\b`), and for patterns too large for a DFA, the regular `regex::Regex` answers
//! instead — its lazy engine may allocate scratch space for states it has not seen yet.
//! The syntax is always that of the `regex` crate.

use crate::text::ContainsMatcher;
use regex::Regex;
use regex_automata::dfa::{dense, Automaton};
use regex_automata::Input;
use std::fmt;
use std::sync::OnceLock;

/// The largest DFA built for one pattern, in bytes.
const DFA_SIZE_LIMIT: usize = 1 << 20;

/// The largest compiled program (NFA) of one pattern, in bytes: a pattern over it is an
/// error (`\w{200}`, with Unicode classes, needs megabytes), not megabytes per pattern.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The cache the fallback engine may grow per thread, in bytes.
const LAZY_CACHE_LIMIT: usize = 1 << 18;

/// One compiled `message_regex` pattern.
#[derive(Clone)]
pub struct MessageRegex {
    dfa: Option<dense::DFA<Vec<u32>>>,
    regex: Regex,
    /// Bytes the compiled pattern takes (see [`MessageRegex::memory_usage`]).
    memory: usize,
    /// A haystack as long as the shortest match (warms up the fallback engine).
    warm: Option<String>,
}

impl MessageRegex {
    /// Compiles `pattern` (syntax of the `regex` crate), within [`REGEX_SIZE_LIMIT`].
    pub fn new(pattern: &str) -> Result<Self, regex::Error> {
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(LAZY_CACHE_LIMIT)
            .build()?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .unicode_word_boundary(true)
                    .dfa_size_limit(Some(DFA_SIZE_LIMIT))
                    .determinize_size_limit(Some(4 * DFA_SIZE_LIMIT)),
            )
            .build(pattern)
            .ok();
        let warm = regex_syntax::parse(pattern)
            .ok()
            .and_then(|hir| hir.properties().minimum_len())
            .map(|min| " ".repeat(min));
        // The fallback's program is about the size of its Thompson NFA (which compiled
        // within the limit above, so this one does too); its cache is bounded.
        let nfa = regex_automata::nfa::thompson::NFA::compiler()
            .configure(
                regex_automata::nfa::thompson::Config::new().nfa_size_limit(Some(REGEX_SIZE_LIMIT)),
            )
            .build(pattern)
            .map_or(REGEX_SIZE_LIMIT, |n| n.memory_usage());
        // A pattern with a DFA uses the fallback only next to a non-ASCII `\b`.
        let memory = match &dfa {
            Some(d) => d.memory_usage() + nfa,
            None => nfa + LAZY_CACHE_LIMIT,
        };
        Ok(MessageRegex {
            dfa,
            regex,
            memory,
            warm,
        })
    }

    /// About how many bytes the compiled pattern takes: its DFA and its fallback
    /// program (and, for a pattern without a DFA, the fallback's cache at its bound).
    pub fn memory_usage(&self) -> usize {
        self.memory
    }

    /// Does the pattern match somewhere in `haystack`?
    #[inline]
    pub fn is_match(&self, haystack: &str) -> bool {
        self.is_match_from(haystack, 0)
    }

    /// Does the pattern match somewhere in `haystack` starting at or after byte `start`
    /// (a character boundary)? The text before `start` is still context for `^`, `\b`
    /// and the like.
    #[inline]
    pub fn is_match_from(&self, haystack: &str, start: usize) -> bool {
        if start > haystack.len() {
            return false;
        }
        if let Some(dfa) = &self.dfa {
            let input = Input::new(haystack).range(start..).earliest(true);
            if let Ok(found) = dfa.try_search_fwd(&input) {
                return found.is_some();
            }
        }
        self.regex.is_match_at(haystack, start)
    }

    /// Is the pattern matched by a prebuilt DFA (no allocation, ever)?
    pub fn is_dfa(&self) -> bool {
        self.dfa.is_some()
    }

    /// The pattern.
    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }

    /// Lets the fallback engine allocate its scratch space for this thread now.
    fn warm_up(&self) {
        if let Some(hay) = &self.warm {
            let _ = self.regex.is_match(hay);
        }
    }
}

impl fmt::Debug for MessageRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageRegex")
            .field("pattern", &self.as_str())
            .field("dfa", &self.is_dfa())
            .finish()
    }
}

/// The compiled message conditions of a machine.
///
/// One pass over the message decides them all: the message is case-folded and fed to
/// one Aho–Corasick automaton that holds every `message_contains` needle **and** the
/// required literals of every `message_regex` pattern (the prefixes every match of the
/// pattern must begin with, as the `regex` crate's literal extractor finds them, folded
/// the same way). A needle found sets its flag; a literal found makes its pattern a
/// candidate, checked once by the pattern's own DFA from just before the literal's
/// first occurrence (every match starts at one). A pattern whose literal does not occur
/// is never run; a pattern without a required literal (`\d{3}-\d{4}`) is run on
/// every message.
#[derive(Clone, Debug)]
pub struct Matchers {
    /// The `message_contains` needles (ids `0..n_contains`), then the literals.
    needles: ContainsMatcher,
    n_contains: usize,
    /// Per literal id (minus `n_contains`): the pattern it stands for, and the longest
    /// folded literal of that pattern in bytes.
    literals: Box<[(u32, u32)]>,
    /// Every pattern on its own (`None`: did not compile).
    pub(crate) regexes: Box<[Option<MessageRegex>]>,
    /// Patterns without a required literal: run on every message.
    always: Box<[u32]>,
    /// The regexes of the rules on arguments (semantics §16), by index (`None`: did
    /// not compile).
    pub(crate) arguments: Box<[Option<Regex>]>,
}

/// Patterns whose first candidate occurrence is remembered while matching (more are
/// still exact, only checked again at later occurrences of their literals).
const TRACKED_PATTERNS: usize = 256;

impl Matchers {
    /// Compiles the needles (already case-folded) and the patterns. The compiler has
    /// validated both, so nothing fails in practice; should a pattern fail anyway, its
    /// slot is `None` and its condition never holds (see [`MessageMatchers::failures`]).
    pub fn new<S: AsRef<str>>(contains: &[S], regexes: &[S]) -> Self {
        let compiled: Box<[Option<MessageRegex>]> = regexes
            .iter()
            .map(|s| MessageRegex::new(s.as_ref()).ok())
            .collect();
        Self::with_compiled(contains, regexes, compiled)
    }

    /// [`Matchers::new`] with the patterns already compiled (`compiled[j]` from
    /// `regexes[j]`; `None`: did not compile), so that a compiler that validated them
    /// does not compile them again.
    pub fn with_compiled<S: AsRef<str>>(
        contains: &[S],
        regexes: &[S],
        compiled: Box<[Option<MessageRegex>]>,
    ) -> Self {
        let mut needles: Vec<String> = contains.iter().map(|s| s.as_ref().to_owned()).collect();
        let mut literals = Vec::new();
        let mut always = Vec::new();
        for (j, (re, src)) in compiled.iter().zip(regexes).enumerate() {
            if re.is_none() {
                continue;
            }
            match required_literals(src.as_ref()) {
                Some(lits) => {
                    let longest = lits.iter().map(String::len).max().unwrap_or(0) as u32;
                    for lit in lits {
                        needles.push(lit);
                        literals.push((j as u32, longest));
                    }
                }
                None => always.push(j as u32),
            }
        }
        let needles = ContainsMatcher::new(&needles).unwrap_or_else(|_| {
            // Cannot happen (the needles are plain strings); stay exact regardless:
            // the contains needles alone, and every pattern run on every message.
            always = (0..compiled.len() as u32).collect();
            literals.clear();
            ContainsMatcher::new(contains).unwrap_or(ContainsMatcher::none())
        });
        Matchers {
            needles,
            n_contains: contains.len(),
            literals: literals.into_boxed_slice(),
            regexes: compiled,
            always: always.into_boxed_slice(),
            arguments: Box::new([]),
        }
    }

    /// These matchers with the regexes of the rules on arguments compiled from
    /// `sources` (in the order of their indices; [`crate::args::Rules::regex_sources`]).
    /// A source that does not compile leaves its slot `None`: its test never holds.
    #[must_use]
    pub fn with_arguments<S: AsRef<str>>(mut self, sources: &[S]) -> Self {
        self.arguments = sources
            .iter()
            .map(|s| argument_regex(s.as_ref()).ok())
            .collect();
        self
    }

    /// The compiled regexes of the rules on arguments.
    pub fn arguments(&self) -> &[Option<Regex>] {
        &self.arguments
    }

    /// How many patterns have a required literal (are run only when it occurs).
    pub fn prefiltered(&self) -> usize {
        self.regexes.len() - self.always.len()
    }

    /// Sets flag `i` in `flags` for every needle `i` the message contains, and flag
    /// `n_contains + j` for every pattern `j` that matches it.
    #[inline]
    pub(crate) fn match_message(&self, message: &str, n_contains: usize, flags: &mut [u64]) {
        let mut checked = [0u64; TRACKED_PATTERNS / 64];
        self.needles.for_each_match_at(message, |id, end| {
            if id < self.n_contains {
                crate::bits::set(flags, id);
                return;
            }
            let Some(&(j, longest)) = self.literals.get(id - self.n_contains) else {
                return;
            };
            let j = j as usize;
            if crate::bits::test(flags, n_contains + j) || crate::bits::test(&checked, j) {
                return;
            }
            crate::bits::set(&mut checked, j);
            // The occurrence is `longest` folded bytes at most, so at most that many
            // characters of `message`, each of at most 4 bytes.
            let mut start = end.saturating_sub(4 * longest as usize);
            while !message.is_char_boundary(start) {
                start -= 1;
            }
            if self.regex_matches_from(j, message, start) {
                crate::bits::set(flags, n_contains + j);
            }
        });
        for &j in self.always.iter() {
            let j = j as usize;
            if self.regex_matches_from(j, message, 0) {
                crate::bits::set(flags, n_contains + j);
            }
        }
    }

    /// Does pattern `j` match `message` somewhere at or after byte `start` (with the
    /// text before `start` still seen by `^` and `\b`)?
    #[inline]
    fn regex_matches_from(&self, j: usize, message: &str, start: usize) -> bool {
        self.regexes
            .get(j)
            .and_then(Option::as_ref)
            .is_some_and(|re| re.is_match_from(message, start))
    }

    /// Lets every pattern's fallback engine allocate its scratch space for the calling
    /// thread now.
    fn warm_up(&self) {
        for re in self.regexes.iter().flatten() {
            re.warm_up();
        }
    }
}

/// The literals every match of `pattern` begins with, case-folded (duplicates removed),
/// or `None` when there is no such finite set of non-empty literals.
fn required_literals(pattern: &str) -> Option<Vec<String>> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let hir = regex_syntax::parse(pattern).ok()?;
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix);
    let mut seq = extractor.extract(&hir);
    seq.optimize_for_prefix_by_preference();
    let mut out: Vec<String> = Vec::new();
    for lit in seq.literals()? {
        let bytes = lit.as_bytes();
        // A literal may be cut inside a character: keep its whole characters (a
        // shorter prefix is still required).
        let text = match core::str::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => core::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?,
        };
        let folded = crate::text::fold_case(text);
        if folded.is_empty() {
            return None;
        }
        if !out.contains(&folded) {
            out.push(folded);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Compiles a regex of a rule on arguments (syntax of the `regex` crate), within
/// [`REGEX_SIZE_LIMIT`].
pub fn argument_regex(pattern: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(LAZY_CACHE_LIMIT)
        .build()
}

/// The message conditions of a generated machine, compiled on first use.
pub struct MessageMatchers {
    contains: &'static [&'static str],
    regexes: &'static [&'static str],
    arguments: &'static [&'static str],
    compiled: OnceLock<Matchers>,
}

impl MessageMatchers {
    /// Needles (case-folded) and patterns to compile on first use.
    pub const fn new(contains: &'static [&'static str], regexes: &'static [&'static str]) -> Self {
        MessageMatchers {
            contains,
            regexes,
            arguments: &[],
            compiled: OnceLock::new(),
        }
    }

    /// The same, with the regexes of the rules on arguments (semantics §16), in the
    /// order of their indices.
    pub const fn with_arguments(mut self, arguments: &'static [&'static str]) -> Self {
        self.arguments = arguments;
        self
    }

    /// The compiled matchers (compiling them the first time).
    pub fn get(&self) -> &Matchers {
        self.compiled.get_or_init(|| {
            Matchers::new(self.contains, self.regexes).with_arguments(self.arguments)
        })
    }

    /// Compiles the matchers if needed, and lets any pattern that is not a DFA allocate
    /// its scratch space for the calling thread now. [`crate::Session::new`] calls this.
    pub fn warm_up(&self) {
        self.get().warm_up();
    }

    /// The patterns that did not compile (expected: none).
    pub fn failures(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.regexes
            .iter()
            .zip(self.get().regexes.iter())
            .filter(|(_, re)| re.is_none())
            .map(|(s, _)| *s)
    }
}

impl fmt::Debug for MessageMatchers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageMatchers")
            .field("contains", &self.contains)
            .field("regexes", &self.regexes)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dfa_and_fallback_agree() {
        let patterns = [
            r"(?i)critique|evaluate",
            r"(?i)\b(research|find out)\b",
            r"^tail$",
            r"\d{3}-\d{4}",
            r"(?i)résumé",
        ];
        let messages = [
            "Critique this",
            "RESEARCH now",
            "researcher",
            "tail",
            "tail!",
            "call 555-1234",
            "Résumé attached",
            "naïve research é",
            "",
        ];
        for p in patterns {
            let m = MessageRegex::new(p).unwrap();
            assert!(m.is_dfa(), "{p} should fit in a DFA");
            let plain = Regex::new(p).unwrap();
            for msg in messages {
                assert_eq!(m.is_match(msg), plain.is_match(msg), "{p:?} on {msg:?}");
            }
        }
        assert!(MessageRegex::new("(").is_err());
    }
}
