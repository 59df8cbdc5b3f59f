//! Where a value came from (semantics §16): the forms values are matched in, and the
//! values a text holds. A value is remembered by its *normal form* and looked up by it,
//! so an argument written differently from where it was seen still matches: an IBAN
//! without its spaces and in capitals, an e-mail address in lower case, a number by its
//! exact decimal value. A text (a user's message, an untrusted result) holds its words,
//! the addresses and links inside them, and the IBANs written in groups.

use super::found::email_addresses;
use std::borrow::Cow;

/// The normal form of a string value: trimmed; an IBAN (two letters, two digits, then
/// 11 to 30 letters or digits, written with or without single spaces) without spaces and
/// in capitals; a plain e-mail address (one `@`, a dotted domain, no space) in lower
/// case; anything else as written.
pub fn normal_form(value: &str) -> Cow<'_, str> {
    let v = value.trim();
    if let Some(iban) = iban(v) {
        return Cow::Owned(iban);
    }
    if is_address(v) && v.bytes().any(|b| b.is_ascii_uppercase()) {
        return Cow::Owned(v.to_ascii_lowercase());
    }
    Cow::Borrowed(v)
}

/// `value` as a compact IBAN in capitals, if it is written as one (groups separated by
/// single spaces allowed).
fn iban(value: &str) -> Option<String> {
    let len = value.len();
    if !(15..=42).contains(&len) || value.contains("  ") {
        return None;
    }
    // The shape is checked on the bytes first: most values are not IBANs, and only an
    // IBAN is copied.
    let mut b = value.bytes().filter(|b| *b != b' ');
    let n = value.bytes().filter(|b| *b != b' ').count();
    let shaped = (15..=34).contains(&n)
        && b.by_ref().take(2).all(|c| c.is_ascii_alphabetic())
        && b.by_ref().take(2).all(|c| c.is_ascii_digit())
        && b.all(|c| c.is_ascii_alphanumeric());
    shaped.then(|| {
        value
            .bytes()
            .filter(|b| *b != b' ')
            .map(|b| b.to_ascii_uppercase() as char)
            .collect()
    })
}

/// A plain e-mail address: one `@` with something before it and a dotted domain after,
/// no whitespace.
fn is_address(v: &str) -> bool {
    let mut parts = v.split('@');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(local), Some(domain), None) => {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !v.chars().any(char::is_whitespace)
        }
        _ => false,
    }
}

/// Characters that end a piece of a word (quotes, brackets, separators).
fn splits(c: char) -> bool {
    matches!(
        c,
        ',' | ';' | '=' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '"' | '\'' | '`' | '|'
    )
}

/// Trailing or leading punctuation a word is read without.
fn edge(c: char) -> bool {
    matches!(c, '.' | ':' | '!' | '?' | '*' | '_' | '~')
}

/// Every value `text` holds, each passed to `visit` (a value may come more than once):
/// each word (split at whitespace; read whole and, when it holds quotes, brackets, `,`,
/// `;`, `=` or `|`, also in the pieces between them; without a leading or trailing `.`,
/// `:`, `!`, `?`, `*`, `_` or `~`), every e-mail
/// address inside the text, and every IBAN written in groups ("DE89 3704 0044 0532
/// 0130 00"). Each value is passed in its [`normal_form`].
pub fn values_in_text(text: &str, visit: &mut dyn FnMut(&str)) {
    let mut words: Vec<&str> = Vec::new();
    for word in text.split_whitespace() {
        let whole = word.trim_matches(|c| edge(c) || splits(c));
        if whole.contains(splits) {
            visit(&normal_form(whole));
        }
        for piece in word.split(splits) {
            let piece = piece.trim_matches(edge);
            if !piece.is_empty() {
                words.push(piece);
                visit(&normal_form(piece));
            }
        }
    }
    if let Some(addresses) = email_addresses(text) {
        for a in &addresses {
            visit(a);
        }
    }
    // IBANs in groups: a word of two letters and two digits, and the short groups after it.
    for (i, first) in words.iter().enumerate() {
        let f = first.as_bytes();
        if f.len() < 4
            || !f[..2].iter().all(u8::is_ascii_alphabetic)
            || !f[2..4].iter().all(u8::is_ascii_digit)
        {
            continue;
        }
        let mut joined = String::from(*first);
        for next in words.iter().skip(i + 1).take(8) {
            if next.len() > 4 || !next.bytes().all(|b| b.is_ascii_alphanumeric()) {
                break;
            }
            joined.push(' ');
            joined.push_str(next);
            if let Some(iban) = iban(&joined) {
                visit(&iban);
            }
        }
    }
}

/// The words of a value that is not one value of a text: `value`'s pieces as
/// [`values_in_text`] reads them, in their normal forms. A value several words long
/// was seen in a text when each of its words was.
pub fn words_of(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in value.split_whitespace() {
        for piece in word.split(splits) {
            let piece = piece.trim_matches(edge);
            if !piece.is_empty() {
                out.push(normal_form(piece).into_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        values_in_text(text, &mut |v| out.push(v.to_owned()));
        out
    }

    #[test]
    fn normal_forms() {
        assert_eq!(
            normal_form(" de89 3704 0044 0532 0130 00 "),
            "DE89370400440532013000"
        );
        assert_eq!(normal_form("Bob@Corp.Example"), "bob@corp.example");
        assert_eq!(normal_form("Hello World"), "Hello World");
        assert_eq!(
            normal_form("DE89  3704 0044 0532 0130 00"),
            "DE89  3704 0044 0532 0130 00"
        );
    }

    #[test]
    fn a_text_holds_its_words_addresses_and_grouped_ibans() {
        let v = values(
            "Pay the landlord: DE89 3704 0044 0532 0130 00, mail Bob@Corp.Example (\"today\").",
        );
        assert!(v.contains(&"DE89370400440532013000".to_owned()), "{v:?}");
        assert!(v.contains(&"bob@corp.example".to_owned()), "{v:?}");
        assert!(v.contains(&"landlord".to_owned()), "{v:?}");
        assert!(v.contains(&"today".to_owned()), "{v:?}");
        let v = values("see <a href=\"https://evil.example/x?y=1\">here</a>");
        assert!(v.contains(&"https://evil.example/x?y".to_owned()), "{v:?}");
        assert!(v.contains(&"1".to_owned()), "{v:?}");
    }

    #[test]
    fn words_of_a_value() {
        assert_eq!(words_of("Alice  Smith."), vec!["Alice", "Smith"]);
    }
}
