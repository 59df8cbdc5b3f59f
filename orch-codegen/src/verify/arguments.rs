//! Rules on arguments in the host model of `orch verify` (semantics §14, §16): what a
//! call's arguments are is the model's choice, so every test of a predicate is a
//! decision it controls — both outcomes are explored. A call can run when some choice
//! satisfies every required rule that applies to it; it runs ungated when that choice
//! also makes no conditional `approve` hold. Tests are told apart by what they say (two
//! rules that test the same thing share the decision). `range` tests of one path are
//! decided together, by the number the model picks (below, at or between their bounds,
//! or no number at all), so `/amount ≥ 1000` implies `/amount ≥ 500`. The tests of one
//! path are decided jointly ([`super::feasible`]): a choice no value could make (absent
//! and in range, a string and a number, one of a `oneOf`'s values and not matching a
//! `glob` they all match) is dropped; tests of different paths stay independent. A
//! proof is sound, and a witness says which outcomes of the tests it assumed.
//!
//! A budget test (semantics §17) is no choice when the state knows the total: a count of
//! a tool's calls without `where` or `within` is exact in the model ([`Totals`]); any
//! other budget's total is the model's choice.

use super::feasible::{Class, PathChoice, Pattern, StrTest};
use orch_runtime::args::compare_numbers;
use orch_runtime::compiled::{Pred, RuleKind, Rules, Span, Test, ANY_STEP, UNBOUNDED};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// The most distinct tests one call's decision is enumerated over; past it the call is
/// taken to be able to run, ungated (sound for a proof).
pub(crate) const MAX_DECISIONS: usize = 16;

/// Budget `b`'s total with the call being judged, in billionths, where the model knows
/// it exactly; `None` where it is the model's choice.
pub(crate) type Totals<'a> = &'a dyn Fn(usize) -> Option<i128>;

/// A predicate in some rules' compiled form.
#[derive(Clone, Copy)]
pub(crate) struct Formula<'r> {
    pub rules: Rules<'r>,
    pub root: u32,
    /// The machine's tool names, for words about a value's source.
    pub tools: &'r [String],
}

impl Formula<'_> {
    /// Node `node` of this formula's rules, told apart from the same index of other
    /// rules (a property's `when` is compiled apart from the machine's).
    fn key(&self, node: u32) -> (usize, u32) {
        (self.rules.preds.as_ptr() as usize, node)
    }
}

/// Could a call of declared tool `tool` (`None`: a foreign tool, which no rule names)
/// in step `step` (`None`: none active) run with arguments satisfying `when` and every
/// required rule — and, when `ungated`, no conditional `approve`? When it could, the
/// outcome of each test the arguments were assumed to have ("`/amount` must be a number
/// of at least 100: holds"), in the order of their words; empty when no test applies or
/// there are too many to enumerate.
pub(crate) fn can_run<'r>(
    rules: Rules<'r>,
    tools: &'r [String],
    tool: Option<usize>,
    step: Option<usize>,
    when: Option<Formula<'r>>,
    ungated: bool,
    totals: Totals<'_>,
) -> Option<Vec<String>> {
    let step = step.map_or(ANY_STEP, |s| s as u16);
    let applying: Vec<(RuleKind, Formula<'_>)> = match tool {
        Some(t) => rules
            .rules
            .iter()
            .filter(|r| r.tool as usize == t && (r.step == ANY_STEP || r.step == step))
            .map(|r| {
                (
                    r.kind,
                    Formula {
                        rules,
                        root: r.pred,
                        tools,
                    },
                )
            })
            .collect(),
        None => Vec::new(),
    };
    // Each leaf's words are worked out once, not once per choice.
    let mut leaves: HashMap<(usize, u32), Leaf> = HashMap::new();
    for f in when.iter().chain(applying.iter().map(|(_, f)| f)) {
        walk(*f, f.root, &mut |node| {
            leaves
                .entry(f.key(node))
                .or_insert_with(|| leaf(*f, node, totals));
        });
    }
    // What the state decides alone (budgets counted exactly) is decided first, whatever
    // the number of other tests: a required rule it breaks, or a `when` it falsifies,
    // leaves no choice.
    let known = |f: &Formula<'_>| {
        decided(*f, f.root, &|f, node| match leaves.get(&f.key(node)) {
            Some(Leaf::Fixed(b)) => Some(*b),
            _ => None,
        })
    };
    let broken = applying
        .iter()
        .any(|(k, f)| *k == RuleKind::Require && known(f) == Some(false));
    let gated = ungated
        && applying
            .iter()
            .any(|(k, f)| *k == RuleKind::ApproveWhen && known(f) == Some(true));
    if broken || gated || when.as_ref().is_some_and(|f| known(f) == Some(false)) {
        return None;
    }
    let space = Space::new(leaves.values().cloned().collect());
    if space.size().is_none_or(|n| n > 1 << MAX_DECISIONS) {
        return Some(Vec::new());
    }
    let found = space
        .choices()
        .filter(|c| space.feasible(c))
        .find(|choice| {
            let decide = |f: Formula<'_>, node: u32| {
                leaves
                    .get(&f.key(node))
                    .is_some_and(|l| space.holds(choice, l))
            };
            let holds = |f: &Formula<'_>| eval(*f, f.root, &decide);
            when.as_ref().is_none_or(holds)
                && applying
                    .iter()
                    .filter(|(k, _)| *k == RuleKind::Require)
                    .all(|(_, f)| holds(f))
                && !(ungated
                    && applying
                        .iter()
                        .any(|(k, f)| *k == RuleKind::ApproveWhen && holds(f)))
        })?;
    Some(space.assumed(&found))
}

/// A leaf test as a decision: a `range` of a path (decided by the path's number), or
/// any other test, by its words.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Leaf {
    /// A test whose outcome the state decides (a budget the model counts exactly).
    Fixed(bool),
    Range {
        path: String,
        min: Option<String>,
        max: Option<String>,
    },
    Other {
        /// What it says (and, for a value from results, its source): its identity.
        words: String,
        /// Its JSON pointer.
        path: String,
        /// What it says of the value there.
        class: Class,
    },
}

/// Every choice the model has for one call: a truth value per other test, and per path
/// with `range` tests, where its number lies.
struct Space {
    /// Every other test: its words, its path, what it says.
    others: Vec<(String, String, Class)>,
    /// Per path: its bounds, ascending (as written).
    paths: Vec<(String, Vec<String>)>,
    /// Every path some test reads, grouped once: the indices of its tests in `others`
    /// and of its bounds in `paths`, so that a choice is checked path by path
    /// ([`Space::feasible`]) without grouping again.
    groups: Vec<(Vec<usize>, Option<usize>)>,
}

/// One choice: a bit per other test, a region per path (`2i`: strictly between bounds
/// `i-1` and `i`; `2i+1`: at bound `i`; `2n+1`: not a number).
struct Choice {
    bits: u64,
    regions: Vec<usize>,
}

impl Space {
    fn new(mut leaves: Vec<Leaf>) -> Self {
        leaves.sort();
        leaves.dedup();
        let mut others = Vec::new();
        let mut paths: Vec<(String, Vec<String>)> = Vec::new();
        for l in leaves {
            match l {
                Leaf::Fixed(_) => {}
                Leaf::Other { words, path, class } => {
                    if others
                        .last()
                        .is_none_or(|(w, _, _): &(String, String, Class)| *w != words)
                    {
                        others.push((words, path, class));
                    }
                }
                Leaf::Range { path, min, max } => {
                    let at = match paths.iter().position(|(p, _)| *p == path) {
                        Some(i) => i,
                        None => {
                            paths.push((path, Vec::new()));
                            paths.len() - 1
                        }
                    };
                    paths[at].1.extend(min.into_iter().chain(max));
                }
            }
        }
        for (_, bounds) in &mut paths {
            bounds.sort_by(|a, b| compare_numbers(a, b).unwrap_or(Ordering::Equal));
            bounds.dedup_by(|a, b| compare_numbers(a, b) == Some(Ordering::Equal));
        }
        let mut by_path: BTreeMap<&str, (Vec<usize>, Option<usize>)> = BTreeMap::new();
        for (i, (_, path, _)) in others.iter().enumerate() {
            by_path.entry(path).or_default().0.push(i);
        }
        for (k, (path, _)) in paths.iter().enumerate() {
            by_path.entry(path).or_default().1 = Some(k);
        }
        let groups = by_path.into_values().collect();
        Space {
            others,
            paths,
            groups,
        }
    }

    /// How many choices there are (`None`: too many to count).
    fn size(&self) -> Option<usize> {
        let bits = 1usize.checked_shl(self.others.len() as u32)?;
        self.paths
            .iter()
            .try_fold(bits, |n, (_, b)| n.checked_mul(2 * b.len() + 2))
    }

    fn choices(&self) -> impl Iterator<Item = Choice> + '_ {
        let n = self.size().unwrap_or(0);
        (0..n).map(move |mut k| {
            let mut regions = Vec::with_capacity(self.paths.len());
            for (_, b) in &self.paths {
                let r = 2 * b.len() + 2;
                regions.push(k % r);
                k /= r;
            }
            Choice {
                bits: k as u64,
                regions,
            }
        })
    }

    /// Could one value per path make this choice's outcomes ([`super::feasible`])?
    fn feasible(&self, choice: &Choice) -> bool {
        self.groups.iter().all(|(tests, range)| {
            PathChoice {
                tests: tests
                    .iter()
                    .map(|&i| (&self.others[i].2, choice.bits & (1 << i) != 0))
                    .collect(),
                range: range.map(|k| (self.paths[k].1.as_slice(), choice.regions[k])),
            }
            .feasible()
        })
    }

    /// The outcome of every test in `choice`, in words.
    fn assumed(&self, choice: &Choice) -> Vec<String> {
        let mut out: Vec<String> = self
            .others
            .iter()
            .enumerate()
            .map(|(i, (words, _, _))| {
                let words = words.split_once('#').map_or(words.as_str(), |(w, _)| w);
                let holds = choice.bits & (1 << i) != 0;
                format!("{words}: {}", if holds { "holds" } else { "does not hold" })
            })
            .collect();
        for (k, (path, bounds)) in self.paths.iter().enumerate() {
            let region = choice.regions[k];
            let n = bounds.len();
            let at = if region == 2 * n + 1 {
                format!("`{path}` is not a number")
            } else if n == 0 {
                // A `range` without bounds: any number.
                format!("`{path}` is a number")
            } else if region % 2 == 1 {
                format!("`{path}` is {}", bounds[region / 2])
            } else if region == 0 {
                format!("`{path}` is a number below {}", bounds[0])
            } else if region == 2 * n {
                format!("`{path}` is a number above {}", bounds[n - 1])
            } else {
                format!(
                    "`{path}` is a number between {} and {}",
                    bounds[region / 2 - 1],
                    bounds[region / 2]
                )
            };
            out.push(at);
        }
        out
    }

    fn holds(&self, choice: &Choice, leaf: &Leaf) -> bool {
        match leaf {
            Leaf::Fixed(holds) => *holds,
            Leaf::Other { words, .. } => self
                .others
                .iter()
                .position(|(o, _, _)| o == words)
                .is_some_and(|i| choice.bits & (1 << i) != 0),
            Leaf::Range { path, min, max } => {
                let Some(p) = self.paths.iter().position(|(q, _)| q == path) else {
                    return false;
                };
                let bounds = &self.paths[p].1;
                let region = choice.regions[p];
                let n = bounds.len();
                if region == 2 * n + 1 {
                    return false; // not a number
                }
                let cmp = |a: &str, b: &str| compare_numbers(a, b).unwrap_or(Ordering::Equal);
                if region % 2 == 1 {
                    let v = &bounds[region / 2];
                    return min
                        .as_deref()
                        .is_none_or(|m| cmp(m, v) != Ordering::Greater)
                        && max
                            .as_deref()
                            .is_none_or(|m| cmp(v, m) != Ordering::Greater);
                }
                // Strictly between bounds i-1 and i (below all for i = 0, above all for
                // i = n): every bound is one of `bounds`, so comparing with the
                // neighbours decides.
                let i = region / 2;
                let above_min = min
                    .as_deref()
                    .is_none_or(|m| i > 0 && cmp(m, &bounds[i - 1]) != Ordering::Greater);
                let below_max = max
                    .as_deref()
                    .is_none_or(|m| i < n && cmp(&bounds[i], m) != Ordering::Greater);
                above_min && below_max
            }
        }
    }
}

/// A leaf test as a decision: a `range` by its path and bounds, any other test by its
/// words (and, for a value from results, its source).
fn leaf(f: Formula<'_>, node: u32, totals: Totals<'_>) -> Leaf {
    if let Some(Pred::Test {
        test: Test::Budget { budget, min, max },
        ..
    }) = f.rules.preds.get(node as usize)
    {
        if let Some(total) = totals(*budget as usize) {
            let bound = |s: &Span| orch_runtime::args::bound(f.rules.text_of(*s));
            let above = min.is_empty() || bound(min).is_some_and(|m| total >= m);
            let below = max.is_empty() || bound(max).is_some_and(|m| total <= m);
            return Leaf::Fixed(above && below);
        }
    }
    if let Some(Pred::Test {
        path,
        test: Test::Range { min, max },
    }) = f.rules.preds.get(node as usize)
    {
        let text = |s: &Span| (!s.is_empty()).then(|| f.rules.text_of(*s).to_owned());
        return Leaf::Range {
            path: f.rules.text_of(*path).to_owned(),
            min: text(min),
            max: text(max),
        };
    }
    let (path, class) = match f.rules.preds.get(node as usize) {
        Some(Pred::Test { path, test }) => (f.rules.text_of(*path).to_owned(), class_of(f, test)),
        _ => (String::new(), Class::InResult),
    };
    Leaf::Other {
        words: f.rules.describe(node, &|i| {
            f.tools.get(i as usize).map_or("", String::as_str)
        }) + "#"
            + &source_of(f, node),
        path,
        class,
    }
}

/// What a test says of the value at its path ([`Class`]).
fn class_of(f: Formula<'_>, test: &Test) -> Class {
    let text = |s: Span| f.rules.text_of(s).to_owned();
    let list = |s: Span| -> Vec<String> {
        f.rules
            .strings
            .get(s.range())
            .unwrap_or(&[])
            .iter()
            .map(|t| f.rules.text_of(*t).to_owned())
            .collect()
    };
    match *test {
        Test::Exists => Class::Exists,
        Test::Equals(v) => Class::Literals(vec![text(v)]),
        Test::OneOf(l) => Class::Literals(list(l)),
        Test::Glob(g) => Class::Str(StrTest::Glob(text(g))),
        Test::Regex { source, .. } => Class::Str(StrTest::Regex(Pattern::new(text(source)))),
        Test::HostIn(l) => Class::Str(StrTest::HostIn(list(l))),
        Test::HostnameIn(l) => Class::Str(StrTest::HostnameIn(list(l))),
        Test::AddressesIn(l) => Class::Str(StrTest::AddressesIn(list(l))),
        Test::LinksIn(l) => Class::Str(StrTest::LinksIn(list(l))),
        Test::EmailsIn(l) => Class::Str(StrTest::EmailsIn(list(l))),
        Test::Length { min, max } => Class::Length {
            min,
            max: (max != UNBOUNDED).then_some(max),
        },
        Test::Each(_) => Class::Each,
        // `range` is decided by its path's number (`Leaf::Range`); a value from results
        // and a budget's total (time and history abstracted) are the model's choice.
        // A bound from a result is the model's choice too.
        Test::Range { .. } | Test::InResult(_) | Test::Budget { .. } | Test::ResultBound { .. } => {
            Class::InResult
        }
    }
}

/// For a value-from-results test, its source index (part of its identity); else none.
fn source_of(f: Formula<'_>, node: u32) -> String {
    match f.rules.preds.get(node as usize) {
        Some(Pred::Test {
            test: Test::InResult(s),
            ..
        }) => f
            .rules
            .sources
            .get(*s as usize)
            .map_or_else(String::new, |src| {
                format!(
                    "{:?}:{}:{}",
                    src.origin,
                    src.tool,
                    f.rules.text_of(src.path)
                )
            }),
        _ => String::new(),
    }
}

/// Calls `visit` with every leaf test under `node`.
fn walk(f: Formula<'_>, node: u32, visit: &mut dyn FnMut(u32)) {
    match f.rules.preds.get(node as usize) {
        Some(Pred::All(span) | Pred::Any(span)) => {
            for &c in children(f, *span) {
                walk(f, c, visit);
            }
        }
        Some(Pred::Not(inner)) => walk(f, *inner, visit),
        Some(Pred::Test { .. }) => visit(node),
        None => {}
    }
}

fn children<'r>(f: Formula<'r>, span: Span) -> &'r [u32] {
    f.rules.children.get(span.range()).unwrap_or(&[])
}

/// A predicate's value where only some tests are known (`leaf` says `None` for the
/// others): `Some` when the known ones decide it, whatever the others are.
fn decided(
    f: Formula<'_>,
    node: u32,
    leaf: &dyn Fn(Formula<'_>, u32) -> Option<bool>,
) -> Option<bool> {
    match f.rules.preds.get(node as usize) {
        Some(Pred::All(span)) => {
            let mut all = Some(true);
            for &c in children(f, *span) {
                match decided(f, c, leaf) {
                    Some(false) => return Some(false),
                    None => all = None,
                    Some(true) => {}
                }
            }
            all
        }
        Some(Pred::Any(span)) => {
            let mut any = Some(false);
            for &c in children(f, *span) {
                match decided(f, c, leaf) {
                    Some(true) => return Some(true),
                    None => any = None,
                    Some(false) => {}
                }
            }
            any
        }
        Some(Pred::Not(inner)) => decided(f, *inner, leaf).map(|b| !b),
        Some(Pred::Test { .. }) => leaf(f, node),
        None => Some(false),
    }
}

fn eval(f: Formula<'_>, node: u32, choice: &dyn Fn(Formula<'_>, u32) -> bool) -> bool {
    match f.rules.preds.get(node as usize) {
        Some(Pred::All(span)) => children(f, *span).iter().all(|&c| eval(f, c, choice)),
        Some(Pred::Any(span)) => children(f, *span).iter().any(|&c| eval(f, c, choice)),
        Some(Pred::Not(inner)) => !eval(f, *inner, choice),
        Some(Pred::Test { .. }) => choice(f, node),
        None => false,
    }
}
