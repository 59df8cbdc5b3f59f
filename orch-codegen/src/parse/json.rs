//! The JSON front end: an AgentDock `template.json` (or a bare orchestration object) to
//! the [`Template`] model, keeping the byte span of every value. Unknown fields are
//! ignored (AgentDock's templates carry fields orch does not read), except in the objects
//! whose every key orch knows — `availableTools` and a property — where an unknown key
//! (a misspelt `approve` would silently drop a gate) is E021 with a suggestion; wrong
//! types are diagnostics (E002), never panics.

use super::ticked;
use crate::check::suggest::Suggester;
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{
    ArgTest, Condition, ConditionKind, ConditionType, Property, PropertyRule, SequenceEntry, Span,
    Spanned, Step, Template,
};
use jsonc_parser::ast::{Object, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, CommentCollectionStrategy, ParseOptions};

use crate::limits::MAX_TEMPLATE_BYTES;

#[path = "json_properties.rs"]
mod properties;
#[path = "json_rules.rs"]
mod rules;

/// Parses a template. Returns the model when the JSON could be read (even with type
/// errors in some fields, which are reported and skipped) and the diagnostics found.
/// `fallback_name` names the machine when the template has neither `agentId` nor `name`.
pub fn parse(source: &str, fallback_name: Option<&str>) -> (Option<Template>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    if source.len() > MAX_TEMPLATE_BYTES {
        diags.push(Diagnostic::new(
            Code::LimitExceeded,
            None,
            format!(
                "the template is {} bytes; the limit is {} bytes",
                source.len(),
                MAX_TEMPLATE_BYTES
            ),
        ));
        return (None, diags);
    }
    // A byte order mark (editors on Windows write one) is accepted: it becomes
    // whitespace of the same length, so every byte offset stays where it is.
    let without_bom;
    let source = match source.strip_prefix('\u{feff}') {
        Some(rest) => {
            without_bom = format!("   {rest}");
            without_bom.as_str()
        }
        None => source,
    };
    let strict = ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let collect = CollectOptions {
        comments: CommentCollectionStrategy::Off,
        tokens: false,
    };
    let parsed = match jsonc_parser::parse_to_ast(source, &collect, &strict) {
        Ok(p) => p,
        Err(e) => {
            let r = e.range();
            diags.push(
                Diagnostic::new(
                    Code::InvalidJson,
                    Some(Span::bytes(r.start, r.end.max(r.start + 1))),
                    format!("invalid JSON: {}", e.kind()),
                )
                .label("here"),
            );
            return (None, diags);
        }
    };
    let Some(root) = parsed.value else {
        diags.push(Diagnostic::new(
            Code::InvalidJson,
            Some(Span::bytes(0, 0)),
            "invalid JSON: the file is empty",
        ));
        return (None, diags);
    };
    let mut r = Reader { diags };
    let template = r.template(&root, fallback_name);
    (template, r.diags)
}

fn span_of(v: &impl Ranged) -> Span {
    let r = v.range();
    Span::bytes(r.start, r.end)
}

fn kind_of(v: &Value<'_>) -> &'static str {
    match v {
        Value::StringLit(_) => "a string",
        Value::NumberLit(_) => "a number",
        Value::BooleanLit(_) => "a boolean",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::NullKeyword(_) => "null",
    }
}

/// The last property called `name` (as `JSON.parse` would keep it). A `null` value is
/// the same as no property: every optional field may be written as `null`.
fn get<'o, 'a>(obj: &'o Object<'a>, name: &str) -> Option<&'o Value<'a>> {
    obj.properties
        .iter()
        .rev()
        .find(|p| p.name.as_str() == name)
        .map(|p| &p.value)
        .filter(|v| !matches!(v, Value::NullKeyword(_)))
}

/// A number literal's value is an integer above `u64::MAX`.
struct TooLarge;

/// The value of a JSON number literal when it is a non-negative integer (exactly, in
/// any notation: `12`, `12.0`, `1.2e1`, `120e-1`, `-0`); `Some(Err)` when it is one but
/// exceeds `u64::MAX`; `None` when it is negative, has a fractional part, or is not a
/// JSON number.
fn integer_value(lit: &str) -> Option<Result<u64, TooLarge>> {
    let (negative, rest) = match lit.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, lit),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The value is `digits × 10^(exponent − frac.len())`, digits without leading zeros.
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(Ok(0)); // zero, also `-0` and `0.0e5`
    }
    if negative {
        return None;
    }
    let shift = exponent.checked_sub(i64::try_from(frac.len()).ok()?)?;
    let (kept, dropped) = if shift >= 0 {
        (digits, "")
    } else {
        let cut = usize::try_from(shift.unsigned_abs()).ok()?;
        if cut >= digits.len() {
            return None; // 0 < value < 1
        }
        digits.split_at(digits.len() - cut)
    };
    if !dropped.bytes().all(|b| b == b'0') {
        return None;
    }
    let zeros = usize::try_from(shift.max(0)).ok()?;
    // u64::MAX has 20 digits: anything longer is too large (without building it).
    if kept.len() + zeros > 20 {
        return Some(Err(TooLarge));
    }
    let text = format!("{kept}{}", "0".repeat(zeros));
    Some(text.parse::<u64>().map_err(|_| TooLarge))
}

struct Reader {
    diags: Vec<Diagnostic>,
}

impl Reader {
    fn wrong(&mut self, v: &Value<'_>, field: &str, expected: &str) {
        self.diags.push(
            Diagnostic::new(
                Code::WrongType,
                Some(span_of(v)),
                format!("`{field}` must be {expected}, found {}", kind_of(v)),
            )
            .label(format!("expected {expected}")),
        );
    }

    fn string(&mut self, v: &Value<'_>, field: &str) -> Option<Spanned<String>> {
        match v {
            Value::StringLit(s) => Some(Spanned::new(s.value.to_string(), span_of(s))),
            other => {
                self.wrong(other, field, "a string");
                None
            }
        }
    }

    fn opt_string(&mut self, obj: &Object<'_>, field: &str) -> Option<Spanned<String>> {
        match get(obj, field)? {
            Value::NullKeyword(_) => None,
            v => self.string(v, field),
        }
    }

    fn object<'o, 'a>(&mut self, v: &'o Value<'a>, field: &str) -> Option<&'o Object<'a>> {
        match v {
            Value::Object(o) => Some(o),
            other => {
                self.wrong(other, field, "an object");
                None
            }
        }
    }

    fn strings(&mut self, v: &Value<'_>, field: &str) -> Option<Vec<Spanned<String>>> {
        match v {
            Value::Array(a) => Some(
                a.elements
                    .iter()
                    .filter_map(|e| self.string(e, &format!("{field}[]")))
                    .collect(),
            ),
            other => {
                self.wrong(other, field, "an array of strings");
                None
            }
        }
    }

    /// E021 for every key of `obj` that is not in `known`, with the closest known key.
    fn known_keys(&mut self, obj: &Object<'_>, what: &str, known: &[&str]) {
        for p in &obj.properties {
            let key = p.name.as_str();
            if known.contains(&key) {
                continue;
            }
            let mut d = Diagnostic::new(
                Code::UnknownField,
                Some(span_of(&p.name)),
                format!("`{key}` is not a key of {what}"),
            )
            .label("unknown key");
            d = match Suggester::new(known.iter().copied()).closest(key) {
                Some(k) => d.help(format!("did you mean `{k}`?")),
                None => d.help(format!("the keys are {}", ticked(known))),
            };
            self.diags.push(d);
        }
    }

    /// A non-negative integer: any JSON number whose value is one (`10`, `10.0`, `1e1`,
    /// `-0`), as JSON Schema's `integer` and `JSON.parse` see it; at most `u64::MAX`.
    fn uint(&mut self, v: &Value<'_>, field: &str) -> Option<Spanned<u64>> {
        let n = match v {
            Value::NumberLit(n) => n,
            other => {
                self.wrong(other, field, "a non-negative integer");
                return None;
            }
        };
        match integer_value(n.value) {
            Some(Ok(x)) => Some(Spanned::new(x, span_of(n))),
            Some(Err(TooLarge)) => {
                self.diags.push(
                    Diagnostic::new(
                        Code::WrongType,
                        Some(span_of(n)),
                        format!("`{field}` of {} is too large", n.value),
                    )
                    .label(format!("at most {}", u64::MAX)),
                );
                None
            }
            None => {
                self.diags.push(
                    Diagnostic::new(
                        Code::WrongType,
                        Some(span_of(n)),
                        format!(
                            "`{field}` must be a non-negative integer, found {}",
                            n.value
                        ),
                    )
                    .label("expected a non-negative integer"),
                );
                None
            }
        }
    }

    fn template(&mut self, root: &Value<'_>, fallback_name: Option<&str>) -> Option<Template> {
        let root_obj = self.object(root, "the template")?;
        let mut t = Template {
            span: span_of(root),
            ..Template::default()
        };
        // The agent wrapper, or a bare orchestration object.
        let orch = match get(root_obj, "orchestration") {
            Some(v) => self.object(v, "orchestration")?,
            None if get(root_obj, "steps").is_some() => root_obj,
            None => {
                self.diags.push(
                    Diagnostic::new(
                        Code::MissingField,
                        Some(Span::bytes(root_obj.range.start, root_obj.range.start + 1)),
                        "the template has no `orchestration` (and is not a bare orchestration object with `steps`)",
                    )
                    .help("add `\"orchestration\": {\"steps\": [...]}`"),
                );
                return None;
            }
        };
        self.agent_fields(root_obj, fallback_name, &mut t);
        self.orchestration_fields(orch, &mut t);
        match get(orch, "steps") {
            Some(Value::Array(a)) => {
                for s in &a.elements {
                    if let Some(step) = self.step(s) {
                        t.steps.push(step);
                    }
                }
            }
            Some(other) => self.wrong(other, "orchestration.steps", "an array of steps"),
            None => self.diags.push(
                Diagnostic::new(
                    Code::MissingField,
                    Some(Span::bytes(orch.range.start, orch.range.start + 1)),
                    "`orchestration` has no `steps`",
                )
                .help("add `\"steps\": [...]` (an empty list is allowed)"),
            ),
        }
        Some(t)
    }

    /// The agent's fields: its name (`agentId`, else `name`, else the fallback), the
    /// tool universe (`tools`, else `nodes` without `llm.*`), `options.maxSteps`.
    fn agent_fields(
        &mut self,
        root_obj: &Object<'_>,
        fallback_name: Option<&str>,
        t: &mut Template,
    ) {
        // Both are read (and so type-checked); `agentId` wins.
        let agent_id = self.opt_string(root_obj, "agentId");
        let name = self.opt_string(root_obj, "name");
        t.name = agent_id
            .or(name)
            .or_else(|| fallback_name.map(|n| Spanned::new(n.to_owned(), Span::bytes(0, 0))));
        // `nodes` is read (and so type-checked) even when `tools` decides.
        let tools = get(root_obj, "tools").map(|v| self.strings(v, "tools"));
        let nodes = get(root_obj, "nodes").map(|v| self.strings(v, "nodes"));
        t.universe = match (tools, nodes) {
            (Some(tools), _) => tools,
            (None, Some(nodes)) => nodes.map(|nodes| {
                nodes
                    .into_iter()
                    .filter(|n| !n.value.starts_with("llm."))
                    .collect()
            }),
            (None, None) => None,
        };
        if let Some(opts) = get(root_obj, "options") {
            if let Some(o) = self.object(opts, "options") {
                if let Some(v) = get(o, "maxSteps") {
                    t.max_rounds = self.uint(v, "options.maxSteps");
                }
            }
        }
    }

    /// The orchestration's own fields besides `steps`: description, default step,
    /// history length, gates, lost results, properties.
    fn orchestration_fields(&mut self, orch: &Object<'_>, t: &mut Template) {
        match get(orch, "description") {
            Some(Value::StringLit(s)) => t.description = vec![s.value.to_string()],
            Some(Value::Array(_)) => {
                if let Some(v) = get(orch, "description") {
                    t.description = self
                        .strings(v, "orchestration.description")
                        .unwrap_or_default()
                        .into_iter()
                        .map(|s| s.value)
                        .collect();
                }
            }
            Some(Value::NullKeyword(_)) | None => {}
            Some(other) => self.wrong(
                other,
                "orchestration.description",
                "a string or an array of strings",
            ),
        }
        t.default_step = self.opt_string(orch, "defaultStep");
        if let Some(v) = get(orch, "historyLength") {
            t.history_length = self.uint(v, "orchestration.historyLength");
        }
        if let Some(v) = get(orch, "approve") {
            if let Some((names, rules)) = self.approve_entries(v, "orchestration.approve") {
                t.approve = names;
                t.rules.extend(rules);
            }
        }
        if let Some(v) = get(orch, "rules") {
            t.rules.extend(self.rules(v, "orchestration.rules"));
        }
        if let Some(v) = get(orch, "trust") {
            if let Some(o) = self.object(v, "orchestration.trust") {
                self.known_keys(o, "`trust`", &["trusted", "untrusted"]);
                if let Some(v) = get(o, "trusted") {
                    t.trusted = self
                        .strings(v, "orchestration.trust.trusted")
                        .unwrap_or_default();
                }
                if let Some(v) = get(o, "untrusted") {
                    t.untrusted = self
                        .strings(v, "orchestration.trust.untrusted")
                        .unwrap_or_default();
                }
            }
        }
        if let Some(v) = get(orch, "rememberedValues") {
            t.remembered_values = self.uint(v, "orchestration.rememberedValues");
        }
        if let Some(v) = get(orch, "budgets") {
            t.budgets = self.budgets(v);
        }
        if let Some(v) = get(orch, "lostResults") {
            if let Some(o) = self.object(v, "orchestration.lostResults") {
                self.known_keys(o, "`lostResults`", &["retry", "ran", "hold"]);
                let lost = &mut t.lost_results;
                for (key, list) in [
                    ("retry", &mut lost.retry),
                    ("ran", &mut lost.ran),
                    ("hold", &mut lost.hold),
                ] {
                    if let Some(v) = get(o, key) {
                        let field = format!("orchestration.lostResults.{key}");
                        *list = self.strings(v, &field).unwrap_or_default();
                    }
                }
            }
        }
        match get(orch, "properties") {
            Some(Value::Array(a)) => {
                for p in &a.elements {
                    if let Some(p) = self.property(p) {
                        t.properties.push(p);
                    }
                }
            }
            Some(other) => self.wrong(other, "orchestration.properties", "an array of properties"),
            None => {}
        }
    }

    fn step(&mut self, v: &Value<'_>) -> Option<Step> {
        let o = self.object(v, "orchestration.steps[]")?;
        let mut s = Step {
            span: span_of(v),
            conditions_span: span_of(v),
            ..Step::default()
        };
        s.name = self.opt_string(o, "name");
        if s.name.is_none() && get(o, "name").is_none() {
            self.diags.push(
                Diagnostic::new(
                    Code::MissingField,
                    Some(s.span.first_byte()),
                    "a step has no `name`",
                )
                .label("this step")
                .help("every step needs a unique `\"name\"`"),
            );
        }
        s.description = self.opt_string(o, "description").map(|d| d.value);
        match get(o, "isDefault") {
            Some(Value::BooleanLit(b)) => s.is_default = Some(Spanned::new(b.value, span_of(b))),
            Some(Value::NullKeyword(_)) | None => {}
            Some(other) => self.wrong(other, "isDefault", "a boolean"),
        }
        match get(o, "conditions") {
            Some(Value::Array(a)) => {
                s.conditions_span = span_of(a);
                for c in &a.elements {
                    if let Some(c) = self.condition(c) {
                        s.conditions.push(c);
                    }
                }
            }
            Some(Value::NullKeyword(_)) | None => {}
            Some(other) => self.wrong(other, "conditions", "an array of conditions"),
        }
        if let Some(av) = get(o, "availableTools") {
            if let Some(a) = self.object(av, "availableTools") {
                self.known_keys(a, "`availableTools`", &["allowed", "denied", "approve"]);
                if let Some(v) = get(a, "allowed") {
                    s.allowed = self.strings(v, "availableTools.allowed");
                }
                if let Some(v) = get(a, "denied") {
                    s.denied = self.strings(v, "availableTools.denied");
                }
                if let Some(v) = get(a, "approve") {
                    if let Some((names, rules)) = self.approve_entries(v, "availableTools.approve")
                    {
                        s.approve = Some(names);
                        s.rules.extend(rules);
                    }
                }
            }
        }
        match get(o, "sequence") {
            Some(Value::Array(a)) => {
                let mut entries = Vec::new();
                for e in &a.elements {
                    match e {
                        Value::StringLit(t) => entries.push(SequenceEntry::Tool(Spanned::new(
                            t.value.to_string(),
                            span_of(t),
                        ))),
                        Value::Array(_) => {
                            if let Some(g) = self.strings(e, "sequence[]") {
                                entries.push(SequenceEntry::Group(Spanned::new(g, span_of(e))));
                            }
                        }
                        other => {
                            self.wrong(other, "sequence[]", "a tool name or an array of tool names")
                        }
                    }
                }
                s.sequence = Some(Spanned::new(entries, span_of(a)));
            }
            Some(Value::NullKeyword(_)) | None => {}
            Some(other) => self.wrong(other, "sequence", "an array"),
        }
        if let Some(v) = get(o, "resetSequenceOn") {
            s.reset_sequence_on = self.strings(v, "resetSequenceOn").unwrap_or_default();
        }
        if let Some(v) = get(o, "rules") {
            s.rules.extend(self.rules(v, "rules"));
        }
        Some(s)
    }

    fn condition(&mut self, v: &Value<'_>) -> Option<Condition> {
        let o = self.object(v, "conditions[]")?;
        let mut c = Condition {
            span: span_of(v),
            ..Condition::default()
        };
        c.kind = self
            .opt_string(o, "type")
            .map(|k| Spanned::new(ConditionType::parse(&k.value), k.span));
        if c.kind.is_none() && get(o, "type").is_none() {
            self.diags.push(
                Diagnostic::new(
                    Code::MissingField,
                    Some(c.span),
                    "a condition has no `type`",
                )
                .help(format!("valid types: {}", ConditionKind::list())),
            );
        }
        c.value = self.opt_string(o, "value");
        if let Some(w) = get(o, "window") {
            c.window = self.uint(w, "window");
        }
        if let Some(range) = get(o, "range") {
            c.has_range = true;
            if let Some(ArgTest::Range {
                min,
                max,
                min_result,
                max_result,
                ..
            }) = self.test("range", range)
            {
                if let Some(r) = min_result.or(max_result) {
                    self.diags.push(
                        Diagnostic::new(
                            Code::InvalidRule,
                            Some(r.span),
                            "a budget condition compares the total with numbers, not with a result",
                        )
                        .help("write the bound as a number"),
                    );
                }
                c.min = min;
                c.max = max;
            }
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_in_any_notation() {
        let ok = |s: &str| integer_value(s).map(|r| r.ok());
        assert_eq!(ok("12"), Some(Some(12)));
        assert_eq!(ok("12.0"), Some(Some(12)));
        assert_eq!(ok("1.2e1"), Some(Some(12)));
        assert_eq!(ok("120E-1"), Some(Some(12)));
        assert_eq!(ok("1200e-2"), Some(Some(12)));
        assert_eq!(ok("-0"), Some(Some(0)));
        assert_eq!(ok("0.0e5"), Some(Some(0)));
        assert_eq!(ok("18446744073709551615"), Some(Some(u64::MAX)));
        assert_eq!(ok("1.8446744073709551615e19"), Some(Some(u64::MAX)));
        assert_eq!(ok("18446744073709551616"), Some(None));
        assert_eq!(ok("1e400"), Some(None));
        for not in ["-1", "1.5", "12e-1", "0.5", "1e-400", "-1e3"] {
            assert_eq!(integer_value(not).map(|r| r.ok()), None, "{not}");
        }
    }

    #[test]
    fn reads_agent_wrapper_and_ignores_unknown_fields() {
        let src = r#"{"agentId": "a", "personality": ["x"], "nodes": ["llm.x", "search"],
            "options": {"maxSteps": 5},
            "orchestration": {"description": ["l1", "l2"], "defaultStep": "D", "historyLength": 20,
              "steps": [{"name": "D"}, {"name": "S", "sequence": ["search", ["a", "b"]],
                "conditions": [{"type": "tool_used", "value": "search", "description": "x"}],
                "availableTools": {"allowed": ["*"], "denied": []}, "resetSequenceOn": ["user_message"]}]}}"#;
        let (t, d) = parse(src, None);
        assert!(d.is_empty(), "{d:?}");
        let t = t.unwrap();
        assert_eq!(t.name.unwrap().value, "a");
        assert_eq!(
            t.universe
                .unwrap()
                .iter()
                .map(|s| s.value.as_str())
                .collect::<Vec<_>>(),
            ["search"]
        );
        assert_eq!(t.description, ["l1", "l2"]);
        assert_eq!(t.history_length.unwrap().value, 20);
        assert_eq!(t.max_rounds.unwrap().value, 5);
        assert_eq!(t.steps.len(), 2);
        let s = &t.steps[1];
        assert_eq!(s.sequence.as_ref().unwrap().value.len(), 2);
        assert_eq!(s.conditions[0].value.as_ref().unwrap().value, "search");
        assert_eq!(
            &src[s.conditions[0]
                .value
                .as_ref()
                .unwrap()
                .span
                .byte_range()
                .unwrap()],
            "\"search\""
        );
    }

    #[test]
    fn bare_orchestration_and_fallback_name() {
        let (t, d) = parse(r#"{"steps": []}"#, Some("file-stem"));
        assert!(d.is_empty());
        assert_eq!(t.unwrap().name.unwrap().value, "file-stem");
    }

    #[test]
    fn wrong_types_are_reported_with_spans() {
        let src = r#"{"steps": [{"name": 3, "sequence": "x", "conditions": [{"type": "tool_used", "window": -1}]}]}"#;
        let (t, d) = parse(src, None);
        assert!(t.is_some());
        let codes: Vec<_> = d.iter().map(|d| d.code).collect();
        assert_eq!(
            codes,
            [Code::WrongType, Code::WrongType, Code::WrongType],
            "{d:?}"
        );
        assert!(d[0]
            .message
            .contains("`name` must be a string, found a number"));
    }

    #[test]
    fn invalid_json_has_a_location() {
        let (t, d) = parse("{\"steps\": [\n  {\"name\": \"a\",}\n]}", None);
        assert!(t.is_none());
        assert_eq!(d[0].code, Code::InvalidJson);
        let (line, _) = crate::diagnostic::line_col(
            "{\"steps\": [\n  {\"name\": \"a\",}\n]}",
            d[0].span.unwrap().order().1,
        );
        assert_eq!(line, 2);
        let (t, d) = parse("", None);
        assert!(t.is_none() && d[0].code == Code::InvalidJson);
        let (t, d) = parse("[1]", None);
        assert!(t.is_none() && d[0].code == Code::WrongType);
    }
}
