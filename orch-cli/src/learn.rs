//! `orch learn`: a first template from what agents did — decision logs (every call with
//! its arguments, as observe mode records them) or OpenAI/Anthropic transcripts.
//!
//! What it generalises, conservatively, and says so in the template's descriptions:
//!
//! - **Tools**: every tool that ran.
//! - **Orders that always held**: "`b` only after `a`" when, in every run, every call of
//!   `b` came after some call of `a`, and `b` ran in at least [`Learner::min_runs`]
//!   runs. Written as steps activated by `tool_used` conditions — one per set of such
//!   `a`s the runs were seen in, most specific first — each allowing the tools whose
//!   prerequisites it holds. A run in a state the traces never showed falls to a step
//!   of fewer prerequisites: never more than was seen.
//! - **Argument values**: per tool and top-level argument present in every call (at
//!   least [`Learner::min_calls`] calls): URLs sharing one domain become `hostIn`, e-mail
//!   addresses sharing one domain `addressesIn`, and a few values each seen more than
//!   once `oneOf`. Other values (ranges of numbers, many distinct strings) are reported,
//!   not made rules.
//! - **Side effects**: tools whose names say they change something (`send_*`, `pay*`,
//!   `delete_*`, ...) are proposed as approvals in the description; with
//!   [`Learner::approve_side_effects`] they are written into `approve`.
//!
//! The template compiles, passes `orch verify`, and — without approvals written in —
//! admits every call that ran in the traces it learned from.

use crate::trace::TraceEvent;
use crate::whatif::{thousands, Logged};
use orch_agent::audit::{is_checkpoint, AuditEvent, DecisionRecord};
use orch_agent::Policy;
use orch_runtime::dynamic::DynMachine;
use orch_runtime::Call;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One call that ran.
#[derive(Clone, Debug)]
struct Ran {
    tool: String,
    /// Its arguments, when the source kept them.
    arguments: Option<Value>,
}

/// Why a source cannot be learned from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnError(pub String);

impl std::fmt::Display for LearnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LearnError {}

/// What `orch learn` gathers from its sources, then writes as a template.
#[derive(Debug)]
pub struct Learner {
    /// The runs: each the calls that ran, in order.
    runs: BTreeMap<String, Vec<Ran>>,
    /// Tools in the order first seen.
    tools: Vec<String>,
    /// Sources read, and calls seen that did not run (refused, failed).
    sources: Vec<String>,
    not_run: u64,
    /// Calls of a decision log whose arguments were not kept.
    without_arguments: u64,
    /// An order becomes a step only when its later tool ran in at least this many runs.
    pub min_runs: usize,
    /// Argument values become a rule only for a tool called at least this many times.
    pub min_calls: usize,
    /// At most this many distinct values become a `oneOf` rule.
    pub max_values: usize,
    /// Write the side-effect tools into `approve` (by default they are only proposed).
    pub approve_side_effects: bool,
}

impl Default for Learner {
    fn default() -> Self {
        Learner {
            runs: BTreeMap::new(),
            tools: Vec::new(),
            sources: Vec::new(),
            not_run: 0,
            without_arguments: 0,
            min_runs: 3,
            min_calls: 5,
            max_values: 5,
            approve_side_effects: false,
        }
    }
}

/// The words in a tool's name that say it changes something.
const SIDE_EFFECT_WORDS: [&str; 24] = [
    "send", "pay", "transfer", "delete", "remove", "create", "update", "write", "post", "refund",
    "charge", "book", "cancel", "issue", "submit", "publish", "deploy", "execute", "drop", "grant",
    "revoke", "buy", "purchase", "reply",
];

/// Does `tool`'s name say it changes something (a word of it is a side-effect verb)?
pub fn looks_like_side_effect(tool: &str) -> bool {
    tool.split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(split_camel)
        .any(|w| SIDE_EFFECT_WORDS.contains(&w.to_ascii_lowercase().as_str()))
}

/// `sendMoney` → `send`, `Money`.
fn split_camel(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in word.char_indices() {
        if i > start && c.is_ascii_uppercase() {
            parts.push(&word[start..i]);
            start = i;
        }
    }
    parts.push(&word[start..]);
    parts
}

impl Learner {
    /// A learner with the default thresholds.
    pub fn new() -> Self {
        Learner::default()
    }

    fn ran(&mut self, run: &str, tool: &str, arguments: Option<Value>) {
        if !self.tools.iter().any(|t| t == tool) {
            self.tools.push(tool.to_owned());
        }
        self.runs.entry(run.to_owned()).or_default().push(Ran {
            tool: tool.to_owned(),
            arguments,
        });
    }

    /// Reads one source, `name` in messages: a decision log (JSON lines, any number of
    /// runs; a call ran when its tool is recorded after it) or a transcript (one run).
    pub fn read(&mut self, name: &str, text: &str) -> Result<(), LearnError> {
        self.sources.push(name.to_owned());
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if is_checkpoint(first) || serde_json::from_str::<DecisionRecord>(first).is_ok() {
            return self.read_log(text.lines());
        }
        let (_, events) = crate::trace::parse(text).map_err(|e| LearnError(e.to_string()))?;
        self.read_transcript(name, &events);
        Ok(())
    }

    /// A decision log, a line at a time.
    pub fn read_log<'a>(&mut self, lines: impl Iterator<Item = &'a str>) -> Result<(), LearnError> {
        // Per run, the calls presented and not yet recorded: (tool, arguments).
        let mut open: HashMap<String, Vec<(String, Option<Value>)>> = HashMap::new();
        for (i, line) in lines.enumerate() {
            if line.trim().is_empty() || is_checkpoint(line) {
                continue;
            }
            let record: Logged<'_> = serde_json::from_str(line)
                .map_err(|e| LearnError(format!("line {}: not a decision record: {e}", i + 1)))?;
            match record.event {
                AuditEvent::Call {
                    tool, arguments, ..
                } => {
                    if arguments.is_none() {
                        self.without_arguments += 1;
                    }
                    let arguments = arguments.and_then(|a| serde_json::from_str(&a).ok());
                    open.entry(record.run.into_owned())
                        .or_default()
                        .push((tool, arguments));
                }
                AuditEvent::Record { tool, .. } => {
                    let calls = open.entry(record.run.to_string()).or_default();
                    let arguments = match calls.iter().rposition(|(t, _)| *t == tool) {
                        Some(k) => calls.remove(k).1,
                        None => None,
                    };
                    self.ran(&record.run, &tool, arguments);
                }
                AuditEvent::Reset => {
                    // A reset starts a new run as far as orders go.
                    if let Some(calls) = self.runs.remove(record.run.as_ref()) {
                        let n = self.runs.len();
                        self.runs.insert(format!("{}#{n}", record.run), calls);
                    }
                }
                _ => {}
            }
        }
        self.not_run += open.values().map(|c| c.len() as u64).sum::<u64>();
        Ok(())
    }

    /// A transcript's events (one run, named `run`).
    pub fn read_transcript(&mut self, run: &str, events: &[TraceEvent]) {
        let ran = crate::trace::ran_ids(events);
        for e in events {
            if let TraceEvent::Call {
                id,
                tool,
                arguments,
                ..
            } = e
            {
                if ran.contains(id.as_str()) {
                    let arguments = serde_json::from_str(arguments).ok();
                    self.ran(run, tool, arguments);
                } else {
                    self.not_run += 1;
                }
            }
        }
    }

    /// How many calls that ran were read.
    pub fn calls(&self) -> usize {
        self.runs.values().map(Vec::len).sum()
    }

    /// The template, named `name`.
    pub fn template(&self, name: &str) -> Value {
        let mut notes = vec![format!(
            "Learned by `orch learn` from {} calls that ran in {} runs ({}). Review every rule before you enforce it: run it in observe mode first (docs/rollout.md).",
            thousands(self.calls() as u64),
            thousands(self.runs.len() as u64),
            self.sources.join(", ")
        )];
        if self.not_run > 0 {
            notes.push(format!(
                "{} calls that did not run (refused, failed, never answered) were left out.",
                self.not_run
            ));
        }
        if self.without_arguments > 0 {
            notes.push(format!(
                "{} calls came without their arguments (a log in enforce mode keeps only those a rule judged): their values are not learned.",
                self.without_arguments
            ));
        }
        let orders = self.orders();
        let steps = self.steps(&orders, &mut notes);
        let rules = self.rules(&mut notes);
        let side: Vec<&String> = self
            .tools
            .iter()
            .filter(|t| looks_like_side_effect(t))
            .collect();
        let mut orchestration = Map::new();
        if !side.is_empty() {
            let list = side
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ");
            match self.approve_side_effects {
                true => {
                    notes.push(format!("Approval: {list} look like side effects (their names say they change something): a human approves each call."));
                    orchestration.insert("approve".into(), json!(side));
                }
                false => notes.push(format!("Proposed, not written: {list} look like side effects (their names say they change something); to have a human approve each call, add `\"approve\": {}` here (or run `orch learn --approve-side-effects`).", json!(side))),
            }
        }
        orchestration.insert("description".into(), json!(notes));
        if !rules.is_empty() {
            orchestration.insert("rules".into(), Value::Array(rules));
        }
        orchestration.insert("steps".into(), Value::Array(steps));
        json!({
            "agentId": name,
            "name": name,
            "description": "A first template learned from recorded calls by `orch learn`.",
            "tools": self.tools,
            "orchestration": orchestration,
        })
    }

    /// The orders that always held: `(a, b)` for "`b` only after `a`", with the number
    /// of runs `b` ran in.
    fn orders(&self) -> Vec<(String, String, usize)> {
        let mut found = Vec::new();
        for b in &self.tools {
            let runs_with_b: Vec<&Vec<Ran>> = self
                .runs
                .values()
                .filter(|calls| calls.iter().any(|c| c.tool == *b))
                .collect();
            if runs_with_b.len() < self.min_runs {
                continue;
            }
            for a in &self.tools {
                if a == b {
                    continue;
                }
                let always = runs_with_b.iter().all(|calls| {
                    let first_b = calls.iter().position(|c| c.tool == *b);
                    let first_a = calls.iter().position(|c| c.tool == *a);
                    matches!((first_a, first_b), (Some(x), Some(y)) if x < y)
                });
                if always {
                    found.push((a.clone(), b.clone(), runs_with_b.len()));
                }
            }
        }
        // At most four prerequisites (the best supported), so at most 16 steps.
        let mut prerequisites: Vec<(&String, usize)> = Vec::new();
        for (a, _, n) in &found {
            match prerequisites.iter_mut().find(|(p, _)| *p == a) {
                Some((_, m)) => *m = (*m).max(*n),
                None => prerequisites.push((a, *n)),
            }
        }
        prerequisites.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(y.0)));
        let kept: BTreeSet<String> = prerequisites
            .iter()
            .take(4)
            .map(|(p, _)| (*p).clone())
            .collect();
        found.retain(|(a, _, _)| kept.contains(a));
        found
    }

    /// Steps from the orders: a default step for runs before any prerequisite ran, and
    /// one per set of prerequisites the runs were seen in, most specific first.
    fn steps(&self, orders: &[(String, String, usize)], notes: &mut Vec<String>) -> Vec<Value> {
        let needs = |tool: &str| -> BTreeSet<&str> {
            orders
                .iter()
                .filter(|(_, b, _)| b == tool)
                .map(|(a, _, _)| a.as_str())
                .collect()
        };
        let prerequisites: BTreeSet<&str> = orders.iter().map(|(a, _, _)| a.as_str()).collect();
        let allowed = |held: &BTreeSet<&str>| -> Vec<&str> {
            self.tools
                .iter()
                .map(String::as_str)
                .filter(|t| needs(t).is_subset(held))
                .collect()
        };
        if orders.is_empty() {
            notes.push(
                "No order held in every run (or none had enough runs): one step allows every tool."
                    .into(),
            );
            return vec![json!({
                "name": "Any",
                "description": "Every tool seen, in any order.",
                "isDefault": true,
                "availableTools": {"allowed": self.tools},
            })];
        }
        for (a, b, n) in orders {
            notes.push(format!(
                "Order: `{b}` only after `{a}` — it held in all {n} runs that called `{b}`."
            ));
        }
        // The sets of prerequisites the runs were in when they called a tool.
        let mut seen: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
        for calls in self.runs.values() {
            let mut held = BTreeSet::new();
            seen.insert(held.clone());
            for c in calls {
                if prerequisites.contains(c.tool.as_str()) {
                    held.insert(c.tool.as_str());
                    seen.insert(held.clone());
                }
            }
        }
        let mut sets: Vec<BTreeSet<&str>> = seen.into_iter().filter(|s| !s.is_empty()).collect();
        sets.sort_by(|x, y| y.len().cmp(&x.len()).then(x.cmp(y)));
        let mut steps = vec![json!({
            "name": "Start",
            "description": "Before any tool others waited for has run.",
            "isDefault": true,
            "availableTools": {"allowed": allowed(&BTreeSet::new())},
        })];
        for held in sets {
            let names: Vec<&str> = held.iter().copied().collect();
            let conditions: Vec<Value> = names
                .iter()
                .map(|t| json!({"type": "tool_used", "value": t}))
                .collect();
            steps.push(json!({
                "name": format!("After {}", names.join(" and ")),
                "description": format!("Once {} ran.", names.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(" and ")),
                "conditions": conditions,
                "availableTools": {"allowed": allowed(&held)},
            }));
        }
        steps
    }

    /// Rules on arguments: per tool and top-level argument.
    fn rules(&self, notes: &mut Vec<String>) -> Vec<Value> {
        let mut rules = Vec::new();
        for tool in &self.tools {
            let calls: Vec<&Value> = self
                .runs
                .values()
                .flatten()
                .filter(|c| c.tool == *tool)
                .filter_map(|c| c.arguments.as_ref())
                .collect();
            if calls.len() < self.min_calls {
                continue;
            }
            let Some(first) = calls[0].as_object() else {
                continue;
            };
            for key in first.keys() {
                let values: Vec<&Value> = calls.iter().filter_map(|c| c.get(key)).collect();
                if values.len() < calls.len() {
                    continue;
                }
                let path = format!("/{}", key.replace('~', "~0").replace('/', "~1"));
                let name = format!("{tool}-{key}");
                if let Some((require, why)) = self.generalise(&values) {
                    notes.push(format!("Rule `{name}`: `{path}` of `{tool}` {why}."));
                    rules.push(json!({"name": name, "tool": tool, "require": {
                        "path": path,
                    }}));
                    if let (Some(Value::Object(rule)), Value::Object(test)) =
                        (rules.last_mut().map(|r| &mut r["require"]), require)
                    {
                        rule.extend(test);
                    }
                } else if let Some(range) = number_range(&values) {
                    notes.push(format!(
                        "Seen, not made a rule: `{path}` of `{tool}` ranged {range} over {} calls.",
                        values.len()
                    ));
                }
            }
        }
        rules
    }

    /// A test that holds for every one of `values`, and why it was chosen; `None` when
    /// the values are many and share nothing.
    fn generalise(&self, values: &[&Value]) -> Option<(Value, String)> {
        let strings: Option<Vec<&str>> = values.iter().map(|v| v.as_str()).collect();
        if let Some(strings) = &strings {
            if let Some(domain) = common_domain(strings.iter().map(|s| url_host(s))) {
                return Some((
                    json!({"hostIn": [domain, format!("*.{domain}")]}),
                    format!(
                        "was always a URL on `{domain}` ({} calls): hostIn",
                        values.len()
                    ),
                ));
            }
            if let Some(domain) = common_domain(strings.iter().map(|s| email_domain(s))) {
                if strings
                    .iter()
                    .all(|s| email_domain(s) == Some(domain.clone()))
                {
                    return Some((
                        json!({"addressesIn": [format!("*@{domain}")]}),
                        format!(
                            "was always an address at `{domain}` ({} calls): addressesIn",
                            values.len()
                        ),
                    ));
                }
            }
        }
        let scalar = values
            .iter()
            .all(|v| v.is_string() || v.is_number() || v.is_boolean());
        let mut distinct: Vec<&Value> = Vec::new();
        for v in values {
            if !distinct.contains(v) {
                distinct.push(v);
                if distinct.len() > self.max_values {
                    // Many values: no `oneOf` (and no need to count them all).
                    return None;
                }
            }
        }
        if scalar && distinct.len() <= self.max_values && values.len() >= 2 * distinct.len() {
            let shown: Vec<String> = distinct.iter().map(|v| v.to_string()).collect();
            return Some((
                json!({"oneOf": distinct}),
                format!(
                    "took only {} value(s) over {} calls ({}): oneOf",
                    distinct.len(),
                    values.len(),
                    shown.join(", ")
                ),
            ));
        }
        None
    }
}

impl Learner {
    /// Replays every run it learned from through `machine` (the learned template,
    /// compiled): the number of calls admitted, or the first call it refuses or asks
    /// about — which would be a fault of `orch learn`, as it admits every call by
    /// construction (and says so before it writes anything).
    pub fn admits_every_call(&self, machine: &DynMachine) -> Result<usize, String> {
        let mut admitted = 0;
        for (run, calls) in &self.runs {
            let policy = Policy::new(machine.tools().iter().cloned());
            let mut session = machine.session();
            policy.prepare(&mut session);
            for (i, c) in calls.iter().enumerate() {
                let arguments = c
                    .arguments
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                let call = Call::of_text(&c.tool, &arguments);
                if let Err(refusal) = policy.admit_call(&mut session, &c.tool, &call) {
                    return Err(format!(
                        "run `{run}`, call {} (`{}`): {}",
                        i + 1,
                        c.tool,
                        refusal.reason
                    ));
                }
                policy.record(&mut session, &c.tool);
                admitted += 1;
            }
        }
        Ok(admitted)
    }
}

/// The order a template's keys are written in (others after them, alphabetically): the
/// order a person reads a template in.
const KEY_ORDER: [&str; 17] = [
    "agentId",
    "name",
    "description",
    "tools",
    "orchestration",
    "approve",
    "rules",
    "steps",
    "isDefault",
    "conditions",
    "type",
    "value",
    "availableTools",
    "allowed",
    "tool",
    "path",
    "require",
];

/// `template` as pretty JSON text, its keys in the order a person reads a template in.
pub fn to_text(template: &Value) -> String {
    fn write(v: &Value, indent: usize, out: &mut String) {
        let pad = |n: usize| "  ".repeat(n);
        match v {
            Value::Object(o) if !o.is_empty() => {
                let mut keys: Vec<&String> = o.keys().collect();
                let rank = |k: &str| KEY_ORDER.iter().position(|x| *x == k).unwrap_or(usize::MAX);
                keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
                out.push_str("{\n");
                for (i, k) in keys.iter().enumerate() {
                    out.push_str(&pad(indent + 1));
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push_str(": ");
                    write(&o[k.as_str()], indent + 1, out);
                    out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(indent));
                out.push('}');
            }
            Value::Array(a) if a.iter().all(|e| !e.is_object() && !e.is_array()) => {
                // Short lists of names on one line.
                let items: Vec<String> = a.iter().map(Value::to_string).collect();
                let line = format!("[{}]", items.join(", "));
                if line.len() <= 80 || a.iter().any(Value::is_number) {
                    out.push_str(&line);
                } else {
                    out.push_str("[\n");
                    for (i, item) in items.iter().enumerate() {
                        out.push_str(&pad(indent + 1));
                        out.push_str(item);
                        out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                    }
                    out.push_str(&pad(indent));
                    out.push(']');
                }
            }
            Value::Array(a) if !a.is_empty() => {
                out.push_str("[\n");
                for (i, e) in a.iter().enumerate() {
                    out.push_str(&pad(indent + 1));
                    write(e, indent + 1, out);
                    out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(indent));
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(template, 0, &mut out);
    out.push('\n');
    out
}

/// The host of an absolute `http(s)` URL, lowercased.
fn url_host(s: &str) -> Option<String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.contains('@') {
        return None;
    }
    let host = authority.split(':').next()?.to_ascii_lowercase();
    let plain = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    plain.then_some(host)
}

/// The domain of a plain e-mail address, lowercased.
fn email_domain(s: &str) -> Option<String> {
    let (local, domain) = s.split_once('@')?;
    let plain = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._+".contains(c))
    };
    (plain(local) && plain(domain) && domain.contains('.')).then(|| domain.to_ascii_lowercase())
}

/// The last two labels every host shares (`a.bank.example`, `bank.example` →
/// `bank.example`), when every one is a host.
fn common_domain(hosts: impl Iterator<Item = Option<String>>) -> Option<String> {
    let mut common: Option<String> = None;
    for host in hosts {
        let host = host?;
        let labels: Vec<&str> = host.rsplit('.').take(2).collect();
        if labels.len() < 2 {
            return None;
        }
        let domain = format!("{}.{}", labels[1], labels[0]);
        match &common {
            None => common = Some(domain),
            Some(c) if *c == domain => {}
            Some(_) => return None,
        }
    }
    common
}

/// "12 to 980", when every value is a number.
fn number_range(values: &[&Value]) -> Option<String> {
    let numbers: Option<Vec<f64>> = values.iter().map(|v| v.as_f64()).collect();
    let numbers = numbers?;
    let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
    let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(format!("{min} to {max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_effects_are_told_by_their_names() {
        for tool in [
            "send_email",
            "issue_refund",
            "sendMoney",
            "delete-file",
            "pay",
        ] {
            assert!(looks_like_side_effect(tool), "{tool}");
        }
        for tool in [
            "lookup_order",
            "get_contacts",
            "search",
            "read_file",
            "sender_info",
        ] {
            assert!(!looks_like_side_effect(tool), "{tool}");
        }
    }

    #[test]
    fn domains_are_shared_or_not() {
        let hosts = [
            "https://www.bank.example/a",
            "http://bank.example:8080",
            "https://api.bank.example?q",
        ];
        assert_eq!(
            common_domain(hosts.iter().map(|h| url_host(h))).as_deref(),
            Some("bank.example")
        );
        let mixed = ["https://bank.example", "https://evil.example"];
        assert_eq!(common_domain(mixed.iter().map(|h| url_host(h))), None);
        assert_eq!(url_host("https://user@bank.example"), None);
        assert_eq!(
            email_domain("ana@corp.example").as_deref(),
            Some("corp.example")
        );
        assert_eq!(email_domain("Ana <ana@corp.example>"), None);
    }
}
