//! The run protocol's gateway half, written once: what each look at a run's [`Record`]
//! (kept in an [`orch_store::SessionStore`]) decides, for `orch mcp` and `orch policy`
//! alike ([protocol.md], semantics §13.1, §15).
//!
//! A call goes *admit* (judged against the stored state, its lease written in the same
//! compare-and-set: [`admit`]) → *forward* (the host's) → *settle* (the host read the
//! result, or knows it is lost: [`settle`]). Each function here is one look at a record:
//! it changes the record in place and says whether it must be written, so a host runs it
//! inside its compare-and-set ([`orch_store::lease::modify`], [`modify`]) and only converts the outcome
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

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod approvals;
pub mod runs;

use orch_agent::protocol::Question;
use orch_agent::{Gate, Gated, Policy, Refusal, RefusalKind};
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_runtime::{Call, LostRule};
use orch_store::lease::{Delivery, Record};
use std::fmt;
use std::time::Duration;

/// Why the run protocol could not decide: the store's failure, or a record it cannot
/// read. A host converts it to its wire (`orch mcp` a JSON-RPC error, `orch policy` a
/// fail-closed `UNKNOWN`); the decisions themselves are [`Admission`] and [`Settled`].
#[derive(Debug)]
pub enum RunError {
    /// The store failed.
    Store(orch_store::StoreError),
    /// Every compare-and-set attempt conflicted with concurrent updates of the run.
    Conflict {
        /// How many attempts were made.
        attempts: u32,
    },
    /// The stored record, or the session snapshot in it, cannot be read. It is left as
    /// it is.
    Corrupt {
        /// What is wrong, in words.
        why: String,
        /// The decoding error ([`orch_store::lease::RecordError`] or
        /// [`orch_runtime::RestoreError`]).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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
            RunError::Corrupt { why, .. } => write!(
                f,
                "its stored record is corrupt ({why}); it was left as it is"
            ),
            RunError::Ended => write!(f, "the run has ended"),
        }
    }
}

impl RunError {
    /// The error of a record or snapshot that cannot be read: `why` in words, `source`
    /// the decoding error.
    pub fn corrupt(why: String, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        RunError::Corrupt {
            why,
            source: Box::new(source),
        }
    }
}

/// The message says everything (the cause's words included); `source()` gives the
/// typed cause to a program that walks the chain.
impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Store(e) => Some(e),
            RunError::Corrupt { source, .. } => Some(source.as_ref()),
            RunError::Conflict { .. } | RunError::Ended => None,
        }
    }
}

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
            .map_err(|e| RunError::corrupt(format!("its session cannot be restored: {e}"), e))?,
    };
    policy.prepare(&mut session);
    Ok(session)
}

/// [`orch_store::lease::modify`] with the run protocol's errors: `change` sees the record
/// under `key` (`None`: nothing stored) and decides, and may run more than once;
/// `known` is a version and record this process believes current, tried first without a
/// read. Returns the value and, when it wrote, the new version and record.
pub async fn modify<S, R>(
    store: &S,
    key: &str,
    known: Option<(u64, Record)>,
    change: impl FnMut(Option<Record>) -> Result<orch_store::lease::Change<R>, RunError> + Send,
) -> Result<(R, Option<(u64, Record)>), RunError>
where
    S: orch_store::SessionStore + ?Sized,
{
    orch_store::lease::modify(
        store,
        key,
        known,
        |e| RunError::corrupt(e.to_string(), e),
        change,
    )
    .await
    .map_err(|e| match e {
        orch_store::ModifyError::Store(orch_store::StoreError::Conflict { attempts, .. }) => {
            RunError::Conflict { attempts }
        }
        orch_store::ModifyError::Store(e) => RunError::Store(e),
        orch_store::ModifyError::Change(e) => e,
    })
}

/// What one look at a run decided for a call ([`admit`]).
#[derive(Debug)]
// Made once per call and moved once to its caller: boxing the refusal's question would
// cost an allocation on the path that asks a human, and save nothing measurable.
#[allow(clippy::large_enum_variant)]
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
pub enum Ended {
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
///
/// `delivery`: the id the call's caller sent it under (as a refusal shows it) and the
/// delivery it names ([`Delivery::new`] of the id made unique by the caller's session),
/// when the host has such an id (`orch mcp`: the JSON-RPC request id). A delivery the
/// record remembers is not judged again ([`orch_agent::run_host::delivered_again`]'s words); an admitted one rides
/// on the lease and is remembered as ran when its tool is recorded; one refused for
/// good (not asked, not busy, not held, not a stale answer) is remembered as refused.
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
    delivery: Option<(&str, &Delivery)>,
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
    if let Some(refusal) = delivery.and_then(|d| delivered_again(record, policy, &session, tool, d))
    {
        let admission = Admission::Refused {
            refusal,
            question: None,
            session,
        };
        return Ok((admission, write));
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
            let mut remembered = false;
            if let (Some((_, delivery)), None, Some(code)) =
                (delivery, &question, code_of(refusal.kind))
            {
                record.delivered.remember(*delivery, code);
                remembered = true;
            }
            let admission = Admission::Refused {
                refusal,
                question,
                session,
            };
            Ok((admission, write || changed || remembered))
        }
        Gated::Admitted { changed } => {
            if changed {
                // The approval this call passed on is consumed with the lease's write.
                record.snapshot = Some(session.snapshot().to_bytes());
            }
            let token = record.lease_to(tool, lease_for);
            if let Some(lease) = record.lease.as_mut() {
                lease.delivery = delivery.map(|(_, d)| *d);
            }
            Ok((Admission::Admitted { token, session }, true))
        }
    }
}

/// The refusal of `delivery` (shown as `shown`) if `record` remembers what it came to:
/// it is not judged again.
fn delivered_again(
    record: &Record,
    policy: &Policy,
    session: &DynSession<'_>,
    tool: &str,
    (shown, delivery): (&str, &Delivery),
) -> Option<Refusal> {
    // Only the same call under the same id is the same delivery: another call under an
    // id used before (against JSON-RPC's rule, by a careless client) is judged afresh.
    let (seen, outcome) = record
        .delivered
        .find(&delivery.key)
        .filter(|(seen, _)| seen.call == delivery.call)?;
    debug_assert_eq!(seen, *delivery);
    let refused_as = match outcome {
        RAN => None,
        // A code this version does not know (written by a newer one) is still a refusal.
        code => Some(kind_of(code).unwrap_or(RefusalKind::NotAllowed)),
    };
    Some(orch_agent::run_host::delivered_again(
        policy, session, tool, shown, refused_as,
    ))
}

/// What a remembered delivery came to when it ran ([`orch_store::lease::Deliveries`]).
const RAN: u8 = 0;

/// The refusal kinds a delivery is remembered as refused with, by their stored codes
/// (`1 + ` the place here): the codes are stored in records, so this list only grows.
const REMEMBERED: [RefusalKind; 6] = [
    RefusalKind::NotAllowed,
    RefusalKind::OutOfSequence,
    RefusalKind::BrokenRule,
    RefusalKind::UnknownTool,
    RefusalKind::Unavailable,
    RefusalKind::Rejected,
];

/// The stored code of a refusal of this kind, if it is what its delivery came to for
/// good (remembered, so the same delivery is refused so again): not one that waits on
/// something — a human's answer, a busy or held run, an answer that applied to nothing.
fn code_of(kind: RefusalKind) -> Option<u8> {
    let at = REMEMBERED.iter().position(|k| *k == kind)?;
    // REMEMBERED has 6 kinds.
    Some(at as u8 + 1)
}

/// The refusal kind a stored code names.
fn kind_of(code: u8) -> Option<RefusalKind> {
    REMEMBERED.get(usize::from(code).checked_sub(1)?).copied()
}

/// One look at `record` to settle the call whose lease has `token` (`None`: the host
/// cannot say which call — `orch policy` without the request phase's token) with what
/// the host knows of its `outcome`. A result for a run held on this very call resolves
/// the hold (the result came after all). `restore` makes the session from the record's
/// snapshot when the tool is recorded (a host that kept the session as admitted hands it
/// back when the snapshot is the one it was admitted with, and saves a restore).
/// `track_offered`: say whether recording changed the tools the run offers. `result`:
/// what the call returned, when it ran and a rule on arguments reads its tool's results
/// (semantics §16; [`DynMachine::reads_results_of`]). With the outcome, the session the
/// call was recorded into when it was (its snapshot is then the record's new one): a
/// host that keeps it for the run's next call attaches it instead of restoring the run
/// again, while the stored snapshot is still that one.
#[allow(clippy::too_many_arguments)]
pub fn settle<'m, E>(
    record: &mut Record,
    machine: &'m DynMachine,
    policy: &Policy,
    restore: impl FnOnce(Option<&[u8]>) -> Result<DynSession<'m>, E>,
    token: Option<u64>,
    outcome: Ended,
    result: Option<&str>,
    track_offered: bool,
) -> Result<(Looked<Settled>, Option<DynSession<'m>>), E> {
    let gone = if token.is_some() {
        Settled::Lapsed
    } else {
        Settled::NoCall
    };
    let Some(lease) = &record.lease else {
        return Ok(((gone, false), None));
    };
    if token.is_some_and(|t| t != lease.token) {
        return Ok(((Settled::Lapsed, false), None));
    }
    if lease.held && outcome == Ended::Lost {
        // Held already; a second loss of the same call changes nothing.
        return Ok(((Settled::Held, false), None));
    }
    if token.is_none() && lease.held {
        // Only the call's own result may resolve a hold.
        return Ok(((Settled::NoCall, false), None));
    }
    let tool = lease.tool.clone();
    let rule = match outcome {
        Ended::Ran => LostRule::Ran,
        Ended::NotRun => LostRule::Retry,
        Ended::Lost => machine.lost_rule(&tool),
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
                .as_ref()
                .zip(before)
                .is_some_and(|(s, b)| policy.offered(s) != b),
        },
    };
    Ok(((settled, true), session))
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
                if let Some(delivery) = lease.delivery {
                    // The delivery ran: the same one again is never run a second time.
                    record.delivered.remember(delivery, RAN);
                }
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
pub async fn resolve_key<S: orch_store::SessionStore + ?Sized>(
    store: &S,
    key: &str,
    machine: &DynMachine,
    resolution: Resolution,
) -> Result<Option<String>, RunError> {
    use orch_store::lease::Change;
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

/// How a host waits for a run whose call is in flight ([`reserve`]): the first pause
/// between two looks, doubled after each look up to `max_pause`, plus up to `jitter`
/// at random (so that waiters on several instances do not look at the run in
/// lockstep), for at most `limit` in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyWait {
    /// The longest wait before the call is refused as busy.
    pub limit: Duration,
    /// The first pause between two looks.
    pub first_pause: Duration,
    /// The longest pause between two looks.
    pub max_pause: Duration,
    /// Up to this much is added to each pause at random.
    pub jitter: Duration,
}

/// What one look at a run for a call found ([`reserve`]'s `look`).
#[derive(Debug)]
pub enum Look<T> {
    /// The look decided (admitted, refused, asked): the host's value.
    Decided(T),
    /// Another call of the run is in flight: its tool.
    Busy(String),
}

/// What [`reserve`] came to.
#[derive(Debug)]
pub enum Reserved<T> {
    /// A look decided.
    Decided(T),
    /// The run was still busy with a call of `other` when the wait's limit passed:
    /// refuse the call with [`busy_reason`].
    Busy {
        /// The tool of the call in flight.
        other: String,
    },
    /// The host gave up waiting (the request was cancelled).
    Cancelled,
}

/// Looks at a run for a call (`look`: one compare-and-set, [`admit`] inside it) until a
/// look decides, waiting as `wait` says while another call of the run is in flight, so
/// that the second call is judged against the state the first one left — the one waiting
/// loop of every gateway. `cancelled` resolving ends the wait ([`Reserved::Cancelled`]).
pub async fn reserve<T, E, Fut>(
    wait: BusyWait,
    mut look: impl FnMut() -> Fut,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<Reserved<T>, E>
where
    Fut: std::future::Future<Output = Result<Look<T>, E>>,
{
    let deadline = std::time::Instant::now() + wait.limit;
    let mut pause = wait.first_pause;
    let mut cancelled = std::pin::pin!(cancelled);
    loop {
        let other = match look().await? {
            Look::Decided(value) => return Ok(Reserved::Decided(value)),
            Look::Busy(other) => other,
        };
        if std::time::Instant::now() >= deadline {
            return Ok(Reserved::Busy { other });
        }
        let jitter_us = u64::try_from(wait.jitter.as_micros()).unwrap_or(u64::MAX);
        let jitter = match jitter_us {
            0 => Duration::ZERO,
            n => Duration::from_micros(orch_store::lease::token() % n),
        };
        let mut sleep = std::pin::pin!(tokio::time::sleep(pause + jitter));
        let woke = std::future::poll_fn(|cx| {
            if std::future::Future::poll(cancelled.as_mut(), cx).is_ready() {
                return std::task::Poll::Ready(false);
            }
            std::future::Future::poll(sleep.as_mut(), cx).map(|()| true)
        })
        .await;
        if !woke {
            return Ok(Reserved::Cancelled);
        }
        pause = (pause * 2).min(wait.max_pause);
    }
}

/// The words a call of `tool` is refused with when a call of `other` in the same run
/// was still in flight after `waited`: the same on every gateway.
pub fn busy_reason(tool: &str, other: &str, waited: Duration) -> String {
    format!(
        "error: `{tool}` was not run: a call of `{other}` in the same workflow run has been in flight for more than {} s; try again when it has finished.",
        waited.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn wait(limit: Duration) -> BusyWait {
        BusyWait {
            limit,
            first_pause: Duration::from_micros(100),
            max_pause: Duration::from_millis(1),
            jitter: Duration::from_micros(100),
        }
    }

    /// A run busy for two looks is looked at again until a look decides.
    #[tokio::test]
    async fn a_busy_run_is_looked_at_again_until_a_look_decides() {
        let looks = Cell::new(0);
        let look = || {
            looks.set(looks.get() + 1);
            let n = looks.get();
            async move {
                Ok::<_, ()>(match n {
                    1 | 2 => Look::Busy("pay".to_owned()),
                    _ => Look::Decided(n),
                })
            }
        };
        let reserved = reserve(
            wait(Duration::from_secs(3600)),
            look,
            std::future::pending(),
        )
        .await;
        assert!(matches!(reserved, Ok(Reserved::Decided(3))), "{reserved:?}");
        assert_eq!(looks.get(), 3);
    }

    /// Past the wait's limit the call is refused as busy, naming the call in flight.
    #[tokio::test]
    async fn a_run_busy_past_the_limit_refuses_the_call() {
        let look = || async { Ok::<Look<()>, ()>(Look::Busy("pay".to_owned())) };
        let reserved = reserve(wait(Duration::ZERO), look, std::future::pending()).await;
        let Ok(Reserved::Busy { other }) = reserved else {
            panic!("{reserved:?}");
        };
        assert_eq!(other, "pay");
        let reason = busy_reason("refund", &other, Duration::from_secs(5));
        assert!(reason.contains("`refund` was not run"), "{reason}");
        assert!(reason.contains("a call of `pay`"), "{reason}");
    }

    /// A cancelled request stops waiting; a look's error ends the wait with it.
    #[tokio::test]
    async fn a_cancelled_wait_and_a_failed_look_end_it() {
        let looks = Cell::new(0);
        let look = || {
            looks.set(looks.get() + 1);
            async { Ok::<Look<()>, ()>(Look::Busy("pay".to_owned())) }
        };
        let reserved = reserve(
            wait(Duration::from_secs(3600)),
            look,
            std::future::ready(()),
        )
        .await;
        assert!(matches!(reserved, Ok(Reserved::Cancelled)), "{reserved:?}");
        assert_eq!(looks.get(), 1);
        let failing = || async { Err::<Look<()>, _>("the store failed") };
        let reserved = reserve(
            wait(Duration::from_secs(3600)),
            failing,
            std::future::pending(),
        )
        .await;
        assert!(matches!(reserved, Err("the store failed")), "{reserved:?}");
    }
}
