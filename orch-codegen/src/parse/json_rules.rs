//! Rules on arguments in JSON (semantics §16): the entries of `rules`, the conditional
//! entries of `approve`, and their predicates. Shapes only — pointers, numbers, regexes
//! and bounds are judged by `check::rules`, the same for both front ends.

use super::{get, span_of, ticked, Reader};
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{
    ArgRule, ArgRuleKind, ArgTest, BudgetDecl, Origin, Predicate, PredicateNode, ResultNumber,
    Scalar, Spanned,
};
use jsonc_parser::ast::{Object, Value};

/// The keys of a combinator object.
const COMBINATORS: [&str; 3] = ["all", "any", "not"];

impl Reader {
    /// `rules`: an array of `{name, tool, require}` (`field` names it in messages).
    pub(super) fn rules(&mut self, v: &Value<'_>, field: &str) -> Vec<ArgRule> {
        let Value::Array(a) = v else {
            self.wrong(v, field, "an array of rules");
            return Vec::new();
        };
        a.elements
            .iter()
            .filter_map(|e| {
                let o = self.object(e, &format!("{field}[]"))?;
                self.known_keys(o, "a rule", &["name", "tool", "require"]);
                let name = self.opt_string(o, "name");
                if name.is_none() && get(o, "name").is_none() {
                    self.missing(
                        e,
                        "a rule has no `name`",
                        "every rule needs a `\"name\"`: refusals and decision logs cite it",
                    );
                }
                self.rule(e, o, name, "require", ArgRuleKind::Require)
            })
            .collect()
    }

    /// `approve`: tool names and patterns, and conditional entries `{tool, when, name?}`
    /// (returned as rules).
    pub(super) fn approve_entries(
        &mut self,
        v: &Value<'_>,
        field: &str,
    ) -> Option<(Vec<Spanned<String>>, Vec<ArgRule>)> {
        let Value::Array(a) = v else {
            self.wrong(
                v,
                field,
                "an array of tool names and `{\"tool\", \"when\"}` objects",
            );
            return None;
        };
        let (mut names, mut rules) = (Vec::new(), Vec::new());
        for e in &a.elements {
            match e {
                Value::StringLit(s) => names.push(Spanned::new(s.value.to_string(), span_of(s))),
                Value::Object(o) => {
                    self.known_keys(o, "a conditional `approve`", &["name", "tool", "when"]);
                    let name = self.opt_string(o, "name");
                    if let Some(rule) = self.rule(e, o, name, "when", ArgRuleKind::ApproveWhen) {
                        rules.push(rule);
                    }
                }
                other => self.wrong(
                    other,
                    &format!("{field}[]"),
                    "a tool name or a `{\"tool\", \"when\"}` object",
                ),
            }
        }
        Some((names, rules))
    }

    /// A property's `when`.
    pub(super) fn predicate_of_property(&mut self, v: &Value<'_>) -> Option<Predicate> {
        self.predicate(v)
    }

    fn missing(&mut self, at: &Value<'_>, message: &str, help: &str) {
        self.diags.push(
            Diagnostic::new(Code::MissingField, Some(span_of(at).first_byte()), message)
                .label("here")
                .help(help.to_owned()),
        );
    }

    fn rule(
        &mut self,
        v: &Value<'_>,
        o: &Object<'_>,
        name: Option<Spanned<String>>,
        key: &str,
        kind: ArgRuleKind,
    ) -> Option<ArgRule> {
        let tool = self.opt_string(o, "tool");
        if tool.is_none() && get(o, "tool").is_none() {
            self.missing(
                v,
                "a rule has no `tool`",
                "`\"tool\"` names the tool whose calls it judges",
            );
        }
        let predicate = match get(o, key) {
            Some(p) => self.predicate(p),
            None => {
                self.missing(
                    v,
                    &format!("a rule has no `{key}`"),
                    &format!("`\"{key}\"` is the predicate the arguments are judged by"),
                );
                None
            }
        };
        Some(ArgRule {
            span: span_of(v),
            name,
            tool: tool?,
            kind,
            predicate: predicate?,
        })
    }

    /// `orchestration.budgets`: an array of `{name, tool, sum?, where?, per?, within?,
    /// events?}`.
    pub(super) fn budgets(&mut self, v: &Value<'_>) -> Vec<BudgetDecl> {
        let Value::Array(a) = v else {
            self.wrong(v, "orchestration.budgets", "an array of budgets");
            return Vec::new();
        };
        a.elements
            .iter()
            .filter_map(|e| {
                let o = self.object(e, "orchestration.budgets[]")?;
                self.known_keys(
                    o,
                    "a budget",
                    &[
                        "name", "tool", "sum", "where", "per", "within", "events", "counts",
                    ],
                );
                let name = self.opt_string(o, "name");
                if name.is_none() && get(o, "name").is_none() {
                    self.missing(
                        e,
                        "a budget has no `name`",
                        "every budget needs a `\"name\"`: rules read it by name",
                    );
                }
                let tool = self.opt_string(o, "tool");
                if tool.is_none() && get(o, "tool").is_none() {
                    self.missing(
                        e,
                        "a budget has no `tool`",
                        "`\"tool\"` names the tool (or a `*` pattern) whose calls it charges",
                    );
                }
                let when = match get(o, "where") {
                    Some(p) => Some(self.predicate(p)?),
                    None => None,
                };
                let events = match get(o, "events") {
                    Some(n) => Some(self.uint(n, "budgets[].events")?),
                    None => None,
                };
                Some(BudgetDecl {
                    span: span_of(e),
                    name: name?,
                    tool: tool?,
                    sum: self.opt_string(o, "sum"),
                    when,
                    per: self.opt_string(o, "per"),
                    within: self.opt_string(o, "within"),
                    events,
                    counts: self.opt_string(o, "counts"),
                })
            })
            .collect()
    }

    /// A budget test: `{"budget": NAME, "range": {min, max}}`.
    fn budget_test(&mut self, o: &Object<'_>, v: &Value<'_>) -> Option<Predicate> {
        let span = span_of(v);
        self.known_keys(o, "a budget test", &["budget", "range"]);
        let name = self.opt_string(o, "budget")?;
        let Some(range) = get(o, "range") else {
            self.invalid(
                span,
                format!("the test of budget `{}` has no `range`", name.value),
                "a budget is tested by its total: `{\"budget\": \"spend\", \"range\": {\"max\": 10000}}`",
            );
            return None;
        };
        let ArgTest::Range {
            min,
            max,
            min_result,
            max_result,
            ..
        } = self.test("range", range)?
        else {
            return None;
        };
        if let Some(r) = min_result.or(max_result) {
            self.invalid(
                r.span,
                "a budget's total is compared with numbers, not with a result".to_owned(),
                "write the bound as a number",
            );
            return None;
        }
        Some(Predicate {
            span,
            node: PredicateNode::Test {
                path: Spanned::new(String::new(), span.first_byte()),
                test: ArgTest::Budget {
                    span,
                    name,
                    min,
                    max,
                },
            },
        })
    }

    /// A predicate: a combinator (`all`, `any`, `not`), a test (`path` and one test
    /// key), or a budget test (`budget` and `range`).
    pub(super) fn predicate(&mut self, v: &Value<'_>) -> Option<Predicate> {
        let o = self.object(v, "a predicate")?;
        let span = span_of(v);
        if get(o, "budget").is_some() {
            return self.budget_test(o, v);
        }
        let combinators: Vec<&str> = COMBINATORS
            .into_iter()
            .filter(|k| get(o, k).is_some())
            .collect();
        if !combinators.is_empty() {
            self.known_keys(o, "a combinator", &COMBINATORS);
            if combinators.len() > 1 {
                self.invalid(
                    span,
                    format!(
                        "a predicate has {} combinators ({})",
                        combinators.len(),
                        ticked(&combinators)
                    ),
                    "write one per object, nested: `{\"all\": [{\"any\": [..]}, ..]}`",
                );
                return None;
            }
            let key = combinators[0];
            let value = get(o, key)?;
            let node = match key {
                "not" => PredicateNode::Not(Box::new(self.predicate(value)?)),
                list => {
                    let Value::Array(a) = value else {
                        self.wrong(value, list, "an array of predicates");
                        return None;
                    };
                    let items: Vec<Predicate> = a
                        .elements
                        .iter()
                        .filter_map(|e| self.predicate(e))
                        .collect();
                    if items.len() != a.elements.len() {
                        return None;
                    }
                    if list == "all" {
                        PredicateNode::All(items)
                    } else {
                        PredicateNode::Any(items)
                    }
                }
            };
            return Some(Predicate { span, node });
        }
        let mut known = vec!["path"];
        known.extend(ArgTest::KEYS);
        known.extend(COMBINATORS);
        self.known_keys(o, "a predicate", &known);
        let path = match get(o, "path") {
            Some(p) => self.string(p, "path")?,
            None => Spanned::new(String::new(), span.first_byte()),
        };
        // `"equals": null` is a test (of null), unlike an optional field written as null.
        let present = |k: &str| o.properties.iter().any(|p| p.name.as_str() == k);
        let tests: Vec<&str> = ArgTest::KEYS.into_iter().filter(|k| present(k)).collect();
        match tests.len() {
            0 => {
                self.invalid(
                    span,
                    "a predicate has no test".to_owned(),
                    &format!(
                        "add one of {}, or combine predicates with {}",
                        ticked(&ArgTest::KEYS),
                        ticked(&COMBINATORS)
                    ),
                );
                None
            }
            1 => {
                let value = o
                    .properties
                    .iter()
                    .rev()
                    .find(|p| p.name.as_str() == tests[0])?;
                let test = self.test(tests[0], &value.value)?;
                Some(Predicate {
                    span,
                    node: PredicateNode::Test { path, test },
                })
            }
            _ => {
                self.invalid(
                    span,
                    format!("a predicate has {} tests ({})", tests.len(), ticked(&tests)),
                    "one test per predicate: combine several with `all`",
                );
                None
            }
        }
    }

    /// A `range` bound `{"result": TOOL, "path": P}`: the number the newest result of
    /// the tool held there. E021 for other keys, E002 for a key of the wrong type.
    fn result_number(&mut self, v: &Value<'_>, key: &str) -> Option<ResultNumber> {
        let o = self.object(v, &format!("range.{key}"))?;
        self.known_keys(o, &format!("`range.{key}`"), &["result", "path"]);
        let tool = match get(o, "result") {
            Some(t) => self.string(t, "result")?,
            None => {
                self.invalid(
                    span_of(v),
                    format!("`range.{key}` names no `result`"),
                    "a bound from a result is `{\"result\": \"get_balance\", \"path\": \"/balance\"}`",
                );
                return None;
            }
        };
        let path = match get(o, "path") {
            Some(p) => self.string(p, "path")?,
            None => Spanned::new(String::new(), span_of(v).first_byte()),
        };
        Some(ResultNumber {
            span: span_of(v),
            tool,
            path,
        })
    }

    fn invalid(&mut self, span: crate::model::Span, message: String, help: &str) {
        self.diags.push(
            Diagnostic::new(Code::InvalidRule, Some(span.first_byte()), message)
                .label("this predicate")
                .help(help.to_owned()),
        );
    }

    pub(super) fn test(&mut self, key: &str, v: &Value<'_>) -> Option<ArgTest> {
        Some(match key {
            "exists" => match v {
                Value::BooleanLit(b) => ArgTest::Exists(b.value),
                other => {
                    self.wrong(other, "exists", "`true` or `false`");
                    return None;
                }
            },
            "equals" => ArgTest::Equals(self.scalar(v, "equals")?),
            "oneOf" => {
                let Value::Array(a) = v else {
                    self.wrong(v, "oneOf", "an array of strings, numbers, booleans or null");
                    return None;
                };
                let items: Vec<_> = a
                    .elements
                    .iter()
                    .filter_map(|e| self.scalar(e, "oneOf[]"))
                    .collect();
                if items.len() != a.elements.len() {
                    return None;
                }
                ArgTest::OneOf(Spanned::new(items, span_of(v)))
            }
            "glob" => ArgTest::Glob(self.string(v, "glob")?),
            "regex" => ArgTest::Regex(self.string(v, "regex")?),
            "hostIn" => ArgTest::HostIn(Spanned::new(self.strings(v, "hostIn")?, span_of(v))),
            "hostnameIn" => {
                ArgTest::HostnameIn(Spanned::new(self.strings(v, "hostnameIn")?, span_of(v)))
            }
            "addressesIn" => {
                ArgTest::AddressesIn(Spanned::new(self.strings(v, "addressesIn")?, span_of(v)))
            }
            "linksIn" => ArgTest::LinksIn(Spanned::new(self.strings(v, "linksIn")?, span_of(v))),
            "emailsIn" => ArgTest::EmailsIn(Spanned::new(self.strings(v, "emailsIn")?, span_of(v))),
            "each" => ArgTest::Each(Box::new(self.predicate(v)?)),
            "inResult" => {
                let o = self.object(v, "inResult")?;
                self.known_keys(o, "`inResult`", &["tool", "path"]);
                let tool = self.opt_string(o, "tool");
                if tool.is_none() && get(o, "tool").is_none() {
                    self.missing(
                        v,
                        "`inResult` has no `tool`",
                        "`\"tool\"` names the tool whose results hold the values",
                    );
                }
                let path = match get(o, "path") {
                    Some(p) => self.string(p, "inResult.path")?,
                    None => Spanned::new(String::new(), span_of(v).first_byte()),
                };
                ArgTest::InResult {
                    span: span_of(v),
                    tool: tool?,
                    path,
                }
            }
            "from" => ArgTest::From(Spanned::new(self.origins(v)?, span_of(v))),
            "range" => {
                let o = self.object(v, "range")?;
                self.known_keys(o, "`range`", &["min", "max"]);
                let (mut results, mut ok) = ([None, None], true);
                let mut bound =
                    |r: &mut Self, k: &str, slot: &mut Option<Box<ResultNumber>>| match get(o, k) {
                        Some(Value::NumberLit(n)) => {
                            Some(Spanned::new(n.value.to_owned(), span_of(n)))
                        }
                        Some(obj @ Value::Object(_)) => {
                            *slot = r.result_number(obj, k).map(Box::new);
                            ok &= slot.is_some();
                            None
                        }
                        Some(other) => {
                            r.wrong(
                                other,
                                &format!("range.{k}"),
                                "a number, or `{\"result\": TOOL, \"path\": P}`",
                            );
                            ok = false;
                            None
                        }
                        None => None,
                    };
                let [min_slot, max_slot] = &mut results;
                let min = bound(self, "min", min_slot);
                let max = bound(self, "max", max_slot);
                if !ok {
                    return None;
                }
                let [min_result, max_result] = results;
                ArgTest::Range {
                    span: span_of(v),
                    min,
                    max,
                    min_result,
                    max_result,
                }
            }
            "length" => {
                let o = self.object(v, "length")?;
                self.known_keys(o, "`length`", &["min", "max"]);
                let min = match get(o, "min") {
                    Some(m) => Some(self.uint(m, "length.min")?),
                    None => None,
                };
                let max = match get(o, "max") {
                    Some(m) => Some(self.uint(m, "length.max")?),
                    None => None,
                };
                ArgTest::Length {
                    span: span_of(v),
                    min,
                    max,
                }
            }
            _ => return None,
        })
    }

    fn scalar(&mut self, v: &Value<'_>, field: &str) -> Option<Spanned<Scalar>> {
        let scalar = match v {
            Value::StringLit(s) => Scalar::String(s.value.to_string()),
            Value::NumberLit(n) => Scalar::Number(n.value.to_owned()),
            Value::BooleanLit(b) => Scalar::Bool(b.value),
            Value::NullKeyword(_) => Scalar::Null,
            other => {
                self.wrong(other, field, "a string, a number, a boolean or null");
                return None;
            }
        };
        Some(Spanned::new(scalar, span_of(v)))
    }
}

impl Reader {
    /// A `from` list: `"user"`, `"trusted"`, `{"result": TOOL, "path": P}`,
    /// `{"arguments": TOOL, "path": P}`.
    fn origins(&mut self, v: &Value<'_>) -> Option<Vec<Spanned<Origin>>> {
        let Value::Array(a) = v else {
            self.wrong(v, "from", "an array of origins");
            return None;
        };
        let mut out = Vec::new();
        for e in &a.elements {
            let origin = match e {
                Value::StringLit(s) if s.value == "user" => Origin::User,
                Value::StringLit(s) if s.value == "trusted" => Origin::Trusted,
                Value::Object(o) => {
                    self.known_keys(o, "an origin", &["result", "arguments", "path"]);
                    let path = match get(o, "path") {
                        Some(p) => self.string(p, "from[].path")?,
                        None => Spanned::new(String::new(), span_of(e).first_byte()),
                    };
                    match (get(o, "result"), get(o, "arguments")) {
                        (Some(t), None) => Origin::Result {
                            tool: self.string(t, "from[].result")?,
                            path,
                        },
                        (None, Some(t)) => Origin::Arguments {
                            tool: self.string(t, "from[].arguments")?,
                            path,
                        },
                        _ => {
                            self.wrong(
                                e,
                                "from[]",
                                "an object with exactly one of `result` and `arguments`",
                            );
                            return None;
                        }
                    }
                }
                other => {
                    self.wrong(
                        other,
                        "from[]",
                        "`\"user\"`, `\"trusted\"`, or an object with `result` or `arguments`",
                    );
                    return None;
                }
            };
            out.push(Spanned::new(origin, span_of(e)));
        }
        Some(out)
    }
}
