//! Rust identifiers from template names: `"Web Research Mode"` → `WebResearchMode`,
//! `"pubmed_search"` → `PubmedSearch`, `"cognitive-reasoner"` → `cognitive_reasoner`.

//!
//! Identifiers are ASCII, whatever the name: a character outside ASCII becomes the
//! ASCII letters of its compatibility decomposition (`é` → `e`, the Kelvin sign `K` →
//! `K`, `ⅰ` → `i`), or its code point (`検` → `U691c`) when it has none. So every
//! identifier is valid in every edition, triggers no lint in the user's crate
//! (`uncommon_codepoints`, `confusable_idents`), and two names that rustc would see
//! as one identifier are caught as a collision (E005) by comparing these strings.

use heck::{ToSnakeCase, ToUpperCamelCase};
use unicode_normalization::UnicodeNormalization;

/// Every keyword of every edition (2015–2024), strict and reserved: an identifier
/// equal to one gets a `_` appended.
const KEYWORDS: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "crate",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "async",
    "await",
    "dyn",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "macro",
    "override",
    "priv",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "try",
    "gen",
    "union",
    "macro_rules",
    "raw",
    "safe",
];

/// `name` in ASCII: other characters replaced as the module documentation says (a
/// code point set apart by spaces, so that the case conversion makes it a word).
fn ascii(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let plain: String = std::iter::once(c)
            .nfkd()
            .filter(|d| d.is_ascii_alphanumeric())
            .collect();
        if plain.is_empty() {
            // The code point of its normalized form, so that lookalikes that rustc
            // would see as one identifier (`Ω` and the Ohm sign) collide here too.
            for n in std::iter::once(c).nfkc() {
                out.push_str(&format!(" u{:x} ", n as u32));
            }
        } else {
            out.push_str(&plain);
        }
    }
    out
}

/// Makes `s` a usable identifier: `_` before a leading digit, `_` after a keyword.
fn fix(mut s: String) -> Option<String> {
    if s.is_empty() || s.chars().all(|c| c == '_') {
        return None;
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    (syn::parse_str::<syn::Ident>(&s).is_ok() && s.is_ascii()).then_some(s)
}

/// The `enum Tool`/`enum Step` variant for a name (UpperCamelCase, ASCII).
pub fn variant(name: &str) -> Option<String> {
    fix(ascii(name).to_upper_camel_case())
}

/// The module name for a machine name (snake_case, ASCII).
pub fn module(name: &str) -> Option<String> {
    fix(ascii(name).to_snake_case())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants() {
        assert_eq!(
            variant("Web Research Mode").as_deref(),
            Some("WebResearchMode")
        );
        assert_eq!(variant("pubmed_search").as_deref(), Some("PubmedSearch"));
        assert_eq!(variant("ResearchMode").as_deref(), Some("ResearchMode"));
        assert_eq!(variant("3d view").as_deref(), Some("_3dView"));
        assert_eq!(variant("self").as_deref(), Some("Self_"));
        assert_eq!(variant("---"), None);
        assert_eq!(variant("").as_deref(), None);
    }

    #[test]
    fn modules() {
        assert_eq!(
            module("cognitive-reasoner").as_deref(),
            Some("cognitive_reasoner")
        );
        assert_eq!(
            module("Dr. Gregory House").as_deref(),
            Some("dr_gregory_house")
        );
        assert_eq!(module("type").as_deref(), Some("type_"));
        assert_eq!(module("42").as_deref(), Some("_42"));
        // Keywords of every edition, not only the one syn knows.
        for kw in ["gen", "try", "async", "dyn", "union", "raw", "safe"] {
            assert_eq!(module(kw), Some(format!("{kw}_")));
        }
    }

    #[test]
    fn names_become_ascii_and_lookalikes_collide() {
        assert_eq!(variant("\u{212A}"), variant("K"), "Kelvin sign");
        assert_eq!(
            variant("\u{212B}ngstrom"),
            variant("Angstrom"),
            "Angstrom sign"
        );
        assert_eq!(
            variant("\u{2126}").as_deref(),
            Some("U3a9"),
            "Ohm sign is Greek Omega"
        );
        assert_eq!(
            variant("\u{2170}").as_deref(),
            Some("I"),
            "small roman numeral one"
        );
        assert_eq!(variant("Zürich Suche").as_deref(), Some("ZurichSuche"));
        assert_eq!(variant("検索").as_deref(), Some("U691cU7d22"));
        assert_eq!(module("Ölçer-Agent").as_deref(), Some("olcer_agent"));
        assert_eq!(variant("a\u{202E}b").as_deref(), Some("AU202eB"));
        for name in ["K", "\u{212A}", "ⅰ", "x\ny", "\u{FEFF}", "🚀 launch"] {
            let id = variant(name).unwrap_or_default();
            assert!(id.is_ascii(), "{name:?} → {id}");
        }
    }
}
