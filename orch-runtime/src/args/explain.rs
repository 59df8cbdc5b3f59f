//! Rules on arguments in words (semantics §16): why a call broke a rule, what a
//! predicate requires.

use super::rules::{Broken, Pred, Rules, Test, UNBOUNDED};
use super::source::Origin;
use crate::tables::Span;

impl<'a> Rules<'a> {
    /// Why `broken` refused a call with these `arguments`, in words: "`/to` is
    /// "x@evil.example": it must match `*@corp.example`".
    /// `tool` names a tool by its index (for a value from results).
    pub fn explain(
        &self,
        broken: &Broken,
        arguments: &str,
        tool: &dyn Fn(u16) -> &'a str,
    ) -> String {
        if let Some(why) = broken.unreadable {
            return why.to_string();
        }
        let Some(pred) = self.preds.get(broken.pred as usize) else {
            return String::new();
        };
        if let Pred::Test {
            test: Test::Budget { budget, .. },
            ..
        } = *pred
        {
            let total = broken.total.map_or_else(String::new, |t| {
                format!(" would be {} with this call", super::budget::decimal(t))
            });
            return format!(
                "budget `{}`{total}: it {}",
                self.budget_name(budget as usize),
                self.requirement(broken.pred, tool)
            );
        }
        let path = match *pred {
            Pred::Test { path, .. } => path,
            Pred::Any(span) => match self.shared_path(span) {
                Some(path) => path,
                None => return format!("{} does not hold", self.describe(broken.pred, tool)),
            },
            _ => return format!("{} does not hold", self.describe(broken.pred, tool)),
        };
        let mut at = String::new();
        if let Some((each, index)) = broken.element {
            if let Some(Pred::Test { path, .. }) = self.preds.get(each as usize) {
                at.push_str(self.text_of(*path));
            }
            at.push('/');
            at.push_str(&index.to_string());
        }
        at.push_str(self.text_of(path));
        let subject = if at.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("`{at}`")
        };
        let value = match broken.value {
            Some((s, e)) => {
                let v = arguments.get(s as usize..e as usize).unwrap_or("");
                format!("is {}", shorten(v))
            }
            None => "is missing".to_owned(),
        };
        let held = match *pred {
            Pred::Test {
                test: Test::ResultBound { .. },
                ..
            } => match broken.total {
                Some(v) => format!(" ({})", super::budget::decimal(v)),
                None => " (none has held a number there yet)".to_owned(),
            },
            _ => String::new(),
        };
        format!(
            "{subject} {value}: it {}{held}",
            self.requirement(broken.pred, tool)
        )
    }

    /// A predicate node in words ("`/amount` must be a number from 0 to 100"); `tool`
    /// names a tool by its index.
    pub fn describe(&self, pred: u32, tool: &dyn Fn(u16) -> &'a str) -> String {
        match self.preds.get(pred as usize) {
            Some(Pred::All(span)) => self.join(*span, " and ", tool),
            Some(Pred::Any(span)) => match self.shared_path(*span) {
                Some(path) => {
                    let path = self.text_of(path);
                    let subject = if path.is_empty() {
                        "the arguments".to_owned()
                    } else {
                        format!("`{path}`")
                    };
                    format!("{subject} {}", self.requirement(pred, tool))
                }
                None => format!("either {}", self.join(*span, " or ", tool)),
            },
            Some(Pred::Not(inner)) => format!("not ({})", self.describe(*inner, tool)),
            Some(Pred::Test {
                test: Test::Budget { budget, .. },
                ..
            }) => format!(
                "budget `{}` with this call {}",
                self.budget_name(*budget as usize),
                self.requirement(pred, tool)
            ),
            Some(Pred::Test { path, .. }) => {
                let path = self.text_of(*path);
                let subject = if path.is_empty() {
                    "the arguments".to_owned()
                } else {
                    format!("`{path}`")
                };
                format!("{subject} {}", self.requirement(pred, tool))
            }
            None => String::new(),
        }
    }

    /// The budget that budget test `k` of a step condition reads.
    pub fn budget_of_condition(&self, k: u16) -> Option<usize> {
        let p = *self.budget_conditions.get(k as usize)?;
        match self.preds.get(p as usize)? {
            Pred::Test {
                test: Test::Budget { budget, .. },
                ..
            } => Some(*budget as usize),
            _ => None,
        }
    }

    /// Budget test `k` of a step condition in the template's words: "refunds at least 3".
    pub fn describe_budget_condition(&self, k: u16) -> String {
        let test = self
            .budget_conditions
            .get(k as usize)
            .and_then(|&p| self.preds.get(p as usize));
        let Some(Pred::Test {
            test: Test::Budget { budget, min, max },
            ..
        }) = test
        else {
            return String::new();
        };
        let name = self.budget_name(*budget as usize);
        match (self.text_of(*min), self.text_of(*max)) {
            ("", "") => name.to_owned(),
            (min, "") => format!("{name} at least {min}"),
            ("", max) => format!("{name} at most {max}"),
            (min, max) => format!("{name} from {min} to {max}"),
        }
    }

    /// Number `number` of [`Rules::numbers`] in words: "the newest result of
    /// `get_balance` held at `/balance`".
    pub fn number_at(&self, number: u32, tool: &dyn Fn(u16) -> &'a str) -> String {
        match self.numbers.get(number as usize) {
            Some(s) => format!(
                "the newest result of `{}` held at `{}`",
                tool(s.tool),
                self.text_of(s.path)
            ),
            None => "a result held".to_owned(),
        }
    }

    /// Source `source` as the values it remembers: "a value the user wrote".
    pub fn seen_at(&self, source: u32, tool: &dyn Fn(u16) -> &'a str) -> String {
        let Some(src) = self.sources.get(source as usize) else {
            return "a value an earlier result held".to_owned();
        };
        let (name, path) = (tool(src.tool), self.text_of(src.path));
        match src.origin {
            Origin::Result => {
                format!("one of the values earlier results of `{name}` held at `{path}`")
            }
            Origin::Arguments => {
                format!(
                    "one of the values earlier admitted calls of `{name}` were given at `{path}`"
                )
            }
            Origin::User => "a value the user wrote in a message".to_owned(),
            Origin::Trusted => format!("a value the trusted tool `{name}` returned"),
            Origin::Untrusted => format!("a value seen in the untrusted results of `{name}`"),
        }
    }

    fn join(&self, span: Span, sep: &str, tool: &dyn Fn(u16) -> &'a str) -> String {
        let parts: Vec<String> = self
            .children
            .get(span.range())
            .unwrap_or(&[])
            .iter()
            .map(|&c| self.describe(c, tool))
            .collect();
        parts.join(sep)
    }

    /// What a test requires, as a verb phrase ("must be one of 1, 2").
    fn requirement(&self, pred: u32, tool: &dyn Fn(u16) -> &'a str) -> String {
        if let Some(Pred::Any(span)) = self.preds.get(pred as usize) {
            if self.shared_path(*span).is_some() {
                let each: Vec<String> = self
                    .children
                    .get(span.range())
                    .unwrap_or(&[])
                    .iter()
                    .map(|&c| self.requirement(c, tool))
                    .collect();
                return if each.iter().all(|r| r.starts_with("must be ")) {
                    let each: Vec<&str> = each.iter().map(|r| &r["must be ".len()..]).collect();
                    format!("must be either {}", each.join(" or "))
                } else {
                    let each: Vec<&str> =
                        each.iter().map(|r| r.trim_start_matches("must ")).collect();
                    format!("must either {}", each.join(" or "))
                };
            }
        }
        let Some(Pred::Test { test, .. }) = self.preds.get(pred as usize) else {
            return format!("must satisfy: {}", self.describe(pred, tool));
        };
        let list = |span: Span| {
            let items: Vec<&str> = self
                .strings
                .get(span.range())
                .unwrap_or(&[])
                .iter()
                .map(|s| self.text_of(*s))
                .collect();
            if items.len() > 8 {
                format!("{}, … ({} in all)", items[..8].join(", "), items.len())
            } else {
                items.join(", ")
            }
        };
        match *test {
            Test::Exists => "must be present".to_owned(),
            Test::Equals(v) => format!("must be {}", self.text_of(v)),
            Test::OneOf(l) => format!("must be one of {}", list(l)),
            Test::Glob(g) => format!("must be a string matching `{}`", self.text_of(g)),
            Test::Regex { source, .. } => {
                format!(
                    "must be a string matching the regex `{}`",
                    self.text_of(source)
                )
            }
            Test::Range { min, max } => match (min.is_empty(), max.is_empty()) {
                (false, false) => format!(
                    "must be a number from {} to {}",
                    self.text_of(min),
                    self.text_of(max)
                ),
                (false, true) => format!("must be a number of at least {}", self.text_of(min)),
                (true, false) => format!("must be a number of at most {}", self.text_of(max)),
                (true, true) => "must be a number".to_owned(),
            },
            Test::Length { min, max } => match (min, max) {
                (0, UNBOUNDED) => "must be a string, an array or an object".to_owned(),
                (min, UNBOUNDED) => format!("must have a length of at least {min}"),
                (0, max) => format!("must have a length of at most {max}"),
                (min, max) => format!("must have a length from {min} to {max}"),
            },
            Test::HostIn(l) => format!("must be a URL whose host is one of {}", list(l)),
            Test::HostnameIn(l) => format!(
                "must name a host (alone or in a URL) that is one of {}",
                list(l)
            ),
            Test::AddressesIn(l) => format!(
                "must be a list of plain e-mail addresses, each one of {}",
                list(l)
            ),
            Test::LinksIn(l) => format!(
                "must be text whose every link goes to a host that is one of {}",
                list(l)
            ),
            Test::EmailsIn(l) => format!(
                "must be text whose every e-mail address is one of {}",
                list(l)
            ),
            Test::Each(inner) => format!(
                "must be an array whose every element satisfies: {}",
                self.describe(inner, tool)
            ),
            Test::InResult(source) => format!("must be {}", self.seen_at(source, tool)),
            Test::ResultBound { number, upper } => format!(
                "must be a number at {} the number {}",
                if upper { "most" } else { "least" },
                self.number_at(number, tool)
            ),
            Test::Budget { min, max, .. } => match (min.is_empty(), max.is_empty()) {
                (false, false) => format!(
                    "must be from {} to {}",
                    self.text_of(min),
                    self.text_of(max)
                ),
                (false, true) => format!("must be at least {}", self.text_of(min)),
                (true, false) => format!("must be at most {}", self.text_of(max)),
                (true, true) => "must be a total".to_owned(),
            },
        }
    }
}

/// At most 80 characters of a value, for a message.
fn shorten(v: &str) -> String {
    match v.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &v[..at]),
        None => v.to_owned(),
    }
}
