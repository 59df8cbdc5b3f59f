//! The vocabulary of a decision: a refusal and its kind (from the engine's typed
//! refusal), and what a human decided.

use crate::model::ToolCall;
use orch_runtime::{CallDigest, QuestionId, Refusal as EngineRefusal};
use serde::{Deserialize, Serialize};

/// Why a tool call is not run. From a session ([`Orchestrated::check_tool`](crate::Orchestrated::check_tool)),
/// `reason` is the session's own words ("not allowed in step `X`"); from the
/// [`Policy`](crate::Policy), the text to send back to the model as the tool's result (what
/// was wrong, what is allowed now).
///
/// As JSON (the Restate service's replies, a host's own wire): `{"tool", "kind",
/// "reason"}`, and `"rule"` when a rule refused it; `kind` is the word of
/// [`RefusalKind::as_str`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The tool the model asked for.
    pub tool: String,
    /// What kind of refusal it is.
    pub kind: RefusalKind,
    /// What to tell the model: what was wrong, what is allowed now, and what the
    /// sequence expects.
    pub reason: String,
    /// The rule on arguments that refused it ([`RefusalKind::BrokenRule`]), by name.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rule: Option<String>,
}

/// What every reminder of a forced tool starts with ([`Policy::forced_reminder`]): how a
/// host recognises its own reminders in a conversation.
pub const REMINDER_PREFIX: &str = "The workflow requires calling ";

/// The kinds of [`Refusal`], for a caller to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The host has no tool of that name.
    UnknownTool,
    /// The active step does not allow the tool (or denies it).
    NotAllowed,
    /// The active step's sequence waits for another tool.
    OutOfSequence,
    /// The orchestration allows it, but the host has not made it available.
    Unavailable,
    /// The tool is gated (`approve`, semantics §13): the call needs a human's approval,
    /// and none was given for it.
    NeedsApproval,
    /// The tool is gated and a human rejected this very call.
    Rejected,
    /// An answer came that applies to no question the run holds (answered already, the
    /// run changed since, another run's, expired): nothing changed, and nothing was asked
    /// ([`crate::protocol::Unanswered`]).
    StaleAnswer,
    /// Another call of the same run is in flight, and did not finish in time.
    Busy,
    /// The run is held: an earlier call's result never came, its tool must not run
    /// twice (`lostResults`, semantics §15), and no operator has said yet whether it
    /// ran.
    OutcomeUnknown,
    /// The call's arguments break a rule on arguments (semantics §16): refused whatever
    /// a human would say; [`Refusal::rule`] names the rule.
    BrokenRule,
    /// The same call (the same call id, tool and arguments) was delivered again after it
    /// ran: one call runs once, so it is not run again ([`crate::run_host`]).
    AlreadyRan,
}

impl RefusalKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [RefusalKind; 11] = [
        RefusalKind::NotAllowed,
        RefusalKind::OutOfSequence,
        RefusalKind::BrokenRule,
        RefusalKind::UnknownTool,
        RefusalKind::Unavailable,
        RefusalKind::NeedsApproval,
        RefusalKind::Rejected,
        RefusalKind::StaleAnswer,
        RefusalKind::Busy,
        RefusalKind::OutcomeUnknown,
        RefusalKind::AlreadyRan,
    ];

    /// A stable name: `unknown_tool`, `not_allowed`, `out_of_sequence`, `unavailable`,
    /// `needs_approval`, `rejected`, `stale_answer`, `busy`, `outcome_unknown`,
    /// `broken_rule`, `already_ran`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::UnknownTool => "unknown_tool",
            RefusalKind::NotAllowed => "not_allowed",
            RefusalKind::OutOfSequence => "out_of_sequence",
            RefusalKind::Unavailable => "unavailable",
            RefusalKind::NeedsApproval => "needs_approval",
            RefusalKind::Rejected => "rejected",
            RefusalKind::StaleAnswer => "stale_answer",
            RefusalKind::Busy => "busy",
            RefusalKind::OutcomeUnknown => "outcome_unknown",
            RefusalKind::BrokenRule => "broken_rule",
            RefusalKind::AlreadyRan => "already_ran",
        }
    }

    /// The kind [`RefusalKind::as_str`] names (`None` for a word it never says).
    pub fn parse(word: &str) -> Option<RefusalKind> {
        RefusalKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == word)
    }
}

/// A gated call waiting for a human (semantics §13): what to show them, and the call's
/// identity. The session holds the question until the answer or its next event.
/// Serializable, to be kept with the session in any store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalRequest {
    /// The call: tool, arguments (as the model wrote them) and id.
    pub call: ToolCall,
    /// The active step that gates it.
    pub step: Option<String>,
    /// Why it waits, in orch's words ("needs a human's approval of this call in step
    /// `Checkout`").
    pub reason: String,
    /// The call's identity: SHA-256 of the tool and its canonical arguments
    /// ([`CallDigest::of_text`]).
    pub digest: CallDigest,
    /// The question's identity, which the session holds: an answer applies to this
    /// question only, once ([`orch_runtime::QuestionId`]).
    #[serde(default, skip_serializing_if = "QuestionId::is_none")]
    pub question: QuestionId,
    /// Where the call's values were seen, one line each (semantics §16): show them
    /// with the call. Empty when the template remembers nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<String>,
}

/// A human's answer to an [`ApprovalRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "decision")]
pub enum Decision {
    /// Run the call (once).
    Approve,
    /// Do not run it; the model is told, with the human's reason when given.
    Reject {
        /// What to tell the model, besides that a human rejected the call.
        reason: Option<String>,
    },
}

impl Decision {
    /// Is it an approval?
    pub fn approves(&self) -> bool {
        matches!(self, Decision::Approve)
    }

    /// The human's reason for a rejection, if one was given.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Decision::Reject { reason } => reason.as_deref(),
            Decision::Approve => None,
        }
    }
}

impl Serialize for RefusalKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RefusalKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        RefusalKind::parse(&word).ok_or_else(|| {
            let words: Vec<&str> = RefusalKind::ALL.iter().map(|k| k.as_str()).collect();
            serde::de::Error::custom(format!(
                "unknown refusal kind `{word}` (one of: {})",
                words.join(", ")
            ))
        })
    }
}

impl Refusal {
    /// The refusal of `tool`, a call whose arguments break rule `rule` (of step `step`,
    /// or the orchestration's), `why` in the session's words.
    pub fn broken(tool: &str, step: Option<&str>, rule: &str, why: &str) -> Self {
        let of = step.map_or_else(String::new, |s| format!(" in step `{s}`"));
        Refusal {
            tool: tool.to_owned(),
            kind: RefusalKind::BrokenRule,
            reason: format!("it breaks rule `{rule}`{of}: {why}"),
            rule: Some(rule.to_owned()),
        }
    }

    /// The refusal of `tool` for the engine's `refusal`, in the engine's words ("not
    /// allowed in step `X`", "the sequence of step `X` expects `y` at position 1").
    pub fn of_engine<S, E>(tool: &str, refusal: &EngineRefusal<S, E>) -> Self
    where
        EngineRefusal<S, E>: std::fmt::Display,
    {
        Refusal {
            tool: tool.to_owned(),
            kind: RefusalKind::from(refusal),
            reason: refusal.to_string(),
            rule: None,
        }
    }
}

impl<S, E> From<&EngineRefusal<S, E>> for RefusalKind {
    fn from(refusal: &EngineRefusal<S, E>) -> Self {
        match refusal {
            EngineRefusal::NotInStep { .. } => RefusalKind::NotAllowed,
            EngineRefusal::SequenceExpects { .. } => RefusalKind::OutOfSequence,
            EngineRefusal::Unavailable => RefusalKind::Unavailable,
            EngineRefusal::NeedsApproval { .. } => RefusalKind::NeedsApproval,
            EngineRefusal::Rejected { .. } => RefusalKind::Rejected,
            EngineRefusal::BrokenRule { .. } => RefusalKind::BrokenRule,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}
