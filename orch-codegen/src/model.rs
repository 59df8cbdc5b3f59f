//! The template model: what a front end (JSON file, `orchestration!` DSL) read, with the
//! location of every value, before any rule is applied. Front ends fill it in; `check`
//! judges it; nothing here knows about JSON or tokens.

/// Where a value was written: what a diagnostic underlines.
///
/// The two front ends point at different things, and the type says which: the JSON
/// front end at bytes of the template file, the `orchestration!` macro at tokens of
/// its input (an index into the front end's own token table, which maps it back to a
/// `proc_macro2::Span`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Span {
    /// Bytes `start..end` of a JSON source.
    Bytes {
        /// Start (inclusive).
        start: usize,
        /// End (exclusive).
        end: usize,
    },
    /// The token with this index in the macro front end's token table.
    Token(usize),
}

impl Default for Span {
    fn default() -> Self {
        Span::Bytes { start: 0, end: 0 }
    }
}

impl Span {
    /// Bytes `start..end` of a JSON source.
    pub const fn bytes(start: usize, end: usize) -> Self {
        Span::Bytes { start, end }
    }

    /// The first byte of this span, as an empty-ended one-byte span (for diagnostics
    /// about a whole object: they point at its opening brace). Tokens stay as they are.
    pub const fn first_byte(self) -> Self {
        match self {
            Span::Bytes { start, .. } => Span::Bytes {
                start,
                end: start + 1,
            },
            token => token,
        }
    }

    /// The byte range, for a span into a JSON source.
    pub fn byte_range(self) -> Option<core::ops::Range<usize>> {
        match self {
            Span::Bytes { start, end } => Some(start..end),
            Span::Token(_) => None,
        }
    }

    /// A key that orders spans of one source as they appear in it (byte spans before
    /// token spans, which only mix in the file form's `allow` list).
    pub fn order(self) -> (u8, usize) {
        match self {
            Span::Bytes { start, .. } => (0, start),
            Span::Token(i) => (1, i),
        }
    }
}

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// `value` at `span`.
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// A whole template (semantics §1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Template {
    /// The machine's name: `agentId`, else `name` (else the front end's fallback).
    pub name: Option<Spanned<String>>,
    /// Where the template as a whole is (for diagnostics about it).
    pub span: Span,
    /// The declared tool universe (`tools`, else `nodes` without `llm.*`), if any.
    pub universe: Option<Vec<Spanned<String>>>,
    /// `orchestration.description`, one entry per line.
    pub description: Vec<String>,
    /// `orchestration.defaultStep`.
    pub default_step: Option<Spanned<String>>,
    /// `orchestration.historyLength` (extension, semantics §4).
    pub history_length: Option<Spanned<u64>>,
    /// `options.maxSteps`: the agent loop's cap on rounds (model calls) per turn.
    pub max_rounds: Option<Spanned<u64>>,
    /// The steps, in priority order.
    pub steps: Vec<Step>,
    /// Warnings the author allowed (lint names such as `unreachable_step`).
    pub allow: Vec<Spanned<String>>,
    /// `orchestration.approve`: tools (names or patterns) that need a human's approval
    /// of each call in every step (semantics §13).
    pub approve: Vec<Spanned<String>>,
    /// `orchestration.lostResults`: what a call whose result never came means, per tool
    /// (semantics §15).
    pub lost_results: LostResults,
    /// `orchestration.properties`: safety properties `orch verify` proves (semantics §14).
    pub properties: Vec<Property>,
    /// `orchestration.rules` and the conditional entries of `orchestration.approve`:
    /// rules on arguments for every step (semantics §16).
    pub rules: Vec<ArgRule>,
    /// `orchestration.trust.trusted`: tools whose results are the user's own data
    /// (semantics §16).
    pub trusted: Vec<Spanned<String>>,
    /// `orchestration.trust.untrusted`: tools whose results carry text anyone could
    /// have written (pages, mail, files).
    pub untrusted: Vec<Spanned<String>>,
    /// `orchestration.rememberedValues`: how many values a session remembers.
    pub remembered_values: Option<Spanned<u64>>,
    /// `orchestration.budgets`: counts and sums of calls (semantics §17).
    pub budgets: Vec<BudgetDecl>,
}

/// A budget (semantics §17): what it charges, over what, and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetDecl {
    /// The whole entry.
    pub span: Span,
    /// `name`: what tests and refusals call it.
    pub name: Spanned<String>,
    /// `tool`: the tool (a name or a `*` pattern over the declared tools) whose admitted
    /// calls it charges.
    pub tool: Spanned<String>,
    /// `sum`: the JSON pointer of the number it adds up; absent: it counts calls.
    pub sum: Option<Spanned<String>>,
    /// `where`: only calls whose arguments satisfy it are charged.
    pub when: Option<Predicate>,
    /// `per`: `run` (the default) or `step` (it starts again when the active step
    /// changes).
    pub per: Option<Spanned<String>>,
    /// `within`: a sliding window (`24h`, `90s`): charges older than it stop counting.
    pub within: Option<Spanned<String>>,
    /// `events`: how many charges a windowed budget keeps.
    pub events: Option<Spanned<u64>>,
    /// `counts`: `admitted` (the default) or `refused` — the calls the session refused
    /// to admit.
    pub counts: Option<Spanned<String>>,
}

/// A rule on the arguments of one tool's calls (semantics §16): an entry of `rules`
/// (`require`), or a conditional entry of `approve` (`when`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgRule {
    /// The whole entry.
    pub span: Span,
    /// `name`: required for `rules`, optional for a conditional `approve` (which is
    /// then called `approve <tool>`).
    pub name: Option<Spanned<String>>,
    /// `tool`: the tool whose calls it judges (a name).
    pub tool: Spanned<String>,
    /// Refuse or gate.
    pub kind: ArgRuleKind,
    /// What the arguments must (`require`) or may (`when`) satisfy.
    pub predicate: Predicate,
}

/// What an [`ArgRule`] does with its predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgRuleKind {
    /// `require`: a call that does not satisfy it is refused.
    Require,
    /// `when` (in `approve`): a call that satisfies it needs a human's approval.
    ApproveWhen,
}

/// A predicate over a call's arguments, and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Predicate {
    /// The whole predicate.
    pub span: Span,
    /// What it says.
    pub node: PredicateNode,
}

/// The forms of a [`Predicate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PredicateNode {
    /// `all`: every one holds.
    All(Vec<Predicate>),
    /// `any`: at least one holds.
    Any(Vec<Predicate>),
    /// `not`: it does not hold.
    Not(Box<Predicate>),
    /// A test of the value at `path`, a JSON pointer into the arguments (or, inside
    /// `each`, into the element); `""` is the whole.
    Test {
        /// The JSON pointer.
        path: Spanned<String>,
        /// What the value must be.
        test: ArgTest,
    },
}

/// What a value must be (semantics §16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgTest {
    /// `exists`: present (`true`) or absent (`false`).
    Exists(bool),
    /// `equals`: this JSON scalar.
    Equals(Spanned<Scalar>),
    /// `oneOf`: one of these JSON scalars.
    OneOf(Spanned<Vec<Spanned<Scalar>>>),
    /// `glob`: a string matching this `*` glob.
    Glob(Spanned<String>),
    /// `regex`: a string this regex matches somewhere.
    Regex(Spanned<String>),
    /// `range`: a number within `min..=max` (JSON number texts, as written), each bound
    /// a number or the number a tool's newest result held.
    Range {
        /// The whole `range` object.
        span: Span,
        /// `min`, inclusive.
        min: Option<Spanned<String>>,
        /// `max`, inclusive.
        max: Option<Spanned<String>>,
        /// `min` written `{"result": TOOL, "path": P}`.
        min_result: Option<Box<ResultNumber>>,
        /// `max` written `{"result": TOOL, "path": P}`.
        max_result: Option<Box<ResultNumber>>,
    },
    /// `length`: a string, array or object of `min..=max` characters or entries.
    Length {
        /// The whole `length` object.
        span: Span,
        /// `min`, inclusive.
        min: Option<Spanned<u64>>,
        /// `max`, inclusive.
        max: Option<Spanned<u64>>,
    },
    /// `hostIn`: a URL whose host matches one of these `*` globs.
    HostIn(Spanned<Vec<Spanned<String>>>),
    /// `hostnameIn`: a host written alone or in a URL, matching one of these `*` globs.
    HostnameIn(Spanned<Vec<Spanned<String>>>),
    /// `addressesIn`: a list of plain e-mail addresses, each matching one of these `*`
    /// globs.
    AddressesIn(Spanned<Vec<Spanned<String>>>),
    /// `linksIn`: text whose every link goes to a host matching one of these `*` globs.
    LinksIn(Spanned<Vec<Spanned<String>>>),
    /// `emailsIn`: text whose every e-mail address matches one of these `*` globs.
    EmailsIn(Spanned<Vec<Spanned<String>>>),
    /// `each`: an array whose every element satisfies this.
    Each(Box<Predicate>),
    /// `inResult`: a value an earlier result of `tool` held at `path` (a JSON pointer
    /// whose `*` tokens stand for every element or member).
    InResult {
        /// The whole `inResult` object.
        span: Span,
        /// The tool whose results hold the values.
        tool: Spanned<String>,
        /// Where in its results.
        path: Spanned<String>,
    },
    /// `from`: a value the session saw at one of these origins (semantics §16).
    From(Spanned<Vec<Spanned<Origin>>>),
    /// `{"budget": NAME, "range": {min, max}}`: the budget's total with this call within
    /// the bounds (semantics §17). The predicate's path is empty.
    Budget {
        /// The whole predicate.
        span: Span,
        /// The budget's name.
        name: Spanned<String>,
        /// `min`, inclusive.
        min: Option<Spanned<String>>,
        /// `max`, inclusive.
        max: Option<Spanned<String>>,
    },
}

/// Where a value may come from, in a `from` test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `"user"`: the user's messages in this run.
    User,
    /// `"trusted"`: the results of the tools `trust.trusted` names.
    Trusted,
    /// `{"result": TOOL, "path": P}`: the results of `tool` at `path`.
    Result {
        /// The tool.
        tool: Spanned<String>,
        /// Where in its results (`*` tokens: every element or member).
        path: Spanned<String>,
    },
    /// `{"arguments": TOOL, "path": P}`: the arguments of the calls of `tool` that were
    /// admitted to run.
    Arguments {
        /// The tool.
        tool: Spanned<String>,
        /// Where in its arguments (`*` tokens: every element or member).
        path: Spanned<String>,
    },
}

/// A bound of a `range` that is the number the newest result of `tool` held at `path`
/// (semantics §16): `{"result": "get_balance", "path": "/balance"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultNumber {
    /// The whole bound.
    pub span: Span,
    /// The tool whose results hold the number.
    pub tool: Spanned<String>,
    /// Where in its results (a JSON pointer).
    pub path: Spanned<String>,
}

impl ArgTest {
    /// The test's key as written in a template.
    pub fn key(&self) -> &'static str {
        match self {
            ArgTest::Exists(_) => "exists",
            ArgTest::Equals(_) => "equals",
            ArgTest::OneOf(_) => "oneOf",
            ArgTest::Glob(_) => "glob",
            ArgTest::Regex(_) => "regex",
            ArgTest::Range { .. } => "range",
            ArgTest::Length { .. } => "length",
            ArgTest::HostIn(_) => "hostIn",
            ArgTest::HostnameIn(_) => "hostnameIn",
            ArgTest::AddressesIn(_) => "addressesIn",
            ArgTest::LinksIn(_) => "linksIn",
            ArgTest::EmailsIn(_) => "emailsIn",
            ArgTest::Each(_) => "each",
            ArgTest::InResult { .. } => "inResult",
            ArgTest::From(_) => "from",
            ArgTest::Budget { .. } => "budget",
        }
    }

    /// Every test key, in the order the docs list them.
    pub const KEYS: [&'static str; 15] = [
        "exists",
        "equals",
        "oneOf",
        "glob",
        "regex",
        "range",
        "length",
        "hostIn",
        "hostnameIn",
        "addressesIn",
        "linksIn",
        "emailsIn",
        "each",
        "inResult",
        "from",
    ];
}

/// A JSON scalar a rule compares with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// A string (decoded).
    String(String),
    /// A number, its text as written.
    Number(String),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

impl Scalar {
    /// The scalar as JSON text (a string minimally escaped; a number as written).
    pub fn to_json(&self) -> String {
        match self {
            Scalar::String(s) => json_string(s),
            Scalar::Number(n) => n.clone(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Null => "null".to_owned(),
        }
    }
}

/// `s` as a JSON string literal, minimally escaped (RFC 8785's escaping).
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `orchestration.lostResults` (semantics §15): tools (names or patterns) by what a lost
/// result of one of their calls means. A tool in none of the lists is held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LostResults {
    /// `retry`: the call counts as not run; the model may call it again.
    pub retry: Vec<Spanned<String>>,
    /// `ran`: the call counts as run (recorded).
    pub ran: Vec<Spanned<String>>,
    /// `hold`: the run is held until an operator says whether it ran (the default).
    pub hold: Vec<Spanned<String>>,
}

/// One entry of `orchestration.properties` (semantics §14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    /// The whole entry.
    pub span: Span,
    /// `name` (required).
    pub name: Spanned<String>,
    /// `tool`: the tools it is about (a name or a pattern).
    pub tool: Spanned<String>,
    /// What must hold of them.
    pub rule: PropertyRule,
    /// `when` (with `never` and `approved`): the property is about the calls whose
    /// arguments satisfy this predicate only (semantics §16).
    pub when: Option<Predicate>,
}

/// What a [`Property`] says of its tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PropertyRule {
    /// `"after": Q`: every execution comes after some execution of a tool matching `Q`
    /// in the session.
    After(Spanned<String>),
    /// `"atMost": N`: at most `N` executions in the session.
    AtMost(Spanned<u64>),
    /// `"never": true`: no execution at all.
    Never,
    /// `"approved": true`: no execution without a human's approval of the call.
    Approved,
}

impl PropertyRule {
    /// The rule's key as written in a template.
    pub fn key(&self) -> &'static str {
        match self {
            PropertyRule::After(_) => "after",
            PropertyRule::AtMost(_) => "atMost",
            PropertyRule::Never => "never",
            PropertyRule::Approved => "approved",
        }
    }
}

/// One step of `orchestration.steps`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The whole step.
    pub span: Span,
    /// `name` (required; `None` when missing, which is an error).
    pub name: Option<Spanned<String>>,
    /// `description`.
    pub description: Option<String>,
    /// `conditions`, in order; `conditions_span` covers the list.
    pub conditions: Vec<Condition>,
    /// Where the `conditions` list is (the step's span when absent).
    pub conditions_span: Span,
    /// `availableTools.allowed` (absent: `None`).
    pub allowed: Option<Vec<Spanned<String>>>,
    /// `availableTools.denied`.
    pub denied: Option<Vec<Spanned<String>>>,
    /// `availableTools.approve`: tools (names or patterns) the step allows only with a
    /// human's approval of each call (semantics §13).
    pub approve: Option<Vec<Spanned<String>>>,
    /// `sequence` (absent: `None`).
    pub sequence: Option<Spanned<Vec<SequenceEntry>>>,
    /// `isDefault`.
    pub is_default: Option<Spanned<bool>>,
    /// `resetSequenceOn`.
    pub reset_sequence_on: Vec<Spanned<String>>,
    /// `rules` and the conditional entries of `availableTools.approve`: rules on
    /// arguments while this step is active (semantics §16).
    pub rules: Vec<ArgRule>,
}

/// One entry of a sequence: a tool, or a group of alternatives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SequenceEntry {
    /// A single tool.
    Tool(Spanned<String>),
    /// Any one of these tools.
    Group(Spanned<Vec<Spanned<String>>>),
}

impl SequenceEntry {
    /// The tools of the entry.
    pub fn tools(&self) -> &[Spanned<String>] {
        match self {
            SequenceEntry::Tool(t) => core::slice::from_ref(t),
            SequenceEntry::Group(g) => &g.value,
        }
    }

    /// Where the entry is.
    pub fn span(&self) -> Span {
        match self {
            SequenceEntry::Tool(t) => t.span,
            SequenceEntry::Group(g) => g.span,
        }
    }
}

/// The condition types of semantics §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionKind {
    /// `tool_used`: a tool is in the used set.
    ToolUsed,
    /// `sequence_match`: the newest history entries match the step's own sequence.
    SequenceMatch,
    /// `message_contains`: the latest user message contains a text.
    MessageContains,
    /// `message_regex`: a regex matches the latest user message.
    MessageRegex,
    /// `not_recently_used`: a tool is not among the newest `window` history entries.
    NotRecentlyUsed,
    /// `budget`: a budget's total (semantics §17) is within a `range`.
    Budget,
}

impl ConditionKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [ConditionKind; 6] = [
        ConditionKind::ToolUsed,
        ConditionKind::SequenceMatch,
        ConditionKind::MessageContains,
        ConditionKind::MessageRegex,
        ConditionKind::NotRecentlyUsed,
        ConditionKind::Budget,
    ];

    /// The `type` string of a template (and the DSL's keyword).
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionKind::ToolUsed => "tool_used",
            ConditionKind::SequenceMatch => "sequence_match",
            ConditionKind::MessageContains => "message_contains",
            ConditionKind::MessageRegex => "message_regex",
            ConditionKind::NotRecentlyUsed => "not_recently_used",
            ConditionKind::Budget => "budget",
        }
    }

    /// The kind with this `type` string.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Does its `value` name a tool (rather than a text or a pattern)?
    pub const fn names_tool(self) -> bool {
        matches!(
            self,
            ConditionKind::ToolUsed | ConditionKind::NotRecentlyUsed
        )
    }

    /// Does it need a `value`?
    pub const fn needs_value(self) -> bool {
        !matches!(self, ConditionKind::SequenceMatch)
    }

    /// The `type` strings of every kind, comma-separated (for messages).
    pub fn list() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

/// A condition's `type` as written: a kind of semantics §7, or a string that names none
/// (kept, so that the checks can report it and suggest the closest kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionType {
    /// A known kind.
    Known(ConditionKind),
    /// Anything else.
    Unknown(String),
}

impl ConditionType {
    /// Reads a `type` string.
    pub fn parse(s: &str) -> Self {
        match ConditionKind::parse(s) {
            Some(k) => ConditionType::Known(k),
            None => ConditionType::Unknown(s.to_owned()),
        }
    }

    /// The known kind, if it is one.
    pub fn known(&self) -> Option<ConditionKind> {
        match self {
            ConditionType::Known(k) => Some(*k),
            ConditionType::Unknown(_) => None,
        }
    }
}

/// One condition of a step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    /// The whole condition.
    pub span: Span,
    /// `type` (required).
    pub kind: Option<Spanned<ConditionType>>,
    /// `value`.
    pub value: Option<Spanned<String>>,
    /// `window` (for `not_recently_used`).
    pub window: Option<Spanned<u64>>,
    /// `range` (for `budget`): the least total, inclusive, as written.
    pub min: Option<Spanned<String>>,
    /// `range` (for `budget`): the greatest total, inclusive, as written.
    pub max: Option<Spanned<String>>,
    /// Is a `range` written (possibly without bounds)?
    pub has_range: bool,
}

impl Condition {
    /// The tool this condition names (`tool_used`, `not_recently_used`), if any.
    pub fn tool(&self) -> Option<&Spanned<String>> {
        let kind = self.kind.as_ref()?.value.known()?;
        self.value.as_ref().filter(|_| kind.names_tool())
    }
}

impl Step {
    /// Every tool name the step mentions, in one fixed order: `allowed`, the sequence,
    /// `denied`, then the conditions that name a tool. Patterns are included (callers
    /// that want literal names skip them). This order is the order of first mention
    /// that an undeclared universe takes (semantics §2).
    pub fn tool_mentions(&self) -> impl Iterator<Item = &Spanned<String>> + '_ {
        let allowed = self.allowed.iter().flatten();
        let sequence = self
            .sequence
            .iter()
            .flat_map(|q| q.value.iter())
            .flat_map(SequenceEntry::tools);
        let denied = self.denied.iter().flatten();
        let conditions = self.conditions.iter().filter_map(Condition::tool);
        let approve = self.approve.iter().flatten();
        let rules = self.rules.iter().map(|r| &r.tool);
        allowed
            .chain(sequence)
            .chain(denied)
            .chain(conditions)
            .chain(approve)
            .chain(rules)
    }
}
