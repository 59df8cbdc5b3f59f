//! One line of a chained log read back: a decision record or a checkpoint, and the link
//! it carries.

use super::record::{CheckpointRecord, DecisionRecord};

/// One line of a chained log.
pub(super) enum Line {
    Record(Box<DecisionRecord>),
    Checkpoint(CheckpointRecord),
}

impl Line {
    /// A record (the common case, parsed once), else a checkpoint; the error is the one
    /// for what the line claims to be.
    pub(super) fn parse(line: &str) -> Result<Line, String> {
        let as_record = match serde_json::from_str(line) {
            Ok(record) => return Ok(Line::Record(Box::new(record))),
            Err(e) => e,
        };
        match serde_json::from_str(line) {
            Ok(checkpoint) => Ok(Line::Checkpoint(checkpoint)),
            Err(e) if line.contains("\"checkpoint\"") => Err(format!("not a checkpoint: {e}")),
            Err(_) => Err(format!("not a decision record: {as_record}")),
        }
    }

    pub(super) fn seq(&self) -> u64 {
        match self {
            Line::Record(r) => r.seq,
            Line::Checkpoint(c) => c.seq,
        }
    }

    pub(super) fn prev(&self) -> &Option<String> {
        match self {
            Line::Record(r) => &r.prev,
            Line::Checkpoint(c) => &c.prev,
        }
    }

    pub(super) fn hash(&self) -> &Option<String> {
        match self {
            Line::Record(r) => &r.hash,
            Line::Checkpoint(c) => &c.hash,
        }
    }

    pub(super) fn digest(&self) -> String {
        match self {
            Line::Record(r) => r.digest(),
            Line::Checkpoint(c) => c.digest(),
        }
    }
}

/// Is `line` a signed checkpoint (not a decision record)? Readers of a log's events skip
/// checkpoints.
pub fn is_checkpoint(line: &str) -> bool {
    // Only a checkpoint has the key (inside a string every quote is escaped): a record
    // is not parsed twice.
    line.contains("\"checkpoint\":") && serde_json::from_str::<CheckpointRecord>(line).is_ok()
}

/// The number and hash of the last line of a chained log (a record or a checkpoint),
/// for [`super::Auditor::continuing_after`]; `None` when `line` is neither.
pub fn last_link(line: &str) -> Option<(u64, Option<String>)> {
    let line = Line::parse(line).ok()?;
    Some((line.seq(), line.hash().clone()))
}
