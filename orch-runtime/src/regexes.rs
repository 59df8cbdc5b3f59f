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
        if let Some(dfa) = &self.dfa {
            if let Ok(found) = dfa.try_search_fwd(&Input::new(haystack).earliest(true)) {
                return found.is_some();
            }
        }
        self.regex.is_match(haystack)
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

/// The compiled message conditions of a machine: one automaton for every
/// `message_contains` needle, and each `message_regex` pattern.
#[derive(Clone, Debug)]
pub struct Matchers {
    pub(crate) contains: ContainsMatcher,
    pub(crate) regexes: Box<[Option<MessageRegex>]>,
}

impl Matchers {
    /// Compiles the needles (already case-folded) and the patterns. The compiler has
    /// validated both, so nothing fails in practice; should a pattern fail anyway, its
    /// slot is `None` and its condition never holds (see [`MessageMatchers::failures`]).
    pub fn new<S: AsRef<str>>(contains: &[S], regexes: &[S]) -> Self {
        Matchers {
            contains: ContainsMatcher::new(contains).unwrap_or(ContainsMatcher::none()),
            regexes: regexes
                .iter()
                .map(|s| MessageRegex::new(s.as_ref()).ok())
                .collect(),
        }
    }

    /// Sets flag `i` in `flags` for every needle `i` the message contains, and flag
    /// `n_contains + j` for every pattern `j` that matches it.
    #[inline]
    pub(crate) fn match_message(&self, message: &str, n_contains: usize, flags: &mut [u64]) {
        self.contains
            .for_each_match(message, |i| crate::bits::set(flags, i));
        for (j, re) in self.regexes.iter().enumerate() {
            if re.as_ref().is_some_and(|re| re.is_match(message)) {
                crate::bits::set(flags, n_contains + j);
            }
        }
    }

    /// Lets every pattern that is not a DFA allocate its scratch space for the calling
    /// thread now.
    fn warm_up(&self) {
        for re in self.regexes.iter().flatten() {
            re.warm_up();
        }
    }
}

/// The message conditions of a generated machine, compiled on first use.
pub struct MessageMatchers {
    contains: &'static [&'static str],
    regexes: &'static [&'static str],
    compiled: OnceLock<Matchers>,
}

impl MessageMatchers {
    /// Needles (case-folded) and patterns to compile on first use.
    pub const fn new(contains: &'static [&'static str], regexes: &'static [&'static str]) -> Self {
        MessageMatchers {
            contains,
            regexes,
            compiled: OnceLock::new(),
        }
    }

    /// The compiled matchers (compiling them the first time).
    pub fn get(&self) -> &Matchers {
        self.compiled
            .get_or_init(|| Matchers::new(self.contains, self.regexes))
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
