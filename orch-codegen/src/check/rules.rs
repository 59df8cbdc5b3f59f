//! Rules on arguments (semantics §16): each rule's tool resolved, its predicate judged.

use super::{Checker, Universe};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{IrArgRule, IrMemory, IrPred, IrTest};
use crate::model::{
    ArgRule, ArgRuleKind, ArgTest, Origin, Predicate, PredicateNode, Span, Spanned,
};
use orch_runtime::args::{compare_numbers, is_number, is_pointer, MAX_MEMORY_VALUES};
use orch_runtime::compiled::{is_pattern, Origin as RtOrigin, RuleKind, NO_TOOL};
use std::collections::HashMap;

/// The most rules a template may have (rules are numbered with 16 bits).
pub(crate) const MAX_RULES: usize = 4096;
/// The most predicate nodes all rules together may have.
pub(crate) const MAX_PREDICATE_NODES: usize = 1 << 16;

impl<'t> Checker<'t> {
    /// semantics §16: the orchestration's rules, then each step's (`step_index` maps a
    /// step of the template to its index, `None` for a step left out after an error).
    /// E013: a rule's `tool` is a name, not a pattern. E015: it is a tool of the
    /// universe. E025: two rules of one scope with one name; a predicate that cannot be
    /// judged ([`Checker::predicate`]). E019: more than [`MAX_RULES`] rules or
    /// [`MAX_PREDICATE_NODES`] predicate nodes.
    pub(super) fn arg_rules(&mut self, universe: &Universe<'t>) -> Vec<IrArgRule> {
        let t = self.t;
        let mut out = Vec::new();
        let scopes = std::iter::once((None, &t.rules))
            .chain(t.steps.iter().enumerate().map(|(i, s)| (Some(i), &s.rules)));
        for (step, rules) in scopes {
            let mut seen: HashMap<String, Span> = HashMap::new();
            for r in rules {
                if let Some(rule) = self.arg_rule(r, step, universe, &mut seen) {
                    out.push(rule);
                }
            }
        }
        let nodes: usize = out.iter().map(|r| count(&r.pred)).sum();
        if out.len() > MAX_RULES || nodes > MAX_PREDICATE_NODES {
            self.push(Diagnostic::new(
                Code::LimitExceeded,
                out.get(MAX_RULES).map(|r| r.span),
                format!(
                    "the template has {} rules on arguments with {nodes} predicate nodes; the limits are {MAX_RULES} rules and {MAX_PREDICATE_NODES} nodes",
                    out.len()
                ),
            ));
        }
        out
    }

    fn arg_rule(
        &mut self,
        r: &ArgRule,
        step: Option<usize>,
        universe: &Universe<'t>,
        seen: &mut HashMap<String, Span>,
    ) -> Option<IrArgRule> {
        let name = match &r.name {
            Some(n) => {
                if let Some(first) = seen.insert(n.value.clone(), n.span) {
                    self.push(
                        Diagnostic::new(
                            Code::ConflictingRule,
                            Some(n.span),
                            format!("two rules are named `{}`", n.value),
                        )
                        .label("the second")
                        .related(first, "the first")
                        .help("refusals and decision logs name the rule: give every rule its own name"),
                    );
                }
                n.value.clone()
            }
            None => format!("approve {}", r.tool.value),
        };
        let tool = self.rule_tool(&r.tool, universe);
        let pred = self.predicate(&r.predicate, universe);
        Some(IrArgRule {
            name,
            tool: tool?,
            step,
            kind: match r.kind {
                ArgRuleKind::Require => RuleKind::Require,
                ArgRuleKind::ApproveWhen => RuleKind::ApproveWhen,
            },
            pred: pred?,
            span: r.span,
        })
    }

    /// A property's `when` (semantics §16), judged as a rule's predicate is.
    pub(super) fn property_when(
        &mut self,
        when: &Predicate,
        universe: &Universe<'t>,
    ) -> Option<IrPred> {
        self.predicate(when, universe)
    }

    /// E013/E015: a rule's tool is one tool of the universe, by name.
    fn rule_tool(&mut self, tool: &Spanned<String>, universe: &Universe<'t>) -> Option<usize> {
        if self.empty_tool_name(tool) {
            return None;
        }
        if is_pattern(&tool.value) {
            self.push(
                Diagnostic::new(
                    Code::PatternNotAllowed,
                    Some(tool.span),
                    format!(
                        "a rule on arguments names one tool, not the pattern `{}`",
                        tool.value
                    ),
                )
                .label("a tool name is required here")
                .help("write one rule per tool: each tool's arguments have their own shape")
                .about_tool(&tool.value),
            );
            return None;
        }
        self.tool_by_name(tool, universe, "a rule's `tool`")
    }

    /// E015: `tool` is a tool of the universe, by name (`what` says where it is
    /// written): not in the declared tools, or, without declared tools, in no step.
    pub(super) fn tool_by_name(
        &mut self,
        tool: &Spanned<String>,
        universe: &Universe<'t>,
        what: &str,
    ) -> Option<usize> {
        let found = self.resolve(universe, tool, what);
        if found.is_none() && !universe.declared {
            self.push(
                Diagnostic::new(
                    Code::UnknownTool,
                    Some(tool.span),
                    format!("unknown tool `{}`", tool.value),
                )
                .label("no step mentions this tool")
                .help("declare the template's `tools`, or allow the tool in a step")
                .about_tool(&tool.value),
            );
        }
        found
    }

    /// E025: a predicate of the wrong shape — a path that is not a JSON pointer, an
    /// empty list, a host pattern with a scheme or a path (what the JSON Schema says
    /// too). E016: a regex that does not compile. E026: bounds out of order.
    fn predicate(&mut self, p: &Predicate, universe: &Universe<'t>) -> Option<IrPred> {
        Some(match &p.node {
            PredicateNode::All(items) | PredicateNode::Any(items) => {
                if items.is_empty() {
                    let key = if matches!(p.node, PredicateNode::All(_)) {
                        "all"
                    } else {
                        "any"
                    };
                    self.bad(
                        p.span,
                        format!("`{key}` lists no predicate"),
                        "list at least one predicate",
                    );
                    return None;
                }
                let checked: Vec<Option<IrPred>> =
                    items.iter().map(|i| self.predicate(i, universe)).collect();
                let checked: Vec<IrPred> = checked.into_iter().collect::<Option<_>>()?;
                if matches!(p.node, PredicateNode::All(_)) {
                    IrPred::All(checked)
                } else {
                    IrPred::Any(checked)
                }
            }
            PredicateNode::Not(inner) => IrPred::Not(Box::new(self.predicate(inner, universe)?)),
            PredicateNode::Test { path, test } => {
                let path_ok = is_pointer(&path.value);
                if !path_ok {
                    self.bad(
                        path.span,
                        format!("`{}` is not a JSON pointer", path.value),
                        "a path is a JSON pointer (RFC 6901): `\"\"` for the whole arguments, `/to`, `/items/0/price`; `~` is written `~0` and `/` in a key `~1`",
                    );
                }
                let test = self.test(test, universe);
                if !path_ok {
                    return None;
                }
                let path = path.value.clone();
                let each = |tests: Vec<IrTest>| -> Vec<IrPred> {
                    tests
                        .into_iter()
                        .map(|test| IrPred::Test {
                            path: path.clone(),
                            test,
                        })
                        .collect()
                };
                match test? {
                    Negated::AllOf(tests) => IrPred::All(each(tests)),
                    Negated::AnyOf(tests) => IrPred::Any(each(tests)),
                    Negated::No(test) => IrPred::Test { path, test },
                    Negated::Yes(test) => IrPred::Not(Box::new(IrPred::Test { path, test })),
                }
            }
        })
    }

    fn test(&mut self, test: &ArgTest, universe: &Universe<'t>) -> Option<Negated> {
        Some(Negated::No(match test {
            ArgTest::Exists(true) => IrTest::Exists,
            ArgTest::Exists(false) => return Some(Negated::Yes(IrTest::Exists)),
            ArgTest::Equals(v) => IrTest::Equals(self.scalar(v)?),
            ArgTest::OneOf(list) => {
                if list.value.is_empty() {
                    self.bad(
                        list.span,
                        "`oneOf` lists no value".to_owned(),
                        "list the values allowed",
                    );
                    return None;
                }
                let values: Vec<Option<String>> =
                    list.value.iter().map(|v| self.scalar(v)).collect();
                IrTest::OneOf(values.into_iter().collect::<Option<_>>()?)
            }
            ArgTest::Glob(g) => IrTest::Glob(g.value.clone()),
            ArgTest::Regex(re) => {
                if let Err(e) = orch_runtime::compiled::argument_regex(&re.value) {
                    self.push(
                        Diagnostic::new(
                            Code::InvalidRegex,
                            Some(re.span),
                            format!("the regex `{}` does not compile", re.value),
                        )
                        .label("not a regex of the `regex` crate")
                        .help(e.to_string()),
                    );
                    return None;
                }
                IrTest::Regex(re.value.clone())
            }
            ArgTest::Range {
                min_result,
                max_result,
                ..
            } if min_result.is_some() || max_result.is_some() => {
                return self.range_with_results(test, universe);
            }
            ArgTest::Range { span, min, max, .. } => {
                for b in [min, max].into_iter().flatten() {
                    if !is_number(&b.value) {
                        self.bad(
                            b.span,
                            format!("`{}` is not a JSON number", b.value),
                            "write the bound as a JSON number",
                        );
                        return None;
                    }
                }
                if let (Some(lo), Some(hi)) = (min, max) {
                    if compare_numbers(&lo.value, &hi.value) == Some(core::cmp::Ordering::Greater) {
                        self.conflict(
                            *span,
                            format!("`range` from {} to {} holds no number", lo.value, hi.value),
                        );
                        return None;
                    }
                }
                IrTest::Range {
                    min: min.as_ref().map(|m| m.value.clone()),
                    max: max.as_ref().map(|m| m.value.clone()),
                }
            }
            ArgTest::Length { span, min, max } => {
                let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX - 1).min(u32::MAX - 1);
                let lo = min.as_ref().map_or(0, |m| clamp(m.value));
                let hi = max.as_ref().map(|m| clamp(m.value));
                if hi.is_some_and(|hi| hi < lo) {
                    self.conflict(
                        *span,
                        format!("`length` from {lo} to {} holds nothing", hi.unwrap_or(0)),
                    );
                    return None;
                }
                IrTest::Length { min: lo, max: hi }
            }
            ArgTest::HostIn(hosts) => IrTest::HostIn(self.hosts(hosts, "hostIn")?),
            ArgTest::HostnameIn(hosts) => IrTest::HostnameIn(self.hosts(hosts, "hostnameIn")?),
            ArgTest::AddressesIn(globs) => {
                IrTest::AddressesIn(self.addresses(globs, "addressesIn")?)
            }
            ArgTest::LinksIn(hosts) => IrTest::LinksIn(self.hosts(hosts, "linksIn")?),
            ArgTest::EmailsIn(globs) => IrTest::EmailsIn(self.addresses(globs, "emailsIn")?),
            ArgTest::Each(inner) => IrTest::Each(Box::new(self.predicate(inner, universe)?)),
            ArgTest::InResult { tool, path, .. } => {
                let tool = self.rule_tool(tool, universe)?;
                let path = self.source_path(path)?;
                IrTest::Seen {
                    origin: RtOrigin::Result,
                    tool,
                    path,
                }
            }
            ArgTest::From(origins) => return self.from(origins, universe),
            ArgTest::Budget {
                span,
                name,
                min,
                max,
            } => self.budget_test(*span, name, min, max)?,
        }))
    }

    /// A `range` with a bound from a result (semantics §16): the number bounds as a
    /// `range`, each result bound a test of its own; E015 for an unknown tool, E025 for
    /// a path that is not a pointer.
    fn range_with_results(&mut self, test: &ArgTest, universe: &Universe<'t>) -> Option<Negated> {
        let ArgTest::Range {
            span,
            min,
            max,
            min_result,
            max_result,
        } = test
        else {
            return None;
        };
        let mut tests = Vec::new();
        if min.is_some() || max.is_some() {
            let numbers = ArgTest::Range {
                span: *span,
                min: min.clone(),
                max: max.clone(),
                min_result: None,
                max_result: None,
            };
            match self.test(&numbers, universe)? {
                Negated::No(t) => tests.push(t),
                _ => return None,
            }
        }
        for (r, upper) in [(min_result, false), (max_result, true)] {
            let Some(r) = r else { continue };
            let tool = self.rule_tool(&r.tool, universe);
            let path = self.source_path(&r.path);
            tests.push(IrTest::ResultBound {
                tool: tool?,
                path: path?,
                upper,
            });
        }
        Some(Negated::AllOf(tests))
    }

    /// A `from` test: one test per source it names (`"trusted"`: one per trusted tool),
    /// any of which may hold. E025: no origin, a path that is not a pointer; E026:
    /// `"trusted"` with no trusted tool.
    fn from(
        &mut self,
        origins: &Spanned<Vec<Spanned<Origin>>>,
        universe: &Universe<'t>,
    ) -> Option<Negated> {
        if origins.value.is_empty() {
            self.bad(
                origins.span,
                "`from` lists no origin".to_owned(),
                "list where the value may come from: `\"user\"`, `\"trusted\"`, `{\"result\": TOOL, \"path\": P}` or `{\"arguments\": TOOL, \"path\": P}`",
            );
            return None;
        }
        let mut tests = Vec::new();
        let mut ok = true;
        for o in &origins.value {
            match &o.value {
                Origin::User => tests.push(IrTest::Seen {
                    origin: RtOrigin::User,
                    tool: usize::from(NO_TOOL),
                    path: String::new(),
                }),
                Origin::Trusted => {
                    if self.trusted.is_empty() {
                        // An unknown tool in `trust.trusted` is reported there (E015).
                        if self.t.trusted.is_empty() {
                            self.push(
                                Diagnostic::new(
                                    Code::ConflictingRule,
                                    Some(o.span),
                                    "`trusted` stands for no tool: the template declares none trusted".to_owned(),
                                )
                                .label("no value can come from here")
                                .help("name the tools whose results are the user's own data in `orchestration.trust.trusted`"),
                            );
                        }
                        ok = false;
                    }
                    for &tool in &self.trusted {
                        tests.push(IrTest::Seen {
                            origin: RtOrigin::Trusted,
                            tool,
                            path: String::new(),
                        });
                    }
                }
                Origin::Result { tool, path } | Origin::Arguments { tool, path } => {
                    let origin = if matches!(o.value, Origin::Result { .. }) {
                        RtOrigin::Result
                    } else {
                        RtOrigin::Arguments
                    };
                    let tool = self.rule_tool(tool, universe);
                    let path = self.source_path(path);
                    match (tool, path) {
                        (Some(tool), Some(path)) => tests.push(IrTest::Seen { origin, tool, path }),
                        _ => ok = false,
                    }
                }
            }
        }
        tests.dedup();
        if !ok {
            return None;
        }
        Some(match tests.len() {
            1 => Negated::No(tests.remove(0)),
            _ => Negated::AnyOf(tests),
        })
    }

    /// A path into a tool's results or arguments: E025 unless it is a JSON pointer.
    fn source_path(&mut self, path: &Spanned<String>) -> Option<String> {
        if !is_pointer(&path.value) {
            self.bad(
                path.span,
                format!("`{}` is not a JSON pointer", path.value),
                "a path into a tool's results or arguments is a JSON pointer, where a `*` token stands for every element or member: `/contacts/*/iban`",
            );
            return None;
        }
        Some(path.value.clone())
    }

    /// semantics §16: the tools declared trusted and untrusted, and how many values a
    /// session remembers. E015: each is a tool of the universe; E026: none is both;
    /// E019: `rememberedValues` from 1 to [`MAX_MEMORY_VALUES`].
    pub(super) fn memory(&mut self, universe: &Universe<'t>) -> IrMemory {
        let t = self.t;
        let mut memory = IrMemory::default();
        for (list, out) in [
            (&t.trusted, &mut memory.trusted),
            (&t.untrusted, &mut memory.untrusted),
        ] {
            for name in list {
                if let Some(i) = self.rule_tool(name, universe) {
                    if !out.contains(&i) {
                        out.push(i);
                    }
                }
            }
        }
        for name in &t.untrusted {
            if let Some(i) = universe.tools.iter().position(|u| u.value == name.value) {
                if memory.trusted.contains(&i) {
                    self.push(
                        Diagnostic::new(
                            Code::ConflictingRule,
                            Some(name.span),
                            format!("`{}` is declared both trusted and untrusted", name.value),
                        )
                        .label("declared twice")
                        .help("a tool's results are either the user's own data (`trusted`) or text anyone could have written (`untrusted`)"),
                    );
                }
            }
        }
        if let Some(n) = &t.remembered_values {
            if n.value == 0 || n.value > MAX_MEMORY_VALUES as u64 {
                self.push(Diagnostic::new(
                    Code::LimitExceeded,
                    Some(n.span),
                    format!(
                        "`rememberedValues` is {}; a session remembers from 1 to {MAX_MEMORY_VALUES} values",
                        n.value
                    ),
                ));
            } else {
                memory.values = Some(n.value as u32);
            }
        }
        self.trusted = memory.trusted.clone();
        memory
    }

    /// A scalar's JSON text; E025 for a number that is not a JSON number (the DSL's).
    fn scalar(&mut self, v: &Spanned<crate::model::Scalar>) -> Option<String> {
        if let crate::model::Scalar::Number(n) = &v.value {
            if !is_number(n) {
                self.bad(
                    v.span,
                    format!("`{n}` is not a JSON number"),
                    "write it as a JSON number",
                );
                return None;
            }
        }
        Some(v.value.to_json())
    }

    /// E026: bounds out of order (`min` above `max`).
    fn conflict(&mut self, span: Span, message: String) {
        self.push(
            Diagnostic::new(Code::ConflictingRule, Some(span), message)
                .label("no value is within these bounds")
                .help("`min` must not be above `max`"),
        );
    }

    /// The hosts of a `hostIn`, `hostnameIn` or `linksIn` (`key`), lowercased: each a
    /// host alone.
    fn hosts(&mut self, hosts: &Spanned<Vec<Spanned<String>>>, key: &str) -> Option<Vec<String>> {
        let kind = GlobKind {
            noun: "host",
            empty_help: "list the hosts allowed (`example.com`, `*.example.com`)",
            not_one: "a host",
            help: "write the host alone (`example.com`, `*.example.com`): no scheme, port or path",
            fits: |h| !h.is_empty() && !h.contains(['/', ':', '@']),
        };
        self.globs(hosts, key, &kind)
    }

    /// The address patterns of an `addressesIn` or `emailsIn` (`key`), lowercased: each
    /// with one `@`.
    fn addresses(
        &mut self,
        globs: &Spanned<Vec<Spanned<String>>>,
        key: &str,
    ) -> Option<Vec<String>> {
        let kind = GlobKind {
            noun: "address",
            empty_help: "list the addresses allowed (`boss@example.com`, `*@example.com`)",
            not_one: "an e-mail address pattern",
            help: "write one address or pattern with one `@` (`boss@example.com`, `*@example.com`)",
            fits: |g| {
                g.matches('@').count() == 1
                    && !g.contains(|c: char| c.is_whitespace() || c == ',' || c == ';')
            },
        };
        self.globs(globs, key, &kind)
    }

    /// The globs of a list test (`key`), lowercased, each one that `kind` fits; a bad
    /// list is E025 at the list or at the entry.
    fn globs(
        &mut self,
        globs: &Spanned<Vec<Spanned<String>>>,
        key: &str,
        kind: &GlobKind,
    ) -> Option<Vec<String>> {
        if globs.value.is_empty() {
            self.bad(
                globs.span,
                format!("`{key}` lists no {}", kind.noun),
                kind.empty_help,
            );
            return None;
        }
        if let Some(g) = globs.value.iter().find(|g| !(kind.fits)(&g.value)) {
            self.bad(
                g.span,
                format!("`{}` is not {}", g.value, kind.not_one),
                kind.help,
            );
            return None;
        }
        Some(
            globs
                .value
                .iter()
                .map(|g| g.value.to_ascii_lowercase())
                .collect(),
        )
    }

    pub(super) fn bad(&mut self, span: Span, message: String, help: &str) {
        self.push(
            Diagnostic::new(Code::InvalidRule, Some(span), message)
                .label("cannot be judged")
                .help(help.to_owned()),
        );
    }
}

/// A test, or its negation (`"exists": false`).
enum Negated {
    No(IrTest),
    Yes(IrTest),
    /// Any of these tests of the same value (a `from` naming several sources).
    AnyOf(Vec<IrTest>),
    /// All of these tests of the same value (a `range` with a bound from a result).
    AllOf(Vec<IrTest>),
}

/// Predicate nodes in `p`.
fn count(p: &IrPred) -> usize {
    1 + match p {
        IrPred::All(items) | IrPred::Any(items) => items.iter().map(count).sum(),
        IrPred::Not(inner) => count(inner),
        IrPred::Test {
            test: IrTest::Each(inner),
            ..
        } => count(inner),
        IrPred::Test { .. } => 0,
    }
}

/// What the entries of a list test are ([`Checker::globs`]): hosts or address patterns.
struct GlobKind {
    /// What the list lists ("host").
    noun: &'static str,
    /// How to mend an empty list.
    empty_help: &'static str,
    /// What an entry must be ("a host").
    not_one: &'static str,
    /// How to mend an entry that is not.
    help: &'static str,
    /// Is this entry one?
    fits: fn(&str) -> bool,
}
