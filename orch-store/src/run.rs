//! The run protocol's gateway half, written once: what each look at a run's [`Record`]
//! decides, for `orch mcp` and `orch policy` alike ([protocol.md], semantics §13.1, §15).
//!
//! A call goes *admit* (judged against the stored state, its lease written in the same
//! compare-and-set: [`admit`]) → *forward* (the host's) → *settle* (the host read the
//! result, or knows it is lost: [`settle`]). Each function here is one look at a record:
//! it changes the record in place and says whether it must be written, so a host runs it
//! inside its compare-and-set ([`crate::lease::modify`]) and only converts the outcome
//! into its own wire format.
//!
//! **Lost results.** A lease that lapses without a result, or a call whose host knows
//! the result will not come (the upstream timed out, went away, the call was
//! cancelled), has an *unknown* outcome. What that means is the template's, per tool
//! ([`LostRule`]): `retry` drops the lease (not run), `ran` records the tool, `hold`
//! keeps the lease *held* — every call of the run is refused as
//! [`RefusalKind::OutcomeUnknown`] until the call's own late result arrives or an
//! operator says whether it ran ([`resolve`]).
//!
//! [protocol.md]: https://github.com/orch-rs/orch/blob/main/docs/protocol.md

use crate::lease::Record;
use orch_agent::protocol::Question;
use orch_agent::{Gate, Gated, Policy, Refusal, RefusalKind};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, LostRule};
use std::fmt;
use std::time::Duration;

/// Why the run protocol could not decide: the store's failure, or a record it cannot
/// read. A host converts it to its wire (`orch mcp` a JSON-RPC error, `orch policy` a
/// fail-closed `UNKNOWN`); the decisions themselves are [`Admission`] and [`Settled`].
#[derive(Debug)]
pub enum RunError {
    /// The store failed.
    Store(crate::StoreError),
    /// Every compare-and-set attempt conflicted with concurrent updates of the run.
    Conflict {
        /// How many attempts were made.
        attempts: u32,
    },
    /// The stored record, or the session snapshot in it, cannot be read: what is wrong.
    /// It is left as it is.
    Corrupt(String),
    /// The run's record is gone (its session ended: `DELETE`, TTL) and is not brought
    /// back.
    Ended,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Store(e) => write!(f, "the session store failed: {e}"),
            RunError::Conflict { attempts } => write!(
                f,
                "{attempts} attempts conflicted with concurrent updates of the run"
            ),
            RunError::Corrupt(why) => write!(
                f,
                "its stored record is corrupt ({why}); it was left as it is"
            ),
            RunError::Ended => write!(f, "the run has ended"),
        }
    }
}

impl std::error::Error for RunError {}

/// The session a run's record stores (`snapshot`; a fresh one without), with `policy`'s
/// host tools made available.
pub fn restore<'m>(
    machine: &'m DynMachine,
    policy: &Policy,
    snapshot: Option<&[u8]>,
) -> Result<DynSession<'m>, RunError> {
    let mut session = match snapshot {
        None => DynSession::new(machine),
        Some(bytes) => orch_runtime::Snapshot::from_bytes(bytes)
            .and_then(|snapshot| DynSession::restore(machine, &snapshot))
            .map(|(session, _report)| session)
            .map_err(|e| RunError::Corrupt(format!("its session cannot be restored: {e}")))?,
    };
    policy.prepare(&mut session);
    Ok(session)
}

/// [`crate::lease::modify`] with the run protocol's errors: `change` sees the record
/// under `key` (`None`: nothing stored) and decides, and may run more than once;
/// `known` is a version and record this process believes current, tried first without a
/// read. Returns the value and, when it wrote, the new version and record.
pub async fn modify<S, R>(
    store: &S,
    key: &str,
    known: Option<(u64, Record)>,
    change: impl FnMut(Option<Record>) -> Result<crate::lease::Change<R>, RunError> + Send,
) -> Result<(R, Option<(u64, Record)>), RunError>
where
    S: crate::SessionStore + ?Sized,
{
    crate::lease::modify(store, key, known, RunError::Corrupt, change)
        .await
        .map_err(|e| match e {
            crate::ModifyError::Store(crate::StoreError::Conflict { attempts, .. }) => {
                RunError::Conflict { attempts }
            }
            crate::ModifyError::Store(e) => RunError::Store(e),
            crate::ModifyError::Change(e) => e,
        })
}

/// What one look at a run decided for a call ([`admit`]).
#[derive(Debug)]
pub enum Admission<'m> {
    /// Admitted: the lease with this token is in the record; the session as admitted
    /// (what the record's snapshot holds), so that recording the result need not restore
    /// it again.
    Admitted {
        /// The lease's token.
        token: u64,
        /// The session as admitted.
        session: DynSession<'m>,
    },
    /// Not admitted: the workflow refuses it, or the run is held
    /// ([`RefusalKind::OutcomeUnknown`]).
    Refused {
        /// Why, in the words the model is sent.
        refusal: Refusal,
        /// The call is gated and the run now holds this question about it.
        question: Option<Question>,
        /// The session the refusal was judged in.
        session: DynSession<'m>,
    },
    /// Another call of the run is in flight: its tool. Nothing was judged.
    Busy(String),
}

/// How a forwarded call ended, as far as the host knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete, successful result came (`protocol::classify`): the tool ran.
    Ran,
    /// A result came that says the tool did not run (an error, `input_required`, a
    /// task, a malformed result), or the call never left the host.
    NotRun,
    /// No result will come (timeout, the upstream went away, the call was cancelled
    /// after it was sent, the host's task died): the outcome is unknown, and the tool's
    /// [`LostRule`] decides.
    Lost,
}

/// What settling a call did ([`settle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// The tool was recorded (it ran, or its lost result counts as run).
    Recorded {
        /// Did the tools the run offers change? (Only looked at when the host asked:
        /// `false` otherwise.)
        changed: bool,
    },
    /// The lease was dropped, nothing recorded (it did not run, or its lost result may
    /// be retried).
    Released,
    /// The result was lost and the tool must not run twice: the run is held.
    Held,
    /// The call's lease is gone: it lapsed (and its lost result was settled by the
    /// template's rule, or another call was admitted since), or the call was settled
    /// already. Nothing changed.
    Lapsed,
    /// No call of the run is in flight, and the host gave no token to say one was.
    NoCall,
}

/// A look's decision: the value, and whether the record changed (write it).
pub type Looked<T> = (T, bool);

/// One look at `record` for the call `call` of `tool` (its identity and arguments) under `gate`:
/// a call in flight makes it [`Admission::Busy`]; a lapsed lease is settled first by its
/// tool's [`LostRule`]; a held run refuses; otherwise the workflow judges it
/// ([`Policy::admit_gated`]) and an admitted call's lease (lasting `lease_for`) is
/// written with the same record. `restore` makes the session from the record's snapshot
/// (`None`: none stored); it is called once.
#[allow(clippy::too_many_arguments)]
pub fn admit<'m, E>(
    record: &mut Record,
    machine: &'m DynMachine,
    policy: &Policy,
    restore: impl FnOnce(Option<&[u8]>) -> Result<DynSession<'m>, E>,
    tool: &str,
    call: &Call<'_>,
    gate: Gate<'_>,
    lease_for: Duration,
) -> Result<Looked<Admission<'m>>, E> {
    if let Some(lease) = record.busy() {
        return Ok((Admission::Busy(lease.tool.clone()), false));
    }
    let mut session = restore(record.snapshot.as_deref())?;
    let mut write = false;
    if let Some(lapsed) = record.lapsed() {
        let rule = machine.lost_rule(&lapsed.tool);
        apply(record, Some(&mut session), policy, rule, None);
        write = true;
    }
    if let Some(held) = record.held() {
        let refusal = held_refusal(tool, &held.tool);
        let admission = Admission::Refused {
            refusal,
            question: None,
            session,
        };
        return Ok((admission, write));
    }
    match policy.admit_gated(&mut session, tool, call, gate) {
        Gated::Refused {
            refusal,
            question,
            changed,
        } => {
            if changed {
                // A question just asked, or a rejection just answered: the run holds it.
                record.snapshot = Some(session.snapshot().to_bytes());
            }
            let admission = Admission::Refused {
                refusal,
                question,
                session,
            };
            Ok((admission, write || changed))
        }
        Gated::Admitted { changed } => {
            if changed {
                // The approval this call passed on is consumed with the lease's write.
                record.snapshot = Some(session.snapshot().to_bytes());
            }
            let token = record.lease_to(tool, lease_for);
            Ok((Admission::Admitted { token, session }, true))
        }
    }
}

/// One look at `record` to settle the call whose lease has `token` (`None`: the host
/// cannot say which call — `orch policy` without the request phase's token) with what
/// the host knows of its `outcome`. A result for a run held on this very call resolves
/// the hold (the result came after all). `restore` makes the session from the record's
/// snapshot when the tool is recorded (a host that kept the session as admitted hands it
/// back when the snapshot is the one it was admitted with, and saves a restore).
/// `track_offered`: say whether recording changed the tools the run offers. `result`:
/// what the call returned, when it ran and a rule on arguments reads its tool's results
/// (semantics §16; [`DynMachine::reads_results_of`]).
#[allow(clippy::too_many_arguments)]
pub fn settle<'m, E>(
    record: &mut Record,
    machine: &'m DynMachine,
    policy: &Policy,
    restore: impl FnOnce(Option<&[u8]>) -> Result<DynSession<'m>, E>,
    token: Option<u64>,
    outcome: Outcome,
    result: Option<&str>,
    track_offered: bool,
) -> Result<Looked<Settled>, E> {
    let gone = if token.is_some() {
        Settled::Lapsed
    } else {
        Settled::NoCall
    };
    let Some(lease) = &record.lease else {
        return Ok((gone, false));
    };
    if token.is_some_and(|t| t != lease.token) {
        return Ok((Settled::Lapsed, false));
    }
    if lease.held && outcome == Outcome::Lost {
        // Held already; a second loss of the same call changes nothing.
        return Ok((Settled::Held, false));
    }
    if token.is_none() && lease.held {
        // Only the call's own result may resolve a hold.
        return Ok((Settled::NoCall, false));
    }
    let tool = lease.tool.clone();
    let rule = match outcome {
        Outcome::Ran => LostRule::Ran,
        Outcome::NotRun => LostRule::Retry,
        Outcome::Lost => machine.lost_rule(&tool),
    };
    let mut session = match rule {
        LostRule::Ran => Some(restore(record.snapshot.as_deref())?),
        LostRule::Retry | LostRule::Hold => None,
    };
    // Comparing the offered tools costs two lists: only for a host that tells its
    // clients when they change.
    let before = session
        .as_ref()
        .filter(|_| track_offered)
        .map(|s| policy.offered(s));
    apply(record, session.as_mut(), policy, rule, result);
    let settled = match rule {
        LostRule::Hold => Settled::Held,
        LostRule::Retry => Settled::Released,
        LostRule::Ran => Settled::Recorded {
            changed: session
                .zip(before)
                .is_some_and(|(s, b)| policy.offered(&s) != b),
        },
    };
    Ok((settled, true))
}

/// What an operator says of a held run's call ([`resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The call ran: record it.
    Ran,
    /// The call did not run: drop it.
    NotRun,
}

/// An operator's answer for a held run: the held call `ran` or not. `Ok(Some(tool))`:
/// the tool of the call resolved; `Ok(None)`: the run is not held (nothing changed).
pub fn resolve<'m, E>(
    record: &mut Record,
    policy: &Policy,
    restore: impl FnOnce(Option<&[u8]>) -> Result<DynSession<'m>, E>,
    resolution: Resolution,
) -> Result<Option<String>, E> {
    let Some(held) = record.held() else {
        return Ok(None);
    };
    let tool = held.tool.clone();
    let (rule, mut session) = match resolution {
        Resolution::Ran => (LostRule::Ran, Some(restore(record.snapshot.as_deref())?)),
        Resolution::NotRun => (LostRule::Retry, None),
    };
    apply(record, session.as_mut(), policy, rule, None);
    Ok(Some(tool))
}

/// Applies `rule` to the lease of `record`: `Retry` drops it, `Ran` records its tool in
/// `session` (the record's session: required for `Ran`) and drops it, `Hold` marks it
/// held. The one place a call's lease is settled.
fn apply(
    record: &mut Record,
    session: Option<&mut DynSession<'_>>,
    policy: &Policy,
    rule: LostRule,
    result: Option<&str>,
) {
    match rule {
        LostRule::Retry => record.lease = None,
        LostRule::Ran => {
            if let (Some(lease), Some(session)) = (record.lease.take(), session) {
                match result {
                    Some(result) => policy.record_result(session, &lease.tool, result),
                    None => policy.record(session, &lease.tool),
                };
                record.snapshot = Some(session.snapshot().to_bytes());
            }
        }
        LostRule::Hold => {
            if let Some(lease) = record.lease.as_mut() {
                lease.held = true;
            }
        }
    }
}

/// The refusal of a call of `tool` while the run is held on a lost call of `held`.
pub fn held_refusal(tool: &str, held: &str) -> Refusal {
    Refusal {
        tool: tool.to_owned(),
        kind: RefusalKind::OutcomeUnknown,
        reason: format!(
            "error: `{tool}` was not run: an earlier call of `{held}` in this workflow run was sent and its result never came back, so whether it ran is unknown; `{held}` must not run twice, so the run is held until an operator says whether it ran."
        ),
        rule: None,
    }
}

/// [`resolve`] for the run stored under `key` in `store` (compiled from `machine`'s
/// template), with compare-and-set: `Ok(Some(tool))`, the held call's tool;
/// `Ok(None)`, the run is not held (or nothing is stored under `key`).
pub async fn resolve_key<S: crate::SessionStore + ?Sized>(
    store: &S,
    key: &str,
    machine: &DynMachine,
    resolution: Resolution,
) -> Result<Option<String>, RunError> {
    use crate::lease::Change;
    let policy = Policy::new(machine.tools().to_vec());
    let (tool, _) = modify(store, key, None, |record| {
        let Some(mut record) = record else {
            return Ok(Change::Keep(None));
        };
        let restore = |snapshot: Option<&[u8]>| restore(machine, &policy, snapshot);
        Ok(match resolve(&mut record, &policy, restore, resolution)? {
            Some(tool) => Change::Write(record, Some(tool)),
            None => Change::Keep(None),
        })
    })
    .await?;
    Ok(tool)
}
