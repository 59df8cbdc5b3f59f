//! The `orchestration!` macro of **orch**. This crate is deliberately thin: it parses
//! the macro input and maps diagnostics to spans; reading, checking and code generation
//! are `orch-codegen`'s, shared with build.rs and the CLI.
//!
//! File form: compile a template file (path relative to `CARGO_MANIFEST_DIR`) into a
//! module, exactly as build.rs would:
//!
//! ```ignore
//! orch_macros::orchestration!(file = "agents/cognitive-reasoner/template.json");
//! // warnings are errors in a macro unless allowed:
//! orch_macros::orchestration!(file = "agents/dr-house.json", allow = [shadowed_step, sequence_never_completes]);
//! use cognitive_reasoner::{Session, Step, Tool};
//! ```
//!
//! Errors are `compile_error!`s on the path literal whose message names
//! `file:line:column` of the offending JSON value. Editing the file rebuilds the crate:
//! the expansion contains `include_bytes!` of it, which cargo tracks.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use orch_codegen::diagnostic::{location, Severity};
use orch_codegen::emit::{self, Origin};
use orch_codegen::model::{Span as ModelSpan, Spanned};
use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, Ident, LitStr, Token};

/// `file = "path"` [`, allow = [lint, ...]`]
struct FileInput {
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

/// Compiles an orchestration template into a module (see the crate docs).
#[proc_macro]
pub fn orchestration(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = syn::parse_macro_input!(input as FileInput);
    match expand_file(&input) {
        Ok(tokens) | Err(tokens) => tokens.into(),
    }
}

fn expand_file(input: &FileInput) -> Result<TokenStream, TokenStream> {
    let lit_span = input.path.span();
    let rel = input.path.value();
    let base = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let full = std::path::Path::new(&base).join(&rel);
    let fail = |msg: String| syn::Error::new(lit_span, msg).to_compile_error();
    let source = std::fs::read_to_string(&full)
        .map_err(|e| fail(format!("cannot read `{}`: {e}", full.display())))?;
    let fallback = orch_codegen::fallback_name(&full);
    let (template, mut diags) = orch_codegen::json::parse(&source, fallback.as_deref());
    let mut ir = None;
    if let Some(mut t) = template {
        t.allow = input
            .allow
            .iter()
            .map(|i| Spanned::new(i.to_string(), ModelSpan::default()))
            .collect();
        let (checked, more) = orch_codegen::check::check(&t);
        diags.extend(more);
        ir = checked;
    }
    // Stable Rust has no macro warnings: every remaining warning is an error here.
    let mut errors: Option<syn::Error> = None;
    for d in &diags {
        let at = match d.span {
            Some(s) => location(&rel, &source, s),
            None => rel.clone(),
        };
        let mut msg = format!("{at}: {}[{}]: {}", d.severity().as_str(), d.code, d.message);
        if let Some(help) = &d.help {
            msg.push_str(&format!("\nhelp: {help}"));
        }
        if d.severity() == Severity::Warning {
            msg.push_str(&format!(
                "\nnote: warnings are errors in `orchestration!`; allow it with `allow = [{}]`",
                d.code.name()
            ));
        }
        let e = syn::Error::new(lit_span, msg);
        match &mut errors {
            Some(all) => all.combine(e),
            None => errors = Some(e),
        }
    }
    if let Some(e) = errors {
        return Err(e.to_compile_error());
    }
    let Some(ir) = ir else {
        return Err(fail("the template could not be compiled".into()));
    };
    let module = emit::module(&ir, Origin::File(&rel));
    let track = full.display().to_string();
    let name = syn::Ident::new(&ir.module, proc_macro2::Span::call_site());
    Ok(quote! {
        #module
        // Makes cargo rebuild this crate when the template changes.
        const _: () = {
            #[allow(unused)]
            const TEMPLATE: &[u8] = include_bytes!(#track);
            let _ = #name::NAME;
        };
    })
}
