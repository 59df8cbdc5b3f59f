//! The two scalar readings rules need beyond text: JSON numbers compared exactly, as
//! the decimals they are written as (never through a float), and the host of a URL.

use core::cmp::Ordering;

/// A JSON number as a decimal: sign, significant digits (no leading or trailing zeros)
/// and the power of ten of the first digit.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    /// The value is `0.d1d2d3… × 10^exponent` (meaningless when `digits` is empty: zero).
    exponent: i64,
}

/// Exponents are clamped here: beyond it, every number compares by sign and exponent
/// alone anyway (the argument text is at most 1 MiB).
const EXPONENT_LIMIT: i64 = 1 << 40;

impl Decimal {
    /// Reads JSON number text (the reader or the compiler checked its grammar).
    fn parse(text: &str) -> Option<Decimal> {
        let b = text.as_bytes();
        let (negative, b) = match b.first() {
            Some(b'-') => (true, &b[1..]),
            _ => (false, b),
        };
        let int_end = b
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(b.len());
        let (int, rest) = b.split_at(int_end);
        let (frac, rest) = match rest.first() {
            Some(b'.') => {
                let rest = &rest[1..];
                let end = rest
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                rest.split_at(end)
            }
            _ => (&rest[..0], rest),
        };
        let mut exp: i64 = 0;
        if let Some(b'e' | b'E') = rest.first() {
            let (neg, digits) = match rest.get(1) {
                Some(b'-') => (true, &rest[2..]),
                Some(b'+') => (false, &rest[2..]),
                _ => (false, &rest[1..]),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            for d in digits {
                exp = (exp * 10 + i64::from(d - b'0')).min(EXPONENT_LIMIT);
            }
            if neg {
                exp = -exp;
            }
        } else if !rest.is_empty() || int.is_empty() {
            return None;
        }
        let all: Vec<u8> = int.iter().chain(frac).map(|d| d - b'0').collect();
        let lead = all.iter().take_while(|&&d| d == 0).count();
        let mut digits = all[lead..].to_vec();
        while digits.last() == Some(&0) {
            digits.pop();
        }
        let exponent = int.len() as i64 - lead as i64 + exp;
        Some(Decimal {
            negative: negative && !digits.is_empty(),
            digits,
            exponent,
        })
    }

    fn cmp_magnitude(&self, other: &Decimal) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self
                .exponent
                .cmp(&other.exponent)
                .then_with(|| self.digits.cmp(&other.digits)),
        }
    }
}

/// A JSON number's sign, significant digits (no leading or trailing zeros; empty for
/// zero) and the power of ten of the first digit: the value is `0.d1d2… × 10^exponent`.
#[cfg(test)]
pub(crate) fn decimal_parts(text: &str) -> Option<(bool, Vec<u8>, i64)> {
    let d = Decimal::parse(text)?;
    Some((d.negative, d.digits, d.exponent))
}

/// Compares two JSON numbers exactly (`1.0` equals `1` and `1e0`;
/// `12345678901234567890123` is less than `12345678901234567890124`). `None` when one is
/// not a number.
pub fn compare_numbers(a: &str, b: &str) -> Option<Ordering> {
    let (a, b) = (Decimal::parse(a)?, Decimal::parse(b)?);
    Some(match (a.negative, b.negative) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => a.cmp_magnitude(&b),
        (true, true) => b.cmp_magnitude(&a),
    })
}

/// A number's exact value as text, the same for every way of writing it (`1`, `1.0`,
/// `10e-1` are all `1e1`; zero is `0`): `-`, the significant digits, `e` and the power
/// of ten of the first digit. `None` when `text` is not a number.
pub(crate) fn decimal_key(text: &str) -> Option<String> {
    let d = Decimal::parse(text)?;
    if d.digits.is_empty() {
        return Some("0".to_owned());
    }
    let mut out = String::with_capacity(d.digits.len() + 8);
    if d.negative {
        out.push('-');
    }
    out.extend(d.digits.iter().map(|x| char::from(b'0' + x)));
    out.push('e');
    out.push_str(&d.exponent.to_string());
    Some(out)
}

/// Is `text` a JSON number (RFC 8259 grammar)?
pub fn is_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// The host of an absolute URL (`scheme://[userinfo@]host[:port][/…]`), lowercased and
/// without a trailing dot — read strictly: `None` for anything a browser or an HTTP
/// library might read another host from (a backslash, whitespace or a control
/// character anywhere, a percent escape or a non-ASCII character in the host, no `//`
/// after the scheme, a port that is not digits). The host is what follows the *last*
/// `@` of the authority, as in the WHATWG URL standard: `https://bank.com@evil.com/` is
/// `evil.com`.
pub fn url_host(url: &str) -> Option<String> {
    if url
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return None;
    }
    let (scheme, rest) = url.split_once("://")?;
    let mut sc = scheme.bytes();
    if !sc.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !sc.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        return None;
    }
    authority_host(rest)
}

/// The host of what follows `scheme://` (or a host name written alone): the authority
/// ends at the first `/`, `?` or `#`; the host follows its *last* `@`. `None` for a
/// port that is not digits, or a host that is empty, not plain ASCII (letters, digits,
/// `-`, `.`, `_`) or a bracketed address of anything but hex digits, `:` and `.`.
fn authority_host(rest: &str) -> Option<String> {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (inside, after) = v6.split_once(']')?;
        if inside.is_empty()
            || !inside
                .bytes()
                .all(|c| c.is_ascii_hexdigit() || c == b':' || c == b'.')
        {
            return None;
        }
        (&host_port[..inside.len() + 2], after.strip_prefix(':'))
    } else {
        match host_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if let Some(port) = port {
        if !port.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let plain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_');
    if host.is_empty() || !(host.starts_with('[') || host.bytes().all(plain)) {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

/// The host a string names, written alone (`www.example.com`, `example.com:8080/path`)
/// or as an absolute URL (read as [`url_host`] reads it), lowercased and without a
/// trailing dot: the host a tool that puts `https://` before a bare name would reach.
/// Read as strictly as [`url_host`]: `None` for a backslash, whitespace or a control
/// character anywhere, a port that is not digits, or a host that is not plain ASCII —
/// so `example.com\@evil.example` and `https:evil.example` name no host. What comes
/// before an `@` is read as a URL's userinfo is: `good.example@evil.example` names
/// `evil.example`.
pub fn host_name(value: &str) -> Option<String> {
    if value.contains("://") {
        return url_host(value);
    }
    if value
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return None;
    }
    authority_host(value)
}

/// The e-mail addresses of a list written as text — plain `local@domain` addresses
/// separated by commas, semicolons or whitespace — lowercased; `None` when the text is
/// anything else (a display name, quotes, angle brackets, a comment, an address with two
/// `@` or none, an empty list). The local part is letters, digits and
/// ``.!#$%&'*+/=?^_`{|}~-``; the domain is labels of letters, digits and `-` joined by
/// single dots. So `"eve@evil.example, boss@corp.example"` is two addresses, and
/// `"Boss <boss@corp.example>"` is not a list this function reads.
pub fn address_list(value: &str) -> Option<Vec<String>> {
    let local = |c: u8| c.is_ascii_alphanumeric() || b".!#$%&'*+/=?^_`{|}~-".contains(&c);
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let mut out = Vec::new();
    for token in value.split(|c: char| c == ',' || c == ';' || c.is_whitespace()) {
        if token.is_empty() {
            continue;
        }
        let (user, domain) = token.split_once('@')?;
        if user.is_empty() || !user.bytes().all(local) || !domain.split('.').all(label) {
            return None;
        }
        out.push(token.to_ascii_lowercase());
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_read_as_strictly_as_urls() {
        for (value, host) in [
            ("www.example.com", Some("www.example.com")),
            ("Example.COM.", Some("example.com")),
            ("example.com:8080/a?b#c", Some("example.com")),
            ("example.com/path@evil.example", Some("example.com")),
            ("https://example.com/x", Some("example.com")),
            ("https://good.example@evil.example/", Some("evil.example")),
            ("good.example@evil.example", Some("evil.example")),
            ("[::1]:80", Some("[::1]")),
            ("example.com\\@evil.example", None),
            ("good.example%2F@evil.example", Some("evil.example")),
            ("https:evil.example", None),
            ("example.com:http", None),
            ("exa mple.com", None),
            ("exämple.com", None),
            ("", None),
            ("/path", None),
            ("//evil.example", None),
            ("?q", None),
        ] {
            assert_eq!(host_name(value).as_deref(), host, "{value:?}");
        }
    }

    #[test]
    fn address_lists_are_plain_addresses_or_nothing() {
        assert_eq!(
            address_list("eve@evil.example, Boss@Corp.example;x@y.z  w@v.u").unwrap(),
            ["eve@evil.example", "boss@corp.example", "x@y.z", "w@v.u"]
        );
        for value in [
            "",
            " , ; ",
            "Boss <boss@corp.example>",
            "\"eve@evil\"@corp.example",
            "boss@corp.example (eve@evil.example)",
            "eve@evil.example@corp.example",
            "boss",
            "@corp.example",
            "boss@",
            "boss@corp..example",
            "boss@-corp.example",
            "boss@corp.example.",
            "boss@cörp.example",
        ] {
            assert_eq!(address_list(value), None, "{value:?}");
        }
    }

    #[test]
    fn numbers_compare_exactly() {
        use Ordering::*;
        for (a, b, o) in [
            ("1", "1.0", Equal),
            ("1e0", "10e-1", Equal),
            ("0", "-0.0", Equal),
            ("100", "99.999999999999999999999", Greater),
            ("12345678901234567890123", "12345678901234567890124", Less),
            ("-5", "3", Less),
            ("-5", "-3", Less),
            ("1e400", "1e399", Greater),
            ("1e-400", "0", Greater),
            ("0.5", "5e-1", Equal),
            ("1E+2", "100", Equal),
            ("9e99999999999999999999", "1e99999999999999999999", Greater),
        ] {
            assert_eq!(compare_numbers(a, b), Some(o), "{a} vs {b}");
        }
        assert_eq!(compare_numbers("x", "1"), None);
        assert_eq!(decimal_key("1.0"), decimal_key("10e-1"));
        assert_eq!(decimal_key("-0.0").as_deref(), Some("0"));
        assert_ne!(
            decimal_key("12345678901234567890123"),
            decimal_key("12345678901234567890124")
        );
        assert!(is_number("-0.5e+3") && !is_number("01") && !is_number("1.") && !is_number("+1"));
    }

    #[test]
    fn url_hosts_are_read_strictly() {
        for (url, host) in [
            ("https://Example.COM/path", Some("example.com")),
            ("https://example.com.", Some("example.com")),
            ("http://user:pw@bank.com@evil.com:8080/x", Some("evil.com")),
            ("https://bank.com@evil.com/", Some("evil.com")),
            ("https://evil.com#@bank.com", Some("evil.com")),
            ("https://evil.com?@bank.com", Some("evil.com")),
            ("https://[::1]:80/", Some("[::1]")),
            ("https://evil.com\\@bank.com", None),
            ("https://ex%61mple.com/", None),
            ("https://exämple.com/", None),
            ("https:example.com", None),
            ("//example.com", None),
            ("https://example.com:80x/", None),
            ("https:// example.com", None),
            ("https:///path", None),
        ] {
            assert_eq!(url_host(url).as_deref(), host, "{url}");
        }
    }
}
