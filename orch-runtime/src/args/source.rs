//! Where remembered values come from (semantics §16): a source is an origin — a tool's
//! results, its admitted calls' arguments, the user's messages, a trusted or an
//! untrusted tool — with its tool and path.

use crate::form::{Literal, LiteralWriter};
use crate::tables::Span;

/// What a [`Source`] remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The scalars at [`Source::path`] in the results of [`Source::tool`].
    Result,
    /// The scalars at [`Source::path`] in the arguments of the calls of
    /// [`Source::tool`] admitted to run (free, or approved).
    Arguments,
    /// The values in the user's messages ([`values_in_text`](super::values_in_text)).
    User,
    /// Every scalar anywhere in the results of [`Source::tool`], a tool the template
    /// declares trusted.
    Trusted,
    /// The values in the text of the results of [`Source::tool`], a tool the template
    /// declares untrusted: every string's values, or the whole result's when it is not
    /// JSON. Kept apart (a ring of their own), to say where a value was seen.
    Untrusted,
}

/// [`Source::tool`] of a source that names no tool (the user's messages).
pub const NO_TOOL: u16 = u16::MAX;

/// Where remembered values come from: what is remembered ([`Origin`]), of which tool,
/// at which path (a JSON pointer whose `*` tokens stand for every element or member).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source {
    /// What it remembers.
    pub origin: Origin,
    /// The tool (an index into the machine's tools), or [`NO_TOOL`].
    pub tool: u16,
    /// The pointer into its results or arguments, a span of [`Rules::text`](super::Rules::text).
    pub path: Span,
}

impl Literal for Source {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.item("Source { origin: ");
        w.item(match self.origin {
            Origin::Result => "Origin::Result",
            Origin::Arguments => "Origin::Arguments",
            Origin::User => "Origin::User",
            Origin::Trusted => "Origin::Trusted",
            Origin::Untrusted => "Origin::Untrusted",
        });
        w.text(", tool: ");
        w.int(self.tool);
        w.text(", path: ");
        self.path.write_literal(w);
        w.text(" }");
    }
}
