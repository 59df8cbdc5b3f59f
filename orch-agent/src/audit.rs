//! Decision records: every event a host applies to a session — the host's tools, a user
//! message, a call presented for admission, a tool that ran, a question put to a human
//! and its answer, a reset — as one structured record of what was decided, by which
//! rule, and where the session stood before and after. A host gives a [`Policy`] an
//! [`Auditor`] (`Policy::audited`) and every decision the policy takes is written to the
//! auditor's sink: a callback, JSON lines in a file ([`JsonLines`]), or anything that
//! implements [`DecisionSink`].
//!
//! Records can be chained ([`Auditor::chained`]): each carries the SHA-256 of the one
//! before it (`prev`) and its own (`hash`), so removing, inserting, reordering or editing
//! a record breaks the chain where it happened ([`verify_chain`], `orch audit verify`).
//! Transitions are deterministic, so the events alone re-derive every decision: `orch
//! replay TEMPLATE LOG` does, and names the first record that does not follow.
//!
//! With no auditor, a policy costs what it did: the session's engine is never touched.
//!
//! [`Policy`]: crate::Policy

mod auditor;
mod chain;
mod line;
mod record;
mod replay;
#[cfg(feature = "sign")]
pub mod sign;
#[cfg(feature = "store")]
pub mod store;

pub use auditor::{now_rfc3339, rule_admitting, rule_of, Auditor, Buffer, DecisionSink, JsonLines};
pub use chain::{verify, verify_chain, verify_signed, Anchor, ChainBreak, Verified};
pub use line::{is_checkpoint, last_link};
pub use record::{
    key_id, AuditEvent, CheckpointKeys, CheckpointRecord, CheckpointSignature, CheckpointSigner,
    DecisionRecord, Position, Rule, CHECKPOINT_CONTEXT, RECORD_VERSION,
};
pub use replay::{replay, Divergence, Replayed};
