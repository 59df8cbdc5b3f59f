//! Form fields (`application/x-www-form-urlencoded`, as a browser sends a form's body
//! and a `GET` form's query), decoded without trusting them.

/// The value of `name` in a form's `application/x-www-form-urlencoded` body.
pub(crate) fn form_value(body: &[u8], name: &str) -> Option<String> {
    body.split(|&b| b == b'&').find_map(|pair| {
        let mut parts = pair.splitn(2, |&b| b == b'=');
        let key = decode(parts.next()?)?;
        (key == name)
            .then(|| decode(parts.next().unwrap_or_default()))
            .flatten()
    })
}

/// Percent-decodes a form field (`+` is a space); `None` when it is not UTF-8.
fn decode(bytes: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'+' => out.push(b' '),
            b'%' => {
                let escaped = bytes
                    .get(at + 1..at + 3)
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok());
                match escaped {
                    Some(byte) => {
                        out.push(byte);
                        at += 2;
                    }
                    // Not an escape: kept as written.
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded_and_bad_ones_are_none() {
        let body = b"csrf=ab%2Fc&decision=approve&reason=too+much%21";
        assert_eq!(form_value(body, "reason").as_deref(), Some("too much!"));
        assert_eq!(form_value(body, "csrf").as_deref(), Some("ab/c"));
        assert_eq!(form_value(body, "missing"), None);
        assert_eq!(form_value(b"reason=%ff", "reason"), None);
        assert_eq!(form_value(b"reason=%2", "reason").as_deref(), Some("%2"));
        assert_eq!(
            form_value(b"reason=100%", "reason").as_deref(),
            Some("100%")
        );
    }
}
