//! Rust identifiers from template names: `"Web Research Mode"` → `WebResearchMode`,
//! `"pubmed_search"` → `PubmedSearch`, `"cognitive-reasoner"` → `cognitive_reasoner`.

use heck::{ToSnakeCase, ToUpperCamelCase};

fn valid(s: &str) -> bool {
    syn::parse_str::<syn::Ident>(s).is_ok()
}

/// Makes `s` a usable identifier: `_` before a leading digit, `_` after a keyword.
fn fix(mut s: String) -> Option<String> {
    if s.is_empty() || s.chars().all(|c| c == '_') {
        return None;
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if valid(&s) {
        return Some(s);
    }
    s.push('_');
    valid(&s).then_some(s)
}

/// The `enum Tool`/`enum Step` variant for a name (UpperCamelCase).
pub fn variant(name: &str) -> Option<String> {
    fix(name.to_upper_camel_case())
}

/// The module name for a machine name (snake_case).
pub fn module(name: &str) -> Option<String> {
    fix(name.to_snake_case())
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
    }
}
