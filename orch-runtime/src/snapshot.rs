//! Snapshots (semantics §9): a session's whole state by *names*, with a format version and
//! the fingerprint of the compiled template, so it can be stored anywhere and restored
//! into the same template — or into a changed one, mapping by name and reporting what
//! could not be mapped.
//!
//! Two encodings: JSON (feature `serde`) and a compact binary form
//! ([`Snapshot::to_bytes`], [`Snapshot::from_bytes`]) whose decoder checks every length
//! against the bytes that remain, so hostile input can never make it allocate more than
//! the input's own size.

use crate::approval::{Approval, CallDigest, QuestionId, Verdict};
use crate::bits::{ToolEnum, Words};
use crate::machine::{Machine, StepEnum};
use crate::session::Session;
use crate::state::{State, Usage, FOREIGN, NO_STEP};
use crate::tables::Tables;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// The snapshot format version this runtime writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The largest snapshot accepted, in bytes (JSON or binary).
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 20;

/// A session's state by names (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct Snapshot {
    /// [`FORMAT_VERSION`] when written.
    pub version: u32,
    /// The machine's name (`agentId`, else `name`).
    pub machine: String,
    /// The compiled template's fingerprint when written.
    pub fingerprint: u64,
    /// The active step.
    pub step: Option<String>,
    /// The position in the active step's sequence.
    pub sequence_index: u32,
    /// The history, oldest first; `None` is a foreign tool.
    pub history: Vec<Option<String>>,
    /// Every tool used since the session began (or was reset).
    pub used: Vec<String>,
    /// The message conditions the latest user message satisfied
    /// (`contains:<needle>` / `regex:<pattern>`).
    pub matched: Vec<String>,
    /// Cumulative token usage.
    pub usage: Usage,
    /// The host's available tools (`None`: every tool of the machine, and no foreign
    /// tool listed). Names the template does not declare are the host's foreign tools
    /// (a [`crate::dynamic::DynSession`] lists them in `allowed()`).
    pub available: Option<Vec<String>>,
    /// A human's verdict on one call, held in this state (semantics §13). Absent in
    /// snapshots written before approvals existed, which restore with none.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub approval: Option<Approval>,
    /// The values remembered from results for rules on arguments (semantics §16), oldest
    /// first: 32 hex digits each (a 128-bit key, never the value's text). Absent when
    /// none are held.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub memory: Vec<String>,
    /// What the host keeps with the session, opaque to the runtime (orch-agent's run host
    /// keeps its ledger of calls here, so a call delivered again after a restore is not
    /// run twice). Empty when the host keeps nothing; hex digits in the JSON form.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty", with = "hex_bytes")
    )]
    pub host: Vec<u8>,
}

/// The JSON form of [`Snapshot::host`]: lowercase hex digits.
#[cfg(feature = "serde")]
mod hex_bytes {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&hex)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let hex = String::deserialize(d)?;
        if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(D::Error::custom(
                "`host` is not an even number of hex digits",
            ));
        }
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(D::Error::custom))
            .collect()
    }
}

/// What a restore could not carry over exactly (restoring into a changed template).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// The snapshot was written by a different build of the template.
    pub fingerprint_changed: bool,
    /// The active step no longer exists; the session fell back to the default step
    /// (index 0).
    pub missing_step: Option<String>,
    /// The sequence index was past the end of the step's (changed) sequence and was
    /// set to its end.
    pub index_clamped: Option<(u32, u32)>,
    /// Tools that no longer exist: their history entries became foreign entries (they
    /// did run), and they left the used set. (In the available list, a name the
    /// template does not declare is one of the host's foreign tools and is kept.)
    pub missing_tools: Vec<String>,
    /// Message conditions that no longer exist (dropped).
    pub missing_conditions: Vec<String>,
    /// History entries beyond the machine's capacity (the oldest were dropped).
    pub history_truncated: usize,
    /// The snapshot held a human's verdict on a call, given under another build of the
    /// template: it was dropped (the human is asked again).
    pub approval_dropped: bool,
    /// The snapshot held values remembered from results, under another build of the
    /// template: they were dropped (rules that read them refuse until the results come
    /// again).
    pub memory_dropped: bool,
}

impl RestoreReport {
    /// Was everything carried over exactly (same template, nothing lost)?
    pub fn is_exact(&self) -> bool {
        *self == RestoreReport::default()
    }

    /// Was anything lost or changed beyond the fingerprint?
    pub fn lost_anything(&self) -> bool {
        self.missing_step.is_some()
            || self.index_clamped.is_some()
            || !self.missing_tools.is_empty()
            || !self.missing_conditions.is_empty()
            || self.history_truncated > 0
            || self.approval_dropped
            || self.memory_dropped
    }
}

/// Why a snapshot could not be restored or decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// The snapshot belongs to another machine.
    OtherMachine {
        /// The snapshot's machine.
        found: String,
        /// This machine.
        expected: String,
    },
    /// A format version this runtime does not read.
    UnsupportedVersion(u32),
    /// Malformed data: what is wrong and where.
    Malformed(String),
    /// The input is larger than [`MAX_SNAPSHOT_BYTES`].
    TooLarge(usize),
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::OtherMachine { found, expected } => {
                write!(
                    f,
                    "the snapshot belongs to machine `{found}`, not `{expected}`"
                )
            }
            RestoreError::UnsupportedVersion(v) => {
                write!(f, "snapshot format version {v} is not supported (this runtime reads {FORMAT_VERSION})")
            }
            RestoreError::Malformed(why) => write!(f, "malformed snapshot: {why}"),
            RestoreError::TooLarge(n) => write!(
                f,
                "snapshot of {n} bytes exceeds the limit of {MAX_SNAPSHOT_BYTES}"
            ),
        }
    }
}

impl std::error::Error for RestoreError {}

/// The name of message flag `i` in two parts: `("contains:", needle)` or
/// `("regex:", pattern)`.
fn flag_parts<'t, S: AsRef<str>>(t: &'t Tables<'_, S>, i: usize) -> (&'static str, &'t str) {
    match t.contains.get(i) {
        Some(c) => ("contains:", c.as_ref()),
        None => (
            "regex:",
            t.regexes
                .get(i - t.contains.len())
                .map_or("", |r| r.as_ref()),
        ),
    }
}

/// The name of message flag `i`: `contains:<needle>` or `regex:<pattern>`.
fn flag_name<S: AsRef<str>>(t: &Tables<'_, S>, i: usize) -> String {
    let (kind, text) = flag_parts(t, i);
    format!("{kind}{text}")
}

/// What a snapshot of an engine state holds, its names borrowed from the tables (shared
/// by typed and run-time sessions): [`Parts::into_snapshot`] owns them,
/// [`Parts::encode`] writes the binary encoding without making a [`Snapshot`].
pub(crate) fn parts<'t, S, U, F, H, D, C, R>(
    t: &'t Tables<'_, S>,
    state: &State<U, F, H, D, C, R>,
    available: &[u64],
    foreign_available: &'t [String],
) -> Parts<'t>
where
    S: AsRef<str>,
    U: AsRef<[u64]> + AsMut<[u64]>,
    F: AsRef<[u64]> + AsMut<[u64]>,
    H: AsRef<[u16]> + AsMut<[u16]>,
    D: AsRef<[u64]> + AsMut<[u64]>,
    C: AsRef<[u16]> + AsMut<[u16]>,
    R: AsRef<[u64]> + AsMut<[u64]>,
{
    let tool = |i: usize| t.tools.get(i).map(AsRef::as_ref);
    let names =
        |bits: &[u64]| -> Vec<&str> { crate::bits::BitIter::new(bits).filter_map(tool).collect() };
    let all = (0..t.tools.len()).all(|i| crate::bits::test(available, i));
    Parts {
        fingerprint: t.fingerprint,
        machine: t.name,
        step: state
            .active()
            .and_then(|i| t.step_names.get(i))
            .map(AsRef::as_ref),
        sequence_index: u32::from(state.index),
        usage: state.usage,
        history: state
            .history()
            .map(|i| match i {
                FOREIGN => None,
                i => tool(i as usize),
            })
            .collect(),
        used: names(state.used.as_ref()),
        available: (!all || !foreign_available.is_empty()).then(|| {
            let mut list = names(available);
            list.extend(foreign_available.iter().map(String::as_str));
            list
        }),
        matched: crate::bits::BitIter::new(state.flags.as_ref())
            .map(|i| flag_parts(t, i))
            .collect(),
        approval: state.approval,
        memory: crate::args::memory::oldest_first(state.memory.as_ref())
            .into_iter()
            .map(|[hi, lo]| {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&hi.to_be_bytes());
                key[8..].copy_from_slice(&lo.to_be_bytes());
                key
            })
            .collect(),
        host: &[],
    }
}

/// What the binary encoding writes, borrowed: from a [`Snapshot`]
/// ([`Snapshot::to_bytes`]) or straight from a session's state ([`parts`]), so both
/// write the same bytes by construction.
pub(crate) struct Parts<'a> {
    fingerprint: u64,
    machine: &'a str,
    step: Option<&'a str>,
    sequence_index: u32,
    usage: Usage,
    history: Vec<Option<&'a str>>,
    used: Vec<&'a str>,
    available: Option<Vec<&'a str>>,
    /// Each matched condition's name as a prefix and the rest (`("contains:", needle)`),
    /// written as one string.
    matched: Vec<(&'a str, &'a str)>,
    approval: Option<Approval>,
    /// The remembered values, 16 bytes each.
    memory: Vec<[u8; 16]>,
    /// What the host keeps with the session ([`Snapshot::host`]).
    pub(crate) host: &'a [u8],
}

impl Parts<'_> {
    /// The [`Snapshot`] of these parts (its names owned; remembered values as hex keys).
    pub(crate) fn into_snapshot(self) -> Snapshot {
        Snapshot {
            version: FORMAT_VERSION,
            machine: self.machine.to_owned(),
            fingerprint: self.fingerprint,
            step: self.step.map(str::to_owned),
            sequence_index: self.sequence_index,
            history: self
                .history
                .into_iter()
                .map(|h| h.map(str::to_owned))
                .collect(),
            used: self.used.into_iter().map(str::to_owned).collect(),
            matched: self
                .matched
                .into_iter()
                .map(|(kind, text)| format!("{kind}{text}"))
                .collect(),
            usage: self.usage,
            available: self
                .available
                .map(|list| list.into_iter().map(str::to_owned).collect()),
            approval: self.approval,
            memory: self
                .memory
                .iter()
                .map(|key| key.iter().map(|b| format!("{b:02x}")).collect())
                .collect(),
            host: self.host.to_vec(),
        }
    }

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
                + 16 * self.memory.len(),
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

/// Puts `snapshot`'s remembered values into `state` (oldest first); `Err` for a key
/// that is not 32 hex digits.
fn restore_memory<U, F, H, D, C, R: AsRef<[u64]> + AsMut<[u64]>>(
    snapshot: &Snapshot,
    state: &mut State<U, F, H, D, C, R>,
) -> Result<(), RestoreError> {
    let mut keys = Vec::with_capacity(snapshot.memory.len());
    for hex in &snapshot.memory {
        let bad =
            || RestoreError::Malformed(format!("a remembered value `{hex}` is not 32 hex digits"));
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let hi = u64::from_str_radix(&hex[..16], 16).map_err(|_| bad())?;
        let lo = u64::from_str_radix(&hex[16..], 16).map_err(|_| bad())?;
        keys.push([hi, lo]);
    }
    crate::args::memory::Memory(state.memory.as_mut()).load(&keys);
    Ok(())
}

/// The step and sequence index a snapshot's step `name` and `sequence_index` restore
/// to: a step that no longer exists gives the default step (reported), an index past a
/// shortened sequence its end (reported).
fn restored_step<S: AsRef<str>>(
    t: &Tables<'_, S>,
    name: &str,
    sequence_index: u32,
    report: &mut RestoreReport,
) -> (u16, u16) {
    match t.step_index(name) {
        Some(step) => {
            let len = t.steps.get(step).map_or(0, |s| s.sequence.len);
            if sequence_index > len {
                report.index_clamped = Some((sequence_index, len));
                (step as u16, len as u16)
            } else {
                (step as u16, sequence_index as u16)
            }
        }
        None => {
            report.missing_step = Some(name.to_owned());
            (t.default_step.unwrap_or(NO_STEP), 0)
        }
    }
}

/// Restores `snapshot` into a blank `state` and `available` (shared by typed and
/// run-time sessions). Names in the available list that the template does not declare
/// are the host's foreign tools: they go to `foreign_available` (nothing is lost: the
/// host still has them; a typed session, which judges a foreign tool available whenever
/// the host names it, passes `None`).
pub(crate) fn restore_into<S, U, F, H, D, C, R>(
    t: &Tables<'_, S>,
    snapshot: &Snapshot,
    state: &mut State<U, F, H, D, C, R>,
    available: &mut [u64],
    mut foreign_available: Option<&mut Vec<String>>,
) -> Result<RestoreReport, RestoreError>
where
    S: AsRef<str>,
    U: AsRef<[u64]> + AsMut<[u64]>,
    F: AsRef<[u64]> + AsMut<[u64]>,
    H: AsRef<[u16]> + AsMut<[u16]>,
    D: AsRef<[u64]> + AsMut<[u64]>,
    C: AsRef<[u16]> + AsMut<[u16]>,
    R: AsRef<[u64]> + AsMut<[u64]>,
{
    if snapshot.version != FORMAT_VERSION {
        return Err(RestoreError::UnsupportedVersion(snapshot.version));
    }
    if snapshot.machine != t.name {
        return Err(RestoreError::OtherMachine {
            found: snapshot.machine.clone(),
            expected: t.name.to_owned(),
        });
    }
    let mut report = RestoreReport {
        fingerprint_changed: snapshot.fingerprint != t.fingerprint,
        ..RestoreReport::default()
    };
    // Names are looked up in hash maps built once, so restoring costs time linear in
    // the snapshot, whatever it holds.
    let tool_index: HashMap<&str, usize> = t
        .tools
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_ref(), i))
        .collect();
    let tool_index = |name: &str| tool_index.get(name).copied();
    let mut missing: HashSet<String> = HashSet::new();
    let mut missing_tool = |name: &str, report: &mut RestoreReport| {
        if missing.insert(name.to_owned()) {
            report.missing_tools.push(name.to_owned());
        }
    };
    state.clear();
    if let Some(name) = &snapshot.step {
        let (step, index) = restored_step(t, name, snapshot.sequence_index, &mut report);
        state.step = step;
        state.index = index;
    }
    let capacity = state.hist.as_ref().len();
    let skip = snapshot.history.len().saturating_sub(capacity);
    report.history_truncated = skip;
    for entry in &snapshot.history[skip..] {
        let i = match entry {
            None => FOREIGN,
            Some(name) => match tool_index(name) {
                Some(i) => i as u16,
                None => {
                    missing_tool(name, &mut report);
                    FOREIGN
                }
            },
        };
        let next = state.hist_next as usize;
        state.hist.as_mut()[next % capacity] = i;
        state.hist_next = ((next + 1) % capacity) as u16;
    }
    for name in &snapshot.used {
        match tool_index(name) {
            Some(i) => crate::bits::set(state.used.as_mut(), i),
            None => missing_tool(name, &mut report),
        }
    }
    available.fill(0);
    match &snapshot.available {
        None => (0..t.tools.len()).for_each(|i| crate::bits::set(available, i)),
        Some(names) => {
            let mut foreign_seen: HashSet<&str> = HashSet::new();
            for name in names {
                match (tool_index(name), foreign_available.as_deref_mut()) {
                    (Some(i), _) => crate::bits::set(available, i),
                    (None, Some(foreign)) if foreign_seen.insert(name) => {
                        foreign.push(name.clone())
                    }
                    (None, _) => {}
                }
            }
        }
    }
    let flag_index: HashMap<String, usize> = (0..t.message_flags())
        .map(|i| (flag_name(t, i), i))
        .collect();
    for m in &snapshot.matched {
        match flag_index.get(m.as_str()) {
            Some(&i) => crate::bits::set(state.flags.as_mut(), i),
            None => report.missing_conditions.push(m.clone()),
        }
    }
    state.usage = snapshot.usage;
    // The derived condition state is a function of what was just restored.
    state.rebuild(t);
    // A verdict is bound to the state it was given in: kept only in the same template.
    if snapshot.approval.is_some() && report.fingerprint_changed {
        report.approval_dropped = true;
    } else {
        state.approval = snapshot.approval;
    }
    // Remembered values are keyed by the template's sources: kept only in the same one.
    if !snapshot.memory.is_empty() && report.fingerprint_changed {
        report.memory_dropped = true;
    } else {
        restore_memory(snapshot, state)?;
    }
    Ok(report)
}

impl<M: Machine> Session<M> {
    /// The session's state by names.
    pub fn snapshot(&self) -> Snapshot {
        parts(
            M::tables(),
            self.raw_state(),
            self.available().words().as_ref(),
            &[],
        )
        .into_snapshot()
    }

    /// A session from a snapshot: exact for the same template; for a changed template,
    /// mapped by name, with what could not be mapped in the report (a step that no
    /// longer exists falls back to the default step with index 0).
    pub fn restore(snapshot: &Snapshot) -> Result<(Self, RestoreReport), RestoreError> {
        let mut state = crate::session::fresh_state::<M>();
        let mut available = <<M::Tool as ToolEnum>::Words as Words>::ZERO;
        let report = restore_into(M::tables(), snapshot, &mut state, available.as_mut(), None)?;
        Ok((Session::from_parts(state, available), report))
    }
}

/// The AgentDock client-facing shape of a session (its `OrchestrationState` as the
/// client sees it). `recentlyUsedTools` follows AgentDock: newest first, without
/// duplicates, at most 10.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct AgentDockView {
    /// The session id.
    pub session_id: String,
    /// Recently used tools, newest first, de-duplicated, at most 10.
    pub recently_used_tools: Vec<String>,
    /// The active step's name.
    pub active_step: Option<String>,
    /// The sequence index.
    pub sequence_index: u32,
    /// Cumulative token usage.
    pub cumulative_token_usage: AgentDockUsage,
}

/// Token usage in AgentDock's field names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct AgentDockUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Total tokens.
    pub total_tokens: u64,
}

impl<M: Machine> Session<M> {
    /// The AgentDock client-facing view of this session.
    pub fn agentdock_view(&self, session_id: &str) -> AgentDockView {
        let mut recent: Vec<String> = Vec::new();
        for entry in self.history().collect::<Vec<_>>().into_iter().rev() {
            if let crate::HistoryEntry::Tool(t) = entry {
                if !recent.iter().any(|r| r == t.name()) {
                    recent.push(t.name().to_owned());
                }
            }
            if recent.len() == 10 {
                break;
            }
        }
        let u = self.usage();
        AgentDockView {
            session_id: session_id.to_owned(),
            recently_used_tools: recent,
            active_step: self.step().map(|s| s.name().to_owned()),
            sequence_index: self.sequence_index() as u32,
            cumulative_token_usage: AgentDockUsage {
                prompt_tokens: u.prompt,
                completion_tokens: u.completion,
                total_tokens: u.total(),
            },
        }
    }
}

// ---------------------------------------------------------------------------------
// Binary encoding.

const MAGIC: &[u8; 4] = b"orch";

/// The binary encoding's revision: 1 had no checksum; 2 ends with the CRC-32 (IEEE) of
/// every byte before it, little-endian, so corruption is an error instead of a
/// different session. Revision 1 is still read. In revision 2 an optional section may
/// follow the matched conditions: tag 1, a held verdict (32 bytes of call digest, then
/// 1 for approved, 2 for rejected, 3 for pending); snapshots written without it read as holding none.
const ENCODING: u64 = 2;

/// The most bytes of text a binary snapshot may decode to. Names are written once and
/// referenced by index, so a small input can name a long string many times; past this
/// bound decoding stops with an error instead of copying it (the largest real session —
/// 16,384 tools with long names and a full history — stays far below it).
pub const MAX_DECODED_BYTES: usize = 64 << 20;

fn put_varint(out: &mut Vec<u8>, mut x: u64) {
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

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Bytes of text decoded so far.
    decoded: usize,
}

impl<'a> Reader<'a> {
    /// Accounts for `n` more bytes of decoded text.
    fn decode(&mut self, n: usize) -> Result<(), RestoreError> {
        self.decoded = self.decoded.saturating_add(n);
        if self.decoded > MAX_DECODED_BYTES {
            return Err(self.bad(&format!(
                "the snapshot decodes to more than {MAX_DECODED_BYTES} bytes of names"
            )));
        }
        Ok(())
    }

    fn bad(&self, what: &str) -> RestoreError {
        RestoreError::Malformed(format!("{what} at byte {}", self.at))
    }

    fn byte(&mut self, what: &str) -> Result<u8, RestoreError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| self.bad(&format!("truncated: expected {what}")))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self, what: &str) -> Result<u64, RestoreError> {
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
    fn count(&mut self, what: &str) -> Result<usize, RestoreError> {
        let n = self.varint(what)?;
        let remaining = (self.bytes.len() - self.at) as u64;
        if n > remaining {
            return Err(self.bad(&format!(
                "{what} says {n} items but only {remaining} bytes remain"
            )));
        }
        Ok(n as usize)
    }

    fn str(&mut self, what: &str) -> Result<&'a str, RestoreError> {
        let n = self.count(what)?;
        self.decode(n)?;
        let s = &self.bytes[self.at..self.at + n];
        let s = std::str::from_utf8(s).map_err(|_| self.bad(&format!("{what} is not UTF-8")))?;
        self.at += n;
        Ok(s)
    }

    fn u64_le(&mut self, what: &str) -> Result<u64, RestoreError> {
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
        let memory = self
            .memory
            .iter()
            .map(|hex| {
                let mut key = [0u8; 16];
                for (k, pair) in key.iter_mut().zip(hex.as_bytes().chunks(2)) {
                    let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    *k = pair.first().map_or(0, |&c| digit(c)) * 16
                        + pair.get(1).map_or(0, |&c| digit(c));
                }
                key
            })
            .collect();
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
        // Optional sections, in order: the verdict (1 or 2), the remembered values (3).
        let approval = match r.bytes.get(r.at) {
            Some(1 | 2) => Some(read_approval(&mut r)?),
            _ => None,
        };
        let memory = match r.bytes.get(r.at) {
            Some(3) => read_memory(&mut r)?,
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
            host,
        })
    }
}

/// A snapshot's bytes checked before they are read: their size, the magic bytes, the
/// version, and (from revision 2 on) the checksum over the rest. The reader is past the
/// version; the bytes returned are the content, without the checksum.
fn checked(bytes: &[u8]) -> Result<(Reader<'_>, &[u8]), RestoreError> {
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
fn read_memory(r: &mut Reader<'_>) -> Result<Vec<String>, RestoreError> {
    r.byte("the memory section")?;
    let n = r.count("the remembered values")?;
    let mut memory = Vec::with_capacity(n.min(crate::args::MEMORY_VALUES));
    for _ in 0..n {
        let end = r.at + 16;
        let key = r
            .bytes
            .get(r.at..end)
            .ok_or_else(|| r.bad("truncated: expected a remembered value"))?;
        memory.push(key.iter().map(|b| format!("{b:02x}")).collect());
        r.at = end;
    }
    Ok(memory)
}

/// The verdict section of a snapshot: the held verdict's call digest and verdict, and
/// (section 2) the question it answers.
fn read_approval(r: &mut Reader<'_>) -> Result<Approval, RestoreError> {
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

#[cfg(feature = "serde")]
impl Snapshot {
    /// The JSON encoding.
    pub fn to_json(&self) -> String {
        // Serializing plain strings and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decodes [`Snapshot::to_json`], refusing input over [`MAX_SNAPSHOT_BYTES`] before
    /// parsing it.
    pub fn from_json(json: &str) -> Result<Snapshot, RestoreError> {
        if json.len() > MAX_SNAPSHOT_BYTES {
            return Err(RestoreError::TooLarge(json.len()));
        }
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| RestoreError::Malformed(e.to_string()))?;
        match v.get("version") {
            None | Some(serde_json::Value::Null) => {
                return Err(RestoreError::Malformed("missing `version`".into()))
            }
            Some(ver) => match ver.as_u64() {
                Some(ver) if ver == u64::from(FORMAT_VERSION) => {}
                Some(ver) => {
                    return Err(RestoreError::UnsupportedVersion(
                        ver.min(u64::from(u32::MAX)) as u32,
                    ))
                }
                None => {
                    return Err(RestoreError::Malformed(format!(
                        "`version` must be a non-negative integer, found {ver}"
                    )))
                }
            },
        }
        serde_json::from_value(v).map_err(|e| RestoreError::Malformed(e.to_string()))
    }
}
