//! Diagnostics: stable codes, messages, and rustc-style rendering of JSON sources.

use crate::model::Span;
use core::fmt;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The template is still compiled.
    Warning,
    /// The template is rejected.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

macro_rules! codes {
    ($($variant:ident = $code:literal, $name:literal, $sev:ident, $summary:literal;)*) => {
        /// Every diagnostic the compiler emits. Codes are stable: never renumbered.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $(
                #[doc = $summary]
                $variant,
            )*
        }

        impl Code {
            /// Every code, in order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable code, e.g. `E014`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code),* }
            }

            /// The lint name, e.g. `unreachable_step` (used to allow a warning).
            pub fn name(self) -> &'static str {
                match self { $(Code::$variant => $name),* }
            }

            /// Error or warning.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$sev),* }
            }

            /// One line saying what the diagnostic is about.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary),* }
            }

            /// The code with this `E…`/`W…` string or lint name.
            pub fn parse(s: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|c| c.as_str().eq_ignore_ascii_case(s) || c.name() == s)
            }
        }
    };
}

codes! {
    InvalidJson = "E001", "invalid_json", Error, "the file is not valid JSON";
    WrongType = "E002", "wrong_type", Error, "a field has the wrong type";
    MissingField = "E003", "missing_field", Error, "a required field is missing";
    DuplicateStep = "E004", "duplicate_step", Error, "two steps have the same name";
    NameCollision = "E005", "name_collision", Error, "two names map to the same Rust identifier";
    InvalidName = "E006", "invalid_name", Error, "a name cannot be turned into a Rust identifier";
    ConflictingDefault = "E007", "conflicting_default", Error, "more than one default step";
    UnknownDefaultStep = "E008", "unknown_default_step", Error, "`defaultStep` names no step";
    UnknownCondition = "E009", "unknown_condition", Error, "unknown condition type";
    MissingValue = "E010", "missing_value", Error, "a condition needs a `value`";
    SequenceMatchWithoutSequence = "E011", "sequence_match_without_sequence", Error, "`sequence_match` on a step without a sequence";
    EmptySequence = "E012", "empty_sequence", Error, "an empty sequence or an empty group";
    PatternNotAllowed = "E013", "pattern_not_allowed", Error, "a pattern where a tool name is required";
    SequenceToolNotPermitted = "E014", "sequence_tool_not_permitted", Error, "a sequence tool the step's own tools do not permit";
    UnknownTool = "E015", "unknown_tool", Error, "a tool that is not in the declared tools";
    InvalidRegex = "E016", "invalid_regex", Error, "a regex that does not compile (a `message_regex`, or a rule's `regex`)";
    ZeroWindow = "E017", "zero_window", Error, "`window` of 0";
    UnknownResetTrigger = "E018", "unknown_reset_trigger", Error, "unknown `resetSequenceOn` entry";
    LimitExceeded = "E019", "limit_exceeded", Error, "the template exceeds a limit of the compiled form";
    UnknownLint = "E020", "unknown_lint", Error, "an `allow` names no warning";
    UnknownField = "E021", "unknown_field", Error, "an unknown key in an object orch defines (`availableTools`, a property)";
    InvalidProperty = "E022", "invalid_property", Error, "a property without exactly one rule, or two properties with one name";
    PropertyViolated = "E023", "property_violated", Error, "a property some reachable state violates (found by exploring every state)";
    ReadsUserMessages = "E024", "reads_user_messages", Error, "a message condition `orch policy` cannot enforce: MCP traffic carries no user messages";
    InvalidRule = "E025", "invalid_rule", Error, "a rule on arguments or a budget of the wrong shape: not exactly one test or combinator, an empty list, a path that is not a JSON pointer, a host with a scheme or a path, a window that is not `<n>ms|s|m|h|d`, `per` other than `run` or `step`";
    ConflictingRule = "E026", "conflicting_rule", Error, "a rule on arguments that contradicts itself or another: bounds out of order, two rules of one scope (or two budgets) with one name, `from` `trusted` with no trusted tool, a tool both trusted and untrusted, a budget bound of more than nine decimal places";
    UnknownBudget = "E027", "unknown_budget", Error, "a rule, step condition or property tests a budget `orchestration.budgets` does not declare, or a budget's `where` tests a budget";
    UnreachableStep = "W001", "unreachable_step", Warning, "a step that can never become active";
    ShadowedStep = "W002", "shadowed_step", Warning, "a step shadowed by an earlier step";
    DefaultStepConditions = "W003", "default_step_conditions", Warning, "conditions on the default step are ignored";
    UnmatchedPattern = "W004", "unmatched_pattern", Warning, "a pattern that matches no tool";
    EmptyToolSet = "W005", "empty_tool_set", Warning, "a step that allows no tool";
    SequenceNeverCompletes = "W006", "sequence_never_completes", Warning, "a sequence that can never complete";
    DeadStep = "W007", "dead_step", Warning, "a step no reachable state activates (found by exploring every state)";
    SequenceCannotComplete = "W008", "sequence_cannot_complete", Warning, "a sequence no reachable state completes (found by exploring every state)";
    NoUserMessages = "W009", "no_user_messages", Warning, "a message condition, message reset or `from` `user` that never fires behind an MCP gateway";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a diagnostic is about, as data: tools that act on diagnostics (`orch graph`
/// marking steps, an editor, a verifier) read these fields, never the message text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Subject {
    /// The step the finding is about, by name.
    pub step: Option<String>,
    /// The tool the finding is about, by name as written (a pattern for W004).
    pub tool: Option<String>,
    /// The position in the step's sequence the finding is about (0-based).
    pub position: Option<usize>,
    /// Another step the finding involves: the earlier step that shadows `step` (W002),
    /// or that wins when `step`'s sequence would go on (W006).
    pub other_step: Option<String>,
}

/// One finding about a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// What kind of finding (decides the severity).
    pub code: Code,
    /// The message: what was found.
    pub message: String,
    /// Where (the offending value), if anywhere in particular.
    pub span: Option<Span>,
    /// A short label under the underlined value.
    pub label: Option<String>,
    /// Other relevant places, each with a label.
    pub related: Vec<(Span, String)>,
    /// How to fix it, where known.
    pub help: Option<String>,
    /// Further context.
    pub notes: Vec<String>,
    /// What it is about (step, tool, sequence position), for tools to read.
    pub subject: Subject,
}

impl Diagnostic {
    /// A diagnostic of `code` saying `message` at `span`.
    pub fn new(code: Code, span: Option<Span>, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            span,
            label: None,
            related: Vec::new(),
            help: None,
            notes: Vec::new(),
            subject: Subject::default(),
        }
    }

    /// Says which step the diagnostic is about.
    #[must_use]
    pub fn about_step(mut self, step: impl Into<String>) -> Self {
        self.subject.step = Some(step.into());
        self
    }

    /// Says which tool the diagnostic is about.
    #[must_use]
    pub fn about_tool(mut self, tool: impl Into<String>) -> Self {
        self.subject.tool = Some(tool.into());
        self
    }

    /// Says which sequence position the diagnostic is about.
    #[must_use]
    pub fn about_position(mut self, position: usize) -> Self {
        self.subject.position = Some(position);
        self
    }

    /// Names the other step the diagnostic involves.
    #[must_use]
    pub fn involving_step(mut self, step: impl Into<String>) -> Self {
        self.subject.other_step = Some(step.into());
        self
    }

    /// Adds the label under the main span.
    #[must_use]
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Adds a help line.
    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds a note.
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// Adds a related location.
    #[must_use]
    pub fn related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }

    /// The severity of its code.
    pub fn severity(&self) -> Severity {
        self.code.severity()
    }

    /// Is it an error?
    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }
}

/// A template's text with its line starts indexed once, so that locating and rendering
/// many diagnostics costs time for the lines they touch, not for the whole file each.
#[derive(Clone, Debug)]
pub struct SourceText<'a> {
    text: &'a str,
    /// Byte offset of the start of every line.
    line_starts: Vec<usize>,
}

/// Lines longer than this are cut around the underlined part when rendered.
const LONG_LINE: usize = 4096;
/// How much of a long line is shown on each side of the underlined part.
const CONTEXT: usize = 256;
/// Related places within this many lines of the main one are drawn; farther ones are
/// named in a note.
const NEAR_LINES: usize = 40;

impl<'a> SourceText<'a> {
    /// Indexes `text`.
    pub fn new(text: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceText { text, line_starts }
    }

    /// The text.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// `at` moved back to a character boundary, within the text.
    fn floor(&self, at: usize) -> usize {
        let mut at = at.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    /// `at` moved forward to a character boundary, within the text.
    fn ceil(&self, at: usize) -> usize {
        let mut at = at.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at += 1;
        }
        at
    }

    /// The 0-based line of byte offset `at`.
    fn line_of(&self, at: usize) -> usize {
        self.line_starts
            .partition_point(|s| *s <= at)
            .saturating_sub(1)
    }

    /// Bytes of 0-based line `line`, without its newline.
    fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let start = self
            .line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len());
        let end = self
            .line_starts
            .get(line + 1)
            .map_or(self.text.len(), |next| next - 1);
        start..end.max(start)
    }

    /// 1-based line and column (in characters) of byte offset `at`.
    pub fn line_col(&self, at: usize) -> (usize, usize) {
        let at = self.floor(at);
        let line = self.line_of(at);
        let start = self.line_range(line).start.min(at);
        let before = &self.text[start..at];
        let col = if before.is_ascii() {
            before.len()
        } else {
            before.chars().count()
        };
        (line + 1, col + 1)
    }
}

/// 1-based line and column (in characters) of byte offset `at` in `source` (for one
/// look-up; index the text with [`SourceText`] for many).
pub fn line_col(source: &str, at: usize) -> (usize, usize) {
    SourceText::new(source).line_col(at)
}

/// `path:line:column` of a span in a JSON source (just `path` for a span that is not
/// into the source).
pub fn location(path: &str, source: &SourceText<'_>, span: Span) -> String {
    match span.byte_range() {
        Some(r) => {
            let (l, c) = source.line_col(r.start);
            format!("{path}:{l}:{c}")
        }
        None => path.to_owned(),
    }
}

/// Renders a diagnostic like rustc, with the offending JSON underlined. `color` adds
/// ANSI styles. Only the lines the diagnostic touches are handed to the renderer (and
/// of a very long line, only the part around the underlined text).
pub fn render(d: &Diagnostic, path: &str, source: &SourceText<'_>, color: bool) -> String {
    use annotate_snippets::{Group, Level, Origin, Renderer};
    use orch_runtime::printable::printable;

    // Text from the template (names quoted in messages, notes and labels) and the path
    // reach a terminal escaped; the renderer shows control characters in the source
    // lines as symbols itself.
    let message = printable(&d.message);
    let label = d.label.as_deref().map(printable);
    let notes: Vec<_> = d.notes.iter().map(|n| printable(n)).collect();
    let help = d.help.as_deref().map(printable);
    let related_labels: Vec<_> = d.related.iter().map(|(_, l)| printable(l)).collect();
    let path = &*printable(path);

    let level = match d.severity() {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let title = level.primary_title(&*message).id(d.code.as_str());
    let mut header = None;
    let mut far_notes: Vec<String> = Vec::new();
    let primary = d.span.and_then(Span::byte_range).map(|r| {
        let start = source.floor(r.start);
        start..source.ceil(r.end).max(start)
    });
    let mut group = match primary {
        Some(primary) => {
            let related: Vec<(std::ops::Range<usize>, &str)> = d
                .related
                .iter()
                .zip(&related_labels)
                .filter_map(|((s, _), label)| {
                    let r = s.byte_range()?;
                    let start = source.floor(r.start);
                    Some((start..source.ceil(r.end).max(start), &**label))
                })
                .collect();
            let (group, cut) = drawn(
                Group::with_title(title),
                source,
                path,
                primary,
                label.as_deref().unwrap_or(""),
                related,
                &mut far_notes,
            );
            header = cut;
            group
        }
        None => Group::with_title(title).element(Origin::path(path)),
    };
    for note in far_notes
        .iter()
        .map(String::as_str)
        .chain(notes.iter().map(|n| &**n))
    {
        group = group.element(Level::NOTE.message(note));
    }
    if let Some(help) = &help {
        group = group.element(Level::HELP.message(&**help));
    }
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let out = renderer.render(&[group]);
    match header {
        // Before the first gutter line (`  |`), where the renderer puts its own.
        Some(header) => {
            let mut lines: Vec<&str> = out.split('\n').collect();
            let at = lines
                .iter()
                .position(|l| strip_ansi(l).trim() == "|")
                .unwrap_or(lines.len().min(1));
            lines.insert(at, &header);
            lines.join("\n")
        }
        None => out,
    }
}

/// A diagnostic's place drawn: the lines around `primary` (labelled `label`) with the
/// `related` places near it; those far from it are named in `far_notes` instead, and
/// when one very long line is cut to the part around `primary`, the `-->` header the
/// renderer would get wrong is returned to be written in its place.
fn drawn<'a>(
    group: annotate_snippets::Group<'a>,
    source: &'a SourceText<'_>,
    path: &'a str,
    primary: std::ops::Range<usize>,
    label: &'a str,
    mut related: Vec<(std::ops::Range<usize>, &'a str)>,
    far_notes: &mut Vec<String>,
) -> (annotate_snippets::Group<'a>, Option<String>) {
    use annotate_snippets::{AnnotationKind, Snippet};
    let mut header = None;
    // Related places far from the main one are named in a note instead of drawn,
    // so that a diagnostic renders only the few lines around it.
    let main_line = source.line_of(primary.start);
    let near = |r: &std::ops::Range<usize>| {
        let (a, b) = (source.line_of(r.start), source.line_of(r.end));
        a + NEAR_LINES >= main_line && b <= main_line + NEAR_LINES
    };
    let far: Vec<(std::ops::Range<usize>, &str)> =
        related.iter().filter(|(r, _)| !near(r)).cloned().collect();
    related.retain(|(r, _)| near(r));
    // The window: whole lines from the first to the last annotated one.
    let all = std::iter::once(&primary).chain(related.iter().map(|(r, _)| r));
    let first = all
        .clone()
        .map(|r| source.line_of(r.start))
        .min()
        .unwrap_or(0);
    let last = all.map(|r| source.line_of(r.end)).max().unwrap_or(first);
    let mut from = source.line_range(first).start;
    let mut to = source.line_range(last).end;
    let mut far = far;
    if first == last && to - from > LONG_LINE {
        // One very long line: show the part around the underlined text (related
        // places far from it are left out), and write the header ourselves (the
        // renderer would count columns from the cut).
        let lo = source.floor(primary.start.saturating_sub(CONTEXT).max(from));
        let end = primary
            .end
            .clamp(primary.start + 1, primary.start + LONG_LINE);
        let hi = source.ceil((end + CONTEXT).min(to));
        far.extend(
            related
                .iter()
                .filter(|(r, _)| r.start < lo || r.end > hi)
                .cloned(),
        );
        related.retain(|(r, _)| r.start >= lo && r.end <= hi);
        (from, to) = (lo, hi);
        let (l, c) = source.line_col(primary.start);
        header = Some(format!(
            "{}--> {path}:{l}:{c}",
            " ".repeat(digits(last + 1))
        ));
    }
    let shift =
        |r: &std::ops::Range<usize>| r.start.clamp(from, to) - from..r.end.clamp(from, to) - from;
    let mut snippet = Snippet::source(&source.text[from..to])
        .line_start(first + 1)
        .annotation(AnnotationKind::Primary.span(shift(&primary)).label(label));
    for (r, label) in &related {
        snippet = snippet.annotation(AnnotationKind::Context.span(shift(r)).label(*label));
    }
    if header.is_none() {
        snippet = snippet.path(path);
    }
    for (r, label) in far {
        let (l, c) = source.line_col(r.start);
        far_notes.push(format!("{label}: {path}:{l}:{c}"));
    }
    (group.element(snippet), header)
}

/// Decimal digits of `n`.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// `s` without ANSI escape sequences.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A one-line form: `path:line:col: warning[W001]: message` (for `cargo:warning=`).
pub fn one_line(d: &Diagnostic, path: &str, source: &SourceText<'_>) -> String {
    let at = match d.span {
        Some(s) => location(path, source, s),
        None => path.to_owned(),
    };
    let mut line = format!("{at}: {}[{}]: {}", d.severity().as_str(), d.code, d.message);
    if let Some(help) = &d.help {
        line.push_str(" (help: ");
        line.push_str(help);
        line.push(')');
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_parse() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            assert!(seen.insert(c.as_str()), "{c} twice");
            assert!(seen.insert(c.name()), "{} twice", c.name());
            assert_eq!(Code::parse(c.as_str()), Some(*c));
            assert_eq!(Code::parse(c.name()), Some(*c));
            let prefix = if c.severity() == Severity::Error {
                'E'
            } else {
                'W'
            };
            assert!(c.as_str().starts_with(prefix));
        }
    }

    #[test]
    fn line_col_counts_chars() {
        let src = "ab\nçd\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        assert_eq!(line_col(src, 5), (2, 2)); // after the 2-byte 'ç'
        assert_eq!(line_col(src, 999), (3, 1));
    }

    #[test]
    fn renders_snippet_with_code_and_help() {
        let src = "{\n  \"x\": \"serch\"\n}\n";
        let d = Diagnostic::new(
            Code::UnknownTool,
            Some(Span::bytes(9, 16)),
            "unknown tool `serch`",
        )
        .label("not a declared tool")
        .help("did you mean `search`?");
        let out = render(&d, "t.json", &SourceText::new(src), false);
        assert!(out.contains("error[E015]: unknown tool `serch`"), "{out}");
        assert!(out.contains("t.json:2:8"), "{out}");
        assert!(out.contains("^^^^^^^ not a declared tool"), "{out}");
        assert!(out.contains("help: did you mean `search`?"), "{out}");
    }
}

/// A diagnostic placed in its source: what the language bindings hand out (positions
/// 1-based, columns in characters, the end exclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The stable code, e.g. `E003`.
    pub code: &'static str,
    /// The code's name, e.g. `unknown_tool`.
    pub name: &'static str,
    /// `error` or `warning`.
    pub severity: &'static str,
    /// What was found.
    pub message: String,
    /// Where the offending value starts (line, column), when it is at one place.
    pub start: Option<(usize, usize)>,
    /// Where it ends (line, column), exclusive.
    pub end: Option<(usize, usize)>,
    /// How to fix it, when known.
    pub help: Option<String>,
    /// Rendered as `orch check` prints it (rustc style, no colour).
    pub rendered: String,
}

/// Every diagnostic of `diagnostics` placed in `source` (named `path` when rendered).
pub fn placed(diagnostics: &[Diagnostic], source: &str, path: &str) -> Vec<Placed> {
    let text = SourceText::new(source);
    diagnostics
        .iter()
        .map(|d| {
            let at = d.span.and_then(|s| s.byte_range());
            Placed {
                code: d.code.as_str(),
                name: d.code.name(),
                severity: d.severity().as_str(),
                message: d.message.clone(),
                start: at.as_ref().map(|r| text.line_col(r.start)),
                end: at.as_ref().map(|r| text.line_col(r.end)),
                help: d.help.clone(),
                rendered: render(d, path, &text, false),
            }
        })
        .collect()
}

/// The one-line summary a binding's error carries: `the template has N errors:
/// PATH:LINE:COL: CODE message` (the first error).
pub fn summary(placed: &[Placed], path: &str) -> String {
    let errors = placed.iter().filter(|d| d.severity == "error").count();
    let first = placed
        .iter()
        .find(|d| d.severity == "error")
        .map_or(String::new(), |d| match d.start {
            Some((l, c)) => format!(": {path}:{l}:{c}: {} {}", d.code, d.message),
            None => format!(": {path}: {} {}", d.code, d.message),
        });
    format!(
        "the template has {errors} error{}{first}",
        if errors == 1 { "" } else { "s" }
    )
}
