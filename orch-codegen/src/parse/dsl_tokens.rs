//! Reading the DSL's tokens into spanned values: the span table (`Lowering`), integers,
//! comma-separated items, optional semicolons — what the step and rule parsers share.

use crate::model::{Span as MSpan, Spanned};
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{bracketed, Ident, LitInt, LitStr, Token};

pub(super) struct Lowering {
    pub(super) spans: Vec<Span>,
}

impl Lowering {
    pub(super) fn at(&mut self, span: Span) -> MSpan {
        self.spans.push(span);
        MSpan::Token(self.spans.len() - 1)
    }

    /// The token behind a span this lowering made.
    pub(super) fn token(&self, span: MSpan) -> Span {
        match span {
            MSpan::Token(i) => self.spans.get(i).copied().unwrap_or_else(Span::call_site),
            MSpan::Bytes { .. } => Span::call_site(),
        }
    }

    pub(super) fn spanned<T>(&mut self, value: T, span: Span) -> Spanned<T> {
        let at = self.at(span);
        Spanned::new(value, at)
    }

    /// An identifier or a string: a tool or step name (or a pattern).
    pub(super) fn name(&mut self, input: ParseStream) -> syn::Result<Spanned<String>> {
        if input.peek(LitStr) {
            let s: LitStr = input.parse()?;
            Ok(self.spanned(s.value(), s.span()))
        } else if input.peek(Ident::peek_any) {
            let i = Ident::parse_any(input)?;
            Ok(self.spanned(i.unraw().to_string(), i.span()))
        } else {
            Err(input.error("expected a name: an identifier or a \"string\""))
        }
    }

    pub(super) fn names(&mut self, input: ParseStream) -> syn::Result<Vec<Spanned<String>>> {
        let content;
        bracketed!(content in input);
        comma_separated(&content, |c| self.name(c))
    }

    pub(super) fn colon_list(&mut self, input: ParseStream) -> syn::Result<Vec<Spanned<String>>> {
        input.parse::<Token![:]>()?;
        let list = self.names(input)?;
        semi(input)?;
        Ok(list)
    }
}

/// A non-negative integer literal, with its span: a minus sign or a number past `u64`
/// is an error that says so (not `invalid digit`).
pub(super) fn uint(input: ParseStream, what: &str) -> syn::Result<(u64, Span)> {
    if input.peek(Token![-]) {
        let minus: Token![-] = input.parse()?;
        return Err(syn::Error::new(
            minus.span,
            format!("`{what}` must be a non-negative integer"),
        ));
    }
    let n: LitInt = input.parse()?;
    match n.base10_parse::<u64>() {
        Ok(v) => Ok((v, n.span())),
        Err(_) if n.base10_digits().bytes().all(|b| b.is_ascii_digit()) => Err(syn::Error::new(
            n.span(),
            format!(
                "`{what}` of {} is too large (at most {})",
                n.base10_digits(),
                u64::MAX
            ),
        )),
        Err(e) => Err(e),
    }
}

/// Items parsed by `item` until `input` ends, separated by `,` (a trailing one allowed).
pub(super) fn comma_separated<T>(
    input: ParseStream,
    mut item: impl FnMut(ParseStream) -> syn::Result<T>,
) -> syn::Result<Vec<T>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        out.push(item(input)?);
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(out)
}

/// An optional `;` (or `,`) after an item.
pub(super) fn semi(input: ParseStream) -> syn::Result<()> {
    if input.parse::<Option<Token![;]>>()?.is_none() {
        input.parse::<Option<Token![,]>>()?;
    }
    Ok(())
}
