//! The file form: `orchestration!(file = "path", allow = [lint, ...])`.

use crate::diagnostic::location;
use crate::emit::{self, Origin};
use crate::model::{Span as ModelSpan, Spanned};
use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, Ident, LitStr, Token};

/// `file = "path"` [`, allow = [lint, ...]`]
pub struct FileInput {
    path: LitStr,
    allow: Vec<Ident>,
}

impl Parse for FileInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        if key != "file" {
            return Err(syn::Error::new(
                key.span(),
                "expected `file = \"path/to/template.json\"`",
            ));
        }
        input.parse::<Token![=]>()?;
        let path: LitStr = input.parse()?;
        let mut allow = Vec::new();
        while input.parse::<Option<Token![,]>>()?.is_some() {
            if input.is_empty() {
                break;
            }
            let key: Ident = input.parse()?;
            if key != "allow" {
                return Err(syn::Error::new(
                    key.span(),
                    "expected `allow = [lint, ...]`",
                ));
            }
            input.parse::<Token![=]>()?;
            let content;
            bracketed!(content in input);
            let lints: Punctuated<Ident, Token![,]> =
                content.parse_terminated(Ident::parse, Token![,])?;
            allow.extend(lints);
        }
        Ok(FileInput { path, allow })
    }
}

/// Expands the file form: the module, or errors naming `file:line:column`.
pub fn expand(input: &FileInput, rt: &TokenStream) -> TokenStream {
    let lit_span = input.path.span();
    let rel = input.path.value();
    // `ORCH_MANIFEST_DIR` overrides the base (trybuild runs the macro from a copy of
    // the crate under target/, where the templates are not).
    let base = std::env::var("ORCH_MANIFEST_DIR")
        .or_else(|_| std::env::var("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|_| ".".into());
    let full = std::path::Path::new(&base).join(&rel);
    let source = match std::fs::read_to_string(&full) {
        Ok(s) => s,
        Err(e) => {
            return syn::Error::new(lit_span, format!("cannot read `{}`: {e}", full.display()))
                .to_compile_error()
        }
    };
    let fallback = crate::fallback_name(&full);
    let text = crate::diagnostic::SourceText::new(&source);
    let (template, diags) = crate::parse::json::parse(&source, fallback.as_deref());
    let Some(mut t) = template else {
        return super::to_errors(
            &diags,
            |d| d.span.map(|s| location(&rel, &text, s)),
            |_| lit_span,
            super::Form::File,
        )
        .map(|e| e.to_compile_error())
        .unwrap_or_default();
    };
    // The allow list's names are tokens of the macro input: `Span::Token(i)` is the
    // i-th ident of `allow = [...]`; every other span is bytes of the file.
    t.allow = input
        .allow
        .iter()
        .enumerate()
        .map(|(i, id)| Spanned::new(id.to_string(), ModelSpan::Token(i)))
        .collect();
    let compiled = crate::compile(
        crate::Source::Template {
            template: Box::new(t),
            diagnostics: diags,
        },
        crate::CheckOptions::default(),
    );
    let allow_spans: Vec<proc_macro2::Span> = input.allow.iter().map(Ident::span).collect();
    let span_of = |s: ModelSpan| match s {
        ModelSpan::Token(i) => allow_spans.get(i).copied().unwrap_or(lit_span),
        ModelSpan::Bytes { .. } => lit_span,
    };
    let loc = |d: &crate::Diagnostic| match d.span {
        Some(s @ ModelSpan::Bytes { .. }) => Some(location(&rel, &text, s)),
        _ => None,
    };
    let errors = super::to_errors(&compiled.diagnostics, loc, span_of, super::Form::File)
        .map(|e| e.to_compile_error());
    let module = emit::module(&compiled, Origin::File(&rel), rt);
    let track = full.display().to_string();
    quote! {
        #errors
        #module
        // Makes cargo rebuild this crate when the template changes.
        const _: &[u8] = include_bytes!(#track);
    }
}
