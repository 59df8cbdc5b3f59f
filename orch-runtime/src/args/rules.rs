//! Rules on arguments (semantics §16), compiled: each rule names a tool, the step it
//! applies in (or every step), whether it *requires* its predicate (a call that breaks
//! it is refused) or *gates* on it (a call for which it holds needs a human's approval),
//! and its predicate — a small tree of tests on JSON pointers into the arguments.

use super::budget::{within, Area, Budget, Charge};
use super::found::{email_addresses, link_hosts};
use super::json::{Doc, Kind, Unreadable};
use super::memory;
use super::scalar::{address_list, compare_numbers, host_name, url_host};
use super::source::{Origin, Source};
use crate::tables::Span;
use crate::text::glob_match;
use core::cmp::Ordering;
use regex::Regex;

/// [`ArgRule::step`] of a rule that applies in every step (and while no step is active).
pub const ANY_STEP: u16 = u16::MAX;
/// An unbounded end of [`Test::Length`].
pub const UNBOUNDED: u32 = u32::MAX;

/// What a rule does with its predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// A call must satisfy the predicate; one that does not is refused.
    Require,
    /// A call that satisfies the predicate needs a human's approval (conditional
    /// `approve`).
    ApproveWhen,
}

/// One rule on the arguments of one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgRule {
    /// The tool (an index into the machine's tools).
    pub tool: u16,
    /// The step it applies in, or [`ANY_STEP`].
    pub step: u16,
    /// Require or gate.
    pub kind: RuleKind,
    /// Its name, a span of [`Rules::text`].
    pub name: Span,
    /// Its predicate, an index into [`Rules::preds`].
    pub pred: u32,
}

/// A predicate node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pred {
    /// Every child holds: a span of [`Rules::children`].
    All(Span),
    /// Some child holds: a span of [`Rules::children`].
    Any(Span),
    /// The child does not hold.
    Not(u32),
    /// A test of the value at a JSON pointer (`path`, a span of [`Rules::text`],
    /// relative to the arguments or, inside [`Test::Each`], to the element).
    Test {
        /// The JSON pointer (RFC 6901).
        path: Span,
        /// What the value must be.
        test: Test,
    },
}

/// What a value must be. Text operands are spans of [`Rules::text`]; lists are spans of
/// [`Rules::strings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Test {
    /// There is a value at the pointer.
    Exists,
    /// Equal to a JSON scalar (its text: a string literal, a number, `true`, `false`,
    /// `null`); numbers by exact decimal value.
    Equals(Span),
    /// Equal to one of these JSON scalars.
    OneOf(Span),
    /// A string matching this `*` glob.
    Glob(Span),
    /// A string the regex matches somewhere (anchor it with `^…$` to match the whole
    /// string).
    Regex {
        /// Its source, a span of [`Rules::text`].
        source: Span,
        /// Its index among the machine's compiled argument regexes
        /// ([`Rules::regex_sources`] in that order).
        index: u32,
    },
    /// A number in `min..=max` (number texts; an empty span is unbounded).
    Range {
        /// The least value allowed.
        min: Span,
        /// The greatest value allowed.
        max: Span,
    },
    /// A string of `min..=max` characters, or an array or object of that many entries
    /// ([`UNBOUNDED`]: no upper bound).
    Length {
        /// The least length.
        min: u32,
        /// The greatest length.
        max: u32,
    },
    /// A string that is an absolute URL whose host matches one of these `*` globs
    /// (lowercase).
    HostIn(Span),
    /// A string that names a host — alone (`www.example.com`, `example.com:8080/path`)
    /// or as an absolute URL ([`host_name`](super::host_name)) — matching one of these
    /// `*` globs (lowercase).
    HostnameIn(Span),
    /// A string that is a list of plain e-mail addresses
    /// ([`address_list`](super::address_list)), every one of which matches one of these
    /// `*` globs (lowercase).
    AddressesIn(Span),
    /// A string every link inside which ([`link_hosts`](super::link_hosts)) goes to a
    /// host matching one of these `*` globs (lowercase); a string without links holds.
    LinksIn(Span),
    /// A string every e-mail address inside which
    /// ([`email_addresses`](super::email_addresses)) matches one of these `*` globs
    /// (lowercase); a string without addresses holds.
    EmailsIn(Span),
    /// An array every element of which satisfies this predicate (an index into
    /// [`Rules::preds`]; its pointers are relative to the element).
    Each(u32),
    /// A value the session saw at a source (an index into [`Rules::sources`]): in an
    /// earlier result of a tool, an earlier call's arguments, the user's messages or a
    /// trusted tool's results — values the session remembers (semantics §16).
    InResult(u32),
    /// A budget's total with this call (semantics §17) — what it charged within its
    /// scope and window, plus what it would charge this call — within `min..=max`
    /// (number texts; an empty span is unbounded). The predicate's path is unused.
    Budget {
        /// The budget (an index into [`Rules::budgets`]).
        budget: u16,
        /// The least total allowed.
        min: Span,
        /// The greatest total allowed.
        max: Span,
    },
    /// A number at most (`upper`) or at least the number the newest result of a tool
    /// held at a path ([`Rules::numbers`] `number`); with no such number held, it does
    /// not hold.
    ResultBound {
        /// The number (an index into [`Rules::numbers`]).
        number: u32,
        /// `true`: the value may not be above it; `false`: not below it.
        upper: bool,
    },
}

compiled_form! {
    /// The argument rules of a machine (borrowed form; see the module docs).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Rules<'a>;
    /// The owned form of [`Rules`].
    #[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
    pub struct OwnedRules;
    {
        /// The rules, in template order: the orchestration's first, then each step's.
        rules: slice(ArgRule),
        /// The predicate nodes.
        preds: slice(Pred),
        /// The children of [`Pred::All`] and [`Pred::Any`].
        children: slice(u32),
        /// The lists of [`Test::OneOf`] and the host and address tests
        /// ([`Test::HostIn`], [`Test::HostnameIn`], [`Test::AddressesIn`],
        /// [`Test::LinksIn`], [`Test::EmailsIn`]): spans of [`Rules::text`].
        strings: slice(Span),
        /// Where the values [`Test::InResult`] reads come from, and the untrusted tools
        /// whose results' values are remembered to say where a value was seen.
        sources: slice(Source),
        /// The numbers [`Test::ResultBound`] compares with: the newest number a tool's
        /// results held at a path (origin [`Origin::Result`]).
        numbers: slice(Source),
        /// The budgets (semantics §17), in template order.
        budgets: slice(Budget),
        /// The tools each budget charges: spans of it are [`Budget::tools`].
        budget_tools: slice(u16),
        /// The budget tests step conditions read (semantics §17): predicate nodes, each a
        /// [`Test::Budget`]; a step's `Condition::Budget(k)` is the `k`-th.
        budget_conditions: slice(u32),
        /// Every text of the rules, one after the other.
        text: text,
        /// The values a session remembers in each ring (the template's
        /// `rememberedValues`; 0: [`MEMORY_VALUES`](super::MEMORY_VALUES)).
        remember: value(u32),
    }
}

/// What the argument rules say about one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Judged {
    /// No rule applies, or every rule that applies is satisfied and no `approve` rule
    /// holds.
    Free,
    /// A conditional `approve` rule (this index) holds: the call needs a human.
    Gated(u16),
    /// A required rule is broken.
    Broken(Broken),
}

/// Why a call breaks a rule: which rule, which part of its predicate, and the value it
/// judged — indices and byte ranges only, so that it costs nothing to carry;
/// [`Rules::explain`] puts it in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Broken {
    /// The rule (an index into [`Rules::rules`]).
    pub rule: u16,
    /// The predicate node that does not hold (an index into [`Rules::preds`]).
    pub pred: u32,
    /// The bytes of the value it judged in the arguments, `(start, end)`; `None` when
    /// nothing was there.
    pub value: Option<(u32, u32)>,
    /// Inside [`Test::Each`]: that node and the element's index.
    pub element: Option<(u32, u32)>,
    /// The arguments could not be read at all.
    pub unreadable: Option<Unreadable>,
    /// A budget test's total with this call, in billionths ([`Test::Budget`]).
    pub total: Option<i128>,
}

impl Broken {
    fn unreadable(rule: u16, pred: u32, why: Unreadable) -> Self {
        Broken {
            rule,
            pred,
            value: None,
            element: None,
            unreadable: Some(why),
            total: None,
        }
    }
}

/// The part of a predicate that failed, while evaluating.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Failure {
    pred: u32,
    value: Option<(u32, u32)>,
    element: Option<(u32, u32)>,
    total: Option<i128>,
}

impl<'a> Rules<'a> {
    /// Are there no rules?
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The text of a span of [`Rules::text`].
    pub fn text_of(&self, span: Span) -> &'a str {
        self.text.get(span.range()).unwrap_or("")
    }

    /// Rule `rule`'s name.
    pub fn name(&self, rule: u16) -> &'a str {
        self.rules
            .get(rule as usize)
            .map_or("", |r| self.text_of(r.name))
    }

    /// The values a session of this machine remembers in each ring.
    pub fn memory_values(&self) -> usize {
        match self.remember {
            0 => super::MEMORY_VALUES,
            n => n as usize,
        }
    }

    /// The words of memory a session of this machine needs: a ring of
    /// [`Rules::memory_values`] values when a rule reads remembered values or a tool is
    /// untrusted, a second when a tool is untrusted, and the budgets' area
    /// ([`Rules::budget_area_words`]).
    pub fn memory_words(&self) -> usize {
        let (main, untrusted) = self.ring_sizes();
        main + untrusted + self.number_area_words() + self.budget_area_words()
    }

    /// The words of the two rings of remembered values (0 where there is none).
    pub(super) fn ring_sizes(&self) -> (usize, usize) {
        let ring = memory::ring_words(self.memory_values());
        if self.sources.is_empty() {
            (0, 0)
        } else if self.has_untrusted() {
            (ring, ring)
        } else {
            (ring, 0)
        }
    }

    /// Does the template declare an untrusted tool?
    fn has_untrusted(&self) -> bool {
        self.sources.iter().any(|s| s.origin == Origin::Untrusted)
    }

    /// A session's memory words split into its two rings: the values rules read, and the
    /// values seen in untrusted text (empty without untrusted tools).
    pub(crate) fn rings<'m>(&self, words: &'m [u64]) -> (&'m [u64], &'m [u64]) {
        let (main, untrusted) = self.ring_sizes();
        let (a, rest) = words.split_at(main.min(words.len()));
        (a, &rest[..untrusted.min(rest.len())])
    }

    /// [`Rules::rings`], mutable.
    pub(crate) fn rings_mut<'m>(&self, words: &'m mut [u64]) -> (&'m mut [u64], &'m mut [u64]) {
        let (main, untrusted) = self.ring_sizes();
        let (a, rest) = words.split_at_mut(main.min(words.len()));
        let n = untrusted.min(rest.len());
        (a, &mut rest[..n])
    }

    /// The budgets' area of a session's memory words (empty without budgets): after the
    /// rings and the numbers.
    pub(crate) fn budget_area<'m>(&self, words: &'m [u64]) -> &'m [u64] {
        let (main, untrusted) = self.ring_sizes();
        words
            .get(main + untrusted + self.number_area_words()..)
            .unwrap_or(&[])
    }

    /// [`Rules::budget_area`], mutable.
    pub(crate) fn budget_area_mut<'m>(&self, words: &'m mut [u64]) -> &'m mut [u64] {
        let (main, untrusted) = self.ring_sizes();
        words
            .get_mut(main + untrusted + self.number_area_words()..)
            .unwrap_or(&mut [])
    }

    /// The sources of the regexes of [`Test::Regex`], in the order of their indices.
    pub fn regex_sources(&self) -> Vec<&'a str> {
        let mut sources: Vec<(u32, &'a str)> = self
            .preds
            .iter()
            .filter_map(|p| match p {
                Pred::Test {
                    test: Test::Regex { source, index },
                    ..
                } => Some((*index, self.text_of(*source))),
                _ => None,
            })
            .collect();
        sources.sort_unstable();
        sources.dedup_by_key(|s| s.0);
        sources.into_iter().map(|(_, s)| s).collect()
    }

    /// Does any rule apply to `tool` in step `step`?
    #[inline]
    pub fn applies(&self, tool: usize, step: u16) -> bool {
        self.rules
            .iter()
            .any(|r| r.tool as usize == tool && (r.step == ANY_STEP || r.step == step))
    }

    /// Does the session read the arguments of a call of `tool` in step `step`: a rule
    /// applies, or a source remembers them (semantics §16)? A host writes a call's
    /// arguments out, and a decision log keeps them, only then.
    pub fn reads_arguments(&self, tool: usize, step: u16) -> bool {
        self.applies(tool, step)
            || self
                .sources
                .iter()
                .any(|s| s.origin == Origin::Arguments && s.tool as usize == tool)
            || self.budget_reads_arguments(tool)
    }

    /// Judges the arguments of a call of `tool` in step `step` (`u16::MAX` when no step
    /// is active) by every rule that applies: the first required rule broken, else the
    /// first `approve` rule that holds, else free. No rule applying costs one pass over
    /// the rules and never allocates; otherwise the arguments are read once. Arguments
    /// that cannot be read break the first required rule, or else gate the call.
    /// `regexes` are the machine's compiled argument regexes; `memory` the session's
    /// memory words; `at` the call's time in milliseconds, if the host gave it (budgets
    /// judge at the newer of it and the session's clock).
    pub fn judge(
        &self,
        tool: usize,
        step: u16,
        arguments: &str,
        regexes: &[Option<Regex>],
        memory: &[u64],
        at: Option<u64>,
    ) -> Judged {
        if !self.applies(tool, step) {
            return Judged::Free;
        }
        let applying = || {
            self.rules.iter().enumerate().filter(move |(_, r)| {
                r.tool as usize == tool && (r.step == ANY_STEP || r.step == step)
            })
        };
        // Arguments that cannot be read break the first required rule, or gate the call.
        let unreadable =
            |why: Unreadable| match applying().find(|(_, r)| r.kind == RuleKind::Require) {
                Some((i, r)) => Judged::Broken(Broken::unreadable(i as u16, r.pred, why)),
                None => applying()
                    .next()
                    .map_or(Judged::Free, |(i, _)| Judged::Gated(i as u16)),
            };
        let doc = match Doc::parse(arguments) {
            Ok(doc) => doc,
            Err(why) => return unreadable(why),
        };
        let mut eval = self.eval(&doc, regexes, memory, tool, at);
        eval.charges = eval.charges_of_call();
        if let Some(why) = eval.unreadable_charge() {
            return unreadable(why);
        }
        for (i, r) in applying().filter(|(_, r)| r.kind == RuleKind::Require) {
            let mut failure = None;
            if !eval.holds(0, r.pred, &mut failure) {
                let f = failure.unwrap_or(Failure {
                    pred: r.pred,
                    ..Failure::default()
                });
                return Judged::Broken(Broken {
                    rule: i as u16,
                    pred: f.pred,
                    value: f.value,
                    element: f.element,
                    unreadable: None,
                    total: f.total,
                });
            }
        }
        for (i, r) in applying().filter(|(_, r)| r.kind == RuleKind::ApproveWhen) {
            if eval.holds(0, r.pred, &mut None) {
                return Judged::Gated(i as u16);
            }
        }
        Judged::Free
    }

    /// Does admitting a call of `tool` change what a session remembers: its arguments
    /// remembered (an `arguments` origin), or a budget's clock or charges (semantics
    /// §16, §17)? A host that stores a session only when it changed stores it then.
    pub fn admit_changes_memory(&self, tool: usize) -> bool {
        !self.budgets.is_empty()
            || self
                .sources
                .iter()
                .any(|s| s.origin == Origin::Arguments && s.tool as usize == tool)
    }

    /// An evaluation of a call of `tool` with the read arguments `doc`, at `at`.
    fn eval<'e>(
        &'e self,
        doc: &'e Doc<'e>,
        regexes: &'e [Option<Regex>],
        memory: &'e [u64],
        tool: usize,
        at: Option<u64>,
    ) -> Eval<'e, 'e> {
        let budgets = Area::new(self.budget_area(memory));
        let clock = budgets.clock();
        let now = at.map_or(clock, |at| at.max(clock));
        self.eval_over(doc, regexes, memory, budgets, tool, now)
    }

    /// An evaluation over the words `rings` (a session's memory words, or their rings
    /// alone) and the budgets `budgets`, at `now`.
    pub(super) fn eval_over<'e>(
        &'e self,
        doc: &'e Doc<'e>,
        regexes: &'e [Option<Regex>],
        rings: &'e [u64],
        budgets: Area<'e>,
        tool: usize,
        now: u64,
    ) -> Eval<'e, 'e> {
        let (main, untrusted) = self.rings(rings);
        Eval {
            rules: self,
            doc,
            regexes,
            memory: memory::live(main),
            untrusted: memory::live(untrusted),
            numbers: self.number_area(rings),
            budgets,
            now,
            tool,
            charges: Vec::new(),
        }
    }

    /// The path every child of the [`Pred::Any`] or [`Pred::All`] `span` tests, when
    /// they are all tests of one path.
    pub(super) fn shared_path(&self, span: Span) -> Option<Span> {
        let mut shared: Option<Span> = None;
        for &c in self.children.get(span.range())? {
            let Some(Pred::Test { path, test }) = self.preds.get(c as usize) else {
                return None;
            };
            if matches!(test, Test::Budget { .. }) {
                return None;
            }
            match shared {
                Some(p) if self.text_of(p) != self.text_of(*path) => return None,
                _ => shared = Some(*path),
            }
        }
        shared
    }
}

/// One evaluation: the rules, the read arguments, the compiled regexes.
pub(super) struct Eval<'r, 'd> {
    pub(super) rules: &'r Rules<'r>,
    pub(super) doc: &'d Doc<'d>,
    regexes: &'r [Option<Regex>],
    /// The session's remembered values (live entries only).
    memory: &'r [u64],
    /// The values seen in untrusted text (live entries only).
    untrusted: &'r [u64],
    /// The numbers results held that bounds read ([`Rules::number_area`]).
    numbers: &'r [u64],
    /// The session's budgets.
    pub(super) budgets: Area<'r>,
    /// The time the call is judged at (ms).
    pub(super) now: u64,
    /// The tool called.
    pub(super) tool: usize,
    /// What each budget charges this call, in the order of [`Rules::budgets`] (read once
    /// per call; empty when the call is charged, not judged).
    pub(super) charges: Vec<Charge>,
}

impl Eval<'_, '_> {
    /// Does predicate `p` hold of node `at`? On `false`, `why` holds the part that failed
    /// (when it held nothing before).
    pub(super) fn holds(&self, at: usize, p: u32, why: &mut Option<Failure>) -> bool {
        let r = self.rules;
        let fail = |why: &mut Option<Failure>, value: Option<(u32, u32)>| {
            if why.is_none() {
                *why = Some(Failure {
                    pred: p,
                    value,
                    element: None,
                    total: None,
                });
            }
            false
        };
        match r.preds.get(p as usize) {
            Some(Pred::Test {
                test: Test::Budget { budget, min, max },
                ..
            }) => {
                let total = self.budget_total(*budget as usize);
                let inside = within(total, r.text_of(*min), r.text_of(*max));
                if !inside && why.is_none() {
                    *why = Some(Failure {
                        pred: p,
                        value: None,
                        element: None,
                        total: Some(total),
                    });
                }
                inside
            }
            Some(Pred::All(span)) => r
                .children
                .get(span.range())
                .unwrap_or(&[])
                .iter()
                .all(|&c| self.holds(at, c, why)),
            Some(Pred::Any(span)) => {
                let any = r
                    .children
                    .get(span.range())
                    .unwrap_or(&[])
                    .iter()
                    .any(|&c| self.holds(at, c, &mut None));
                // Alternatives about one value (a `from` of several sources) name it.
                let value = r.shared_path(*span).and_then(|path| {
                    let n = self.doc.pointer(at, r.text_of(path))?;
                    Some((self.doc.nodes[n].start, self.doc.nodes[n].end))
                });
                any || fail(why, value)
            }
            Some(Pred::Not(inner)) => !self.holds(at, *inner, &mut None) || fail(why, None),
            Some(Pred::Test { path, test }) => {
                let node = self.doc.pointer(at, r.text_of(*path));
                let value = node.map(|n| (self.doc.nodes[n].start, self.doc.nodes[n].end));
                match (node, test) {
                    (Some(n), Test::Each(inner)) => {
                        if self.doc.nodes[n].kind != Kind::Array {
                            return fail(why, value);
                        }
                        for (index, element) in self.doc.children(n).enumerate() {
                            let mut inner_why = None;
                            if !self.holds(element, *inner, &mut inner_why) {
                                if why.is_none() {
                                    let mut f = inner_why.unwrap_or(Failure {
                                        pred: *inner,
                                        ..Failure::default()
                                    });
                                    if f.element.is_none() {
                                        f.element = Some((p, index as u32));
                                    }
                                    *why = Some(f);
                                }
                                return false;
                            }
                        }
                        true
                    }
                    (Some(n), Test::ResultBound { number, .. }) => {
                        let holds = self.test(n, test);
                        if !holds && why.is_none() {
                            *why = Some(Failure {
                                pred: p,
                                value,
                                element: None,
                                total: Rules::held_number(self.numbers, *number as usize),
                            });
                        }
                        holds
                    }
                    (Some(n), test) => self.test(n, test) || fail(why, value),
                    (None, Test::Exists) | (None, _) => fail(why, None),
                }
            }
            None => fail(why, None),
        }
    }

    /// A leaf test of node `n`.
    fn test(&self, n: usize, test: &Test) -> bool {
        let r = self.rules;
        let doc = self.doc;
        let list = |span: Span| {
            r.strings
                .get(span.range())
                .unwrap_or(&[])
                .iter()
                .map(|s| r.text_of(*s))
        };
        match *test {
            Test::Exists => true,
            Test::Equals(v) => scalar_eq(doc, n, r.text_of(v)),
            Test::OneOf(l) => list(l).any(|v| scalar_eq(doc, n, v)),
            Test::Glob(g) => doc.string(n).is_some_and(|s| glob_match(r.text_of(g), &s)),
            Test::Regex { index, .. } => match (doc.string(n), self.regexes.get(index as usize)) {
                (Some(s), Some(Some(re))) => re.is_match(&s),
                _ => false,
            },
            Test::Range { min, max } => {
                if doc.nodes[n].kind != Kind::Number {
                    return false;
                }
                let raw = doc.raw(n);
                let above = min.is_empty()
                    || compare_numbers(raw, r.text_of(min)).is_some_and(|o| o != Ordering::Less);
                let below = max.is_empty()
                    || compare_numbers(raw, r.text_of(max)).is_some_and(|o| o != Ordering::Greater);
                above && below
            }
            Test::Length { min, max } => {
                let len = match doc.nodes[n].kind {
                    Kind::String { .. } => doc.string(n).map_or(0, |s| s.chars().count()),
                    Kind::Array | Kind::Object => doc.nodes[n].len as usize,
                    _ => return false,
                };
                len >= min as usize && (max == UNBOUNDED || len <= max as usize)
            }
            Test::HostIn(l) => doc
                .string(n)
                .and_then(|s| url_host(&s))
                .is_some_and(|host| list(l).any(|p| glob_match(p, &host))),
            Test::HostnameIn(l) => doc
                .string(n)
                .and_then(|s| host_name(&s))
                .is_some_and(|host| list(l).any(|p| glob_match(p, &host))),
            Test::AddressesIn(l) => doc
                .string(n)
                .and_then(|s| address_list(&s))
                .is_some_and(|all| all.iter().all(|a| list(l).any(|p| glob_match(p, a)))),
            Test::LinksIn(l) => doc
                .string(n)
                .and_then(|s| link_hosts(&s))
                .is_some_and(|all| all.iter().all(|h| list(l).any(|p| glob_match(p, h)))),
            Test::EmailsIn(l) => doc
                .string(n)
                .and_then(|s| email_addresses(&s))
                .is_some_and(|all| all.iter().all(|a| list(l).any(|p| glob_match(p, a)))),
            Test::InResult(source) => self.seen(source, n),
            Test::ResultBound { number, upper } => self.within_result(number, upper, n),
            Test::Each(_) | Test::Budget { .. } => false,
        }
    }
}

impl Eval<'_, '_> {
    /// Did the session see node `n`'s value at source `source`?
    fn seen(&self, source: u32, n: usize) -> bool {
        let Some(src) = self.rules.sources.get(source as usize) else {
            return false;
        };
        let live = if src.origin == Origin::Untrusted {
            self.untrusted
        } else {
            self.memory
        };
        super::seen::seen_in(src.origin, source, self.doc, n, live)
    }

    /// Is number node `n` within the bound the number `number` holds: at most it
    /// (`upper`) or at least it? Not when no number is held, or `n` is no number.
    fn within_result(&self, number: u32, upper: bool, n: usize) -> bool {
        if self.doc.nodes[n].kind != Kind::Number {
            return false;
        }
        let Some(held) = Rules::held_number(self.numbers, number as usize) else {
            return false;
        };
        let raw = self.doc.raw(n);
        // Exactly, as billionths; a number more precise than that, as decimal texts.
        let order = match super::budget::bound(raw) {
            Some(v) => Some(v.cmp(&held)),
            None => compare_numbers(raw, &super::budget::decimal(held)),
        };
        match order {
            Some(Ordering::Equal) => true,
            Some(Ordering::Less) => upper,
            Some(Ordering::Greater) => !upper,
            None => false,
        }
    }
}

/// Is node `n` equal to the JSON scalar `literal` (numbers by exact value, strings
/// decoded)?
fn scalar_eq(doc: &Doc<'_>, n: usize, literal: &str) -> bool {
    match (doc.nodes[n].kind, literal.as_bytes().first()) {
        (Kind::String { .. }, Some(b'"')) => match (doc.string(n), Doc::parse(literal)) {
            (Some(s), Ok(lit)) => lit.string(0).is_some_and(|l| l == s),
            _ => false,
        },
        (Kind::Number, Some(b'-' | b'0'..=b'9')) => {
            compare_numbers(doc.raw(n), literal) == Some(Ordering::Equal)
        }
        (Kind::True, _) => literal == "true",
        (Kind::False, _) => literal == "false",
        (Kind::Null, _) => literal == "null",
        _ => false,
    }
}
