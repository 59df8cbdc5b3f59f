//! Was a value seen at a source (semantics §16)? Values from texts match by their normal
//! form, or word by word; others exactly.

use super::json::{Doc, Kind};
use super::memory;
use super::provenance::{normal_form, words_of};
use super::source::Origin;

/// Was node `n` of `doc` seen at source `source` of origin `origin`, by the live entries
/// `live` of its ring? Values from texts (the user's, an untrusted tool's) match by
/// their normal form, or word by word for a value several words long; others exactly.
pub(super) fn seen_in(origin: Origin, source: u32, doc: &Doc<'_>, n: usize, live: &[u64]) -> bool {
    let knows = |k: [u64; 2]| memory::knows(live, &k);
    if !matches!(origin, Origin::User | Origin::Untrusted) {
        return memory::key(source, doc, n).is_some_and(knows);
    }
    match doc.nodes.get(n).map(|node| node.kind) {
        Some(Kind::String { .. }) => {
            let Some(s) = doc.string(n) else {
                return false;
            };
            if knows(memory::string_key(source, &normal_form(&s))) {
                return true;
            }
            let words = words_of(&s);
            words.len() > 1 && words.iter().all(|w| knows(memory::string_key(source, w)))
        }
        Some(Kind::Number) => memory::number_key(source, doc.raw(n)).is_some_and(knows),
        _ => false,
    }
}
