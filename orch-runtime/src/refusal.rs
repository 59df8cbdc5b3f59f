//! Why a tool may not run now: one type and one wording for every session type.

use crate::bits::{ToolEnum, ToolSet};
use crate::machine::StepEnum;
use core::fmt;

/// Why a tool may not run now: the `Err` of `check` on a typed [`crate::Session`]
/// (`Refusal<Step, ToolSet>`: generated code names it `Refusal`) and on a run-time
/// [`crate::dynamic::DynSession`] (`Refusal<&str, Vec<&str>>`, by names). Both say it in
/// the same words:
///
/// ```
/// # orch_runtime::__doc_machine!();
/// use demo::{Session, Tool};
/// let mut s = Session::new();
/// s.on_user_message("research this");
/// let refusal = s.check(Tool::Think).unwrap_err();
/// assert_eq!(refusal.to_string(), "the sequence of step `Research` expects `search` at position 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal<S, E> {
    /// The active step does not allow the tool.
    NotInStep {
        /// The active step.
        step: S,
    },
    /// The active step's sequence is waiting for another tool.
    SequenceExpects {
        /// The active step.
        step: S,
        /// The sequence position that is waiting.
        index: usize,
        /// The tools that position accepts.
        expected: E,
    },
    /// The orchestration allows it, but the host has not made it available.
    Unavailable,
    /// The orchestration allows it and the host has it, but it is gated (semantics §13):
    /// this call needs a human's approval first. The third answer of `check`, besides
    /// "yes" and "no": a caller that does not handle approvals refuses the call, which
    /// is the safe reading.
    NeedsApproval {
        /// The active step (`None` when no step is active and the orchestration's own
        /// `approve` gates the tool).
        step: Option<S>,
    },
    /// Gated, and a human rejected this very call (same tool, same arguments) in the
    /// session's current state.
    Rejected {
        /// The active step (`None` when no step is active).
        step: Option<S>,
    },
    /// The call's arguments break a rule on arguments (semantics §16): refused, whatever
    /// a human would say. `broken` says which rule and where; the session's
    /// `explain_broken` puts it in words.
    BrokenRule {
        /// The active step (`None` when no step is active).
        step: Option<S>,
        /// Which rule, which part of it, and the value it judged.
        broken: crate::args::Broken,
    },
}

impl<S: Copy, E> Refusal<S, E> {
    /// The active step that refused, if the step refused (not the host).
    pub fn step(&self) -> Option<S> {
        match self {
            Refusal::NotInStep { step } | Refusal::SequenceExpects { step, .. } => Some(*step),
            Refusal::NeedsApproval { step }
            | Refusal::Rejected { step }
            | Refusal::BrokenRule { step, .. } => *step,
            Refusal::Unavailable => None,
        }
    }

    /// Is this "needs approval" (the call may run once a human approves it) rather than a
    /// refusal?
    pub fn needs_approval(&self) -> bool {
        matches!(self, Refusal::NeedsApproval { .. })
    }

    /// The wording shared by every session type, given the step's name and the
    /// expected tools' names.
    fn write<'a, N: fmt::Display, I: Iterator<Item = N>>(
        &'a self,
        f: &mut fmt::Formatter<'_>,
        step_name: impl Fn(&'a S) -> &'a str,
        names: impl Fn(&'a E) -> I,
    ) -> fmt::Result {
        match self {
            Refusal::NotInStep { step } => write!(f, "not allowed in step `{}`", step_name(step)),
            Refusal::SequenceExpects {
                step,
                index,
                expected,
            } => {
                write!(f, "the sequence of step `{}` expects ", step_name(step))?;
                if names(expected).nth(1).is_some() {
                    f.write_str("one of ")?;
                }
                for (i, name) in names(expected).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{name}`")?;
                }
                write!(f, " at position {index}")
            }
            Refusal::Unavailable => f.write_str("the host has not made this tool available"),
            Refusal::NeedsApproval { step: Some(step) } => write!(
                f,
                "needs a human's approval of this call in step `{}`",
                step_name(step)
            ),
            Refusal::NeedsApproval { step: None } => {
                f.write_str("needs a human's approval of this call")
            }
            Refusal::Rejected { step: Some(step) } => write!(
                f,
                "a human rejected this call in step `{}`",
                step_name(step)
            ),
            Refusal::Rejected { step: None } => f.write_str("a human rejected this call"),
            Refusal::BrokenRule { step, broken } => {
                write!(f, "the arguments break argument rule #{}", broken.rule)?;
                match step {
                    Some(step) => write!(f, " in step `{}`", step_name(step)),
                    None => Ok(()),
                }
            }
        }
    }
}

impl<S: StepEnum, T: ToolEnum> fmt::Display for Refusal<S, ToolSet<T>> {
    /// `` not allowed in step `Chat` ``, `` the sequence of step `Research` expects
    /// `think` at position 1 ``, `the host has not made this tool available`, or
    /// `` needs a human's approval of this call in step `Checkout` `` or
    /// `` a human rejected this call in step `Checkout` ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, |s| s.name(), |e| e.names())
    }
}

impl fmt::Display for Refusal<&str, Vec<&str>> {
    /// The same words as for a typed session.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, |s| s, |e| e.iter().copied())
    }
}

impl<S: StepEnum, T: ToolEnum> std::error::Error for Refusal<S, ToolSet<T>> {}
impl std::error::Error for Refusal<&str, Vec<&str>> {}

/// The former name of [`Refusal`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `Refusal`: one name for a call that is not allowed"
)]
pub type Denied<S, E> = Refusal<S, E>;
