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
//!             | ("trusted" | "untrusted") ":" "[" tool,* "]" ";" | "remembered_values" ":" int ";"
//!             | "budget" name ":" tool ("sum" string | "where" pred | "per" ("run" | "step")
//!                                       | "within" string | "events" int)* ";"      (semantics §17)
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
//!             | "budget" "(" name ("," ("min" | "max") "=" number)+ ")"
//!               (the string is a JSON pointer; without one, the whole value)
//! test       := "exists" ("(" bool ")")? | "equals" "(" scalar ")" | "one_of" "(" scalar,* ")"
//!             | "glob" "(" string ")" | "regex" "(" string ")" | "host_in" "(" string,* ")"
//!             | ("hostname_in" | "addresses_in" | "links_in" | "emails_in") "(" string,* ")"
//!             | ("range" | "length") "(" (("min" | "max") "=" number),* ")"
//!             | "each" "(" pred ")" | "in_result" "(" tool ("," string)? ")"
//!             | "from" "(" origin,* ")"
//! origin     := "user" | "trusted" | ("result" | "arguments") "(" tool ("," string)? ")"
//! scalar     := string | "-"? number | "true" | "false" | "null"
//! condition  := "sequence_match" | "tool_used" "(" tool ")" | "message_contains" "(" string ")"
//!             | "message_regex" "(" string ")" | "not_recently_used" "(" tool ("," "window" "=" int)? ")"
//!             | "budget" "(" name ("," ("min" | "max") "=" number)* ")"
//! name, tool := ident | string        (strings for names that are not identifiers, and "*" patterns)
//! ```

use crate::model::{
    Condition, ConditionKind, ConditionType, Property, PropertyRule, SequenceEntry, Spanned, Step,
    Template,
};
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{braced, bracketed, parenthesized, Ident, LitStr, Token, Visibility};

#[path = "dsl_rules.rs"]
mod rules;
#[path = "dsl_tokens.rs"]
mod tokens;

use rules::*;
use tokens::{semi, uint, Lowering};

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
                "budget" => template.budgets.push(parse_budget(&mut low, &body)?),
                "trusted" => template.trusted.extend(low.colon_list(&body)?),
                "untrusted" => template.untrusted.extend(low.colon_list(&body)?),
                "remembered_values" => {
                    body.parse::<Token![:]>()?;
                    let (n, span) = uint(&body, "remembered_values")?;
                    template.remembered_values = Some(low.spanned(n, span));
                    semi(&body)?;
                }
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
                        format!("unexpected `{other}`: expected `tools`, `description`, `history`, `max_steps`, `approve`, `rule`, `budget`, `trusted`, `untrusted`, `remembered_values`, `lost`, `property`, `step` or `default step`"),
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
                    let budget = c
                        .kind
                        .as_ref()
                        .is_some_and(|k| k.value == ConditionType::Known(ConditionKind::Budget));
                    if budget && args.parse::<Option<Token![,]>>()?.is_some() {
                        c.has_range = true;
                        for (key, value) in bounds(&args, "budget")? {
                            let text = number_text(&value)?;
                            let slot = if key == "min" { &mut c.min } else { &mut c.max };
                            *slot = Some(low.spanned(text, value.span()));
                        }
                    }
                    while !budget && args.parse::<Option<Token![,]>>()?.is_some() {
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
