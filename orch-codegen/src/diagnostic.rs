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
    InvalidRegex = "E016", "invalid_regex", Error, "a `message_regex` that does not compile";
    ZeroWindow = "E017", "zero_window", Error, "`window` of 0";
    UnknownResetTrigger = "E018", "unknown_reset_trigger", Error, "unknown `resetSequenceOn` entry";
    LimitExceeded = "E019", "limit_exceeded", Error, "the template exceeds a limit of the compiled form";
    UnknownLint = "E020", "unknown_lint", Error, "an `allow` names no warning";
    UnreachableStep = "W001", "unreachable_step", Warning, "a step that can never become active";
    ShadowedStep = "W002", "shadowed_step", Warning, "a step shadowed by an earlier step";
    DefaultStepConditions = "W003", "default_step_conditions", Warning, "conditions on the default step are ignored";
    UnmatchedPattern = "W004", "unmatched_pattern", Warning, "a pattern that matches no tool";
    EmptyToolSet = "W005", "empty_tool_set", Warning, "a step that allows no tool";
    SequenceNeverCompletes = "W006", "sequence_never_completes", Warning, "a sequence that can never complete";
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

/// 1-based line and column (in characters) of byte offset `at` in `source`.
pub fn line_col(source: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(source.len());
    while !source.is_char_boundary(at) {
        at -= 1;
    }
    let before = &source[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..at].chars().count() + 1;
    (line, col)
}

/// `path:line:column` of a span in a JSON source (just `path` for a span that is not
/// into the source).
pub fn location(path: &str, source: &str, span: Span) -> String {
    match span.byte_range() {
        Some(r) => {
            let (l, c) = line_col(source, r.start);
            format!("{path}:{l}:{c}")
        }
        None => path.to_owned(),
    }
}

/// Renders a diagnostic like rustc, with the offending JSON underlined. `color` adds
/// ANSI styles.
pub fn render(d: &Diagnostic, path: &str, source: &str, color: bool) -> String {
    use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

    let level = match d.severity() {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let clamp = |s: core::ops::Range<usize>| {
        let mut start = s.start.min(source.len());
        let mut end = s.end.clamp(start, source.len());
        while !source.is_char_boundary(start) {
            start -= 1;
        }
        while !source.is_char_boundary(end) {
            end += 1;
        }
        start..end
    };
    let title = level.primary_title(d.message.as_str()).id(d.code.as_str());
    let mut group = match d.span.and_then(Span::byte_range) {
        Some(span) => {
            let mut snippet = Snippet::source(source).path(path).annotation(
                AnnotationKind::Primary
                    .span(clamp(span))
                    .label(d.label.as_deref().unwrap_or("")),
            );
            for (s, label) in &d.related {
                if let Some(s) = s.byte_range() {
                    snippet = snippet
                        .annotation(AnnotationKind::Context.span(clamp(s)).label(label.as_str()));
                }
            }
            Group::with_title(title).element(snippet)
        }
        None => Group::with_title(title).element(annotate_snippets::Origin::path(path)),
    };
    for note in &d.notes {
        group = group.element(Level::NOTE.message(note.as_str()));
    }
    if let Some(help) = &d.help {
        group = group.element(Level::HELP.message(help.as_str()));
    }
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    renderer.render(&[group])
}

/// A one-line form: `path:line:col: warning[W001]: message` (for `cargo:warning=`).
pub fn one_line(d: &Diagnostic, path: &str, source: &str) -> String {
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
        let out = render(&d, "t.json", src, false);
        assert!(out.contains("error[E015]: unknown tool `serch`"), "{out}");
        assert!(out.contains("t.json:2:8"), "{out}");
        assert!(out.contains("^^^^^^^ not a declared tool"), "{out}");
        assert!(out.contains("help: did you mean `search`?"), "{out}");
    }
}
