//! Rules about names: the machine's, the steps', the Rust identifiers made from them,
//! and the default step.

use super::{closest, Checker, StepNames};
use crate::diagnostic::{Code, Diagnostic};
use crate::ident;
use crate::model::{Span, Spanned};
use crate::resolved::MachineName;
use std::collections::HashMap;

impl<'t> Checker<'t> {
    /// E003: the template has a name (`agentId`, `name`, or the front end's fallback).
    /// E006: it has letters or digits to make a module name from.
    pub(super) fn machine_name(&mut self) -> MachineName {
        let fallback = |name: String| MachineName {
            name,
            module: "machine".to_owned(),
        };
        let Some(n) = &self.t.name else {
            self.push(
                Diagnostic::new(
                    Code::MissingField,
                    Some(self.t.span.first_byte()),
                    "the template has no `agentId` or `name`",
                )
                .help("add `\"agentId\": \"my-agent\"`; the module is named after it"),
            );
            return fallback(String::new());
        };
        match ident::module(&n.value) {
            Some(module) => MachineName {
                name: n.value.clone(),
                module,
            },
            None => {
                self.push(
                    Diagnostic::new(
                        Code::InvalidName,
                        Some(n.span),
                        format!(
                            "the machine name `{}` has no letters or digits to make a module name",
                            n.value
                        ),
                    )
                    .help("use an `agentId` such as `my-agent`"),
                );
                fallback(n.value.clone())
            }
        }
    }

    /// E006: a step name is not empty. E004: no two steps have the same name.
    pub(super) fn step_names(&mut self) -> StepNames<'t> {
        let t = self.t;
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut unique = Vec::new();
        let mut skip = vec![false; t.steps.len()];
        for (si, s) in t.steps.iter().enumerate() {
            let Some(n) = &s.name else {
                skip[si] = true;
                continue;
            };
            if n.value.is_empty() {
                self.push(
                    Diagnostic::new(Code::InvalidName, Some(n.span), "a step name is empty")
                        .about_step(""),
                );
                continue;
            }
            if let Some(first) = seen.get(n.value.as_str()) {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateStep,
                        Some(n.span),
                        format!("duplicate step name `{}`", n.value),
                    )
                    .label("second definition")
                    .related(*first, "first defined here")
                    .help("step names must be unique; rename one of them")
                    .about_step(&n.value),
                );
                skip[si] = true;
                continue;
            }
            seen.insert(&n.value, n.span);
            unique.push(n);
        }
        StepNames { unique, skip }
    }

    /// E006: every name becomes a Rust identifier. E005: no two names become the
    /// same one. Returns the identifiers (empty where there is none).
    pub(super) fn idents(&mut self, names: &[&Spanned<String>], what: &str) -> Vec<String> {
        let mut by_ident: HashMap<String, &Spanned<String>> = HashMap::new();
        let mut out = Vec::with_capacity(names.len());
        for &n in names {
            let about = |d: Diagnostic| {
                if what == "step" {
                    d.about_step(&n.value)
                } else {
                    d.about_tool(&n.value)
                }
            };
            let Some(id) = ident::variant(&n.value) else {
                self.push(about(
                    Diagnostic::new(
                        Code::InvalidName,
                        Some(n.span),
                        format!(
                            "the {what} name `{}` cannot be made into a Rust identifier",
                            n.value
                        ),
                    )
                    .label("no ASCII letters or digits")
                    .help(format!("give the {what} a name with letters or digits")),
                ));
                out.push(String::new());
                continue;
            };
            if let Some(first) = by_ident.get(&id) {
                let mut notes = Vec::new();
                for name in [&first.value, &n.value] {
                    if !name.is_ascii() {
                        let points: Vec<String> = name
                            .chars()
                            .map(|c| format!("U+{:04X}", c as u32))
                            .collect();
                        notes.push(format!("`{name}` is {}", points.join(" ")));
                    }
                }
                let mut d = Diagnostic::new(
                    Code::NameCollision,
                    Some(n.span),
                    format!(
                        "the {what} names `{}` and `{}` both become `{id}` in Rust",
                        first.value, n.value
                    ),
                )
                .label(format!("becomes `{id}`"))
                .related(first.span, format!("also becomes `{id}`"))
                .help(format!("rename one of the {what}s"));
                for note in notes {
                    d = d.note(note);
                }
                self.push(about(d));
            } else {
                by_ident.insert(id.clone(), n);
            }
            out.push(id);
        }
        out
    }

    /// semantics §1/§6: at most one default step. E008: `defaultStep` names a step.
    /// E007: `defaultStep` and `isDefault` agree, and at most one step says
    /// `isDefault: true`.
    pub(super) fn default_step(&mut self) -> Option<usize> {
        let t = self.t;
        let flagged: Vec<(usize, Span)> = t
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.is_default
                    .as_ref()
                    .filter(|d| d.value)
                    .map(|d| (i, d.span))
            })
            .collect();
        let Some(d) = &t.default_step else {
            for (i, span) in flagged.iter().skip(1) {
                self.push(
                    Diagnostic::new(
                        Code::ConflictingDefault,
                        Some(*span),
                        "more than one step has `isDefault: true`",
                    )
                    .label("second default")
                    .related(flagged[0].1, "first default")
                    .help("keep one default step")
                    .about_step(step_name(t, *i)),
                );
            }
            return flagged.first().map(|(i, _)| *i);
        };
        let by_name = t
            .steps
            .iter()
            .position(|s| s.name.as_ref().is_some_and(|n| n.value == d.value));
        let Some(i) = by_name else {
            let names = t
                .steps
                .iter()
                .filter_map(|s| s.name.as_ref())
                .map(|n| n.value.as_str());
            let mut diag = Diagnostic::new(
                Code::UnknownDefaultStep,
                Some(d.span),
                format!(
                    "`defaultStep` names `{}`, but there is no such step",
                    d.value
                ),
            )
            .label("no step has this name");
            if let Some(s) = closest(&d.value, names) {
                diag = diag.help(format!("did you mean `{s}`?"));
            }
            self.push(diag);
            return None;
        };
        for (j, span) in &flagged {
            if *j != i {
                self.push(
                    Diagnostic::new(
                        Code::ConflictingDefault,
                        Some(*span),
                        format!(
                            "step `{}` has `isDefault: true`, but `defaultStep` is `{}`",
                            step_name(t, *j),
                            d.value
                        ),
                    )
                    .related(d.span, "the default is named here")
                    .help("keep one default: remove `isDefault` or change `defaultStep`")
                    .about_step(step_name(t, *j)),
                );
            }
        }
        if let Some(f) = t.steps[i].is_default.as_ref().filter(|f| !f.value) {
            self.push(
                Diagnostic::new(
                    Code::ConflictingDefault,
                    Some(f.span),
                    format!(
                        "`defaultStep` is `{}`, but that step says `isDefault: false`",
                        d.value
                    ),
                )
                .related(d.span, "the default is named here")
                .help("remove `isDefault: false`")
                .about_step(&d.value),
            );
        }
        Some(i)
    }
}

/// The name of step `i` (`<unnamed>` when it has none).
fn step_name(t: &crate::model::Template, i: usize) -> &str {
    t.steps[i]
        .name
        .as_ref()
        .map_or("<unnamed>", |n| n.value.as_str())
}
