//! Properties in JSON (semantics §14): the entries of `orchestration.properties`, each a
//! `name`, a `tool` and exactly one rule (`after`, `atMost`, `never`, `approved`), with an
//! optional `when`.

use super::*;

impl Reader {
    /// One entry of `orchestration.properties`: `name`, `tool` and exactly one rule.
    pub(super) fn property(&mut self, v: &Value<'_>) -> Option<Property> {
        const RULES: [&str; 4] = ["after", "atMost", "never", "approved"];
        let o = self.object(v, "orchestration.properties[]")?;
        let span = span_of(v);
        self.known_keys(
            o,
            "a property",
            &[
                "name", "tool", "after", "atMost", "never", "approved", "when",
            ],
        );
        let name = self.opt_string(o, "name");
        let tool = self.opt_string(o, "tool");
        for (field, value) in [("name", &name), ("tool", &tool)] {
            if value.is_none() && get(o, field).is_none() {
                self.diags.push(
                    Diagnostic::new(
                        Code::MissingField,
                        Some(span.first_byte()),
                        format!("a property has no `{field}`"),
                    )
                    .label("this property")
                    .help(if field == "name" {
                        "every property needs a unique `\"name\"`"
                    } else {
                        "`\"tool\"` names the tools it is about (a name or a pattern)"
                    }),
                );
            }
        }
        let mut rules = Vec::new();
        for key in RULES {
            let Some(value) = get(o, key) else { continue };
            let rule = match key {
                "after" => self
                    .string(value, "properties[].after")
                    .map(PropertyRule::After),
                "atMost" => self
                    .uint(value, "properties[].atMost")
                    .map(PropertyRule::AtMost),
                flag => match value {
                    Value::BooleanLit(b) if b.value => Some(if flag == "never" {
                        PropertyRule::Never
                    } else {
                        PropertyRule::Approved
                    }),
                    Value::BooleanLit(b) => {
                        self.diags.push(
                            Diagnostic::new(
                                Code::InvalidProperty,
                                Some(span_of(b)),
                                format!("`\"{flag}\": false` says nothing"),
                            )
                            .label("only `true` is a rule")
                            .help(format!("write `\"{flag}\": true`, or remove the property")),
                        );
                        None
                    }
                    other => {
                        self.wrong(other, &format!("properties[].{flag}"), "`true`");
                        None
                    }
                },
            };
            rules.push((key, rule));
        }
        match rules.len() {
            0 => {
                self.diags.push(
                    Diagnostic::new(Code::InvalidProperty, Some(span), "a property has no rule")
                        .label("this property")
                        .help(format!("add one of {}", ticked(&RULES))),
                );
                return None;
            }
            1 => {}
            _ => {
                let keys: Vec<&str> = rules.iter().map(|(k, _)| *k).collect();
                self.diags.push(
                    Diagnostic::new(
                        Code::InvalidProperty,
                        Some(span),
                        format!("a property has {} rules ({})", keys.len(), ticked(&keys)),
                    )
                    .label("this property")
                    .help("one rule per property: split it into several properties"),
                );
                return None;
            }
        }
        let rule = rules.pop().and_then(|(_, r)| r)?;
        let when = match get(o, "when") {
            Some(w) => Some(self.predicate_of_property(w)?),
            None => None,
        };
        if when.is_some() && !matches!(rule, PropertyRule::Never | PropertyRule::Approved) {
            self.diags.push(
                Diagnostic::new(
                    Code::InvalidProperty,
                    Some(span),
                    format!("`when` does not go with `{}`", rule.key()),
                )
                .label("this property")
                .help(
                    "`when` narrows `never` and `approved` to the calls whose arguments satisfy it",
                ),
            );
            return None;
        }
        Some(Property {
            span,
            name: name?,
            tool: tool?,
            rule,
            when,
        })
    }
}
