//! Which of the model's choices are arguments a call could carry: the tests of one path
//! are decided jointly (semantics §16, "Properties"). A choice that says `/amount` is
//! absent and also in range, or a string and also a number, or one of a `oneOf`'s
//! values and also not matching a `glob` every one of those values matches, is no value
//! at all, and is dropped. What is left is sound (no value is dropped that a call could
//! carry) and exact where a path's value is pinned to a list of literals: every test is
//! then evaluated on each literal. A value from earlier results (`inResult`) stays the
//! model's choice.

use orch_runtime::args::{
    address_list, compare_numbers, email_addresses, host_name, link_hosts, string_literal, url_host,
};
use orch_runtime::compiled::glob_match;
use std::cmp::Ordering;

/// What a leaf test says about the value at its path, as far as deciding paths jointly
/// needs it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Class {
    /// `exists`.
    Exists,
    /// A test of strings only.
    Str(StrTest),
    /// `length`: a string of that many characters, or an array or object of that many
    /// entries.
    Length {
        /// The least length.
        min: u32,
        /// The greatest length (`None`: unbounded).
        max: Option<u32>,
    },
    /// `each`: an array.
    Each,
    /// `equals` or `oneOf`: one of these JSON scalars (their text).
    Literals(Vec<String>),
    /// `inResult`: some scalar a result held — the model's choice.
    InResult,
}

/// A test that holds only of strings, with what it needs to be evaluated on one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum StrTest {
    Glob(String),
    Regex(Pattern),
    HostIn(Vec<String>),
    HostnameIn(Vec<String>),
    AddressesIn(Vec<String>),
    LinksIn(Vec<String>),
    EmailsIn(Vec<String>),
}

impl StrTest {
    fn holds(&self, s: &str) -> bool {
        let any = |globs: &[String], v: &str| globs.iter().any(|g| glob_match(g, v));
        match self {
            StrTest::Glob(g) => glob_match(g, s),
            StrTest::Regex(r) => r.compiled.as_ref().is_some_and(|re| re.is_match(s)),
            StrTest::HostIn(g) => url_host(s).is_some_and(|h| any(g, &h)),
            StrTest::HostnameIn(g) => host_name(s).is_some_and(|h| any(g, &h)),
            StrTest::AddressesIn(g) => address_list(s).is_some_and(|l| l.iter().all(|a| any(g, a))),
            StrTest::LinksIn(g) => link_hosts(s).is_some_and(|l| l.iter().all(|h| any(g, h))),
            StrTest::EmailsIn(g) => email_addresses(s).is_some_and(|l| l.iter().all(|a| any(g, a))),
        }
    }
}

/// A `regex` test's pattern, compiled once when its leaf is made (not once per choice
/// and listed value); compared by its source.
#[derive(Clone, Debug)]
pub(super) struct Pattern {
    source: String,
    /// `None` cannot happen for a checked template (E016), and matches nothing.
    compiled: Option<regex::Regex>,
}

impl Pattern {
    pub(super) fn new(source: String) -> Self {
        let compiled = regex::Regex::new(&source).ok();
        Pattern { source, compiled }
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl PartialOrd for Pattern {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pattern {
    fn cmp(&self, other: &Self) -> Ordering {
        self.source.cmp(&other.source)
    }
}

/// The kinds a value at a path may have, as bits.
const ABSENT: u8 = 1;
const NUMBER: u8 = 2;
const STRING: u8 = 4;
const ARRAY: u8 = 8;
/// `true`, `false`, `null`, an object.
const OTHER: u8 = 16;

/// A JSON scalar's text, read.
#[derive(Debug)]
enum Lit {
    Number(String),
    Str(String),
    Other(String),
}

impl Lit {
    fn read(text: &str) -> Option<Lit> {
        match text.as_bytes().first()? {
            b'"' => string_literal(text).map(Lit::Str),
            b'-' | b'0'..=b'9' => Some(Lit::Number(text.to_owned())),
            _ => Some(Lit::Other(text.to_owned())),
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Lit::Number(_) => NUMBER,
            Lit::Str(_) => STRING,
            Lit::Other(_) => OTHER,
        }
    }

    fn same(&self, other: &Lit) -> bool {
        match (self, other) {
            (Lit::Number(a), Lit::Number(b)) => compare_numbers(a, b) == Some(Ordering::Equal),
            (Lit::Str(a), Lit::Str(b)) | (Lit::Other(a), Lit::Other(b)) => a == b,
            _ => false,
        }
    }
}

/// One path's tests in a choice: each test's class and whether the choice makes it
/// hold; and, when the path has `range` tests, their bounds (ascending) and the region
/// the choice puts its number in (`2i`: strictly between bounds `i-1` and `i`; `2i+1`:
/// at bound `i`; `2n+1`: not a number).
pub(super) struct PathChoice<'c> {
    pub tests: Vec<(&'c Class, bool)>,
    pub range: Option<(&'c [String], usize)>,
}

impl PathChoice<'_> {
    /// Could some value at this path make exactly these tests hold and these fail?
    pub(super) fn feasible(&self) -> bool {
        let mut kinds = ABSENT | NUMBER | STRING | ARRAY | OTHER;
        for (class, holds) in &self.tests {
            match (class, holds) {
                (Class::Exists, true) => kinds &= !ABSENT,
                (Class::Exists, false) => kinds &= ABSENT,
                (_, false) => {}
                (Class::Str(_), true) => kinds &= STRING,
                (Class::Length { .. }, true) => kinds &= STRING | ARRAY | OTHER,
                (Class::Each, true) => kinds &= ARRAY,
                (Class::Literals(list), true) => {
                    kinds &= list
                        .iter()
                        .filter_map(|l| Lit::read(l))
                        .fold(0, |k, l| k | l.kind());
                }
                (Class::InResult, true) => kinds &= NUMBER | STRING | OTHER,
            }
        }
        if let Some((bounds, region)) = self.range {
            if region == 2 * bounds.len() + 1 {
                kinds &= !NUMBER;
            } else {
                kinds &= NUMBER;
            }
        }
        if kinds == 0 {
            return false;
        }
        // Pinned to literals: the value is one of those every holding `equals`/`oneOf`
        // lists and no failing one does, and every other test must say of it what the
        // choice says.
        let pinned: Vec<&Vec<String>> = self
            .tests
            .iter()
            .filter_map(|(c, holds)| match c {
                Class::Literals(l) if *holds => Some(l),
                _ => None,
            })
            .collect();
        let Some(first) = pinned.first() else {
            return true;
        };
        first
            .iter()
            .filter_map(|l| Lit::read(l))
            .any(|value| kinds & value.kind() != 0 && self.consistent(&value))
    }

    /// Does `value` make every test of this path come out as the choice says?
    fn consistent(&self, value: &Lit) -> bool {
        let tests_agree = self.tests.iter().all(|(class, holds)| {
            let is = match class {
                Class::Exists => true,
                Class::Str(t) => matches!(value, Lit::Str(s) if t.holds(s)),
                Class::Length { min, max } => match value {
                    Lit::Str(s) => {
                        let n = s.chars().count();
                        n >= *min as usize && max.is_none_or(|m| n <= m as usize)
                    }
                    _ => false,
                },
                Class::Each => false,
                Class::Literals(list) => list
                    .iter()
                    .filter_map(|l| Lit::read(l))
                    .any(|l| l.same(value)),
                Class::InResult => return true,
            };
            is == *holds
        });
        let range_agrees = self.range.is_none_or(|(bounds, region)| match value {
            Lit::Number(n) => region == region_of(bounds, n),
            _ => region == 2 * bounds.len() + 1,
        });
        tests_agree && range_agrees
    }
}

/// The region of number `n` among ascending `bounds` (see [`PathChoice::range`]).
fn region_of(bounds: &[String], n: &str) -> usize {
    for (i, b) in bounds.iter().enumerate() {
        match compare_numbers(n, b) {
            Some(Ordering::Less) | None => return 2 * i,
            Some(Ordering::Equal) => return 2 * i + 1,
            Some(Ordering::Greater) => {}
        }
    }
    2 * bounds.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(v: &[&str]) -> Class {
        Class::Literals(v.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn an_absent_value_is_in_no_range_and_matches_nothing() {
        let bounds = ["100".to_owned()];
        let absent_in_range = PathChoice {
            tests: vec![(&Class::Exists, false)],
            range: Some((&bounds, 2)),
        };
        assert!(!absent_in_range.feasible());
        let absent = PathChoice {
            tests: vec![(&Class::Exists, false)],
            range: Some((&bounds, 3)),
        };
        assert!(absent.feasible());
        let glob = Class::Str(StrTest::Glob("*".into()));
        assert!(!PathChoice {
            tests: vec![(&Class::Exists, false), (&glob, true)],
            range: None
        }
        .feasible());
    }

    #[test]
    fn a_string_is_no_number_and_no_array() {
        let bounds = ["1".to_owned()];
        let glob = Class::Str(StrTest::Glob("a*".into()));
        assert!(!PathChoice {
            tests: vec![(&glob, true)],
            range: Some((&bounds, 1))
        }
        .feasible());
        assert!(PathChoice {
            tests: vec![(&glob, true)],
            range: Some((&bounds, 3))
        }
        .feasible());
        assert!(!PathChoice {
            tests: vec![(&glob, true), (&Class::Each, true)],
            range: None
        }
        .feasible());
    }

    #[test]
    fn a_value_pinned_to_literals_is_judged_on_each() {
        let one_of = lits(&["\"a@corp.example\"", "\"b@corp.example\""]);
        let corp = Class::Str(StrTest::Glob("*@corp.example".into()));
        // One of them, and not matching a glob both match: no such value.
        assert!(!PathChoice {
            tests: vec![(&one_of, true), (&corp, false)],
            range: None
        }
        .feasible());
        assert!(PathChoice {
            tests: vec![(&one_of, true), (&corp, true)],
            range: None
        }
        .feasible());
        // Not one of them: any other string, matching or not.
        assert!(PathChoice {
            tests: vec![(&one_of, false), (&corp, false)],
            range: None
        }
        .feasible());
        // Numbers pinned by `equals` fall in the range's region, by exact value.
        let bounds = ["1000".to_owned()];
        let small = lits(&["25.50"]);
        assert!(PathChoice {
            tests: vec![(&small, true)],
            range: Some((&bounds, 0))
        }
        .feasible());
        assert!(!PathChoice {
            tests: vec![(&small, true)],
            range: Some((&bounds, 2))
        }
        .feasible());
        let exact = lits(&["1e3"]);
        assert!(PathChoice {
            tests: vec![(&exact, true)],
            range: Some((&bounds, 1))
        }
        .feasible());
        // Two lists: a value both hold.
        let other = lits(&["\"b@corp.example\"", "\"c@x.example\""]);
        let b_only = Class::Str(StrTest::Glob("b@*".into()));
        assert!(!PathChoice {
            tests: vec![(&one_of, true), (&other, true), (&b_only, false)],
            range: None
        }
        .feasible());
        // Escapes are decoded before a string test reads the literal.
        let escaped = lits(&["\"a\\u0040corp.example\""]);
        assert!(!PathChoice {
            tests: vec![(&escaped, true), (&corp, false)],
            range: None
        }
        .feasible());
        // A value from results stays the model's choice.
        assert!(PathChoice {
            tests: vec![(&one_of, true), (&Class::InResult, false)],
            range: None
        }
        .feasible());
    }
}
