//! The run host's ledger: the calls a host has seen, by id, and what each came to — kept
//! with the session's snapshot ([`Ledger::encode`], [`Ledger::decode`]), so a call
//! delivered again after a restore gets what it got the first time.

use crate::policy::RefusalKind;
use crate::Refusal;
use orch_runtime::{CallDigest, QuestionId};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::LEDGER_CALLS;

/// The version of the ledger's encoding inside a snapshot.
const ENCODING: u8 = 1;

/// Where one call stands in the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// A question about it is open until `expires_ms`.
    Asked {
        question: QuestionId,
        expires_ms: u64,
    },
    /// Its question was answered: the question, when this host asked or answered it
    /// (not kept in the encoding: a ledger read back from bytes says `None`).
    Answered { question: Option<QuestionId> },
    /// Admitted; running.
    Running,
    /// It ran and was recorded.
    Ran,
    /// It was refused so.
    Refused(Refusal),
}

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) tool: String,
    pub(crate) call: CallDigest,
    /// The exact arguments `call` was taken over, when this host took it (not kept in
    /// the encoding): the same bytes delivered again need no second digest.
    text: Option<Box<str>>,
    pub(crate) stage: Stage,
    /// When it was put (its place in [`Ledger::order`]).
    put: u64,
}

/// The calls a host has seen, by id ([`LEDGER_CALLS`] at most; the oldest forgotten
/// first). A look-up costs the same however many calls it holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    entries: HashMap<Arc<str>, Entry>,
    /// Ids in the order they were put, each with the number it was put under (an id
    /// forgotten and put again leaves a stale pair, skipped when it comes up).
    order: VecDeque<(Arc<str>, u64)>,
    puts: u64,
}

impl Entry {
    /// The digest of a call of `tool` with `arguments` under this entry's id: the
    /// entry's own when the very same bytes came before ([`Ledger::keep_text`]), else
    /// taken now. Only byte-for-byte equal arguments reuse it.
    pub(crate) fn digest_of(&self, tool: &str, arguments: &str) -> CallDigest {
        match self.tool == tool && self.text.as_deref() == Some(arguments) {
            true => self.call,
            false => CallDigest::of_text(tool, arguments),
        }
    }
}

impl Ledger {
    pub(crate) fn find(&mut self, id: &str) -> Option<&mut Entry> {
        self.entries.get_mut(id)
    }

    pub(crate) fn put(&mut self, id: &str, tool: &str, call: CallDigest, stage: Stage) {
        if let Some(entry) = self.entries.get_mut(id) {
            if entry.call != call || entry.tool != tool {
                entry.text = None;
            }
            entry.tool = tool.to_owned();
            entry.call = call;
            entry.stage = stage;
            return;
        }
        while self.entries.len() >= LEDGER_CALLS {
            let Some((oldest, put)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&oldest).is_some_and(|e| e.put == put) {
                self.entries.remove(&oldest);
            }
        }
        self.puts += 1;
        let id: Arc<str> = id.into();
        self.order.push_back((id.clone(), self.puts));
        self.entries.insert(
            id,
            Entry {
                tool: tool.to_owned(),
                call,
                text: None,
                stage,
                put: self.puts,
            },
        );
        // Stale pairs (ids forgotten) are dropped when they outnumber the live ones.
        if self.order.len() > 2 * LEDGER_CALLS {
            let entries = &self.entries;
            self.order
                .retain(|(id, put)| entries.get(id).is_some_and(|e| e.put == *put));
        }
    }

    /// The entry of `id`, if any, and the digest of the call of `tool` with `arguments`
    /// delivered under it ([`Entry::digest_of`]: taken once per bytes).
    pub(crate) fn look(
        &mut self,
        id: &str,
        tool: &str,
        arguments: &str,
    ) -> (Option<&mut Entry>, CallDigest) {
        let entry = self.entries.get_mut(id);
        let call = match &entry {
            Some(entry) => entry.digest_of(tool, arguments),
            None => CallDigest::of_text(tool, arguments),
        };
        (entry, call)
    }

    /// Keeps `arguments`, the exact bytes the entry of `id`'s digest was taken over, for
    /// [`Entry::digest_of`] (in memory only).
    pub(crate) fn keep_text(&mut self, id: &str, arguments: &str) {
        if let Some(entry) = self.entries.get_mut(id) {
            if entry.text.as_deref() != Some(arguments) {
                entry.text = Some(arguments.into());
            }
        }
    }

    pub(crate) fn forget(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// The entries, oldest first.
    fn oldest_first(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.order.iter().filter_map(|(id, put)| {
            self.entries
                .get(id)
                .filter(|e| e.put == *put)
                .map(|e| (&**id, e))
        })
    }

    /// The ledger as bytes to keep with the session's snapshot (empty when it holds no
    /// call): a version byte, then per call, oldest first, its id, tool, call digest
    /// and stage.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        if self.entries.is_empty() {
            return;
        }
        out.push(ENCODING);
        put_varint(out, self.entries.len() as u64);
        for (id, entry) in self.oldest_first() {
            put_str(out, id);
            put_str(out, &entry.tool);
            out.extend_from_slice(entry.call.as_bytes());
            match &entry.stage {
                Stage::Running => out.push(0),
                Stage::Answered { .. } => out.push(1),
                Stage::Ran => out.push(2),
                Stage::Asked {
                    question,
                    expires_ms,
                } => {
                    out.push(3);
                    out.extend_from_slice(&question.get().to_le_bytes());
                    out.extend_from_slice(&expires_ms.to_le_bytes());
                }
                Stage::Refused(refusal) => {
                    out.push(4);
                    put_str(out, refusal.kind.as_str());
                    put_str(out, &refusal.reason);
                    match &refusal.rule {
                        None => out.push(0),
                        Some(rule) => {
                            out.push(1);
                            put_str(out, rule);
                        }
                    }
                }
            }
        }
    }

    /// Reads [`Ledger::encode`]'s bytes (empty: no call). `Err` says what is wrong.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Ledger, String> {
        let mut ledger = Ledger::default();
        if bytes.is_empty() {
            return Ok(ledger);
        }
        let mut r = Reader { bytes, at: 0 };
        match r.byte()? {
            ENCODING => {}
            other => return Err(format!("its encoding {other} is not known")),
        }
        let n = r.varint()?;
        if n > LEDGER_CALLS as u64 {
            return Err(format!("it holds {n} calls, more than {LEDGER_CALLS}"));
        }
        for _ in 0..n {
            let id = r.str()?;
            let tool = r.str()?;
            let call = CallDigest::from_bytes(r.array::<32>()?);
            let stage = match r.byte()? {
                0 => Stage::Running,
                1 => Stage::Answered { question: None },
                2 => Stage::Ran,
                3 => {
                    let question = QuestionId::new(u64::from_le_bytes(r.array::<8>()?));
                    let expires_ms = u64::from_le_bytes(r.array::<8>()?);
                    if question.is_none() {
                        return Err("a question's id is 0".into());
                    }
                    Stage::Asked {
                        question,
                        expires_ms,
                    }
                }
                4 => {
                    let kind = r.str()?;
                    let kind = RefusalKind::parse(kind)
                        .ok_or_else(|| format!("the refusal kind `{kind}` is not known"))?;
                    let reason = r.str()?.to_owned();
                    let rule = match r.byte()? {
                        0 => None,
                        1 => Some(r.str()?.to_owned()),
                        _ => return Err("a refusal's rule flag is invalid".into()),
                    };
                    Stage::Refused(Refusal {
                        tool: tool.to_owned(),
                        kind,
                        reason,
                        rule,
                    })
                }
                other => return Err(format!("the stage {other} is not known")),
            };
            if ledger.entries.contains_key(id) {
                return Err(format!("the call `{id}` is written twice"));
            }
            ledger.put(id, tool, call, stage);
        }
        if r.at != bytes.len() {
            return Err("trailing bytes".into());
        }
        Ok(ledger)
    }
}

fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8 & 0x7f) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over hostile bytes: every read is checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err("it is truncated".into());
        };
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut x = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            x |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(x);
            }
        }
        Err("a length is not a valid varint".into())
    }

    fn str(&mut self) -> Result<&'a str, String> {
        let n = usize::try_from(self.varint()?).map_err(|_| "a length is too large")?;
        std::str::from_utf8(self.take(n)?).map_err(|_| "a name is not UTF-8".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Ledger {
        let mut l = Ledger::default();
        let call = |t: &str| CallDigest::of_text(t, "{}");
        l.put("a", "pay", call("pay"), Stage::Ran);
        l.put("b", "pay", call("pay"), Stage::Running);
        l.put(
            "c",
            "pay",
            call("pay"),
            Stage::Asked {
                question: QuestionId::new(7),
                expires_ms: 99,
            },
        );
        l.put(
            "d",
            "browse",
            call("browse"),
            Stage::Answered { question: None },
        );
        l.put(
            "e",
            "receipt",
            call("receipt"),
            Stage::Refused(Refusal {
                tool: "receipt".into(),
                kind: RefusalKind::BrokenRule,
                reason: "no".into(),
                rule: Some("known".into()),
            }),
        );
        l.forget("b");
        l
    }

    #[test]
    fn a_ledger_reads_back_as_written_oldest_first() {
        let ledger = sample();
        let mut bytes = Vec::new();
        ledger.encode(&mut bytes);
        let back = Ledger::decode(&bytes).expect("reads back");
        let ids: Vec<&str> = back.oldest_first().map(|(id, _)| id).collect();
        assert_eq!(ids, ["a", "c", "d", "e"]);
        for (id, entry) in ledger.oldest_first() {
            let other = &back.entries[id];
            assert_eq!(
                (&other.tool, other.call, &other.stage),
                (&entry.tool, entry.call, &entry.stage)
            );
        }
        let mut empty = vec![1];
        Ledger::default().encode(&mut empty);
        assert!(empty.is_empty());
    }

    #[test]
    fn every_damaged_ledger_is_an_error_never_a_panic() {
        let mut bytes = Vec::new();
        sample().encode(&mut bytes);
        for cut in 1..bytes.len() {
            assert!(Ledger::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                let _ = Ledger::decode(&bad);
            }
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(Ledger::decode(&extra).is_err());
        assert!(Ledger::decode(&[2]).unwrap_err().contains("encoding 2"));
    }
}
