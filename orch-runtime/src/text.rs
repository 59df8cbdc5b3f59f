//! The two string tests of the semantics, shared by the compiler and the runtime so
//! both judge names and messages identically: `*` globs (semantics §2) and Unicode
//! case-insensitive substring search (`message_contains`, semantics §7). Neither allocates.

/// Does `name` match the glob `pattern`? `*` matches any run of characters (also
/// none); every other character matches itself. There is no other wildcard.
///
/// ```
/// use orch_runtime::compiled::glob_match;
/// assert!(glob_match("*cognitive*", "my_cognitive_tool"));
/// assert!(glob_match("pubmed_*", "pubmed_fetch"));
/// assert!(!glob_match("pubmed_*", "arxiv_fetch"));
/// assert!(glob_match("a?c", "a?c")); // `?` is an ordinary character
/// ```
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p = pattern.as_bytes();
    let n = name.as_bytes();
    // Classic linear-time wildcard matching with one backtrack point. Working on bytes
    // is exact for UTF-8: `*` is ASCII, and literal runs compare byte for byte.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|b| *b == b'*')
}

/// Is `name` a pattern (does it contain `*`)?
pub fn is_pattern(name: &str) -> bool {
    name.contains('*')
}

/// The form `message_contains` values are stored in: the full Unicode case folding of
/// `value` (Unicode 16 `CaseFolding.txt`, statuses C and F), so `"STRASSE"`, `"Straße"`
/// and `"straße"` all fold to `"strasse"`, and `"ΟΔΌΣ"` and `"οδός"` to `"οδόσ"`.
///
/// ```
/// use orch_runtime::compiled::fold_case;
/// assert_eq!(fold_case("ReSearch"), "research");
/// assert_eq!(fold_case("Straße"), "strasse");
/// assert_eq!(fold_case("ΟΔΌΣ"), fold_case("οδός"));
/// ```
pub fn fold_case(value: &str) -> String {
    caseless::default_case_fold_str(value)
}

/// The characters of `text`, fully case-folded one by one, without allocating.
pub(crate) fn folded_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    caseless::Caseless::default_case_fold(text.chars())
}

/// Does `haystack` contain `needle` case-insensitively (full case folding)? `needle`
/// must already be folded with [`fold_case`]. A reference form of what sessions do in
/// one pass for every needle at once (`ContainsMatcher`); this one allocates the folded
/// haystack and runs in linear time.
///
/// ```
/// use orch_runtime::compiled::{contains_folded, fold_case};
/// assert!(contains_folded("Please RESEARCH this", "research"));
/// assert!(contains_folded("ÜBER alles", "über"));
/// assert!(contains_folded("DIE STRASSE", &fold_case("Straße")));
/// assert!(!contains_folded("plan", "planning"));
/// ```
pub fn contains_folded(haystack: &str, needle: &str) -> bool {
    folded_chars(haystack).collect::<String>().contains(needle)
}

/// Needles of at most this many bytes in all get a DFA (one table lookup per byte);
/// more get a compact NFA (memory linear in the needles).
const DFA_NEEDLE_BYTES: usize = 64 * 1024;

/// The automaton of a [`ContainsMatcher`].
#[derive(Clone, Debug)]
enum Needles {
    None,
    Dfa(aho_corasick::dfa::DFA),
    Nfa(aho_corasick::nfa::contiguous::NFA),
}

/// Why a [`ContainsMatcher`] could not be built: the automaton of its needles would be
/// too large.
#[derive(Clone, Debug)]
pub struct NeedleError(aho_corasick::BuildError);

impl core::fmt::Display for NeedleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "the `message_contains` needles cannot be matched: {}",
            self.0
        )
    }
}

impl std::error::Error for NeedleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Every `message_contains` needle of a machine, matched against a message in one pass:
/// the message is case-folded character by character and fed to one Aho–Corasick
/// automaton of the (folded) needles, so the time is linear in the message whatever the
/// number and length of the needles, and nothing is allocated.
#[derive(Clone, Debug)]
pub struct ContainsMatcher {
    needles: Needles,
}

impl ContainsMatcher {
    /// The automaton of `needles` (already folded with [`fold_case`]); needle `i` is
    /// reported as `i`.
    pub fn new<S: AsRef<str>>(needles: &[S]) -> Result<Self, NeedleError> {
        use aho_corasick::MatchKind;
        if needles.is_empty() {
            return Ok(Self::none());
        }
        let total: usize = needles.iter().map(|n| n.as_ref().len()).sum();
        let needles = if total <= DFA_NEEDLE_BYTES {
            aho_corasick::dfa::DFA::builder()
                .match_kind(MatchKind::Standard)
                .build(needles.iter().map(AsRef::as_ref))
                .map(Needles::Dfa)
        } else {
            aho_corasick::nfa::contiguous::NFA::builder()
                .match_kind(MatchKind::Standard)
                .build(needles.iter().map(AsRef::as_ref))
                .map(Needles::Nfa)
        };
        needles
            .map(|needles| ContainsMatcher { needles })
            .map_err(NeedleError)
    }

    /// A matcher with no needles (it never reports one).
    pub fn none() -> Self {
        ContainsMatcher {
            needles: Needles::None,
        }
    }

    /// Calls `found(i)` for every needle `i` that `message` contains (once or more).
    #[inline]
    pub fn for_each_match(&self, message: &str, mut found: impl FnMut(usize)) {
        self.for_each_match_at(message, |i, _| found(i));
    }

    /// Calls `found(i, end)` for every occurrence of a needle `i` in `message`, in the
    /// order they end; `end` is the byte offset in `message` just past the character
    /// where the (folded) occurrence ends. An empty needle is reported at offset 0.
    #[inline]
    pub fn for_each_match_at(&self, message: &str, found: impl FnMut(usize, usize)) {
        match &self.needles {
            Needles::None => {}
            Needles::Dfa(a) => run(a, message, found),
            Needles::Nfa(a) => run(a, message, found),
        }
    }
}

/// Feeds the case-folded bytes of `message` to `a`, reporting every match with the
/// offset in `message` just past the character it ends in.
#[inline]
fn run(
    a: &impl aho_corasick::automaton::Automaton,
    message: &str,
    mut found: impl FnMut(usize, usize),
) {
    use aho_corasick::Anchored;
    let Ok(mut sid) = a.start_state(Anchored::No) else {
        return;
    };
    let mut report = |sid, end| {
        if a.is_match(sid) {
            for i in 0..a.match_len(sid) {
                found(a.match_pattern(sid, i).as_usize(), end);
            }
        }
    };
    // An empty needle matches at the start.
    report(sid, 0);
    let mut buf = [0u8; 4];
    let bytes = message.as_bytes();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte.is_ascii() {
            // ASCII is one byte and folds to its lowercase: no decoding.
            at += 1;
            sid = a.next_state(Anchored::No, sid, byte.to_ascii_lowercase());
            report(sid, at);
            continue;
        }
        // `at` is at a character boundary: it only ever moves past whole characters.
        let Some(c) = message.get(at..).and_then(|rest| rest.chars().next()) else {
            return;
        };
        at += c.len_utf8();
        for f in caseless::Caseless::default_case_fold(core::iter::once(c)) {
            for &b in f.encode_utf8(&mut buf).as_bytes() {
                sid = a.next_state(Anchored::No, sid, b);
                report(sid, at);
            }
        }
    }
}
