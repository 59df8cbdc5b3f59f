//! The compiled rules as Rust literals, for generated code.

use super::rules::{ArgRule, Pred, RuleKind, Test};
use crate::form::{Literal, LiteralWriter};
use crate::tables::Span;

impl Literal for RuleKind {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.item(match self {
            RuleKind::Require => "RuleKind::Require",
            RuleKind::ApproveWhen => "RuleKind::ApproveWhen",
        });
    }
}

impl Literal for ArgRule {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.item("ArgRule { tool: ");
        w.int(self.tool);
        w.text(", step: ");
        w.int(self.step);
        w.text(", kind: ");
        self.kind.write_literal(w);
        w.text(", name: ");
        self.name.write_literal(w);
        w.text(", pred: ");
        w.int(self.pred);
        w.text(" }");
    }
}

impl Literal for Pred {
    fn write_literal(&self, w: &mut LiteralWriter) {
        match self {
            Pred::All(s) | Pred::Any(s) => {
                w.item(if matches!(self, Pred::All(_)) {
                    "Pred::All("
                } else {
                    "Pred::Any("
                });
                s.write_literal(w);
            }
            Pred::Not(p) => {
                w.item("Pred::Not(");
                w.int(p);
            }
            Pred::Test { path, test } => {
                w.item("Pred::Test { path: ");
                path.write_literal(w);
                w.text(", test: ");
                test.write_literal(w);
                w.text(" }");
                return;
            }
        }
        w.text(")");
    }
}

impl Literal for Test {
    fn write_literal(&self, w: &mut LiteralWriter) {
        let span = |w: &mut LiteralWriter, name: &str, s: &Span| {
            w.item(name);
            w.text("(");
            s.write_literal(w);
            w.text(")");
        };
        match self {
            Test::Exists => w.item("Test::Exists"),
            Test::Equals(s) => span(w, "Test::Equals", s),
            Test::OneOf(s) => span(w, "Test::OneOf", s),
            Test::Glob(s) => span(w, "Test::Glob", s),
            Test::HostIn(s) => span(w, "Test::HostIn", s),
            Test::HostnameIn(s) => span(w, "Test::HostnameIn", s),
            Test::AddressesIn(s) => span(w, "Test::AddressesIn", s),
            Test::LinksIn(s) => span(w, "Test::LinksIn", s),
            Test::EmailsIn(s) => span(w, "Test::EmailsIn", s),
            Test::Regex { source, index } => {
                w.item("Test::Regex { source: ");
                source.write_literal(w);
                w.text(", index: ");
                w.int(index);
                w.text(" }");
            }
            Test::Each(i) | Test::InResult(i) => {
                w.item(if matches!(self, Test::Each(_)) {
                    "Test::Each("
                } else {
                    "Test::InResult("
                });
                w.int(i);
                w.text(")");
            }
            Test::Range { min, max } => {
                w.item("Test::Range { min: ");
                min.write_literal(w);
                w.text(", max: ");
                max.write_literal(w);
                w.text(" }");
            }
            Test::Budget { budget, min, max } => {
                w.item("Test::Budget { budget: ");
                w.int(budget);
                w.text(", min: ");
                min.write_literal(w);
                w.text(", max: ");
                max.write_literal(w);
                w.text(" }");
            }
            Test::ResultBound { number, upper } => {
                w.item("Test::ResultBound { number: ");
                w.int(number);
                w.text(", upper: ");
                upper.write_literal(w);
                w.text(" }");
            }
            Test::Length { min, max } => {
                w.item("Test::Length { min: ");
                w.int(min);
                w.text(", max: ");
                w.int(max);
                w.text(" }");
            }
        }
    }
}
