//! Whether a policy enforces its decisions or only records them ([`Mode`]).

use serde::{Deserialize, Serialize};

/// What a [`Policy`](crate::Policy) does with its decisions.
///
/// In [`Mode::Observe`] every call is judged, and recorded, exactly as in
/// [`Mode::Enforce`] — the decision log says what orch *would* have done (refused, asked,
/// by which rule) — but nothing is refused and nothing is asked: every call the host
/// presents is admitted, and the run's state advances as the calls actually ran. A team
/// switches a template to observe before it enforces it (docs/rollout.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Refuse what the template refuses, ask what it gates (the default).
    #[default]
    Enforce,
    /// Judge and record every call, refuse and ask nothing.
    Observe,
}

impl Mode {
    /// `enforce` or `observe`: the word the decision log, `status` and telemetry use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }

    /// Is this [`Mode::Enforce`]? (A decision record leaves the mode out then.)
    pub fn is_enforce(&self) -> bool {
        *self == Mode::Enforce
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not a [`Mode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl std::fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown mode `{}`: expected `enforce` or `observe`",
            orch_runtime::printable::printable(&self.0)
        )
    }
}

impl std::error::Error for UnknownMode {}

impl std::str::FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "observe" => Ok(Mode::Observe),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}
