//! Snapshots (semantics §9): a session's whole state by *names*, with a format version and
//! the fingerprint of the compiled template, so it can be stored anywhere and restored
//! into the same template — or into a changed one, mapping by name and reporting what
//! could not be mapped.
//!
//! Two encodings: JSON (feature `serde`) and a compact binary form
//! ([`Snapshot::to_bytes`], [`Snapshot::from_bytes`]) whose decoder checks every length
//! against the bytes that remain, so hostile input can never make it allocate more than
//! the input's own size.

use crate::approval::Approval;
use crate::bits::{ToolEnum, Words};
use crate::machine::{Machine, StepEnum};
use crate::session::Session;
use crate::state::{State, Usage, FOREIGN, NO_STEP};
use crate::tables::Tables;
use std::collections::{HashMap, HashSet};
use std::fmt;

mod binary;
mod budgets;
mod numbers;

pub use budgets::BudgetSnapshot;
pub use numbers::NumberSnapshot;

/// The most bytes of text a binary snapshot may decode to. Names are written once and
/// referenced by index, so a small input can name a long string many times; past this
/// bound decoding stops with an error instead of copying it (the largest real session —
/// 16,384 tools with long names and a full history — stays far below it).
pub const MAX_DECODED_BYTES: usize = 64 << 20;

/// The snapshot format version this runtime writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Up to this many tools, a restore finds a tool by scanning the template's names.
const FEW_TOOLS: usize = 16;

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
    /// The values seen in untrusted results (a template that declares untrusted tools),
    /// oldest first, as [`Snapshot::memory`].
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub untrusted: Vec<String>,
    /// How many remembered values the session forgot to make room for newer ones.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "is_zero"))]
    pub forgotten: u32,
    /// The session's clock (semantics §17): the newest time, in milliseconds since the
    /// Unix epoch, a host gave a call. Absent when 0.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "is_zero_u64"))]
    pub clock: u64,
    /// The budgets that hold something (semantics §17), by name.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub budgets: Vec<BudgetSnapshot>,
    /// The numbers results held that `range` bounds read (semantics §16), by tool and
    /// path.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub numbers: Vec<NumberSnapshot>,
    /// What the host keeps with the session, opaque to the runtime (orch-agent's run host
    /// keeps its ledger of calls here, so a call delivered again after a restore is not
    /// run twice). Empty when the host keeps nothing; hex digits in the JSON form.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty", with = "hex_bytes")
    )]
    pub host: Vec<u8>,
}

/// Is `n` zero (a count the JSON form leaves out)?
#[cfg(feature = "serde")]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Is `n` zero (a time the JSON form leaves out)?
#[cfg(feature = "serde")]
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// The 16 bytes of a remembered value's key.
fn key_bytes([hi, lo]: [u64; 2]) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&hi.to_be_bytes());
    key[8..].copy_from_slice(&lo.to_be_bytes());
    key
}

/// A remembered value's key as 32 hex digits.
pub(crate) fn hex_key(key: &[u8; 16]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
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
    /// Budgets the template no longer has: what they held was dropped.
    pub missing_budgets: Vec<String>,
    /// Numbers the snapshot held (`"tool /path"`) that the template no longer reads.
    pub missing_numbers: Vec<String>,
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
            || !self.missing_budgets.is_empty()
            || !self.missing_numbers.is_empty()
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
    let (main, untrusted) = t.rules.rings(state.memory.as_ref());
    let (clock, budgets) = budgets::budget_parts(t, state.memory.as_ref());
    let numbers = numbers::number_parts(t, state.memory.as_ref());
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
        memory: crate::args::memory::oldest_first(main)
            .into_iter()
            .map(key_bytes)
            .collect(),
        untrusted: crate::args::memory::oldest_first(untrusted)
            .into_iter()
            .map(key_bytes)
            .collect(),
        forgotten: crate::args::memory::forgotten(main),
        clock,
        budgets,
        numbers,
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
    /// The values seen in untrusted results, 16 bytes each.
    untrusted: Vec<[u8; 16]>,
    /// How many remembered values were forgotten.
    forgotten: u32,
    /// The session's clock.
    clock: u64,
    /// The budgets that hold something.
    budgets: Vec<BudgetSnapshot>,
    /// The numbers results held that bounds read.
    numbers: Vec<NumberSnapshot>,
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
            memory: self.memory.iter().map(hex_key).collect(),
            untrusted: self.untrusted.iter().map(hex_key).collect(),
            forgotten: self.forgotten,
            clock: self.clock,
            budgets: self.budgets,
            numbers: self.numbers,
            host: self.host.to_vec(),
        }
    }
}

/// Puts `snapshot`'s remembered values into `state`'s rings (oldest first); `Err` for a
/// key that is not 32 hex digits.
fn restore_memory<S, U, F, H, D, C, R: AsRef<[u64]> + AsMut<[u64]>>(
    t: &Tables<'_, S>,
    snapshot: &Snapshot,
    state: &mut State<U, F, H, D, C, R>,
) -> Result<(), RestoreError>
where
    S: AsRef<str>,
{
    let keys = |list: &[String]| -> Result<Vec<[u64; 2]>, RestoreError> {
        let mut keys = Vec::with_capacity(list.len());
        for hex in list {
            let bad = || {
                RestoreError::Malformed(format!("a remembered value `{hex}` is not 32 hex digits"))
            };
            if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            let hi = u64::from_str_radix(&hex[..16], 16).map_err(|_| bad())?;
            let lo = u64::from_str_radix(&hex[16..], 16).map_err(|_| bad())?;
            keys.push([hi, lo]);
        }
        Ok(keys)
    };
    let (main_keys, untrusted_keys) = (keys(&snapshot.memory)?, keys(&snapshot.untrusted)?);
    let (main, untrusted) = t.rules.rings_mut(state.memory.as_mut());
    crate::args::memory::Memory(main).load(&main_keys, snapshot.forgotten);
    crate::args::memory::Memory(untrusted).load(&untrusted_keys, 0);
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
    // Names are looked up in a hash map built once, so restoring costs time linear in
    // the snapshot, whatever it holds; a template of a few tools is scanned instead (a
    // bounded number of comparisons, cheaper than building and hashing).
    let tools = t.tools;
    let by_name: Option<HashMap<&str, usize>> = (tools.len() > FEW_TOOLS).then(|| {
        tools
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_ref(), i))
            .collect()
    });
    let tool_index = |name: &str| match &by_name {
        Some(map) => map.get(name).copied(),
        None => tools.iter().position(|n| n.as_ref() == name),
    };
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
    // A verdict is bound to the state it was given in: kept only in the same template.
    if snapshot.approval.is_some() && report.fingerprint_changed {
        report.approval_dropped = true;
    } else {
        state.approval = snapshot.approval;
    }
    // Remembered values are keyed by the template's sources: kept only in the same one.
    let remembers = !snapshot.memory.is_empty() || !snapshot.untrusted.is_empty();
    if remembers && report.fingerprint_changed {
        report.memory_dropped = true;
    } else {
        restore_memory(t, snapshot, state)?;
    }
    // Budgets are kept by name, across builds of the template.
    budgets::restore_budgets(
        t,
        snapshot.clock,
        &snapshot.budgets,
        state.memory.as_mut(),
        &mut report,
    )?;
    // Numbers too, by tool and path.
    numbers::restore_numbers(t, &snapshot.numbers, state.memory.as_mut(), &mut report)?;
    // The derived condition state is a function of what was just restored (budget
    // conditions read the budgets).
    state.rebuild(t);
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
