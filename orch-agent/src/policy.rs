//! The orchestration rules for a model-driven loop, in one place and independent of any
//! agent framework: per model call, which tools to offer and whether to force one; per
//! tool call, admit it or refuse it with a reason the model can act on; after a tool
//! ran, record it. [`Agent`](crate::Agent) uses it; so can an adapter for another
//! framework.

use crate::model::ToolChoice;
use orch_runtime::{Denied, Machine, Session, StepEnum, ToolEnum};

/// What to offer the model for its next call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundPlan {
    /// The tools the session allows now, among the host's (in the host's order).
    pub offered: Vec<String>,
    /// `None` when nothing is offered; the one tool when the sequence position allows
    /// exactly one; `Auto` otherwise.
    pub tool_choice: ToolChoice,
}

/// Why a tool call is not run: the text to send back to the model as the tool's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The tool the model asked for.
    pub tool: String,
    /// What to tell the model: what was wrong, what is allowed now, and what the
    /// sequence expects.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The rules for one host: the names of the tools it can run.
///
/// ```
/// # orch_runtime::__doc_machine!();
/// use orch_agent::{Policy, ToolChoice};
/// let policy = Policy::new(["search", "think", "reflect"]);
/// let mut session = demo::Session::new();
/// policy.prepare(&mut session);
/// session.on_user_message("research this");
/// let plan = policy.plan(&session);
/// assert_eq!(plan.offered, ["search"]);
/// assert_eq!(plan.tool_choice, ToolChoice::Tool("search".into()));
/// let refused = policy.admit(&session, "think").unwrap_err();
/// assert!(refused.reason.contains("expects `search`"));
/// assert!(policy.admit(&session, "search").is_ok());
/// assert_eq!(policy.record(&mut session, "search"), "advanced");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Policy {
    host_tools: Vec<String>,
}

impl Policy {
    /// The rules for a host that can run `host_tools`.
    pub fn new<S: Into<String>>(host_tools: impl IntoIterator<Item = S>) -> Self {
        Policy {
            host_tools: host_tools.into_iter().map(Into::into).collect(),
        }
    }

    /// The host's tools.
    pub fn host_tools(&self) -> &[String] {
        &self.host_tools
    }

    /// Tells the session which of its tools the host has (its available set), before a
    /// turn.
    pub fn prepare<M: Machine>(&self, session: &mut Session<M>) {
        session.set_available(
            M::Tool::ALL
                .iter()
                .copied()
                .filter(|t| self.host_tools.iter().any(|h| h == t.name())),
        );
    }

    /// The tools the session allows now, among the host's.
    pub fn offered<M: Machine>(&self, session: &Session<M>) -> Vec<String> {
        session
            .filter_names(self.host_tools.iter().map(String::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// What to offer the model for its next call.
    pub fn plan<M: Machine>(&self, session: &Session<M>) -> RoundPlan {
        let offered = self.offered(session);
        let tool_choice = if offered.is_empty() {
            ToolChoice::None
        } else if offered.len() == 1 && session.expected().is_some() {
            ToolChoice::Tool(offered[0].clone())
        } else {
            ToolChoice::Auto
        };
        RoundPlan {
            offered,
            tool_choice,
        }
    }

    /// Admits a call of `tool`, or refuses it with the reason: the host has no such
    /// tool, or the orchestration does not allow it now (not in the step, out of
    /// sequence, unavailable). Changes nothing.
    pub fn admit<M: Machine>(&self, session: &Session<M>, tool: &str) -> Result<(), Refusal> {
        if !self.host_tools.iter().any(|h| h == tool) {
            return Err(Refusal {
                tool: tool.to_owned(),
                reason: format!(
                    "error: there is no tool `{tool}`. {}",
                    self.what_now(session, true)
                ),
            });
        }
        session.check_name(tool).map_err(|denied| {
            // A sequence denial already names what the sequence expects.
            let mention = !matches!(denied, Denied::SequenceExpects { .. });
            Refusal {
                tool: tool.to_owned(),
                reason: format!(
                    "error: `{tool}` was not run: {denied}. {}",
                    self.what_now(session, mention)
                ),
            }
        })
    }

    /// Records that `tool` ran (whatever it returned): the outcome (`advanced`,
    /// `completed`, `free`, `out_of_sequence`, `not_allowed`).
    pub fn record<M: Machine>(&self, session: &mut Session<M>, tool: &str) -> &'static str {
        session.record_name(tool).as_str()
    }

    /// "Allowed now: a, b. The sequence of step `S` expects `x` next."
    pub fn what_now<M: Machine>(&self, session: &Session<M>, mention_sequence: bool) -> String {
        let offered = self.offered(session);
        let mut s = if offered.is_empty() {
            "No tool is allowed now.".to_owned()
        } else {
            format!("Allowed now: {}.", offered.join(", "))
        };
        if let (true, Some(step), Some(expected)) =
            (mention_sequence, session.step(), session.expected())
        {
            let names: Vec<&str> = expected.names().collect();
            s.push_str(&format!(
                " The sequence of step `{}` expects `{}` next.",
                step.name(),
                names.join("` or `")
            ));
        }
        s
    }

    /// The text to send when a forced tool was answered with text instead.
    pub fn forced_reminder(tool: &str) -> String {
        format!(
            "The orchestration requires calling `{tool}` now; no other action is possible at this point of the sequence."
        )
    }
}
