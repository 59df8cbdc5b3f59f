//! What the console shows besides the runs: each template's report (its diagram, its
//! diagnostics, what `orch verify` found, with witnesses), made by the host when it loads
//! the template ([`TemplateReport`]), and the decision log it checks on each look
//! ([`DecisionLog`]).

use orch_agent::audit::{Anchor, CheckpointKeys};
use std::path::PathBuf;
use std::sync::Arc;

/// One template as the console's template page shows it.
#[derive(Clone, Debug, Default)]
pub struct TemplateReport {
    /// The template's name (what runs' rows name).
    pub name: String,
    /// Where it was read from.
    pub file: String,
    /// Its compiled fingerprint, 16 hex digits (decision records carry it).
    pub fingerprint: String,
    /// Its steps, in template order: the diagram.
    pub steps: Vec<StepBox>,
    /// What `orch check` says about it, one line each (warnings and notes: a template
    /// with errors is not served).
    pub diagnostics: Vec<String>,
    /// What `orch verify` found: each step's reachability, each sequence's completion,
    /// each declared property, with a shortest witness where there is one.
    pub findings: Vec<Finding>,
}

/// A step of the template's diagram.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepBox {
    /// The step's name.
    pub name: String,
    /// The default step: where a run starts.
    pub default: bool,
    /// When the step is entered (its conditions, joined by "and"; first match wins).
    pub entered_when: Option<String>,
    /// Its sequence's groups, in order (each group: the tools any of which it expects).
    pub sequence: Vec<String>,
    /// Why the analysis marks it (`unreachable`, `shadowed`, `sequence never
    /// completes`).
    pub mark: Option<String>,
}

/// One finding of `orch verify`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finding {
    /// `step`, `sequence`, `property`, or another kind of finding.
    pub kind: String,
    /// What it is about (a step, a sequence's step, a property's name).
    pub subject: String,
    /// The answer in words (`reachable`, `unreachable`, `completes`, `holds`,
    /// `violated`, `unknown`, ...).
    pub answer: String,
    /// Whether the answer is one the author should look at.
    pub bad: bool,
    /// More words (a reason, a message), if any.
    pub detail: Option<String>,
    /// A shortest witness: `orch simulate` events from a fresh session.
    pub witness: Vec<String>,
}

/// A decision log the console checks on each look: its chain, its anchor and its
/// checkpoints' signatures (the file is read whole each time: its cost grows with the
/// log).
#[derive(Clone)]
pub struct DecisionLog {
    /// The log's file (JSON lines, as a gateway's `--decision-log` writes it).
    pub path: PathBuf,
    /// What an auditor anchored (`orch audit verify --anchor-head/--anchor-count`).
    pub anchor: Anchor,
    /// The keys its checkpoints must be signed with; `None`: signatures are not checked.
    pub keys: Option<Arc<dyn CheckpointKeys + Send + Sync>>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionLog")
            .field("path", &self.path)
            .field("anchor", &self.anchor)
            .field("keys", &self.keys.is_some())
            .finish()
    }
}
