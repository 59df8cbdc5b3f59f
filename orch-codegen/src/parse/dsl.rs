//! The inline DSL: tokens → `crate::model::Template`, keeping a table of token
//! spans (a model `Span::Token(i)` is `spans[i]`). No rule is checked
//! here beyond the grammar; `crate::check` judges the template.
//!
//! ```text
//! input      := ("#![allow(" lint,* ")]")* doc* vis? "machine" name "{" item* "}"
//!               (each item may end with ";" or ",")
//! item       := "tools" ":" "[" tool,* "]" ";"
//!             | "description" ":" string ";" | "history" ":" int ";" | "max_steps" ":" int ";"
//!             | "approve" ":" "[" tool,* "]" ";" | rule
//!             | "lost" ("retry" | "ran" | "hold") ":" "[" tool,* "]" ";"
//!             | "property" name ":" tool ("after" tool | "at_most" int
//!                                         | ("never" | "approved") ("when" pred)?) ";"
//!             | doc* "default"? "step" name (";" | "{" step_item* "}")
//! step_item  := "description" ":" string ";"
//!             | "when" condition ";"
//!             | "sequence" ":" "[" (tool | "(" tool ("|" tool)* ")"),* "]" ";"
//!             | "allow" ":" "[" tool,* "]" ";" | "deny" ":" "[" tool,* "]" ";"
//!             | "approve" ":" "[" tool,* "]" ";" | rule
//!             | "reset_sequence_on" ":" "[" ident,* "]" ";"
//! rule       := "rule" name ":" tool "require" pred ";"          (semantics §16)
//!             | "approve" (name ":")? tool "when" pred ";"
//! pred       := ("all" | "any") "(" pred,* ")" | "not" "(" pred ")" | string? test
//!               (the string is a JSON pointer; without one, the whole value)
//! test       := "exists" ("(" bool ")")? | "equals" "(" scalar ")" | "one_of" "(" scalar,* ")"
//!             | "glob" "(" string ")" | "regex" "(" string ")" | "host_in" "(" string,* ")"
//!             | ("range" | "length") "(" (("min" | "max") "=" number),* ")"
//!             | "each" "(" pred ")" | "in_result" "(" tool ("," string)? ")"
//! scalar     := string | "-"? number | "true" | "false" | "null"
//! condition  := "sequence_match" | "tool_used" "(" tool ")" | "message_contains" "(" string ")"
//!             | "message_regex" "(" string ")" | "not_recently_used" "(" tool ("," "window" "=" int)? ")"
//! name, tool := ident | string        (strings for names that are not identifiers, and "*" patterns)
//! ```

use super::ticked;
use crate::check::suggest::Suggester;
use crate::model::{
    ArgRule, ArgRuleKind, ArgTest, Condition, ConditionType, Predicate, PredicateNode, Property,
    PropertyRule, Scalar, SequenceEntry, Span as MSpan, Spanned, Step, Template,
};
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{braced, bracketed, parenthesized, Ident, LitInt, LitStr, Token, Visibility};

/// A parsed invocation: the template, its span table, and where the output goes.
pub struct Dsl {
    /// The lowered template.
    pub template: Template,
    /// `spans[i]` is the token behind model span `i`.
    pub spans: Vec<Span>,
    /// `pub`, `pub(crate)`, or nothing.
    pub vis: Visibility,
    /// Outer doc comments on the machine.
    pub docs: Vec<String>,
    /// Where the machine's name is.
    pub name_span: Span,
}

struct Lowering {
    spans: Vec<Span>,
}

impl Lowering {
    fn at(&mut self, span: Span) -> MSpan {
        self.spans.push(span);
        MSpan::Token(self.spans.len() - 1)
    }

    /// The token behind a span this lowering made.
    fn token(&self, span: MSpan) -> Span {
        match span {
            MSpan::Token(i) => self.spans.get(i).copied().unwrap_or_else(Span::call_site),
            MSpan::Bytes { .. } => Span::call_site(),
        }
    }

    fn spanned<T>(&mut self, value: T, span: Span) -> Spanned<T> {
        let at = self.at(span);
        Spanned::new(value, at)
    }

    /// An identifier or a string: a tool or step name (or a pattern).
    fn name(&mut self, input: ParseStream) -> syn::Result<Spanned<String>> {
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

    fn names(&mut self, input: ParseStream) -> syn::Result<Vec<Spanned<String>>> {
        let content;
        bracketed!(content in input);
        comma_separated(&content, |c| self.name(c))
    }

    fn colon_list(&mut self, input: ParseStream) -> syn::Result<Vec<Spanned<String>>> {
        input.parse::<Token![:]>()?;
        let list = self.names(input)?;
        semi(input)?;
        Ok(list)
    }
}

/// A non-negative integer literal, with its span: a minus sign or a number past `u64`
/// is an error that says so (not `invalid digit`).
fn uint(input: ParseStream, what: &str) -> syn::Result<(u64, Span)> {
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
fn comma_separated<T>(
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
fn semi(input: ParseStream) -> syn::Result<()> {
    if input.parse::<Option<Token![;]>>()?.is_none() {
        input.parse::<Option<Token![,]>>()?;
    }
    Ok(())
}

fn doc_lines(attrs: &[syn::Attribute]) -> syn::Result<Vec<String>> {
    let mut out = Vec::new();
    for a in attrs {
        if a.path().is_ident("doc") {
            if let syn::Meta::NameValue(nv) = &a.meta {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    out.push(s.value().trim().to_owned());
                    continue;
                }
            }
        }
        return Err(syn::Error::new_spanned(
            a,
            "only doc comments are allowed here",
        ));
    }
    Ok(out)
}

impl Parse for Dsl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut low = Lowering { spans: Vec::new() };
        let mut template = Template::default();

        // #![allow(lint, ...)]
        for attr in input.call(syn::Attribute::parse_inner)? {
            if !attr.path().is_ident("allow") {
                return Err(syn::Error::new_spanned(
                    attr,
                    "only `#![allow(...)]` is accepted here",
                ));
            }
            attr.parse_nested_meta(|meta| {
                let Some(ident) = meta.path.get_ident() else {
                    return Err(meta.error("expected a warning name, e.g. `unreachable_step`"));
                };
                let s = low.spanned(ident.to_string(), ident.span());
                template.allow.push(s);
                Ok(())
            })?;
        }

        let docs = doc_lines(&input.call(syn::Attribute::parse_outer)?)?;
        let vis: Visibility = input.parse()?;
        let kw: Ident = input.parse()?;
        if kw != "machine" {
            return Err(syn::Error::new(
                kw.span(),
                "expected `machine Name { ... }`",
            ));
        }
        let name = low.name(input)?;
        let name_span = low.token(name.span);
        template.span = name.span;
        template.name = Some(name);

        let body;
        braced!(body in input);
        while !body.is_empty() {
            let attrs = body.call(syn::Attribute::parse_outer)?;
            let key = Ident::parse_any(&body)?;
            match key.to_string().as_str() {
                "tools" => {
                    let list = low.colon_list(&body)?;
                    template.universe.get_or_insert_with(Vec::new).extend(list);
                }
                "description" => {
                    body.parse::<Token![:]>()?;
                    let s: LitStr = body.parse()?;
                    template.description.push(s.value());
                    semi(&body)?;
                }
                "history" => {
                    body.parse::<Token![:]>()?;
                    let (n, span) = uint(&body, "history")?;
                    template.history_length = Some(low.spanned(n, span));
                    semi(&body)?;
                }
                "max_steps" => {
                    body.parse::<Token![:]>()?;
                    let (n, span) = uint(&body, "max_steps")?;
                    template.max_rounds = Some(low.spanned(n, span));
                    semi(&body)?;
                }
                "approve" if body.peek(Token![:]) => {
                    let list = low.colon_list(&body)?;
                    template.approve.extend(list);
                }
                "approve" => template
                    .rules
                    .push(parse_conditional_approve(&mut low, &body)?),
                "rule" => template.rules.push(parse_rule(&mut low, &body)?),
                "lost" => {
                    let which = Ident::parse_any(&body)?;
                    let lost = &mut template.lost_results;
                    let list = match which.to_string().as_str() {
                        "retry" => &mut lost.retry,
                        "ran" => &mut lost.ran,
                        "hold" => &mut lost.hold,
                        other => {
                            return Err(syn::Error::new(
                                which.span(),
                                format!("unexpected `{other}`: a lost result is `lost retry: [..]`, `lost ran: [..]` or `lost hold: [..]`"),
                            ))
                        }
                    };
                    list.extend(low.colon_list(&body)?);
                }
                "property" => template.properties.push(parse_property(&mut low, &body)?),
                "default" | "step" => {
                    let step = parse_step_declaration(&mut low, &body, &key, &attrs)?;
                    template.steps.push(step);
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unexpected `{other}`: expected `tools`, `description`, `history`, `max_steps`, `approve`, `rule`, `lost`, `property`, `step` or `default step`"),
                    ))
                }
            }
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the machine"));
        }
        Ok(Dsl {
            template,
            spans: low.spans,
            vis,
            docs,
            name_span,
        })
    }
}

/// `property NAME: TOOL after TOOL | at_most N | (never | approved) [when PREDICATE];`
fn parse_property(low: &mut Lowering, input: ParseStream) -> syn::Result<Property> {
    let name = low.name(input)?;
    input.parse::<Token![:]>()?;
    let tool = low.name(input)?;
    let rule_kw = Ident::parse_any(input)?;
    let rule = match rule_kw.to_string().as_str() {
        "after" => PropertyRule::After(low.name(input)?),
        "at_most" => {
            let (n, span) = uint(input, "at_most")?;
            PropertyRule::AtMost(low.spanned(n, span))
        }
        "never" => PropertyRule::Never,
        "approved" => PropertyRule::Approved,
        other => {
            return Err(syn::Error::new(
                rule_kw.span(),
                format!("unexpected `{other}`: a property is `TOOL after TOOL`, `TOOL at_most N`, `TOOL never` or `TOOL approved`"),
            ))
        }
    };
    // `never` and `approved` may be narrowed to the calls whose arguments satisfy a
    // predicate (semantics §16).
    let mut when = None;
    if matches!(rule, PropertyRule::Never | PropertyRule::Approved) && input.peek(Ident) {
        let fork = input.fork();
        if fork.parse::<Ident>().is_ok_and(|w| w == "when") {
            input.parse::<Ident>()?;
            when = Some(parse_predicate(low, input)?);
        }
    }
    semi(input)?;
    Ok(Property {
        span: name.span,
        name,
        tool,
        rule,
        when,
    })
}

/// `[default] step NAME;` or `[default] step NAME { ... }`, after `key` (`step` or
/// `default`) and the step's doc comments `attrs`.
fn parse_step_declaration(
    low: &mut Lowering,
    input: ParseStream,
    key: &Ident,
    attrs: &[syn::Attribute],
) -> syn::Result<Step> {
    let is_default = key == "default";
    if is_default {
        let step_kw = Ident::parse_any(input)?;
        if step_kw != "step" {
            return Err(syn::Error::new(
                step_kw.span(),
                "expected `step` after `default`",
            ));
        }
    }
    let mut step = Step::default();
    let docs = doc_lines(attrs)?;
    if !docs.is_empty() {
        step.description = Some(docs.join(" "));
    }
    let name = low.name(input)?;
    step.span = name.span;
    step.conditions_span = name.span;
    if is_default {
        step.is_default = Some(low.spanned(true, key.span()));
    }
    step.name = Some(name);
    if input.peek(syn::token::Brace) {
        let inner;
        braced!(inner in input);
        parse_step(low, &inner, &mut step)?;
    } else {
        input.parse::<Token![;]>()?;
    }
    Ok(step)
}

fn parse_step(low: &mut Lowering, input: ParseStream, step: &mut Step) -> syn::Result<()> {
    let mut first_when = true;
    while !input.is_empty() {
        let key = Ident::parse_any(input)?;
        match key.to_string().as_str() {
            "description" => {
                input.parse::<Token![:]>()?;
                let s: LitStr = input.parse()?;
                step.description = Some(s.value());
                semi(input)?;
            }
            "when" => {
                let kind = Ident::parse_any(input)?;
                let mut c = Condition {
                    span: low.at(kind.span()),
                    kind: Some(low.spanned(ConditionType::parse(&kind.to_string()), kind.span())),
                    ..Condition::default()
                };
                if first_when {
                    step.conditions_span = low.at(key.span());
                    first_when = false;
                }
                if input.peek(syn::token::Paren) {
                    let args;
                    parenthesized!(args in input);
                    if !args.is_empty() {
                        c.value = Some(low.name(&args)?);
                    }
                    while args.parse::<Option<Token![,]>>()?.is_some() {
                        if args.is_empty() {
                            break;
                        }
                        let k: Ident = args.parse()?;
                        if k != "window" {
                            return Err(syn::Error::new(k.span(), "expected `window = N`"));
                        }
                        args.parse::<Token![=]>()?;
                        let (n, span) = uint(&args, "window")?;
                        c.window = Some(low.spanned(n, span));
                    }
                }
                semi(input)?;
                step.conditions.push(c);
            }
            "sequence" => {
                input.parse::<Token![:]>()?;
                let list;
                let bracket = bracketed!(list in input);
                let mut entries = Vec::new();
                while !list.is_empty() {
                    if list.peek(syn::token::Paren) {
                        let group;
                        let paren = parenthesized!(group in list);
                        let mut tools = Vec::new();
                        while !group.is_empty() {
                            tools.push(low.name(&group)?);
                            if group.is_empty() {
                                break;
                            }
                            group.parse::<Token![|]>()?;
                        }
                        let span = low.at(paren.span.join());
                        entries.push(SequenceEntry::Group(Spanned::new(tools, span)));
                    } else {
                        entries.push(SequenceEntry::Tool(low.name(&list)?));
                    }
                    if list.is_empty() {
                        break;
                    }
                    list.parse::<Token![,]>()?;
                }
                let span = low.at(bracket.span.join());
                step.sequence = Some(Spanned::new(entries, span));
                semi(input)?;
            }
            "allow" => {
                let list = low.colon_list(input)?;
                step.allowed.get_or_insert_with(Vec::new).extend(list);
            }
            "deny" => {
                let list = low.colon_list(input)?;
                step.denied.get_or_insert_with(Vec::new).extend(list);
            }
            "approve" if input.peek(Token![:]) => {
                let list = low.colon_list(input)?;
                step.approve.get_or_insert_with(Vec::new).extend(list);
            }
            "approve" => step.rules.push(parse_conditional_approve(low, input)?),
            "rule" => step.rules.push(parse_rule(low, input)?),
            "reset_sequence_on" => {
                let list = low.colon_list(input)?;
                step.reset_sequence_on.extend(list);
            }
            other => {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unexpected `{other}`: expected `description`, `when`, `sequence`, `allow`, `deny`, `approve`, `rule` or `reset_sequence_on`"),
                ))
            }
        }
    }
    Ok(())
}

/// The DSL's test keywords, in the order the docs list them (the JSON keys in
/// snake case).
const TESTS: [&str; 10] = [
    "exists",
    "equals",
    "one_of",
    "glob",
    "regex",
    "range",
    "length",
    "host_in",
    "each",
    "in_result",
];

/// An error at `span` naming the unexpected `word`, what was `expected`, and the closest
/// of `known` when one is close.
fn unexpected(span: Span, word: &str, expected: &str, known: &[&str]) -> syn::Error {
    let hint = Suggester::new(known.iter().copied())
        .closest(word)
        .map(|k| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default();
    syn::Error::new(span, format!("unexpected `{word}`{hint}: {expected}"))
}

/// `keyword PREDICATE;` ending a rule, or an error that says `usage`.
fn keyword_and_predicate(
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
fn parse_rule(low: &mut Lowering, input: ParseStream) -> syn::Result<ArgRule> {
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
fn parse_conditional_approve(low: &mut Lowering, input: ParseStream) -> syn::Result<ArgRule> {
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
fn parse_predicate(low: &mut Lowering, input: ParseStream) -> syn::Result<Predicate> {
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
        w if TESTS.contains(&w) => {
            let path = Spanned::new(String::new(), span);
            let test = parse_test(low, input)?;
            Ok(Predicate {
                span,
                node: PredicateNode::Test { path, test },
            })
        }
        other => {
            let mut known = vec!["all", "any", "not"];
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
/// `host_in("..", ..)`, `each(PREDICATE)`, `in_result(TOOL, "/pointer")`.
fn parse_test(low: &mut Lowering, input: ParseStream) -> syn::Result<ArgTest> {
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
        "host_in" => {
            let hosts = comma_separated(&args, |a| {
                let s: LitStr = a.parse()?;
                Ok(low.spanned(s.value(), s.span()))
            })?;
            ArgTest::HostIn(Spanned::new(hosts, whole))
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
        "range" => {
            let (mut min, mut max) = (None, None);
            for (key, value) in bounds(&args, &word)? {
                let text = number_text(&value)?;
                let slot = if key == "min" { &mut min } else { &mut max };
                *slot = Some(low.spanned(text, value.span()));
            }
            ArgTest::Range {
                span: whole,
                min,
                max,
            }
        }
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

/// A number literal in a rule, with its sign.
enum Bound {
    Int { lit: LitInt, negative: bool },
    Float { lit: syn::LitFloat, negative: bool },
}

impl Bound {
    fn span(&self) -> Span {
        match self {
            Bound::Int { lit, .. } => lit.span(),
            Bound::Float { lit, .. } => lit.span(),
        }
    }

    fn parse(input: ParseStream) -> syn::Result<Bound> {
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
fn number_text(b: &Bound) -> syn::Result<String> {
    let (sign, text) = match b {
        Bound::Int { lit, negative } => (*negative, lit.to_string()),
        Bound::Float { lit, negative } => (*negative, lit.to_string()),
    };
    Ok(if sign { format!("-{text}") } else { text })
}

/// `min = N, max = N` (either, both, in any order, each once).
fn bounds(args: ParseStream, what: &str) -> syn::Result<Vec<(String, Bound)>> {
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
fn parse_scalar(low: &mut Lowering, input: ParseStream) -> syn::Result<Spanned<Scalar>> {
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
