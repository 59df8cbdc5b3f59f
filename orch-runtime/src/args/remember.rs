//! What a session remembers (semantics §16): the values of results, of admitted calls'
//! arguments and of the user's messages that a source reads, and how an argument is
//! looked up among them.

use super::json::{Doc, Kind};
use super::memory;
use super::provenance::values_in_text;
use super::rules::Rules;
use super::source::{Origin, Source};

/// The origins of the sources that read results.
const READ: &[Origin] = &[Origin::Result, Origin::Trusted, Origin::Untrusted];

/// What a session remembers: the values of results, of admitted calls' arguments and of
/// the user's messages that a source reads (semantics §16).
impl Rules<'_> {
    /// Does a source read the results of the declared tool `tool` (so that a host must
    /// pass them on)?
    pub fn reads_results(&self, tool: usize) -> bool {
        self.reading(tool, READ).next().is_some() || self.numbers_of(tool).next().is_some()
    }

    /// The sources of `origins` that read `tool`'s results or arguments, with their
    /// indices.
    fn reading(
        &self,
        tool: usize,
        origins: &'static [Origin],
    ) -> impl Iterator<Item = (u32, &Source)> + '_ {
        self.sources
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.tool as usize == tool && origins.contains(&s.origin))
            .map(|(i, s)| (i as u32, s))
    }

    /// Remembers the values a result `text` of the declared tool `tool` holds for every
    /// source that reads that tool's results, and the numbers bounds read from it
    /// ([`Rules::remember_numbers`]) (`memory`: the session's memory words). A
    /// result that is not JSON adds nothing, but to an untrusted tool's source, which
    /// reads its whole text. The ring keeps the newest values and counts those it
    /// forgets. `true` when a source reads this tool's results.
    pub fn remember_result(&self, memory: &mut [u64], tool: usize, text: &str) -> bool {
        let numbers = self.remember_numbers(memory, tool, text);
        let mut sources = self.reading(tool, READ).peekable();
        if sources.peek().is_none() {
            return numbers;
        }
        let (main, untrusted) = self.rings_mut(memory);
        let (mut main, mut untrusted) = (memory::Memory(main), memory::Memory(untrusted));
        let doc = Doc::parse(text).ok();
        for (i, source) in sources {
            match (source.origin, &doc) {
                (Origin::Untrusted, None) => values_in_text(text, &mut |v| {
                    memory::text_keys(i, v, &mut |k| untrusted.remember(k))
                }),
                (Origin::Untrusted, Some(doc)) => scalars(doc, &mut |n| {
                    if let Some(s) = doc.string(n) {
                        values_in_text(&s, &mut |v| {
                            memory::text_keys(i, v, &mut |k| untrusted.remember(k))
                        });
                    } else if let Some(k) = memory::key(i, doc, n) {
                        untrusted.remember(k);
                    }
                }),
                (Origin::Trusted, Some(doc)) => scalars(doc, &mut |n| {
                    if let Some(k) = memory::key(i, doc, n) {
                        main.remember(k);
                    }
                }),
                (_, Some(doc)) => doc.pointer_all(0, self.text_of(source.path), &mut |n| {
                    if let Some(k) = memory::key(i, doc, n) {
                        main.remember(k);
                    }
                }),
                (_, None) => {}
            }
        }
        true
    }

    /// Remembers the values at the paths the sources of [`Origin::Arguments`] read in
    /// the `arguments` of a call of the declared tool `tool` admitted to run. `true` when
    /// a source reads them. Costs one pass over the sources when none does.
    pub fn remember_arguments(&self, memory: &mut [u64], tool: usize, arguments: &str) -> bool {
        let mut sources = self.reading(tool, &[Origin::Arguments]).peekable();
        if sources.peek().is_none() {
            return false;
        }
        let Ok(doc) = Doc::parse(arguments) else {
            return true;
        };
        let mut main = memory::Memory(self.rings_mut(memory).0);
        for (i, source) in sources {
            doc.pointer_all(0, self.text_of(source.path), &mut |n| {
                if let Some(k) = memory::key(i, &doc, n) {
                    main.remember(k);
                }
            });
        }
        true
    }

    /// Remembers the values of a user's `message` for the sources of [`Origin::User`].
    /// `true` when a source reads them.
    pub fn remember_user(&self, memory: &mut [u64], message: &str) -> bool {
        let Some(i) = self.sources.iter().position(|s| s.origin == Origin::User) else {
            return false;
        };
        let mut main = memory::Memory(self.rings_mut(memory).0);
        values_in_text(message, &mut |v| {
            memory::text_keys(i as u32, v, &mut |k| main.remember(k))
        });
        true
    }
}

/// Every scalar of `doc`, depth first.
fn scalars(doc: &Doc<'_>, visit: &mut dyn FnMut(usize)) {
    fn walk(doc: &Doc<'_>, n: usize, visit: &mut dyn FnMut(usize)) {
        match doc.nodes.get(n).map(|node| node.kind) {
            Some(Kind::Array | Kind::Object) => {
                for c in doc.children(n) {
                    walk(doc, c, visit);
                }
            }
            Some(_) => visit(n),
            None => {}
        }
    }
    walk(doc, 0, visit);
}
