//! Values found inside text (semantics §16): the links and the e-mail addresses a string
//! argument carries — a message body, a file's content, a note — each to be tested, so
//! that a phishing link or an outside address inside a body breaks a rule.
//!
//! Both readers over-approximate what a reader of the text (a mail client, a chat, a
//! browser, a model) could take for a link or an address, and say "unreadable" where a
//! lenient reader could see another host than a strict one: a rule built on them errs
//! towards refusing.

/// The hosts of every link in `text`, lowercased and without a trailing dot, in the
/// order they occur; `None` when some link has no host this reader can vouch for.
///
/// A link starts at every `://` (the scheme before it, if any, is not judged), at every
/// `www.` (in any case) that begins a word, and at every word that is a host name
/// followed by `/`, `?` or `#` (`evil.example/login`: labels joined by dots, the last of
/// two or more letters). A host name alone (`evil.example`) is not read as a link. Its
/// authority runs to the first whitespace, `/`, `\`, `?` or `#`, or a character no host
/// holds (`<`, `>`, `"`, `'`, `` ` ``, `(`, `)`, `[`, `]`, `{`, `}`, `|`, `^`, `,`, `;`,
/// `!`, `*`); a trailing `.` or `:` is punctuation. The link is unreadable — the whole
/// answer `None` — when an `@` appears anywhere before the next whitespace, `/`, `?` or
/// `#` (userinfo, which moves the host a URL parser reads), when a port is not digits,
/// or when the host is empty or not plain ASCII (letters, digits, `-`, `.`, `_`; so an
/// IPv6 address in brackets or a `://` with nothing after it is unreadable too).
pub fn link_hosts(text: &str) -> Option<Vec<String>> {
    let bytes = text.as_bytes();
    let mut hosts = Vec::new();
    let mut starts: Vec<usize> = text.match_indices("://").map(|(i, _)| i + 3).collect();
    // `www.` in any case, read in place (no lowercased copy of the text).
    starts.extend(
        bytes
            .windows(4)
            .enumerate()
            .filter(|(i, w)| w.eq_ignore_ascii_case(b"www.") && word_start(bytes, *i))
            .map(|(i, _)| i),
    );
    // A word that is a host name followed by `/`.
    let mut i = 0;
    while i < bytes.len() {
        if word_start(bytes, i) && bytes[i].is_ascii_alphanumeric() {
            let end = i + bytes[i..]
                .iter()
                .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
                .count();
            let then = bytes.get(end);
            if matches!(then, Some(b'/' | b'?' | b'#')) && looks_like_domain(&text[i..end]) {
                starts.push(i);
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    starts.sort_unstable();
    starts.dedup();
    for start in starts {
        hosts.push(link_host(&text[start..])?);
    }
    Some(hosts)
}

/// Does a word start at byte `i` (the text's start, or after a character that cannot be
/// inside a host name or a URL's userinfo)?
fn word_start(bytes: &[u8], i: usize) -> bool {
    i == 0
        || !bytes[i - 1].is_ascii_alphanumeric()
            && !matches!(bytes[i - 1], b'-' | b'.' | b'_' | b'@' | b'%' | b'/' | b':')
}

/// Labels of letters, digits, `-` and `_` joined by single dots, at least two, the last
/// of two or more letters.
fn looks_like_domain(word: &str) -> bool {
    let labels: Vec<&str> = word.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty())
        && labels
            .last()
            .is_some_and(|l| l.len() >= 2 && l.bytes().all(|c| c.is_ascii_alphabetic()))
}

/// The host of the link whose authority starts `rest`.
fn link_host(rest: &str) -> Option<String> {
    // Up to the next whitespace, `/`, `?` or `#`: an `@` there is userinfo to some parser.
    let reach = rest
        .find(|c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#'))
        .unwrap_or(rest.len());
    if rest[..reach].contains('@') {
        return None;
    }
    let end = rest
        .find(|c: char| {
            c.is_whitespace()
                || c.is_control()
                || matches!(
                    c,
                    '/' | '\\'
                        | '?'
                        | '#'
                        | '<'
                        | '>'
                        | '"'
                        | '\''
                        | '`'
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '|'
                        | '^'
                        | ','
                        | ';'
                        | '!'
                        | '*'
                )
        })
        .unwrap_or(rest.len());
    let authority = rest[..end].trim_end_matches(['.', ':']);
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let plain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_');
    if host.is_empty() || !host.bytes().all(plain) {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

/// Every e-mail address in `text`, lowercased, in the order they occur: around each `@`,
/// the longest run of local-part characters before it (letters, digits and
/// ``.!#$%&'*+/=?^_`{|}~-``) and of domain characters after it (letters, digits, `-`
/// and `.`, a trailing `.` dropped). An `@` with no local part before it and no dot
/// after it (`@alice`, a mention) is not an address; `None` when an address has no
/// local part this reader can see (`"eve"@corp.example`: quoted), an empty label in its
/// domain, or a domain without a dot (`boss@corp`, which some mail system might still
/// deliver).
pub fn email_addresses(text: &str) -> Option<Vec<String>> {
    let bytes = text.as_bytes();
    let local = |c: u8| c.is_ascii_alphanumeric() || b".!#$%&'*+/=?^_`{|}~-".contains(&c);
    let domain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.');
    let mut out = Vec::new();
    for (at, _) in text.match_indices('@') {
        let from = at - bytes[..at].iter().rev().take_while(|&&c| local(c)).count();
        let to = at + 1 + bytes[at + 1..].iter().take_while(|&&c| domain(c)).count();
        let user = &text[from..at];
        let host = text[at + 1..to].trim_end_matches('.');
        if user.is_empty() && !host.contains('.') {
            continue;
        }
        if user.is_empty() || !host.contains('.') || host.split('.').any(str::is_empty) {
            return None;
        }
        out.push(format!("{user}@{host}").to_ascii_lowercase());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(text: &str) -> Option<Vec<&'static str>> {
        link_hosts(text).map(|v| {
            v.into_iter()
                .map(|h| &*Box::leak(h.into_boxed_str()))
                .collect()
        })
    }

    #[test]
    fn every_link_is_found_with_its_host() {
        assert_eq!(hosts("no links here, e.g. a file.txt"), Some(vec![]));
        assert_eq!(
            hosts(
                "See https://Corp.example/x?y#z, (www.corp.example) and <https://a.corp.example>."
            ),
            Some(vec!["corp.example", "www.corp.example", "a.corp.example"])
        );
        assert_eq!(
            hosts("log in at evil.example/login now, or Evil.example?x, WWW.Other.example"),
            Some(vec!["evil.example", "evil.example", "www.other.example"])
        );
        assert_eq!(
            hosts("[click](https://evil.example:8443/a) or ftp://files.example."),
            Some(vec!["evil.example", "files.example"])
        );
        assert_eq!(
            hosts("mid://word and ://bare.example"),
            Some(vec!["word", "bare.example"])
        );
        assert_eq!(
            hosts("https://corp.example\\evil.example"),
            Some(vec!["corp.example"])
        );
    }

    #[test]
    fn a_link_a_lenient_parser_could_read_otherwise_is_unreadable() {
        for text in [
            "https://corp.example@evil.example/",
            "https://corp.example\"@evil.example/",
            "https://corp.example<@evil.example>",
            "www.corp.example@evil.example",
            "https://bаnk.example/",
            "https://corp.example%2e@evil.example",
            "https://corp.example:http/",
            "https:///path",
            "https://[::1]/",
        ] {
            assert_eq!(hosts(text), None, "{text:?}");
        }
    }

    #[test]
    fn every_address_is_found() {
        assert_eq!(
            email_addresses("Write to Ana@Corp.example, or (eve@evil.example). @ alone"),
            Some(vec![
                "ana@corp.example".to_owned(),
                "eve@evil.example".to_owned()
            ])
        );
        assert_eq!(email_addresses("\"eve@evil.example\"@corp.example"), None);
        assert_eq!(email_addresses("ping @alice, or @ alone"), Some(vec![]));
        assert_eq!(email_addresses("boss@corp"), None);
        assert_eq!(email_addresses("boss@corp..example"), None);
        assert_eq!(email_addresses("no address"), Some(vec![]));
    }
}
