//! `message_regex` matching without allocation.
//!
//! A pattern is compiled to a fully built forward DFA when it fits (the usual case for
//! the short keyword patterns of templates): searching a DFA needs no scratch space, so
//! matching a message never allocates. Unicode `\b` is handled by the DFA's ASCII
//! heuristic; on a message where that heuristic gives up (a non-ASCII letter next to a
//! `\b`), and for patterns too large for a DFA, the regular `regex::Regex` answers
//! instead — its lazy engine may allocate scratch space for states it has not seen yet.
//! The syntax is always that of the `regex` crate.

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

/// The `message_regex` patterns of a generated machine, compiled on first use.
///
/// The compiler validated every pattern with the same `regex` crate, so compilation
/// cannot fail in practice; should it ever (say, a different `regex` version with a
/// different size limit), that pattern's slot is `None` and its condition never holds,
/// and [`Regexes::failures`] names it — there is no panic.
pub struct Regexes {
    sources: &'static [&'static str],
    compiled: OnceLock<Box<[Option<MessageRegex>]>>,
}

impl Regexes {
    /// Patterns to compile on first use.
    pub const fn new(sources: &'static [&'static str]) -> Self {
        Regexes {
            sources,
            compiled: OnceLock::new(),
        }
    }

    /// The compiled patterns (compiling them the first time).
    pub fn get(&self) -> &[Option<MessageRegex>] {
        self.compiled.get_or_init(|| {
            self.sources
                .iter()
                .map(|s| MessageRegex::new(s).ok())
                .collect()
        })
    }

    /// Compiles the patterns if needed, and lets any pattern that is not a DFA allocate
    /// its scratch space for the calling thread now. [`crate::Session::new`] calls this.
    pub fn warm_up(&self) {
        for re in self.get().iter().flatten() {
            re.warm_up();
        }
    }

    /// The sources that did not compile (expected: none).
    pub fn failures(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.sources
            .iter()
            .zip(self.get().iter())
            .filter(|(_, re)| re.is_none())
            .map(|(s, _)| *s)
    }
}

impl fmt::Debug for Regexes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Regexes")
            .field("sources", &self.sources)
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
