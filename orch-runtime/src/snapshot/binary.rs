//! The binary encoding of a snapshot ([`Snapshot::to_bytes`], [`Snapshot::from_bytes`]):
//! names written once and referenced by index, every length checked against the bytes
//! that remain, a CRC-32 at the end.

use super::{Parts, RestoreError, Snapshot, FORMAT_VERSION, MAX_DECODED_BYTES, MAX_SNAPSHOT_BYTES};
use crate::approval::{Approval, CallDigest, QuestionId, Verdict};
use crate::state::Usage;

pub(super) const MAGIC: &[u8; 4] = b"orch";

/// The binary encoding's revision: 1 had no checksum; 2 ends with the CRC-32 (IEEE) of
/// every byte before it, little-endian, so corruption is an error instead of a
/// different session. Revision 1 is still read. In revision 2 an optional section may
/// follow the matched conditions: tag 1, a held verdict (32 bytes of call digest, then
/// 1 for approved, 2 for rejected, 3 for pending); snapshots written without it read as holding none.
pub(super) const ENCODING: u64 = 2;

pub(super) fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    loop {
        let byte = (x & 0x7f) as u8;
        x >>= 7;
        if x == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Bytes of text decoded so far.
    decoded: usize,
}

impl<'a> Reader<'a> {
    /// Accounts for `n` more bytes of decoded text.
    pub(super) fn decode(&mut self, n: usize) -> Result<(), RestoreError> {
        self.decoded = self.decoded.saturating_add(n);
        if self.decoded > MAX_DECODED_BYTES {
            return Err(self.bad(&format!(
                "the snapshot decodes to more than {MAX_DECODED_BYTES} bytes of names"
            )));
        }
        Ok(())
    }

    pub(super) fn bad(&self, what: &str) -> RestoreError {
        RestoreError::Malformed(format!("{what} at byte {}", self.at))
    }

    pub(super) fn byte(&mut self, what: &str) -> Result<u8, RestoreError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| self.bad(&format!("truncated: expected {what}")))?;
        self.at += 1;
        Ok(b)
    }

    pub(super) fn varint(&mut self, what: &str) -> Result<u64, RestoreError> {
        let mut x = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(what)?;
            x |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(x);
            }
        }
        Err(self.bad(&format!("{what} is not a valid varint")))
    }

    /// A count of items that take at least one byte each: never more than remain.
    pub(super) fn count(&mut self, what: &str) -> Result<usize, RestoreError> {
        let n = self.varint(what)?;
        let remaining = (self.bytes.len() - self.at) as u64;
        if n > remaining {
            return Err(self.bad(&format!(
                "{what} says {n} items but only {remaining} bytes remain"
            )));
        }
        Ok(n as usize)
    }

    pub(super) fn str(&mut self, what: &str) -> Result<&'a str, RestoreError> {
        let n = self.count(what)?;
        self.decode(n)?;
        let s = &self.bytes[self.at..self.at + n];
        let s = std::str::from_utf8(s).map_err(|_| self.bad(&format!("{what} is not UTF-8")))?;
        self.at += n;
        Ok(s)
    }

    pub(super) fn u64_le(&mut self, what: &str) -> Result<u64, RestoreError> {
        let end = self.at + 8;
        let b = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| self.bad(&format!("truncated: expected {what}")))?;
        self.at = end;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

impl Snapshot {
    /// The compact binary encoding: tool names are written once, in a table, and
    /// referenced by index.
    pub fn to_bytes(&self) -> Vec<u8> {
        let bytes = |list: &[String]| -> Vec<[u8; 16]> {
            list.iter()
                .map(|hex| {
                    let mut key = [0u8; 16];
                    for (k, pair) in key.iter_mut().zip(hex.as_bytes().chunks(2)) {
                        let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                        *k = pair.first().map_or(0, |&c| digit(c)) * 16
                            + pair.get(1).map_or(0, |&c| digit(c));
                    }
                    key
                })
                .collect()
        };
        let (memory, untrusted) = (bytes(&self.memory), bytes(&self.untrusted));
        Parts {
            fingerprint: self.fingerprint,
            machine: &self.machine,
            step: self.step.as_deref(),
            sequence_index: self.sequence_index,
            usage: self.usage,
            history: self.history.iter().map(Option::as_deref).collect(),
            used: self.used.iter().map(String::as_str).collect(),
            available: self
                .available
                .as_ref()
                .map(|list| list.iter().map(String::as_str).collect()),
            matched: self.matched.iter().map(|m| ("", m.as_str())).collect(),
            approval: self.approval,
            memory,
            untrusted,
            forgotten: self.forgotten,
            clock: self.clock,
            budgets: self.budgets.clone(),
            numbers: self.numbers.clone(),
            host: &self.host,
        }
        .encode()
    }

    /// Decodes [`Snapshot::to_bytes`] (and the checksum-less revision 1 of the
    /// encoding). Malformed, truncated, corrupted or hostile input is an error: never a
    /// panic, and never more than [`MAX_DECODED_BYTES`] of text decoded.
    pub fn from_bytes(bytes: &[u8]) -> Result<Snapshot, RestoreError> {
        let (mut r, bytes) = checked(bytes)?;
        let fingerprint = r.u64_le("the fingerprint")?;
        let machine = r.str("the machine name")?.to_owned();
        let step = match r.byte("the step flag")? {
            0 => None,
            1 => Some(r.str("the step name")?.to_owned()),
            _ => return Err(r.bad("invalid step flag")),
        };
        let sequence_index = u32::try_from(r.varint("the sequence index")?)
            .map_err(|_| r.bad("sequence index out of range"))?;
        let prompt = r.varint("prompt tokens")?;
        let completion = r.varint("completion tokens")?;
        let n_names = r.count("the name table")?;
        let mut names = Vec::with_capacity(n_names);
        for _ in 0..n_names {
            names.push(r.str("a tool name")?.to_owned());
        }
        let name = |r: &mut Reader<'_>, i: u64| -> Result<String, RestoreError> {
            let n = names
                .get(i as usize)
                .ok_or_else(|| r.bad(&format!("name index {i} out of range")))?;
            r.decode(n.len())?;
            Ok(n.clone())
        };
        let n = r.count("the history")?;
        let mut history = Vec::with_capacity(n);
        for _ in 0..n {
            history.push(match r.varint("a history entry")? {
                0 => None,
                i => Some(name(&mut r, i - 1)?),
            });
        }
        let n = r.count("the used set")?;
        let mut used = Vec::with_capacity(n);
        for _ in 0..n {
            let i = r.varint("a used tool")?;
            used.push(name(&mut r, i)?);
        }
        let available = match r.byte("the available flag")? {
            0 => None,
            1 => {
                let n = r.count("the available set")?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = r.varint("an available tool")?;
                    v.push(name(&mut r, i)?);
                }
                Some(v)
            }
            _ => return Err(r.bad("invalid available flag")),
        };
        let n = r.count("the matched conditions")?;
        let mut matched = Vec::with_capacity(n);
        for _ in 0..n {
            matched.push(r.str("a matched condition")?.to_owned());
        }
        // Optional sections, in order: the verdict (1 or 2), the remembered values (3),
        // the values seen in untrusted results (5), the count of forgotten values (6),
        // the clock and the budgets (7), the numbers (8), what the host keeps (4).
        let approval = match r.bytes.get(r.at) {
            Some(1 | 2) => Some(read_approval(&mut r)?),
            _ => None,
        };
        let memory = match r.bytes.get(r.at) {
            Some(3) => read_memory(&mut r)?,
            _ => Vec::new(),
        };
        let untrusted = match r.bytes.get(r.at) {
            Some(5) => read_memory(&mut r)?,
            _ => Vec::new(),
        };
        let forgotten = match r.bytes.get(r.at) {
            Some(6) => {
                r.byte("the forgotten section")?;
                u32::try_from(r.varint("the count of forgotten values")?)
                    .map_err(|_| r.bad("too many forgotten values"))?
            }
            _ => 0,
        };
        let (clock, budgets) = match r.bytes.get(r.at) {
            Some(7) => read_budgets(&mut r)?,
            _ => (0, Vec::new()),
        };
        let numbers = match r.bytes.get(r.at) {
            Some(8) => read_numbers(&mut r)?,
            _ => Vec::new(),
        };
        let host = match r.bytes.get(r.at) {
            None => Vec::new(),
            Some(4) => {
                r.byte("the host section")?;
                let n = r.count("the host's bytes")?;
                let kept = r.bytes[r.at..r.at + n].to_vec();
                r.at += n;
                kept
            }
            Some(_) => return Err(r.bad("unknown section")),
        };
        if r.at != bytes.len() {
            return Err(r.bad("trailing bytes"));
        }
        Ok(Snapshot {
            version: FORMAT_VERSION,
            machine,
            fingerprint,
            step,
            sequence_index,
            history,
            used,
            matched,
            usage: Usage { prompt, completion },
            available,
            approval,
            memory,
            untrusted,
            forgotten,
            clock,
            budgets,
            numbers,
            host,
        })
    }
}

/// A snapshot's bytes checked before they are read: their size, the magic bytes, the
/// version, and (from revision 2 on) the checksum over the rest. The reader is past the
/// version; the bytes returned are the content, without the checksum.
pub(super) fn checked(bytes: &[u8]) -> Result<(Reader<'_>, &[u8]), RestoreError> {
    if bytes.len() > MAX_SNAPSHOT_BYTES {
        return Err(RestoreError::TooLarge(bytes.len()));
    }
    if bytes.get(..4) != Some(MAGIC.as_slice()) {
        return Err(RestoreError::Malformed(
            "not an orch snapshot (bad magic bytes)".into(),
        ));
    }
    let mut r = Reader {
        bytes,
        at: 4,
        decoded: 0,
    };
    let content = match r.varint("the version")? {
        1 => bytes,
        ENCODING => {
            let Some(split) = bytes.len().checked_sub(4).filter(|n| *n >= r.at) else {
                return Err(r.bad("truncated: expected the checksum"));
            };
            let (content, crc) = bytes.split_at(split);
            let mut le = [0u8; 4];
            le.copy_from_slice(crc);
            if crc32fast::hash(content) != u32::from_le_bytes(le) {
                return Err(RestoreError::Malformed(
                    "the checksum does not match: the snapshot is corrupted".into(),
                ));
            }
            r.bytes = content;
            content
        }
        other => {
            return Err(RestoreError::UnsupportedVersion(
                other.min(u64::from(u32::MAX)) as u32,
            ))
        }
    };
    Ok((r, content))
}

/// The remembered values section (3): a count, then 16 bytes per value.
pub(super) fn read_memory(r: &mut Reader<'_>) -> Result<Vec<String>, RestoreError> {
    r.byte("the memory section")?;
    let n = r.count("the remembered values")?;
    let mut memory = Vec::with_capacity(n.min(crate::args::MAX_MEMORY_VALUES));
    for _ in 0..n {
        let end = r.at + 16;
        let key = r
            .bytes
            .get(r.at..end)
            .ok_or_else(|| r.bad("truncated: expected a remembered value"))?;
        let mut k = [0u8; 16];
        k.copy_from_slice(key);
        memory.push(super::hex_key(&k));
        r.at = end;
    }
    Ok(memory)
}

/// The verdict section of a snapshot: the held verdict's call digest and verdict, and
/// (section 2) the question it answers.
pub(super) fn read_approval(r: &mut Reader<'_>) -> Result<Approval, RestoreError> {
    let section = r.byte("the verdict section")?;
    if section != 1 && section != 2 {
        return Err(r.bad("unknown section"));
    }
    let end = r.at + 32;
    let digest = r
        .bytes
        .get(r.at..end)
        .ok_or_else(|| r.bad("truncated: expected the call digest"))?;
    let mut call = [0u8; 32];
    call.copy_from_slice(digest);
    r.at = end;
    let verdict = match r.byte("the verdict")? {
        1 => Verdict::Approved,
        2 => Verdict::Rejected,
        3 => Verdict::Pending,
        _ => return Err(r.bad("invalid verdict")),
    };
    let question = if section == 2 {
        let end = r.at + 8;
        let id = r
            .bytes
            .get(r.at..end)
            .ok_or_else(|| r.bad("truncated: expected the question id"))?;
        let mut le = [0u8; 8];
        le.copy_from_slice(id);
        r.at = end;
        match u64::from_le_bytes(le) {
            0 => return Err(r.bad("a question id of 0 in a section that has one")),
            id => QuestionId::new(id),
        }
    } else {
        QuestionId::NONE
    };
    Ok(Approval {
        call: CallDigest::from_bytes(call),
        verdict,
        question,
    })
}

impl Parts<'_> {
    /// The compact binary encoding: tool names are written once, in a table, and
    /// referenced by index.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// [`Parts::encode`] into `out` (cleared first), so that a caller that snapshots
    /// often reuses one buffer. The names table lists the tools in the order they first
    /// appear in the history, then the used set, then the available list; the body
    /// refers to them by index.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        /// The index of `n` in `names` (the same tables hand out the same `&str`, so the
        /// pointer comparison answers first).
        fn find(n: &str, names: &[&str]) -> Option<usize> {
            names
                .iter()
                .position(|x| std::ptr::eq(*x, n))
                .or_else(|| names.iter().position(|x| *x == n))
        }
        fn add<'a>(n: &'a str, names: &mut Vec<&'a str>) {
            if find(n, names).is_none() {
                names.push(n);
            }
        }
        fn index_of(n: &str, names: &[&str]) -> u64 {
            // Every name was added to the table in the first pass.
            find(n, names).unwrap_or(0) as u64
        }
        let available: &[&str] = self.available.as_deref().unwrap_or(&[]);
        let mut names: Vec<&str> = Vec::with_capacity(16);
        for n in self.history.iter().flatten() {
            add(n, &mut names);
        }
        for n in self.used.iter().chain(available) {
            add(n, &mut names);
        }

        out.clear();
        // A guess of the size (a reused buffer mostly has the room already).
        out.reserve(
            64 + self.machine.len()
                + 16 * names.len()
                + 2 * (self.history.len() + self.used.len() + available.len())
                + 64 * self.matched.len()
                + 16 * (self.memory.len() + self.untrusted.len()),
        );
        out.extend_from_slice(MAGIC);
        put_varint(out, ENCODING);
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        put_str(out, self.machine);
        match self.step {
            None => out.push(0),
            Some(s) => {
                out.push(1);
                put_str(out, s);
            }
        }
        put_varint(out, u64::from(self.sequence_index));
        put_varint(out, self.usage.prompt);
        put_varint(out, self.usage.completion);
        put_varint(out, names.len() as u64);
        for n in &names {
            put_str(out, n);
        }

        put_varint(out, self.history.len() as u64);
        for h in &self.history {
            let r = match h {
                None => 0,
                Some(n) => index_of(n, &names) + 1,
            };
            put_varint(out, r);
        }
        put_varint(out, self.used.len() as u64);
        for n in &self.used {
            put_varint(out, index_of(n, &names));
        }
        match &self.available {
            None => out.push(0),
            Some(list) => {
                out.push(1);
                put_varint(out, list.len() as u64);
                for n in list {
                    put_varint(out, index_of(n, &names));
                }
            }
        }
        put_varint(out, self.matched.len() as u64);
        for (prefix, rest) in &self.matched {
            put_varint(out, (prefix.len() + rest.len()) as u64);
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(rest.as_bytes());
        }
        if let Some(a) = &self.approval {
            // Section 1: a verdict without a question id; 2: with one (8 bytes, LE).
            out.push(if a.question.is_none() { 1 } else { 2 });
            out.extend_from_slice(a.call.as_bytes());
            out.push(match a.verdict {
                Verdict::Approved => 1,
                Verdict::Rejected => 2,
                Verdict::Pending => 3,
            });
            if !a.question.is_none() {
                out.extend_from_slice(&a.question.get().to_le_bytes());
            }
        }
        if !self.memory.is_empty() {
            // Section 3: the remembered values, 16 bytes each (the hex keys' bytes).
            out.push(3);
            put_varint(out, self.memory.len() as u64);
            for key in &self.memory {
                out.extend_from_slice(key);
            }
        }
        if !self.untrusted.is_empty() {
            // Section 5: the values seen in untrusted results, as section 3.
            out.push(5);
            put_varint(out, self.untrusted.len() as u64);
            for key in &self.untrusted {
                out.extend_from_slice(key);
            }
        }
        if self.forgotten != 0 {
            // Section 6: how many remembered values were forgotten.
            out.push(6);
            put_varint(out, u64::from(self.forgotten));
        }
        if self.clock != 0 || !self.budgets.is_empty() {
            // Section 7: the clock and the budgets.
            write_budgets(out, self.clock, &self.budgets);
        }
        if !self.numbers.is_empty() {
            // Section 8: the numbers results held that bounds read.
            write_numbers(out, &self.numbers);
        }
        if !self.host.is_empty() {
            // Section 4: what the host keeps with the session, length-prefixed.
            out.push(4);
            put_varint(out, self.host.len() as u64);
            out.extend_from_slice(self.host);
        }
        let crc = crc32fast::hash(out);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// Section 7 of the binary encoding: the clock, then per budget its name, total and
/// charges.
pub(super) fn write_budgets(out: &mut Vec<u8>, clock: u64, budgets: &[super::BudgetSnapshot]) {
    out.push(7);
    put_varint(out, clock);
    put_varint(out, budgets.len() as u64);
    for b in budgets {
        put_str(out, &b.name);
        put_str(out, &b.total);
        put_varint(out, b.charges.len() as u64);
        for (at, v) in &b.charges {
            put_varint(out, *at);
            put_str(out, v);
        }
    }
}

/// Reads section 7 (the reader is at its tag).
pub(super) fn read_budgets(
    r: &mut Reader<'_>,
) -> Result<(u64, Vec<super::BudgetSnapshot>), RestoreError> {
    r.byte("the budgets section")?;
    let clock = r.varint("the clock")?;
    let n = r.count("the budgets")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str("a budget's name")?.to_owned();
        let total = r.str("a budget's total")?.to_owned();
        let k = r.count("a budget's charges")?;
        let mut charges = Vec::with_capacity(k);
        for _ in 0..k {
            let at = r.varint("a charge's time")?;
            charges.push((at, r.str("a charge's amount")?.to_owned()));
        }
        out.push(super::BudgetSnapshot {
            name,
            total,
            charges,
        });
    }
    Ok((clock, out))
}

/// Section 8 of the binary encoding: per number its tool, path and value.
pub(super) fn write_numbers(out: &mut Vec<u8>, numbers: &[super::NumberSnapshot]) {
    out.push(8);
    put_varint(out, numbers.len() as u64);
    for n in numbers {
        put_str(out, &n.tool);
        put_str(out, &n.path);
        put_str(out, &n.value);
    }
}

/// Reads section 8 (the reader is at its tag).
pub(super) fn read_numbers(r: &mut Reader<'_>) -> Result<Vec<super::NumberSnapshot>, RestoreError> {
    r.byte("the numbers section")?;
    let n = r.count("the numbers")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(super::NumberSnapshot {
            tool: r.str("a number's tool")?.to_owned(),
            path: r.str("a number's path")?.to_owned(),
            value: r.str("a number's value")?.to_owned(),
        });
    }
    Ok(out)
}
