//! Numbers results returned, in snapshots (semantics §16): the newest number a tool's
//! result held at a path that a `range` bound reads, by the tool's *name* and the path —
//! so a run restored into a changed template keeps each one the template still reads.

use super::{RestoreError, RestoreReport};
use crate::args::{bound, decimal};
use crate::tables::Tables;

/// One number a session holds, in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct NumberSnapshot {
    /// The tool whose newest result held it.
    pub tool: String,
    /// Where its results hold it (a JSON pointer).
    pub path: String,
    /// The number, as a decimal.
    pub value: String,
}

/// The numbers a session holds, from its memory words.
pub(super) fn number_parts<S: AsRef<str>>(
    t: &Tables<'_, S>,
    memory: &[u64],
) -> Vec<NumberSnapshot> {
    t.rules
        .held_numbers(memory)
        .into_iter()
        .map(|(tool, path, value)| NumberSnapshot {
            tool: t
                .tools
                .get(tool as usize)
                .map_or_else(String::new, |n| n.as_ref().to_owned()),
            path: path.to_owned(),
            value: decimal(value),
        })
        .collect()
}

/// Puts a snapshot's numbers into a session's memory words, by tool name and path: one
/// the template no longer reads is dropped. `Err` for a value that is not a decimal of
/// at most nine decimal places.
pub(super) fn restore_numbers<S: AsRef<str>>(
    t: &Tables<'_, S>,
    numbers: &[NumberSnapshot],
    memory: &mut [u64],
    report: &mut RestoreReport,
) -> Result<(), RestoreError> {
    for n in numbers {
        let value = bound(&n.value).ok_or_else(|| {
            RestoreError::Malformed(format!(
                "a number `{}` is not a decimal of at most nine decimal places",
                n.value
            ))
        })?;
        let k = t
            .tool_index(&n.tool)
            .and_then(|tool| t.rules.number_index(tool, &n.path));
        match k {
            Some(k) => t.rules.set_number(memory, k, Some(value)),
            None => report
                .missing_numbers
                .push(format!("{} {}", n.tool, n.path)),
        }
    }
    Ok(())
}
