//! The two string tests of the semantics, shared by the compiler and the runtime so
//! both judge names and messages identically: `*` globs (SPEC §2) and Unicode
//! case-insensitive substring search (`message_contains`, SPEC §7). Neither allocates.

/// Does `name` match the glob `pattern`? `*` matches any run of characters (also
/// none); every other character matches itself. There is no other wildcard.
///
/// ```
/// use orch_runtime::__private::glob_match;
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

/// The form `message_contains` values are stored in: the Unicode lowercase of `value`.
///
/// ```
/// assert_eq!(orch_runtime::__private::fold_case("ReSearch"), "research");
/// ```
pub fn fold_case(value: &str) -> String {
    value.chars().flat_map(char::to_lowercase).collect()
}

/// Does `haystack` contain `needle` case-insensitively? `needle` must already be
/// lowercased with [`fold_case`]; the haystack is lowercased character by character on
/// the fly (full Unicode lowercase mapping), so nothing is allocated.
///
/// ```
/// use orch_runtime::__private::contains_folded;
/// assert!(contains_folded("Please RESEARCH this", "research"));
/// assert!(contains_folded("ÜBER alles", "über"));
/// assert!(!contains_folded("plan", "planning"));
/// ```
pub fn contains_folded(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    if haystack.is_ascii() && needle.is_ascii() {
        // Fast path: ASCII lowercase is the full Unicode lowercase for ASCII text.
        let (h, n) = (haystack.as_bytes(), needle.as_bytes());
        return h.len() >= n.len()
            && h.windows(n.len())
                .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b));
    }
    let mut start = haystack.chars().flat_map(char::to_lowercase);
    loop {
        let mut probe = start.clone();
        let mut want = needle.chars();
        loop {
            match want.next() {
                None => return true,
                Some(c) => match probe.next() {
                    Some(h) if h == c => {}
                    Some(_) => break,
                    None => return false,
                },
            }
        }
        if start.next().is_none() {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_cases() {
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "a", true),
            ("*a", "ba", true),
            ("*a", "ab", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("*cognitive*", "cognitive", true),
            ("**x", "yx", true),
            ("se*ch", "search", true),
            ("se*ch", "searches", false),
            ("*é*", "café", true),
            ("exact", "exact", true),
            ("exact", "exacT", false),
        ];
        for (p, n, want) in cases {
            assert_eq!(glob_match(p, n), want, "{p:?} vs {n:?}");
        }
    }

    #[test]
    fn contains_cases() {
        assert!(contains_folded("", ""));
        assert!(!contains_folded("", "a"));
        assert!(contains_folded("abc", "c"));
        assert!(
            contains_folded("aab", "ab"),
            "restart after a partial match"
        );
        assert!(contains_folded("Σίσυφος", "σίσυφος"));
        // 'İ' lowercases to two chars ("i̇"); the stream handles the expansion.
        assert!(contains_folded("İstanbul", &fold_case("İSTANBUL")));
        assert!(!contains_folded("plan", "plans"));
    }
}
