//! The words the package answers in: severities, result and refusal kinds, what a call
//! came to, verdicts, outcomes and findings, as TypeScript string enums.

use napi_derive::napi;

/// A compiler finding's severity.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The template is rejected.
    Error,
    /// The template is still compiled.
    Warning,
}

/// What a tool result says about its call ([`result_kind`](crate::result_kind)).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    /// It completed successfully: the call ran.
    Ran,
    /// `isError: true`.
    Error,
    /// `resultType: "input_required"`.
    InputRequired,
    /// A task, not a completed call.
    Task,
    /// Another `resultType`.
    Other,
    /// Not a tool result.
    Malformed,
}

/// Why a call is refused (`orch_agent::RefusalKind`).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The active step does not allow it.
    NotAllowed,
    /// The sequence expects another tool.
    OutOfSequence,
    /// No such tool.
    UnknownTool,
    /// Allowed, but the host has not made it available.
    Unavailable,
    /// A human must approve this call.
    NeedsApproval,
    /// A human rejected this call.
    Rejected,
    /// An answer to no question the session holds.
    StaleAnswer,
    /// Another call of the run is in flight.
    Busy,
    /// The run is held: an earlier call's outcome is unknown.
    OutcomeUnknown,
    /// The call's arguments break a rule on arguments (`Refusal.rule` names it).
    BrokenRule,
    /// The same call was delivered again after it ran: not run twice.
    AlreadyRan,
}

impl From<orch_agent::RefusalKind> for RefusalKind {
    fn from(kind: orch_agent::RefusalKind) -> Self {
        use orch_agent::RefusalKind as K;
        match kind {
            K::NotAllowed => RefusalKind::NotAllowed,
            K::OutOfSequence => RefusalKind::OutOfSequence,
            K::UnknownTool => RefusalKind::UnknownTool,
            K::Unavailable => RefusalKind::Unavailable,
            K::NeedsApproval => RefusalKind::NeedsApproval,
            K::Rejected => RefusalKind::Rejected,
            K::StaleAnswer => RefusalKind::StaleAnswer,
            K::Busy => RefusalKind::Busy,
            K::OutcomeUnknown => RefusalKind::OutcomeUnknown,
            K::BrokenRule => RefusalKind::BrokenRule,
            K::AlreadyRan => RefusalKind::AlreadyRan,
            // `RefusalKind` is non-exhaustive; every kind it has is above (the test
            // `every_refusal_kind_has_its_name` fails when one is missing).
            _ => RefusalKind::NotAllowed,
        }
    }
}

/// What `Session.begin` came to (the run host).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Run the tool now, then `finish` it.
    Run,
    /// Not run: `refusal` says why.
    Refused,
    /// A human must answer: the session holds `question` about this call.
    Ask,
    /// The same call delivered again: not run again; `refusal` says why.
    Again,
}

/// What `Session.begin` came to: the action, the refusal the model is told when the call
/// does not run, and for `ask` the question's identity (16 hex digits).
#[napi(object)]
pub struct Begin {
    /// `run`, `refused`, `ask` or `again`.
    pub action: Action,
    /// Why it does not run (absent for `run`).
    pub refusal: Option<Refusal>,
    /// The question asked (`ask` only).
    pub question: Option<String>,
}

/// What `Session.answerCall` came to.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// Applied to the question about that call.
    Applied,
    /// That question was answered already.
    Repeated,
    /// The question expired first (it is closed now).
    Late,
    /// The id names another call (another tool or other arguments).
    Foreign,
    /// No question the run holds matches.
    Unknown,
}

/// What `Session.answerCall` came to: the outcome and, when it did not apply, the
/// refusal the model is told.
#[napi(object)]
pub struct Answered {
    /// `applied`, or why not.
    pub outcome: AnswerOutcome,
    /// Why nothing runs on it (absent when it applied).
    pub refusal: Option<Refusal>,
}

/// What a model is told when it answered with text while `tool` is forced: the one
/// wording every surface sends.
#[napi]
pub fn reminder(tool: String) -> String {
    orch_agent::Policy::forced_reminder(&tool)
}

/// What a call whose result never came means (`lostResults`, semantics §15).
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostRule {
    /// Counts as not run: the model may call it again.
    Retry,
    /// Holds the run until an operator says whether it ran (the default).
    Hold,
    /// Counts as run: recorded.
    Ran,
}

/// Whether a machine's sessions enforce its decisions or only judge and record them.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Refuse what the template refuses, ask what it gates (the default).
    Enforce,
    /// Judge and record every call, refuse and ask nothing.
    Observe,
}

impl Mode {
    /// The mode of `mode`.
    pub(crate) fn of(mode: orch_agent::Mode) -> Self {
        match mode {
            orch_agent::Mode::Enforce => Mode::Enforce,
            orch_agent::Mode::Observe => Mode::Observe,
        }
    }
}

/// What a human said of a call, or that the question is open.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Asked, not answered.
    Pending,
    /// Approved: the call may run once.
    Approved,
    /// Rejected: the call must not run.
    Rejected,
}

/// What recording a tool did.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The sequence advanced.
    Advanced,
    /// The sequence completed.
    Completed,
    /// No sequence waited; the tool was allowed.
    Free,
    /// A sequence expected another tool.
    OutOfSequence,
    /// No sequence waited; the tool was not allowed.
    NotAllowed,
}

/// What a verification finding is about.
#[napi(string_enum = "snake_case")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// Can the step become active?
    Step,
    /// Can the step's sequence complete?
    Sequence,
    /// Once active, does the step keep the session for good?
    Trap,
    /// A reachable state waits on tools the host does not have.
    Blocked,
    /// A reachable state allows no tool at all.
    NoTools,
    /// A safety property.
    Property,
    /// The exploration's summary.
    Summary,
}

/// Why a tool may not run now, in the same words orch uses everywhere.
#[napi(object)]
pub struct Refusal {
    /// The tool refused.
    pub tool: String,
    /// Why, as a stable word.
    pub kind: RefusalKind,
    /// Why, in words for the model (what is expected next, what is allowed now).
    pub message: String,
    /// The rule on arguments that refused the call (`broken_rule`), by name.
    pub rule: Option<String>,
}

pub(crate) fn refusal(r: orch_agent::Refusal) -> Refusal {
    Refusal {
        tool: r.tool,
        kind: r.kind.into(),
        message: r.reason,
        rule: r.rule,
    }
}
