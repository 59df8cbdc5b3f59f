//! What a decision log holds: the events, positions and rules of each decision record,
//! the checkpoints, and the traits that sign and check them.

use crate::policy::mode::Mode;
use crate::policy::orchestrated::Orchestrated;
use orch_runtime::{CallDigest, QuestionId};
use serde::{Deserialize, Serialize};

/// The record format this crate writes (`v` of every record).
pub const RECORD_VERSION: u32 = 1;

/// What happened to the session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuditEvent {
    /// The host's tools (the session's available set, semantics §8): first in a log, and
    /// again whenever they change.
    Tools {
        /// The tool names, in the host's order.
        names: Vec<String>,
    },
    /// A user message (semantics §5).
    Message {
        /// Its text.
        text: String,
    },
    /// A call presented for admission: it runs only if admitted.
    Call {
        /// The tool.
        tool: String,
        /// The call's digest (tool and canonical arguments).
        call: CallDigest,
        /// The arguments as sent — kept only when a rule on arguments judged them
        /// (semantics §16), so that a replay judges them again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<String>,
        /// When the call was judged (ms since the Unix epoch, the host's clock), when the
        /// host gave a time — budgets with a window judge by it (semantics §17), so a
        /// replay judges at the same time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<u64>,
    },
    /// A tool ran (semantics §5 "record").
    Record {
        /// The tool.
        tool: String,
        /// What it returned — kept only when a rule on arguments reads its results
        /// (semantics §16), so that a replay remembers the same values.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// A gated call was put to a human (semantics §13.1).
    Ask {
        /// The tool.
        tool: String,
        /// The call's digest.
        call: CallDigest,
        /// The question's identity (absent in logs written before questions had one).
        #[serde(default, skip_serializing_if = "QuestionId::is_none")]
        question: QuestionId,
    },
    /// A human answered the question about a call.
    Answer {
        /// The tool.
        tool: String,
        /// The call's digest.
        call: CallDigest,
        /// The identity of the question answered (absent in logs written before questions
        /// had one).
        #[serde(default, skip_serializing_if = "QuestionId::is_none")]
        question: QuestionId,
        /// Approved or not.
        approved: bool,
        /// The human's reason, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Who answered, when the host knows (an approver's identity: a token's name or a
        /// JWT's subject); absent when the run's own user answered in-band.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// The session was reset (semantics §5).
    Reset,
}

/// Where a session stands: its active step and sequence index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// The active step.
    pub step: Option<String>,
    /// The position in its sequence.
    pub index: usize,
    /// How many remembered values the session has forgotten to make room for newer
    /// ones (semantics §16); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub forgotten: u32,
    /// Each budget's total at that point, by name, as a decimal (semantics §17): what a
    /// budget test read before adding the call it judged. Absent when no budget holds
    /// anything.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub budgets: std::collections::BTreeMap<String, String>,
}

/// Is `n` zero (a count a record leaves out)?
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Position {
    /// Where `session` stands now.
    pub fn of<S: Orchestrated + ?Sized>(session: &S) -> Self {
        Position {
            step: session.step_name().map(str::to_owned),
            index: session.sequence_index(),
            forgotten: session.forgotten(),
            budgets: session.budget_totals().into_iter().collect(),
        }
    }
}

/// The rule that decided a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    /// No step was active: the orchestration's own gate (if any) alone decides.
    NoStep,
    /// The active step's `allowed`/`denied` lists; `pattern`: the `denied` glob that
    /// refused the tool, when one did.
    Step {
        /// The step.
        step: String,
        /// The refusing `denied` glob.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
    /// The active step's sequence, waiting at `position` for one of `expected`.
    Sequence {
        /// The step.
        step: String,
        /// The sequence position.
        position: usize,
        /// The tools that position accepts.
        expected: Vec<String>,
    },
    /// The host: it does not have the tool (or has not made it available).
    Host,
    /// An approval gate (semantics §13): of `step`, or the orchestration's (`None`).
    Gate {
        /// The gating step.
        step: Option<String>,
    },
    /// A rule on arguments (semantics §16), by name, in the active step (`None`: none
    /// active).
    Argument {
        /// The active step.
        step: Option<String>,
        /// The rule's name.
        name: String,
    },
}

impl Rule {
    /// The rule in a few words, for a counter's attribute and a report's totals:
    /// `argument known-recipient`, `sequence Checkout`, `step Browse`, `denied Browse
    /// delete_*`, `gate Paid`, `gate`, `host`, `no step`.
    pub fn label(&self) -> String {
        match self {
            Rule::NoStep => "no step".to_owned(),
            Rule::Step {
                step,
                pattern: Some(p),
            } => format!("denied {step} {p}"),
            Rule::Step {
                step,
                pattern: None,
            } => format!("step {step}"),
            Rule::Sequence { step, .. } => format!("sequence {step}"),
            Rule::Host => "host".to_owned(),
            Rule::Gate { step: Some(step) } => format!("gate {step}"),
            Rule::Gate { step: None } => "gate".to_owned(),
            Rule::Argument { name, .. } => format!("argument {name}"),
        }
    }
}

/// One decision, as written to a sink (one JSON object per line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    /// [`RECORD_VERSION`].
    pub v: u32,
    /// 1, 2, ... within the auditor's log.
    pub seq: u64,
    /// When, in RFC 3339 UTC with milliseconds.
    pub time: String,
    /// The run or session it belongs to (the host's name for it).
    pub run: String,
    /// The compiled template's fingerprint, 16 hex digits.
    pub fingerprint: String,
    /// What happened.
    pub event: AuditEvent,
    /// Where the session stood before.
    pub before: Position,
    /// Where it stands after.
    pub after: Position,
    /// What was decided: `tools`, `message`, `reset`, `admitted`, `refused`,
    /// `needs_approval`, `rejected`, `recorded`, `asked`, `approved`, `denied_by_human`
    /// or `stale` (an answer the session no longer waited for).
    pub decision: String,
    /// The rule that decided a call (for `admitted`, `refused`, `needs_approval`,
    /// `rejected`, `recorded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
    /// The refusal kind (`not_allowed`, `out_of_sequence`, ...) or the record outcome
    /// (`advanced`, `completed`, `free`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// orch's own words for a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The mode of the policy that decided: absent for [`Mode::Enforce`]; `observe` when
    /// the decision was recorded and not enforced — a call recorded as `refused` or
    /// `needs_approval` ran all the same (docs/rollout.md).
    #[serde(default, skip_serializing_if = "Mode::is_enforce")]
    pub mode: Mode,
    /// The SHA-256 (hex) of the previous record of a chained log (`None` for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// The SHA-256 (hex) of this record without `hash`, in a chained log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

impl DecisionRecord {
    /// The record as one JSON line (no newline).
    pub fn to_json(&self) -> String {
        json_line(self)
    }

    /// The hash a chained log gives this record: SHA-256 of its JSON without `hash`.
    pub fn digest(&self) -> String {
        let mut unhashed = self.clone();
        unhashed.hash = None;
        sha256_hex(&unhashed.to_json())
    }
}

/// A line of a log as compact JSON. Plain strings, numbers and enums: serializing cannot
/// fail.
fn json_line<T: Serialize>(line: &T) -> String {
    serde_json::to_string(line).unwrap_or_default()
}

/// The lowercase hex SHA-256 of `text`.
fn sha256_hex(text: &str) -> String {
    hex(&hmac_sha256::Hash::hash(text.as_bytes()))
}

/// A signed checkpoint in a chained log (docs/audit.md, "Checkpoints"): a line of its
/// own in the chain (numbered and linked like a record) whose Ed25519 signature covers
/// its number, time and the hash of the line before it — and so, through the chain,
/// every line before it. Rebuilding the chain without the key, moving a checkpoint, or
/// cutting lines before one breaks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRecord {
    /// [`RECORD_VERSION`].
    pub v: u32,
    /// Its number in the log (records and checkpoints are numbered together).
    pub seq: u64,
    /// When, in RFC 3339 UTC with milliseconds.
    pub time: String,
    /// The signature.
    pub checkpoint: CheckpointSignature,
    /// The hash of the line before it (`None` only at the start of a log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// The SHA-256 (hex) of this line without `hash` (signature included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// Who signed a checkpoint, and the signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSignature {
    /// The signing key's id: the first 16 hex digits of the SHA-256 of its 32 public
    /// key bytes ([`key_id`]).
    pub key: String,
    /// The Ed25519 signature (128 hex digits) of [`CheckpointRecord::signed_message`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

impl CheckpointRecord {
    /// The checkpoint as one JSON line (no newline).
    pub fn to_json(&self) -> String {
        json_line(self)
    }

    /// Its hash in the chain: SHA-256 of its JSON without `hash`.
    pub fn digest(&self) -> String {
        let mut unhashed = self.clone();
        unhashed.hash = None;
        sha256_hex(&unhashed.to_json())
    }

    /// What the key signs: `orch-audit-checkpoint/1 ` followed by the SHA-256 (hex) of
    /// the checkpoint's JSON without `sig` and `hash`.
    pub fn signed_message(&self) -> Vec<u8> {
        let mut unsigned = self.clone();
        unsigned.hash = None;
        unsigned.checkpoint.sig = None;
        let digest = sha256_hex(&unsigned.to_json());
        format!("{CHECKPOINT_CONTEXT}{digest}").into_bytes()
    }
}

/// The prefix of every signed checkpoint message (domain separation).
pub const CHECKPOINT_CONTEXT: &str = "orch-audit-checkpoint/1 ";

/// A key's id as checkpoints name it: the first 16 hex digits of the SHA-256 of its 32
/// public key bytes.
pub fn key_id(public_key: &[u8; 32]) -> String {
    hex(&hmac_sha256::Hash::hash(public_key)[..8])
}

/// Signs checkpoints for an [`super::Auditor`] ([`super::Auditor::signed`]; `sign::SigningKey` with
/// feature `sign`).
pub trait CheckpointSigner: Send + Sync {
    /// The key's id ([`key_id`]).
    fn key_id(&self) -> String;
    /// The signature of `message`, hex.
    fn sign(&self, message: &[u8]) -> String;
}

/// The public keys a verifier accepts checkpoints from ([`super::verify_signed`];
/// `sign::PublicKeys` with feature `sign`).
pub trait CheckpointKeys {
    /// Checks `sig` (hex) over `message` by the key named `key`; says why not.
    fn check(&self, key: &str, message: &[u8], sig: &str) -> Result<(), String>;
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
