//! Verifying a chained decision log: every record links to the one before it, the
//! numbers follow, the log holds what an auditor anchored, and (given keys) every
//! checkpoint is signed.

use super::line::Line;
use super::record::CheckpointKeys;

/// Why a chained log does not verify: the record (1-based line) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainBreak {
    /// The 1-based line of the first record that does not follow.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.why)
    }
}

/// What an auditor already holds about a chained log, from an earlier verification or
/// a published head: the hash of a record (the head it anchored) and/or how many records
/// the log had then. A log that is shorter than that, or diverges from it, fails.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Anchor {
    /// The hash of the last record anchored (`orch audit verify` prints it as the head).
    pub head: Option<String>,
    /// How many records were anchored.
    pub count: Option<u64>,
}

/// A chained log that verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// How many decision records it has (checkpoints not counted).
    pub records: u64,
    /// How many checkpoints.
    pub checkpoints: u64,
    /// The hash of its last line, to anchor (`None` for an empty log).
    pub head: Option<String>,
    /// Whether the checkpoints' signatures were checked (keys were given).
    pub signed: bool,
    /// Decision records after the last checkpoint (all of them without one).
    pub unanchored: u64,
    /// The line of the first of those, if any.
    pub unanchored_from: Option<usize>,
}

/// Checks a chained log (JSON lines): every record parses, carries its own hash and the
/// hash of the record before it, and numbers follow one another. Returns the number of
/// records. Records cut off the end go unnoticed here: [`verify`] against an [`Anchor`]
/// catches them.
pub fn verify_chain(log: &str) -> Result<usize, ChainBreak> {
    verify(log, &Anchor::default()).map(|v| usize::try_from(v.records).unwrap_or(usize::MAX))
}

/// Checks a chained log as [`verify_chain`] does, and against what the auditor already
/// holds (`anchor`): with a count, the log must have at least that many records, and
/// with a head too, the record at that count (or a checkpoint right after it) must hash
/// to it; with a head alone, some line must. Records after the anchor are new ones. A
/// break names the line: the record that diverges, or the line after the last for a log
/// cut short. Checkpoints are checked as links of the chain; their signatures only by
/// [`verify_signed`].
pub fn verify(log: &str, anchor: &Anchor) -> Result<Verified, ChainBreak> {
    verify_signed(log, anchor, None)
}

/// [`verify`], and with `keys`, every checkpoint must be signed by one of them: a
/// checkpoint whose signature does not verify (the chain was rebuilt without the key,
/// or the checkpoint was moved) or that names another key fails at its line, and so
/// does a log with records but no checkpoint at all. Records after the last checkpoint
/// are reported as unanchored ([`Verified::unanchored`]).
pub fn verify_signed(
    log: &str,
    anchor: &Anchor,
    keys: Option<&dyn CheckpointKeys>,
) -> Result<Verified, ChainBreak> {
    let mut prev: Option<String> = None;
    let mut seq: Option<u64> = None;
    let mut count: u64 = 0;
    let mut checkpoints: u64 = 0;
    let mut unanchored: u64 = 0;
    let mut unanchored_from: Option<usize> = None;
    let mut last_line = 0;
    let mut head_found = false;
    // With a count and a head: the line of the anchored record, until the head is found
    // on it or on a checkpoint right after it.
    let mut window: Option<usize> = None;
    let diverges = |line: usize, head: &str| {
        ChainBreak {
        line,
        why: format!(
            "record {} does not lead to the anchored head {head}: the log diverges from what was anchored at or before this record",
            anchor.count.unwrap_or(0)
        ),
    }
    };
    for (i, text) in log.lines().enumerate() {
        let line_no = i + 1;
        if text.trim().is_empty() {
            continue;
        }
        let fail = |why: String| ChainBreak { line: line_no, why };
        let line = Line::parse(text).map_err(fail)?;
        let hash = link(&line, prev.as_ref(), seq).map_err(fail)?;
        match &line {
            Line::Record(_) => {
                if let (Some(at), Some(head)) = (window.take(), &anchor.head) {
                    return Err(diverges(at, head));
                }
                count = count.saturating_add(1);
                unanchored = unanchored.saturating_add(1);
                unanchored_from.get_or_insert(line_no);
                if anchor.count == Some(count) && anchor.head.is_some() {
                    window = Some(line_no);
                }
            }
            Line::Checkpoint(c) => {
                if let Some(keys) = keys {
                    let Some(sig) = &c.checkpoint.sig else {
                        return Err(fail("the checkpoint carries no signature".into()));
                    };
                    keys.check(&c.checkpoint.key, &c.signed_message(), sig)
                        .map_err(|why| fail(format!("the checkpoint does not verify: {why}")))?;
                }
                checkpoints = checkpoints.saturating_add(1);
                unanchored = 0;
                unanchored_from = None;
            }
        }
        // With a count, the head counts only right at the anchored record.
        if anchor.head.as_deref() == Some(hash.as_str())
            && (anchor.count.is_none() || window.take().is_some())
        {
            head_found = true;
        }
        seq = Some(line.seq());
        prev = Some(hash);
        last_line = line_no;
    }
    let after = last_line + 1;
    if let (Some(at), Some(head)) = (window, &anchor.head) {
        return Err(diverges(at, head));
    }
    if let Some(anchored) = anchor.count {
        if count < anchored {
            return Err(ChainBreak {
                line: after,
                why: format!(
                    "the log ends after {count} records, but {anchored} were anchored: records were cut off its end"
                ),
            });
        }
    }
    if let Some(head) = &anchor.head {
        if !head_found {
            return Err(ChainBreak {
                line: after,
                why: format!(
                    "no record hashes to the anchored head {head}: the log was cut before it, or rewritten"
                ),
            });
        }
    }
    if keys.is_some() && checkpoints == 0 && count > 0 {
        return Err(ChainBreak {
            line: after,
            why: format!(
                "no checkpoint in the log: none of its {count} records is signed (its checkpoints were removed and the chain rebuilt, or it was written without a key)"
            ),
        });
    }
    Ok(Verified {
        records: count,
        checkpoints,
        head: prev,
        signed: keys.is_some(),
        unanchored,
        unanchored_from,
    })
}

/// Checks that `line` is intact and follows the record before it (`prev`, its hash,
/// and `seq`, its number): its own hash, or why it breaks the chain.
fn link(line: &Line, prev: Option<&String>, seq: Option<u64>) -> Result<String, String> {
    let Some(hash) = line.hash().clone() else {
        return Err("the record carries no hash: the log is not chained".into());
    };
    let digest = line.digest();
    if hash != digest {
        return Err(format!(
            "the record was altered: its content hashes to {digest}, it says {hash}"
        ));
    }
    if line.prev().as_ref() != prev {
        return Err(match (line.prev(), prev) {
            (None, Some(_)) => {
                "a record is missing before it, or the log was cut and restarted".into()
            }
            _ => "it does not follow the record before it (a record was removed, inserted or reordered)".into(),
        });
    }
    if let Some(seq) = seq {
        match seq.checked_add(1) {
            Some(next) if line.seq() == next => {}
            Some(_) => return Err(format!("record {} follows record {seq}", line.seq())),
            None => {
                return Err(format!(
                    "record {} follows record {seq}, the last number there is",
                    line.seq()
                ))
            }
        }
    }
    Ok(hash)
}
