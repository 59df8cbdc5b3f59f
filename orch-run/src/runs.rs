//! Every run of a store, as an operator sees it (the console's runs and run pages): the
//! run's step, whether a call is in flight, held for an operator or waiting for an
//! approver, its history, what its budgets have counted, its posted question.
//!
//! These are looks, not uses: the records are read with [`SessionStore::peek`] (no TTL
//! refreshed, nothing written), and listing is a scan of the store
//! ([`SessionStore::ids`]) whose cost grows with the number of runs (docs/performance.md
//! measures it on 10,000).

use crate::approvals::{standing, PostedState, OPEN};
use crate::{restore, RunError};
use orch_agent::Policy;
use orch_runtime::dynamic::{DynMachine, DynSession};
use orch_store::lease::{Record, RecordError};
use orch_store::SessionStore;
use serde::Serialize;

/// What a run is doing, as the runs page filters it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Nothing in flight: the run takes its next call.
    Ready,
    /// A call is in flight (its lease holds).
    Calling,
    /// A call's result was lost and the template's rule for it is `hold`: every call is
    /// refused until the result arrives or an operator says whether it ran.
    Held,
    /// A gated call waits for an approver's answer.
    Waiting,
    /// The record or the session in it cannot be read (it is left as it is).
    Unreadable,
}

impl RunState {
    /// Every state, in the order the console offers them.
    pub const ALL: [RunState; 5] = [
        RunState::Ready,
        RunState::Calling,
        RunState::Held,
        RunState::Waiting,
        RunState::Unreadable,
    ];

    /// The state's word (`ready`, `calling`, `held`, `waiting`, `unreadable`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Ready => "ready",
            RunState::Calling => "calling",
            RunState::Held => "held",
            RunState::Waiting => "waiting",
            RunState::Unreadable => "unreadable",
        }
    }

    /// The state named `word`, if one is.
    pub fn parse(word: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

/// One run, as the runs page lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    /// The run's store key (`run:<id>` for named and minted runs, the protocol session's
    /// id otherwise).
    pub id: String,
    /// The template's name.
    pub template: String,
    /// The active step (`None`: the template has no steps, or the record is unreadable).
    pub step: Option<String>,
    /// What the run is doing.
    pub state: RunState,
    /// The tool of the call in flight or held, if any.
    pub tool: Option<String>,
    /// The id of the question it holds open, if any.
    pub question: Option<String>,
    /// When the run ends whatever its use, in milliseconds since the Unix epoch (a minted
    /// run's end); `None`: only the store's idle TTL ends it.
    pub expires_ms: Option<u64>,
    /// Why the record cannot be read, when it cannot.
    pub unreadable: Option<String>,
}

/// One run in full, as the run page shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// What the runs page lists.
    #[serde(flatten)]
    pub row: RunRow,
    /// The template's steps, in order (the run's step is [`RunRow::step`]).
    pub steps: Vec<String>,
    /// The tools the run may call now (gated ones included: they ask).
    pub allowed: Vec<String>,
    /// What the active step's sequence expects next, if it has one.
    pub expected: Option<Vec<String>>,
    /// The tools recorded, oldest first (`None`: a tool the template does not declare).
    pub history: Vec<Option<String>>,
    /// How many remembered values the run has forgotten to make room for newer ones.
    pub forgotten: u32,
    /// Each budget's total now, by name (the template's budgets).
    pub budgets: Vec<(String, String)>,
    /// The question the run posted for approvers, as it stands (open, answered, closed or
    /// expired).
    pub question: Option<crate::approvals::Posted>,
    /// `enforce`, or `observe` when the template's calls are judged and recorded but never
    /// refused or asked about (the mode of the host that reads it).
    pub mode: orch_agent::Mode,
}

/// A run's record as read for a look: the session, the row, and the posted question.
struct Seen<'m> {
    row: RunRow,
    session: Option<DynSession<'m>>,
    question: Option<crate::approvals::Posted>,
}

/// Reads the record stored under `id` (`bytes`) for a look; `None`: what is stored there
/// is not a run's record (an index).
fn look<'m>(
    id: &str,
    bytes: &[u8],
    machine: &'m DynMachine,
    policy: &Policy,
    now_ms: u64,
) -> Option<Seen<'m>> {
    let mut row = RunRow {
        id: id.to_owned(),
        template: machine.name().to_owned(),
        step: None,
        state: RunState::Unreadable,
        tool: None,
        question: None,
        expires_ms: None,
        unreadable: None,
    };
    let record = match Record::decode(bytes) {
        Ok(record) => record,
        Err(RecordError::NoMagic) => return None,
        Err(e) => {
            row.unreadable = Some(format!("its record cannot be read: {e}"));
            return Some(Seen {
                row,
                session: None,
                question: None,
            });
        }
    };
    row.expires_ms = record.expires_ms;
    let read = restore(machine, policy, record.snapshot.as_deref())
        .and_then(|session| Ok((session, standing(&record, machine, policy, now_ms)?)));
    let (session, question) = match read {
        Ok(read) => read,
        Err(e) => {
            row.unreadable = Some(e.to_string());
            return Some(Seen {
                row,
                session: None,
                question: None,
            });
        }
    };
    row.step = session.step().map(str::to_owned);
    let open = question
        .as_ref()
        .filter(|q| q.state == PostedState::Pending);
    row.question = open.map(|q| q.id.clone());
    (row.state, row.tool) = match (record.held(), record.busy(), open) {
        (Some(lease), _, _) => (RunState::Held, Some(lease.tool.clone())),
        (None, Some(lease), _) => (RunState::Calling, Some(lease.tool.clone())),
        (None, None, Some(q)) => (RunState::Waiting, Some(q.tool.clone())),
        (None, None, None) => (RunState::Ready, None),
    };
    Some(Seen {
        row,
        session: Some(session),
        question,
    })
}

/// How many records one read asks the store for.
const BATCH: usize = 512;

/// Every run in `store` (of the template `machine`), in the order of their ids: a scan,
/// then the records read in batches without being used ([`SessionStore::peek`]).
/// Values that are not runs' records (the question index) are left out; records that
/// cannot be read are listed as [`RunState::Unreadable`], with why.
pub async fn list<S: SessionStore + ?Sized>(
    store: &S,
    machine: &DynMachine,
    policy: &Policy,
    now_ms: u64,
) -> Result<Vec<RunRow>, RunError> {
    let mut ids = store.ids().await.map_err(RunError::Store)?;
    ids.retain(|id| id != OPEN);
    ids.sort_unstable();
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(BATCH) {
        let values = store.peek(chunk).await.map_err(RunError::Store)?;
        for (id, value) in chunk.iter().zip(values) {
            let Some(value) = value else { continue };
            if let Some(looked) = look(id, &value.bytes, machine, policy, now_ms) {
                rows.push(looked.row);
            }
        }
    }
    Ok(rows)
}

/// The run stored under `id` in full, as it stands at `now_ms`; `None`: no run is stored
/// there.
pub async fn view<S: SessionStore + ?Sized>(
    store: &S,
    machine: &DynMachine,
    policy: &Policy,
    id: &str,
    now_ms: u64,
) -> Result<Option<RunView>, RunError> {
    if id == OPEN {
        return Ok(None);
    }
    let values = store
        .peek(&[id.to_owned()])
        .await
        .map_err(RunError::Store)?;
    let Some(Some(value)) = values.into_iter().next() else {
        return Ok(None);
    };
    let Some(looked) = look(id, &value.bytes, machine, policy, now_ms) else {
        return Ok(None);
    };
    let mut view = RunView {
        row: looked.row,
        steps: machine.steps().to_vec(),
        allowed: Vec::new(),
        expected: None,
        history: Vec::new(),
        forgotten: 0,
        budgets: Vec::new(),
        question: looked.question,
        mode: policy.mode(),
    };
    if let Some(session) = looked.session {
        view.allowed = policy.offered(&session);
        view.expected = session
            .expected()
            .map(|tools| tools.into_iter().map(str::to_owned).collect());
        view.history = session
            .history()
            .into_iter()
            .map(|t| t.map(str::to_owned))
            .collect();
        view.forgotten = session.forgotten();
        view.budgets = session
            .budget_totals()
            .into_iter()
            .map(|(name, total)| (name.to_owned(), total))
            .collect();
    }
    Ok(Some(view))
}
