//! Text from outside (a template, a transcript, a model, a client, an upstream) made safe
//! to print to a terminal: a control character in a tool name or a message could move
//! the cursor and rewrite what a report already printed, and a bidirectional override
//! could show it in another order than it is. Every human report escapes such text;
//! JSON output stays exact (JSON escapes control characters itself).

use std::borrow::Cow;

/// `text` with every character a terminal would act on or reorder by written as an
/// escape (`\u{1b}`): the C0 controls (newline and tab too: a field is one line), DEL,
/// the C1 controls, the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069) and the line and paragraph separators. A backslash that starts such an
/// escape-looking sequence is left alone: the output is for reading, not for parsing
/// back. Borrowed when there is nothing to escape.
///
/// ```
/// use orch_runtime::printable::printable;
/// assert_eq!(printable("search"), "search");
/// assert_eq!(printable("pay\u{1b}[2K\rok"), "pay\\u{1b}[2K\\u{d}ok");
/// assert_eq!(printable("a\u{202e}b"), "a\\u{202e}b");
/// ```
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acted_on) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acted_on(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Each line of `text` made [`printable`], the line breaks kept (for text that is
/// several lines by design, such as a rendered diagnostic).
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && acted_on(c)) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<Cow<'_, str>> = text.split('\n').map(printable).collect();
    Cow::Owned(lines.join("\n"))
}

/// Does a terminal act on `c` (move, erase, recolour, reorder) instead of showing it?
fn acted_on(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// `eprintln!` with the formatted line made [`printable`]: for a host's log lines, which
/// carry names and errors from clients, upstreams and templates.
///
/// ```
/// orch_runtime::eprintln_printable!("orch: warning: {} said {}", "peer", "a\u{1b}[2Kb");
/// ```
#[macro_export]
macro_rules! eprintln_printable {
    ($($arg:tt)*) => {
        ::std::eprintln!("{}", $crate::printable::printable(&::std::format!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped_and_the_rest_is_kept() {
        assert!(matches!(printable("Grüße, 検索"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\tb\nc\u{7f}d\u{85}e"),
            "a\\u{9}b\\u{a}c\\u{7f}d\\u{85}e"
        );
        assert_eq!(printable("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(printable_lines("one\ntwo\u{1b}"), "one\ntwo\\u{1b}");
        assert!(matches!(printable_lines("one\ntwo"), Cow::Borrowed(_)));
    }
}
