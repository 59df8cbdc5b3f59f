//! Rules on arguments in the DSL (semantics §16): `rule NAME: TOOL require P;`,
//! `approve [NAME:] TOOL when P;`, and their predicates. Shapes only — pointers, numbers,
//! regexes and bounds are judged by `check::rules`, the same for both front ends.

use super::tokens::{comma_separated, semi, Lowering};
use crate::check::suggest::Suggester;
use crate::model::{
    ArgRule, ArgRuleKind, ArgTest, BudgetDecl, Origin, Predicate, PredicateNode, ResultNumber,
    Scalar, Spanned,
};
use crate::parse::ticked;
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{parenthesized, Ident, LitInt, LitStr, Token};

/// The DSL's test keywords, in the order the docs list them (the JSON keys in
/// snake case).
pub(super) const TESTS: [&str; 15] = [
    "exists",
    "equals",
    "one_of",
    "glob",
    "regex",
    "range",
    "length",
    "host_in",
    "hostname_in",
    "addresses_in",
    "links_in",
    "emails_in",
    "each",
    "in_result",
    "from",
];

/// An error at `span` naming the unexpected `word`, what was `expected`, and the closest
/// of `known` when one is close.
pub(super) fn unexpected(span: Span, word: &str, expected: &str, known: &[&str]) -> syn::Error {
    let hint = Suggester::new(known.iter().copied())
        .closest(word)
        .map(|k| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default();
    syn::Error::new(span, format!("unexpected `{word}`{hint}: {expected}"))
}

/// `keyword PREDICATE;` ending a rule, or an error that says `usage`.
pub(super) fn keyword_and_predicate(
    low: &mut Lowering,
    input: ParseStream,
    keyword: &str,
    usage: &str,
) -> syn::Result<Predicate> {
    let kw = Ident::parse_any(input)?;
    if kw != keyword {
        return Err(unexpected(kw.span(), &kw.to_string(), usage, &[keyword]));
    }
    let predicate = parse_predicate(low, input)?;
    semi(input)?;
    Ok(predicate)
}

/// `rule NAME: TOOL require PREDICATE;` (semantics §16).
pub(super) fn parse_rule(low: &mut Lowering, input: ParseStream) -> syn::Result<ArgRule> {
    let name = low.name(input)?;
    input.parse::<Token![:]>()?;
    let tool = low.name(input)?;
    let predicate = keyword_and_predicate(
        low,
        input,
        "require",
        "a rule is `rule NAME: TOOL require PREDICATE;`",
    )?;
    Ok(ArgRule {
        span: name.span,
        name: Some(name),
        tool,
        kind: ArgRuleKind::Require,
        predicate,
    })
}

/// After `approve`: `[NAME:] TOOL when PREDICATE;`, a conditional approval.
pub(super) fn parse_conditional_approve(
    low: &mut Lowering,
    input: ParseStream,
) -> syn::Result<ArgRule> {
    let first = low.name(input)?;
    let (name, tool) = if input.peek(Token![:]) {
        input.parse::<Token![:]>()?;
        (Some(first), low.name(input)?)
    } else {
        (None, first)
    };
    let predicate = keyword_and_predicate(
        low,
        input,
        "when",
        "a conditional approval is `approve [NAME:] TOOL when PREDICATE;` (a list is `approve: [..];`)",
    )?;
    Ok(ArgRule {
        span: name.as_ref().map_or(tool.span, |n| n.span),
        name,
        tool,
        kind: ArgRuleKind::ApproveWhen,
        predicate,
    })
}

/// A predicate: `all(P, ..)`, `any(P, ..)`, `not(P)`, or a test of the value at a JSON
/// pointer, `"/path" TEST` (without the pointer: the whole value, `""`).
pub(super) fn parse_predicate(low: &mut Lowering, input: ParseStream) -> syn::Result<Predicate> {
    if input.peek(LitStr) {
        let path: LitStr = input.parse()?;
        let path = low.spanned(path.value(), path.span());
        let test = parse_test(low, input)?;
        return Ok(Predicate {
            span: path.span,
            node: PredicateNode::Test { path, test },
        });
    }
    if !input.peek(Ident::peek_any) {
        return Err(input.error(
            "expected a predicate: `all(..)`, `any(..)`, `not(..)`, or a JSON pointer and a test, e.g. `\"/amount\" range(max = 100)`",
        ));
    }
    let fork = input.fork();
    let kw = Ident::parse_any(&fork)?;
    let word = kw.to_string();
    let span = low.at(kw.span());
    match word.as_str() {
        "all" | "any" | "not" => {
            Ident::parse_any(input)?;
            let args;
            parenthesized!(args in input);
            let mut items = comma_separated(&args, |a| parse_predicate(low, a))?;
            let node = match word.as_str() {
                "all" => PredicateNode::All(items),
                "any" => PredicateNode::Any(items),
                _ => {
                    if items.len() != 1 {
                        return Err(syn::Error::new(
                            kw.span(),
                            format!("`not` takes one predicate, not {}", items.len()),
                        ));
                    }
                    PredicateNode::Not(Box::new(items.remove(0)))
                }
            };
            Ok(Predicate { span, node })
        }
        "budget" => {
            Ident::parse_any(input)?;
            let args;
            let paren = parenthesized!(args in input);
            let whole = low.at(paren.span.join());
            let name = low.name(&args)?;
            let (mut min, mut max) = (None, None);
            if args.parse::<Option<Token![,]>>()?.is_some() {
                for (key, value) in bounds(&args, "budget")? {
                    let text = number_text(&value)?;
                    let slot = if key == "min" { &mut min } else { &mut max };
                    *slot = Some(low.spanned(text, value.span()));
                }
            }
            if !args.is_empty() {
                return Err(args.error("unexpected tokens in `budget(..)`"));
            }
            if min.is_none() && max.is_none() {
                return Err(syn::Error::new(
                    kw.span(),
                    "a budget test bounds the total: `budget(NAME, max = N)`, `budget(NAME, min = N)` or both",
                ));
            }
            Ok(Predicate {
                span,
                node: PredicateNode::Test {
                    path: Spanned::new(String::new(), span),
                    test: ArgTest::Budget {
                        span: whole,
                        name,
                        min,
                        max,
                    },
                },
            })
        }
        w if TESTS.contains(&w) => {
            let path = Spanned::new(String::new(), span);
            let test = parse_test(low, input)?;
            Ok(Predicate {
                span,
                node: PredicateNode::Test { path, test },
            })
        }
        other => {
            let mut known = vec!["all", "any", "not", "budget"];
            known.extend(TESTS);
            Err(unexpected(
                kw.span(),
                other,
                "a predicate is `all(..)`, `any(..)`, `not(..)`, or a JSON pointer string and a test",
                &known,
            ))
        }
    }
}

/// A test: `exists`, `exists(false)`, `equals(V)`, `one_of(V, ..)`, `glob("..")`,
/// `regex("..")`, `range(min = N, max = N)`, `length(min = N, max = N)`,
/// `host_in("..", ..)`, `hostname_in("..", ..)`, `addresses_in("..", ..)`, `links_in("..", ..)`, `emails_in("..", ..)`, `each(PREDICATE)`, `in_result(TOOL, "/pointer")`.
pub(super) fn parse_test(low: &mut Lowering, input: ParseStream) -> syn::Result<ArgTest> {
    let kw = Ident::parse_any(input)?;
    let word = kw.to_string();
    if word == "exists" && !input.peek(syn::token::Paren) {
        return Ok(ArgTest::Exists(true));
    }
    if !TESTS.contains(&word.as_str()) {
        return Err(unexpected(
            kw.span(),
            &word,
            &format!("a test is one of {}", ticked(&TESTS)),
            &TESTS,
        ));
    }
    let args;
    let paren = parenthesized!(args in input);
    let whole = low.at(paren.span.join());
    let test = match word.as_str() {
        "exists" => {
            let b: syn::LitBool = args.parse()?;
            ArgTest::Exists(b.value)
        }
        "equals" => ArgTest::Equals(parse_scalar(low, &args)?),
        "one_of" => {
            let items = comma_separated(&args, |a| parse_scalar(low, a))?;
            ArgTest::OneOf(Spanned::new(items, whole))
        }
        "glob" | "regex" => {
            let s: LitStr = args.parse()?;
            let s = low.spanned(s.value(), s.span());
            if word == "glob" {
                ArgTest::Glob(s)
            } else {
                ArgTest::Regex(s)
            }
        }
        "host_in" | "hostname_in" | "addresses_in" | "links_in" | "emails_in" => {
            let globs = comma_separated(&args, |a| {
                let s: LitStr = a.parse()?;
                Ok(low.spanned(s.value(), s.span()))
            })?;
            let globs = Spanned::new(globs, whole);
            match word.as_str() {
                "host_in" => ArgTest::HostIn(globs),
                "hostname_in" => ArgTest::HostnameIn(globs),
                "links_in" => ArgTest::LinksIn(globs),
                "emails_in" => ArgTest::EmailsIn(globs),
                _ => ArgTest::AddressesIn(globs),
            }
        }
        "each" => ArgTest::Each(Box::new(parse_predicate(low, &args)?)),
        "in_result" => {
            let tool = low.name(&args)?;
            let path = if args.parse::<Option<Token![,]>>()?.is_some() && !args.is_empty() {
                let s: LitStr = args.parse()?;
                low.spanned(s.value(), s.span())
            } else {
                Spanned::new(String::new(), whole)
            };
            ArgTest::InResult {
                span: whole,
                tool,
                path,
            }
        }
        "from" => ArgTest::From(Spanned::new(parse_origins(low, &args)?, whole)),
        "range" => parse_range(low, &args, whole, &word)?,
        _ => {
            // "length"
            let (mut min, mut max) = (None, None);
            for (key, value) in bounds(&args, &word)? {
                let Bound::Int { lit, negative } = &value else {
                    return Err(syn::Error::new(
                        value.span(),
                        "a length is a non-negative integer",
                    ));
                };
                if *negative {
                    return Err(syn::Error::new(
                        value.span(),
                        "a length is a non-negative integer",
                    ));
                }
                let n = lit.base10_parse::<u64>()?;
                let slot = if key == "min" { &mut min } else { &mut max };
                *slot = Some(low.spanned(n, lit.span()));
            }
            ArgTest::Length {
                span: whole,
                min,
                max,
            }
        }
    };
    if !args.is_empty() {
        return Err(args.error(format!("unexpected tokens in `{word}(..)`")));
    }
    Ok(test)
}

/// After `budget`: `NAME: TOOL` and its clauses, each at most once, in any order —
/// `sum "/pointer"`, `where PREDICATE`, `per run|step`, `within "24h"`, `events N` —
/// then `;` (semantics §17).
pub(super) fn parse_budget(low: &mut Lowering, input: ParseStream) -> syn::Result<BudgetDecl> {
    const CLAUSES: [&str; 6] = ["sum", "where", "per", "within", "events", "counts"];
    let name = low.name(input)?;
    input.parse::<Token![:]>()?;
    let tool = low.name(input)?;
    let mut budget = BudgetDecl {
        span: name.span,
        name,
        tool,
        sum: None,
        when: None,
        per: None,
        within: None,
        events: None,
        counts: None,
    };
    let mut seen: Vec<String> = Vec::new();
    while !input.peek(Token![;]) && !input.peek(Token![,]) && !input.is_empty() {
        let kw = Ident::parse_any(input)?;
        let word = kw.to_string();
        if !CLAUSES.contains(&word.as_str()) {
            return Err(unexpected(
                kw.span(),
                &word,
                "a budget is `budget NAME: TOOL [sum \"/pointer\"] [where PREDICATE] [per run|step|message] [within \"24h\"] [events N] [counts admitted|refused];`",
                &CLAUSES,
            ));
        }
        if seen.contains(&word) {
            return Err(syn::Error::new(
                kw.span(),
                format!("`{word}` is given twice in a budget"),
            ));
        }
        seen.push(word.clone());
        match word.as_str() {
            "sum" | "within" => {
                let s: LitStr = input.parse()?;
                let s = Some(low.spanned(s.value(), s.span()));
                if word == "sum" {
                    budget.sum = s;
                } else {
                    budget.within = s;
                }
            }
            "where" => budget.when = Some(parse_predicate(low, input)?),
            "per" | "counts" => {
                let word_after = Ident::parse_any(input)?;
                let value = Some(low.spanned(word_after.to_string(), word_after.span()));
                if word == "per" {
                    budget.per = value;
                } else {
                    budget.counts = value;
                }
            }
            _ => {
                let n: LitInt = input.parse()?;
                budget.events = Some(low.spanned(n.base10_parse::<u64>()?, n.span()));
            }
        }
    }
    semi(input)?;
    Ok(budget)
}

/// `range(min = N, max = N)`, a bound possibly `result(TOOL, "/pointer")`.
fn parse_range(
    low: &mut Lowering,
    args: ParseStream,
    whole: crate::model::Span,
    word: &str,
) -> syn::Result<ArgTest> {
    let (mut min, mut max) = (None, None);
    let (mut min_result, mut max_result) = (None, None);
    for (key, value) in bounds(args, word)? {
        if let Bound::Result { kw, tool, path } = &value {
            let r = ResultNumber {
                span: low.at(kw.span()),
                tool: low.spanned(tool.0.clone(), tool.1),
                path: low.spanned(path.value(), path.span()),
            };
            *(if key == "min" {
                &mut min_result
            } else {
                &mut max_result
            }) = Some(Box::new(r));
            continue;
        }
        let text = number_text(&value)?;
        let slot = if key == "min" { &mut min } else { &mut max };
        *slot = Some(low.spanned(text, value.span()));
    }
    Ok(ArgTest::Range {
        span: whole,
        min,
        max,
        min_result,
        max_result,
    })
}

/// A number literal in a rule, with its sign — or, in a `range`, the number a tool's
/// newest result held: `result(TOOL, "/pointer")`.
pub(super) enum Bound {
    Int {
        lit: LitInt,
        negative: bool,
    },
    Float {
        lit: syn::LitFloat,
        negative: bool,
    },
    Result {
        kw: Ident,
        tool: (String, Span),
        path: LitStr,
    },
}

impl Bound {
    pub(super) fn span(&self) -> Span {
        match self {
            Bound::Int { lit, .. } => lit.span(),
            Bound::Float { lit, .. } => lit.span(),
            Bound::Result { kw, .. } => kw.span(),
        }
    }

    fn parse(input: ParseStream) -> syn::Result<Bound> {
        if input.peek(Ident) && !input.peek2(Token![=]) {
            let kw: Ident = input.parse()?;
            if kw != "result" {
                return Err(syn::Error::new(
                    kw.span(),
                    "expected a number, or `result(TOOL, \"/pointer\")`",
                ));
            }
            let args;
            parenthesized!(args in input);
            let tool = if args.peek(LitStr) {
                let s: LitStr = args.parse()?;
                (s.value(), s.span())
            } else {
                let i = Ident::parse_any(&args)?;
                (i.to_string(), i.span())
            };
            args.parse::<Token![,]>()?;
            let path: LitStr = args.parse()?;
            if !args.is_empty() {
                return Err(args.error("`result` takes a tool and a JSON pointer"));
            }
            return Ok(Bound::Result { kw, tool, path });
        }
        let negative = input.parse::<Option<Token![-]>>()?.is_some();
        if input.peek(LitInt) {
            Ok(Bound::Int {
                lit: input.parse()?,
                negative,
            })
        } else if input.peek(syn::LitFloat) {
            Ok(Bound::Float {
                lit: input.parse()?,
                negative,
            })
        } else {
            Err(input.error("expected a number"))
        }
    }
}

/// A number's text as written (a JSON number; `check` judges it, so `1_000` or `10u8`
/// is an error there, at this token).
pub(super) fn number_text(b: &Bound) -> syn::Result<String> {
    let (sign, text) = match b {
        Bound::Int { lit, negative } => (*negative, lit.to_string()),
        Bound::Float { lit, negative } => (*negative, lit.to_string()),
        Bound::Result { kw, .. } => return Err(syn::Error::new(
            kw.span(),
            "only a `range` of an argument compares with a result's number; this bound is a number",
        )),
    };
    Ok(if sign { format!("-{text}") } else { text })
}

/// `min = N, max = N` (either, both, in any order, each once).
pub(super) fn bounds(args: ParseStream, what: &str) -> syn::Result<Vec<(String, Bound)>> {
    let mut out: Vec<(String, Bound)> = Vec::new();
    comma_separated(args, |args| {
        let key: Ident = args.parse()?;
        let k = key.to_string();
        if k != "min" && k != "max" {
            return Err(unexpected(
                key.span(),
                &k,
                &format!("`{what}` takes `min = N` and `max = N`"),
                &["min", "max"],
            ));
        }
        if out.iter().any(|(seen, _)| *seen == k) {
            return Err(syn::Error::new(
                key.span(),
                format!("`{k}` is given twice in `{what}`"),
            ));
        }
        args.parse::<Token![=]>()?;
        out.push((k, Bound::parse(args)?));
        Ok(())
    })?;
    Ok(out)
}

/// A JSON scalar: a string, a number (with its sign), `true`, `false` or `null`.
pub(super) fn parse_scalar(low: &mut Lowering, input: ParseStream) -> syn::Result<Spanned<Scalar>> {
    if input.peek(LitStr) {
        let s: LitStr = input.parse()?;
        return Ok(low.spanned(Scalar::String(s.value()), s.span()));
    }
    if input.peek(syn::LitBool) {
        let b: syn::LitBool = input.parse()?;
        return Ok(low.spanned(Scalar::Bool(b.value), b.span));
    }
    if input.peek(Ident::peek_any) {
        let i = Ident::parse_any(input)?;
        if i == "null" {
            return Ok(low.spanned(Scalar::Null, i.span()));
        }
        return Err(syn::Error::new(
            i.span(),
            format!("unexpected `{i}`: expected a string, a number, `true`, `false` or `null`"),
        ));
    }
    let b = Bound::parse(input)?;
    let span = b.span();
    Ok(low.spanned(Scalar::Number(number_text(&b)?), span))
}

/// The origins of a `from(..)` test: `user`, `trusted`, `result(TOOL, "/p")`,
/// `arguments(TOOL, "/p")`.
fn parse_origins(low: &mut Lowering, args: ParseStream) -> syn::Result<Vec<Spanned<Origin>>> {
    let mut origins = Vec::new();
    while !args.is_empty() {
        let word = Ident::parse_any(args)?;
        let span = low.at(word.span());
        let origin = match word.to_string().as_str() {
            "user" => Origin::User,
            "trusted" => Origin::Trusted,
            which @ ("result" | "arguments") => {
                let inner;
                parenthesized!(inner in args);
                let tool = low.name(&inner)?;
                let path = if inner.parse::<Option<Token![,]>>()?.is_some()
                    && !inner.is_empty()
                {
                    let s: LitStr = inner.parse()?;
                    low.spanned(s.value(), s.span())
                } else {
                    Spanned::new(String::new(), span)
                };
                if which == "result" {
                    Origin::Result { tool, path }
                } else {
                    Origin::Arguments { tool, path }
                }
            }
            other => {
                return Err(unexpected(
                    word.span(),
                    other,
                    "an origin is `user`, `trusted`, `result(TOOL, \"/path\")` or `arguments(TOOL, \"/path\")`",
                    &["user", "trusted", "result", "arguments"],
                ))
            }
        };
        origins.push(Spanned::new(origin, span));
        if args.parse::<Option<Token![,]>>()?.is_none() {
            break;
        }
    }
    Ok(origins)
}
