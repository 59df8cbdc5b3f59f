//! Where a call's values were seen, in words, for the human asked about it (semantics
//! §16): "`/iban` "DE89…": seen only in the untrusted results of `read_file`; not in the
//! user's messages".

use super::json::{Doc, Kind};
use super::memory;
use super::rules::{Pred, Rules, Test, ANY_STEP};
use super::seen::seen_in;
use super::source::{Origin, Source};

/// The most lines [`Rules::origins`] writes.
const MOST: usize = 8;

impl<'a> Rules<'a> {
    /// Where the values of a call of `tool` in step `step` were seen, one line per value,
    /// for a question about it: the values the provenance tests of the rules that apply
    /// read, and — when the template declares untrusted tools — every scalar argument at
    /// the top of the arguments. Each line says every source the value was seen at, and
    /// where it was not (the user's messages, the trusted tools), when the template reads
    /// those. Empty when the template remembers nothing or the arguments cannot be read;
    /// at most eight lines. `memory` is the session's memory words; `tool_name` names a
    /// tool by its index.
    pub fn origins(
        &self,
        tool: usize,
        step: u16,
        arguments: &str,
        memory: &[u64],
        tool_name: &dyn Fn(u16) -> &'a str,
    ) -> Vec<String> {
        if self.sources.is_empty() {
            return Vec::new();
        }
        let Ok(doc) = Doc::parse(arguments) else {
            return Vec::new();
        };
        let mut paths: Vec<String> = Vec::new();
        for r in self
            .rules
            .iter()
            .filter(|r| r.tool as usize == tool && (r.step == ANY_STEP || r.step == step))
        {
            self.provenance_paths(r.pred, &mut paths);
        }
        if self.sources.iter().any(|s| s.origin == Origin::Untrusted)
            && doc.nodes.first().map(|n| n.kind) == Some(Kind::Object)
        {
            for c in doc.children(0) {
                if !matches!(doc.nodes[c].kind, Kind::Array | Kind::Object) {
                    if let Some(key) = doc.key(c) {
                        paths.push(format!("/{}", key.replace('~', "~0").replace('/', "~1")));
                    }
                }
            }
        }
        let mut seen_paths: Vec<String> = Vec::new();
        let mut lines = Vec::new();
        for path in paths {
            if seen_paths.contains(&path) || lines.len() >= MOST {
                continue;
            }
            let Some(n) = doc.pointer(0, &path) else {
                continue;
            };
            seen_paths.push(path.clone());
            if matches!(doc.nodes[n].kind, Kind::Array | Kind::Object) {
                continue;
            }
            lines.push(self.origin_line(&path, &doc, n, memory, tool_name));
        }
        lines
    }

    /// The paths (relative to the arguments) of the provenance tests of predicate `p`,
    /// outside [`Test::Each`].
    fn provenance_paths(&self, p: u32, out: &mut Vec<String>) {
        match self.preds.get(p as usize) {
            Some(Pred::All(span)) | Some(Pred::Any(span)) => {
                for &c in self.children.get(span.range()).unwrap_or(&[]) {
                    self.provenance_paths(c, out);
                }
            }
            Some(Pred::Not(inner)) => self.provenance_paths(*inner, out),
            Some(Pred::Test {
                path,
                test: Test::InResult(_),
            }) => out.push(self.text_of(*path).to_owned()),
            _ => {}
        }
    }

    /// One line of [`Rules::origins`]: the value at `path` (node `n`) and where it was
    /// seen.
    fn origin_line(
        &self,
        path: &str,
        doc: &Doc<'_>,
        n: usize,
        memory: &[u64],
        tool_name: &dyn Fn(u16) -> &'a str,
    ) -> String {
        let (main, untrusted) = self.rings(memory);
        let (main, untrusted) = (memory::live(main), memory::live(untrusted));
        let mut seen = Vec::new();
        let mut unseen = Vec::new();
        // Seen at a source that vouches (anything but untrusted text)?
        let mut vouched = false;
        for (i, src) in self.sources.iter().enumerate() {
            let live = if src.origin == Origin::Untrusted {
                untrusted
            } else {
                main
            };
            let at = self.seen_where(src, tool_name);
            if seen_in(src.origin, i as u32, doc, n, live) {
                vouched |= src.origin != Origin::Untrusted;
                if !seen.contains(&at) {
                    seen.push(at);
                }
            } else if matches!(src.origin, Origin::User | Origin::Trusted) && !unseen.contains(&at)
            {
                // The user first: "not in the user's messages" is what a human reads first.
                if src.origin == Origin::User {
                    unseen.insert(0, at);
                } else {
                    unseen.push(at);
                }
            }
        }
        let value = shorten(doc.raw(n));
        let mut line = match (seen.is_empty(), vouched) {
            (true, _) => format!("`{path}` {value}: seen nowhere orch remembers"),
            (false, false) => format!("`{path}` {value}: seen only {}", seen.join("; ")),
            (false, true) => format!("`{path}` {value}: seen {}", seen.join("; ")),
        };
        if !seen.is_empty() && !unseen.is_empty() {
            line.push_str("; not ");
            line.push_str(&unseen.join(", nor "));
        }
        line
    }
}

impl<'a> Rules<'a> {
    /// Where a source's values were seen, as a place: "in the user's messages".
    fn seen_where(&self, src: &Source, tool_name: &dyn Fn(u16) -> &'a str) -> String {
        let (name, path) = (tool_name(src.tool), self.text_of(src.path));
        match src.origin {
            Origin::Result => format!("in results of `{name}` at `{path}`"),
            Origin::Arguments => format!("in the arguments of earlier `{name}` calls at `{path}`"),
            Origin::User => "in the user's messages".to_owned(),
            Origin::Trusted => format!("in results of the trusted tool `{name}`"),
            Origin::Untrusted => format!("in untrusted results of `{name}`"),
        }
    }
}

/// At most 60 characters of a value's JSON text.
fn shorten(v: &str) -> String {
    match v.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &v[..at]),
        None => v.to_owned(),
    }
}
