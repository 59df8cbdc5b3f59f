//! Rules on arguments in the IR (semantics §16), and their flat compiled form.

use super::SourceSpan;
use orch_runtime::compiled::{
    ArgRule, Budget, Origin, OwnedRules, Per, Pred, RuleKind, Source, Span, Test, ANY_STEP,
    EVERY_CALL, NO_TOOL, UNBOUNDED,
};
use std::collections::HashMap;

/// A rule on the arguments of one tool's calls, its names resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrArgRule {
    /// Its name (a conditional `approve` without one: `approve <tool>`).
    pub name: String,
    /// The tool (an index into [`super::Ir::tools`]).
    pub tool: usize,
    /// The step it belongs to, or `None` for the orchestration's (every step).
    pub step: Option<usize>,
    /// Refuse (`require`) or gate (`approve` … `when`).
    pub kind: RuleKind,
    /// Its predicate.
    pub pred: IrPred,
    /// Where it is written.
    pub span: SourceSpan,
}

/// A predicate, checked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IrPred {
    /// Every one holds.
    All(Vec<IrPred>),
    /// One holds.
    Any(Vec<IrPred>),
    /// It does not hold.
    Not(Box<IrPred>),
    /// The value at the JSON pointer `path` passes `test`.
    Test {
        /// The JSON pointer.
        path: String,
        /// The test.
        test: IrTest,
    },
}

/// A test of one value, checked: numbers are valid JSON number texts, bounds ordered,
/// regexes compile, host patterns lowercase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IrTest {
    /// Present.
    Exists,
    /// Equal to this JSON scalar (its text).
    Equals(String),
    /// Equal to one of these JSON scalars.
    OneOf(Vec<String>),
    /// A string matching this glob.
    Glob(String),
    /// A string this regex matches.
    Regex(String),
    /// A number within the bounds (number texts).
    Range {
        /// Inclusive lower bound.
        min: Option<String>,
        /// Inclusive upper bound.
        max: Option<String>,
    },
    /// A length within the bounds.
    Length {
        /// Inclusive lower bound.
        min: u32,
        /// Inclusive upper bound.
        max: Option<u32>,
    },
    /// A URL whose host matches one of these globs.
    HostIn(Vec<String>),
    /// A host, alone or in a URL, matching one of these globs.
    HostnameIn(Vec<String>),
    /// A list of plain e-mail addresses, each matching one of these globs.
    AddressesIn(Vec<String>),
    /// Text whose every link goes to a host matching one of these globs.
    LinksIn(Vec<String>),
    /// Text whose every e-mail address matches one of these globs.
    EmailsIn(Vec<String>),
    /// An array whose every element satisfies it.
    Each(Box<IrPred>),
    /// A budget's total with this call within the bounds (decimal texts); the
    /// predicate's path is empty.
    Budget {
        /// The budget (an index into [`IrMemory::budgets`]).
        budget: usize,
        /// Inclusive lower bound.
        min: Option<String>,
        /// Inclusive upper bound.
        max: Option<String>,
    },
    /// A number at most (`upper`) or at least the number the newest result of `tool`
    /// held at `path`.
    ResultBound {
        /// The tool (an index into the IR's tools).
        tool: usize,
        /// The JSON pointer into its results.
        path: String,
        /// `true`: at most; `false`: at least.
        upper: bool,
    },
    /// A value the session saw at a source: of `origin`, of `tool`, at `path` (`*`
    /// tokens: every element or member).
    Seen {
        /// What the source remembers.
        origin: Origin,
        /// The tool (an index into the IR's tools; [`NO_TOOL`] for the user's messages).
        tool: usize,
        /// The pointer into its results or arguments.
        path: String,
    },
}

/// What the sessions of a machine remember besides what rules read (semantics §16).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrMemory {
    /// The tools declared trusted.
    pub trusted: Vec<usize>,
    /// The tools declared untrusted.
    pub untrusted: Vec<usize>,
    /// `rememberedValues`, if written.
    pub values: Option<u32>,
    /// The budgets (semantics §17), in template order.
    pub budgets: Vec<IrBudget>,
    /// The budget tests step conditions read, each an [`IrTest::Budget`]; a step's
    /// [`IrCondition::Budget`](crate::ir::IrCondition::Budget) is an index into it.
    pub conditions: Vec<IrTest>,
}

impl IrMemory {
    /// Budget condition `k` ([`IrMemory::conditions`]) in the template's words:
    /// "refunds at least 3".
    pub fn describe_condition(&self, k: usize) -> String {
        let Some(IrTest::Budget { budget, min, max }) = self.conditions.get(k) else {
            return String::new();
        };
        let name = self.budgets.get(*budget).map_or("", |b| b.name.as_str());
        match (min, max) {
            (None, None) => name.to_owned(),
            (Some(min), None) => format!("{name} at least {min}"),
            (None, Some(max)) => format!("{name} at most {max}"),
            (Some(min), Some(max)) => format!("{name} from {min} to {max}"),
        }
    }
}

/// A budget, checked (semantics §17).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrBudget {
    /// Its name.
    pub name: String,
    /// The tools whose admitted calls it charges (indices into the IR's tools).
    pub tools: Vec<usize>,
    /// The JSON pointer of the number it adds up; `None`: it counts calls.
    pub sum: Option<String>,
    /// Only calls whose arguments satisfy it are charged.
    pub when: Option<IrPred>,
    /// What it counts over: the run, a step's activation, a user message.
    pub per: Per,
    /// Its window in milliseconds; 0: none.
    pub within_ms: u64,
    /// The charges a windowed budget keeps (0 without a window).
    pub events: u32,
    /// It counts the calls the session refused, not those it admitted.
    pub refused: bool,
    /// Where it is written.
    pub span: SourceSpan,
}

/// Builds [`OwnedRules`] from the IR's rules and memory: predicates flattened, texts
/// stored once, a source for each trusted and untrusted tool.
pub(super) fn flatten(rules: &[IrArgRule], memory: &IrMemory) -> OwnedRules {
    let mut f = Flat::default();
    f.out.remember = memory.values.unwrap_or(0);
    for (origin, tools) in [
        (Origin::Trusted, &memory.trusted),
        (Origin::Untrusted, &memory.untrusted),
    ] {
        for tool in tools {
            f.source(origin, *tool, "");
        }
    }
    let mut offset = 1u32;
    for b in &memory.budgets {
        let name = f.text(&b.name);
        let start = f.out.budget_tools.len() as u32;
        f.out.budget_tools.extend(b.tools.iter().map(|&t| t as u16));
        let tools = Span::new(start, b.tools.len() as u32);
        let sum = b.sum.as_deref().map(|s| f.text(s));
        let pred = b.when.as_ref().map_or(EVERY_CALL, |p| f.pred(p));
        let budget = Budget {
            name,
            tools,
            sum,
            pred,
            per: b.per,
            within: b.within_ms,
            events: b.events,
            offset,
            refused: b.refused,
        };
        offset = offset.saturating_add(budget.words() as u32);
        f.out.budgets.push(budget);
    }
    for r in rules {
        let pred = f.pred(&r.pred);
        let name = f.text(&r.name);
        f.out.rules.push(ArgRule {
            tool: r.tool as u16,
            step: r.step.map_or(ANY_STEP, |s| s as u16),
            kind: r.kind,
            name,
            pred,
        });
    }
    for test in &memory.conditions {
        let pred = f.pred(&IrPred::Test {
            path: String::new(),
            test: test.clone(),
        });
        f.out.budget_conditions.push(pred);
    }
    f.out
}

/// One predicate flattened on its own (a property's `when`, a rule in a hover): the
/// rules' form holding only it (and the template's budgets, by name, which its budget
/// tests read), and its root node.
pub fn flatten_predicate(pred: &IrPred, budget_names: &[&str]) -> (OwnedRules, u32) {
    let mut f = Flat::default();
    for name in budget_names {
        let name = f.text(name);
        f.out.budgets.push(Budget {
            name,
            tools: Span::new(0, 0),
            sum: None,
            pred: EVERY_CALL,
            per: Per::Run,
            within: 0,
            events: 0,
            offset: 0,
            refused: false,
        });
    }
    let root = f.pred(pred);
    (f.out, root)
}

#[derive(Default)]
struct Flat {
    out: OwnedRules,
    texts: HashMap<String, Span>,
    regexes: HashMap<String, u32>,
    sources: HashMap<(u8, usize, String), u32>,
}

/// An origin as a number, for a map key.
fn origin_code(origin: Origin) -> u8 {
    match origin {
        Origin::Result => 0,
        Origin::Arguments => 1,
        Origin::User => 2,
        Origin::Trusted => 3,
        Origin::Untrusted => 4,
    }
}

impl Flat {
    /// The index of the source of `origin`, `tool` and `path`, added when new.
    fn source(&mut self, origin: Origin, tool: usize, path: &str) -> u32 {
        let key = (origin_code(origin), tool, path.to_owned());
        if let Some(i) = self.sources.get(&key) {
            return *i;
        }
        let i = self.out.sources.len() as u32;
        let path = self.text(path);
        self.out.sources.push(Source {
            origin,
            tool: u16::try_from(tool).unwrap_or(NO_TOOL),
            path,
        });
        self.sources.insert(key, i);
        i
    }

    /// The index of the number read from `tool`'s results at `path`, added once.
    fn number(&mut self, tool: usize, path: &str) -> u32 {
        let tool = u16::try_from(tool).unwrap_or(NO_TOOL);
        let found = self
            .out
            .numbers
            .iter()
            .position(|s| s.tool == tool && self.out.text.get(s.path.range()) == Some(path));
        if let Some(k) = found {
            return k as u32;
        }
        let path = self.text(path);
        self.out.numbers.push(Source {
            origin: Origin::Result,
            tool,
            path,
        });
        (self.out.numbers.len() - 1) as u32
    }

    fn text(&mut self, s: &str) -> Span {
        if let Some(span) = self.texts.get(s) {
            return *span;
        }
        // Inside the text pool already (a longer text containing it)? Keep it simple:
        // append, once per distinct text.
        let span = Span::new(self.out.text.len() as u32, s.len() as u32);
        self.out.text.push_str(s);
        self.texts.insert(s.to_owned(), span);
        span
    }

    fn list(&mut self, items: &[String]) -> Span {
        let spans: Vec<Span> = items.iter().map(|s| self.text(s)).collect();
        let start = self.out.strings.len() as u32;
        self.out.strings.extend(spans);
        Span::new(start, items.len() as u32)
    }

    fn pred(&mut self, p: &IrPred) -> u32 {
        let node = match p {
            IrPred::All(items) | IrPred::Any(items) => {
                let children: Vec<u32> = items.iter().map(|c| self.pred(c)).collect();
                let start = self.out.children.len() as u32;
                self.out.children.extend(children);
                let span = Span::new(start, items.len() as u32);
                if matches!(p, IrPred::All(_)) {
                    Pred::All(span)
                } else {
                    Pred::Any(span)
                }
            }
            IrPred::Not(inner) => Pred::Not(self.pred(inner)),
            IrPred::Test { path, test } => {
                let test = match test {
                    IrTest::Exists => Test::Exists,
                    IrTest::Equals(v) => Test::Equals(self.text(v)),
                    IrTest::OneOf(vs) => Test::OneOf(self.list(vs)),
                    IrTest::Glob(g) => Test::Glob(self.text(g)),
                    IrTest::Regex(re) => {
                        let next = self.regexes.len() as u32;
                        let index = *self.regexes.entry(re.clone()).or_insert(next);
                        Test::Regex {
                            source: self.text(re),
                            index,
                        }
                    }
                    IrTest::Range { min, max } => Test::Range {
                        min: min.as_deref().map_or(Span::new(0, 0), |m| self.text(m)),
                        max: max.as_deref().map_or(Span::new(0, 0), |m| self.text(m)),
                    },
                    IrTest::Length { min, max } => Test::Length {
                        min: *min,
                        max: max.unwrap_or(UNBOUNDED),
                    },
                    IrTest::HostIn(hosts) => Test::HostIn(self.list(hosts)),
                    IrTest::HostnameIn(hosts) => Test::HostnameIn(self.list(hosts)),
                    IrTest::AddressesIn(globs) => Test::AddressesIn(self.list(globs)),
                    IrTest::LinksIn(hosts) => Test::LinksIn(self.list(hosts)),
                    IrTest::EmailsIn(globs) => Test::EmailsIn(self.list(globs)),
                    IrTest::Each(inner) => Test::Each(self.pred(inner)),
                    IrTest::Budget { budget, min, max } => Test::Budget {
                        budget: *budget as u16,
                        min: min.as_deref().map_or(Span::new(0, 0), |m| self.text(m)),
                        max: max.as_deref().map_or(Span::new(0, 0), |m| self.text(m)),
                    },
                    IrTest::Seen { origin, tool, path } => {
                        Test::InResult(self.source(*origin, *tool, path))
                    }
                    IrTest::ResultBound { tool, path, upper } => Test::ResultBound {
                        number: self.number(*tool, path),
                        upper: *upper,
                    },
                };
                Pred::Test {
                    path: self.text(path),
                    test,
                }
            }
        };
        self.out.preds.push(node);
        (self.out.preds.len() - 1) as u32
    }
}
