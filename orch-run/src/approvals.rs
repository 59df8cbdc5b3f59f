//! Questions posted for approvers who are not the run's user (docs/approvals.md,
//! "Approvers elsewhere"): a gateway that asks with [`Gate::AskOnce`] keeps what an
//! approver needs to see the question — the run, the step, the tool, the exact arguments
//! as the call carried them, where their values came from, who asked, when it expires —
//! in the run's record beside the session that holds it ([`Posted`], in
//! [`Record::question`]), and names the run in an index ([`OPEN`]) so that the open
//! questions of every run are found without a scan.
//!
//! An answer is one compare-and-set of the run's record ([`answer`]): it applies only
//! while the run's session still holds that very question (the question's ticket, the
//! run, its step and the template give its identity again), once, before it expires;
//! the posted question then says who answered, when and why. The call itself is
//! admitted by the caller's retry (or the waiting call's next look), which consumes the
//! approval: one answer runs one call.
//!
//! [`Gate::AskOnce`]: orch_agent::Gate::AskOnce

use crate::{restore, Looked, RunError};
use orch_agent::protocol::{Question, Ticket, Unanswered};
use orch_agent::{HumanAnswer, Policy};
use orch_runtime::dynamic::DynMachine;
use orch_runtime::{CallDigest, Verdict};
use orch_store::lease::{Change, Record};
use orch_store::SessionStore;
use serde::{Deserialize, Serialize};

/// The store key of the index of runs that hold a posted question
/// ([`orch_store::index`]).
pub const OPEN: &str = "orch:approvals:open";

/// The longest reason an approver may give, in bytes.
pub const MAX_REASON_BYTES: usize = 2_048;

/// A question posted for approvers, as a run's record keeps it and the approvals API
/// shows it (JSON, camelCase).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Posted {
    /// The question's public id: `q-` and the 16 hex digits of its identity.
    pub id: String,
    /// The question's ticket (what an answer carries back in-band).
    pub ticket: String,
    /// The run's store key.
    pub run: String,
    /// The template's `agentId`.
    pub template: String,
    /// The active step when it was asked.
    pub step: Option<String>,
    /// The tool called.
    pub tool: String,
    /// The call's arguments, byte for byte as the call carried them.
    pub arguments: String,
    /// Where the call's values were seen, one line each (empty when the template
    /// remembers nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<String>,
    /// Who the run's calls come from, when the host knows (a credential's subject): they
    /// may not answer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<String>,
    /// When it was asked, in milliseconds since the Unix epoch.
    pub asked_ms: u64,
    /// When it stops being answerable.
    pub expires_ms: u64,
    /// Where it stands.
    pub state: PostedState,
    /// The answer, once given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answered>,
}

/// Where a posted question stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PostedState {
    /// Waiting for an approver.
    Pending,
    /// Approved: the call runs once when it comes again.
    Approved,
    /// Rejected: the same call is refused as rejected until the run's next event.
    Rejected,
    /// Past its expiry without an answer.
    Expired,
    /// The run moved on (another event, another question) before an answer.
    Closed,
}

impl PostedState {
    /// The state's word.
    pub fn as_str(self) -> &'static str {
        match self {
            PostedState::Pending => "pending",
            PostedState::Approved => "approved",
            PostedState::Rejected => "rejected",
            PostedState::Expired => "expired",
            PostedState::Closed => "closed",
        }
    }
}

/// Who answered a posted question, when and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answered {
    /// The approver's identity (an operator token's name, a JWT's subject).
    pub by: String,
    /// Approved or not.
    pub approved: bool,
    /// The approver's reason, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl Posted {
    /// The posting of `question`, asked in `run` of the template `template` about a call
    /// with `arguments`, by `asked_by`, at `now_ms`.
    pub fn new(
        question: &Question,
        template: &str,
        arguments: &str,
        asked_by: Option<&str>,
        now_ms: u64,
    ) -> Posted {
        Posted {
            id: public_id(question),
            ticket: question.ticket().to_string(),
            run: question.run.clone(),
            template: template.to_owned(),
            step: question.step.clone(),
            tool: question.tool.clone(),
            arguments: arguments.to_owned(),
            origins: question.origins.clone(),
            asked_by: asked_by.map(str::to_owned),
            asked_ms: now_ms,
            expires_ms: question.expires_ms,
            state: PostedState::Pending,
            answer: None,
        }
    }

    /// Where it stands at `now_ms`: a pending question past its expiry is expired.
    pub fn state_at(&self, now_ms: u64) -> PostedState {
        match self.state {
            PostedState::Pending if now_ms >= self.expires_ms => PostedState::Expired,
            state => state,
        }
    }

    /// The posted question a record holds, if any.
    pub fn of(record: &Record) -> Result<Option<Posted>, RunError> {
        let Some(bytes) = &record.question else {
            return Ok(None);
        };
        serde_json::from_slice(bytes)
            .map(Some)
            .map_err(|e| RunError::corrupt(format!("its posted question cannot be read: {e}"), e))
    }

    /// Keeps it in `record`.
    pub fn put(&self, record: &mut Record) {
        // A struct of strings and numbers: serializing cannot fail.
        record.question = serde_json::to_vec(self).ok();
    }
}

/// The sentence a refusal of a call that waits on `posted` ends with.
pub fn waiting_words(posted: &Posted) -> String {
    format!(
        " The question `{}` about this call waits for an approver; call it again with the same arguments once it is answered.",
        posted.id
    )
}

/// The public id of `question`: `q-` and the 16 hex digits of its identity.
pub fn public_id(question: &Question) -> String {
    format!("q-{:016x}", question.id().get())
}

/// Why an answer applied to nothing ([`answer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAnswered {
    /// The run holds no posted question with that id (never posted here, or another
    /// question was posted since).
    Unknown,
    /// It was answered, expired or closed already: how it stands.
    Settled(Box<Posted>),
    /// The run moved on since it was asked (another event or question): it is closed now.
    Stale(Box<Posted>),
    /// The approver is who the run's calls come from.
    OwnRun,
}

impl std::fmt::Display for NotAnswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAnswered::Unknown => f.write_str("no such question is waiting in this run"),
            NotAnswered::Settled(p) => match &p.answer {
                Some(a) => write!(f, "the question was {} already, by {}", p.state.as_str(), a.by),
                None => write!(f, "the question is {} already", p.state.as_str()),
            },
            NotAnswered::Stale(_) => f.write_str(
                "the run moved on since the question was asked (another event or question): it is closed, nothing was answered",
            ),
            NotAnswered::OwnRun => f.write_str(
                "an approver may not answer a question asked by their own run's calls",
            ),
        }
    }
}

/// An approver's answer to the posted question `id`.
#[derive(Clone, Copy, Debug)]
pub struct Answer<'a> {
    /// The question's public id.
    pub id: &'a str,
    /// Approved or rejected.
    pub approved: bool,
    /// Who answers.
    pub by: &'a str,
    /// Why, if they said.
    pub reason: Option<&'a str>,
    /// When, in milliseconds since the Unix epoch.
    pub now_ms: u64,
}

/// One look at `record` (the run `run` of `machine`'s template) for an approver's
/// `answer`: applied to the run's session — only while it holds that very question,
/// before its expiry, once — and to the posted question, or why not. A question found
/// expired or no longer held is marked so (the record is then written too).
pub fn answer(
    record: &mut Record,
    machine: &DynMachine,
    policy: &Policy,
    run: &str,
    answer: Answer<'_>,
) -> Result<Looked<Result<Posted, NotAnswered>>, RunError> {
    let Some(mut posted) = Posted::of(record)?.filter(|p| p.id == answer.id) else {
        return Ok((Err(NotAnswered::Unknown), false));
    };
    if posted.state_at(answer.now_ms) != PostedState::Pending {
        let write = posted.state == PostedState::Pending;
        if write {
            posted.state = PostedState::Expired;
            posted.put(record);
        }
        return Ok((Err(NotAnswered::Settled(Box::new(posted))), write));
    }
    if posted.asked_by.as_deref() == Some(answer.by) {
        return Ok((Err(NotAnswered::OwnRun), false));
    }
    let mut session = restore(machine, policy, record.snapshot.as_deref())?;
    let ticket = Ticket::parse(&posted.ticket)
        .map_err(|e| RunError::corrupt(format!("its posted question's ticket: {e}"), e))?;
    let call = CallDigest::of_text(&posted.tool, &posted.arguments);
    let given = HumanAnswer {
        approved: answer.approved,
        reason: answer.reason,
        by: Some(answer.by),
    };
    match policy.answer_ticket_as(&mut session, run, &posted.tool, &call, &ticket, given) {
        Ok(()) => {
            record.snapshot = Some(session.snapshot().to_bytes());
            posted.state = match answer.approved {
                true => PostedState::Approved,
                false => PostedState::Rejected,
            };
            posted.answer = Some(Answered {
                by: answer.by.to_owned(),
                approved: answer.approved,
                reason: answer.reason.map(str::to_owned),
                at_ms: answer.now_ms,
            });
            posted.put(record);
            Ok((Ok(posted), true))
        }
        Err(Unanswered::Expired) => {
            posted.state = PostedState::Expired;
            posted.put(record);
            Ok((Err(NotAnswered::Settled(Box::new(posted))), true))
        }
        Err(_) => {
            posted.state = PostedState::Closed;
            posted.put(record);
            Ok((Err(NotAnswered::Stale(Box::new(posted))), true))
        }
    }
}

/// How the posted question of `record` stands at `now_ms`, if it has one: a pending
/// question past its expiry is expired, and one the run's session no longer holds open
/// (the run moved on: another event, another question) is closed.
pub fn standing(
    record: &Record,
    machine: &DynMachine,
    policy: &Policy,
    now_ms: u64,
) -> Result<Option<Posted>, RunError> {
    let Some(mut posted) = Posted::of(record)? else {
        return Ok(None);
    };
    posted.state = posted.state_at(now_ms);
    if posted.state == PostedState::Pending {
        let session = restore(machine, policy, record.snapshot.as_deref())?;
        let call = CallDigest::of_text(&posted.tool, &posted.arguments);
        let held = session
            .approval()
            .is_some_and(|a| a.call == call && a.verdict == Verdict::Pending);
        if !held {
            posted.state = PostedState::Closed;
        }
    }
    Ok(Some(posted))
}

/// The record stored under `run`, if any.
async fn load<S: SessionStore + ?Sized>(store: &S, run: &str) -> Result<Option<Record>, RunError> {
    let Some(value) = store.load(run).await.map_err(RunError::Store)? else {
        return Ok(None);
    };
    Record::decode(&value.bytes)
        .map(Some)
        .map_err(|e| RunError::corrupt(e.to_string(), e))
}

/// The posted questions of every run in `store` that the index names, newest first, as
/// they stand at `now_ms` ([`standing`]): the open ones, and the answered or closed ones
/// until their expiry (so a late second answer is told who answered). Runs whose
/// question expired or is gone are dropped from the index on the way.
pub async fn questions<S: SessionStore + ?Sized>(
    store: &S,
    machine: &DynMachine,
    policy: &Policy,
    now_ms: u64,
) -> Result<Vec<Posted>, RunError> {
    let runs = orch_store::index::members(store, OPEN)
        .await
        .map_err(RunError::Store)?;
    let mut found = Vec::with_capacity(runs.len());
    for run in runs {
        let posted = match load(store, &run).await? {
            Some(record) => standing(&record, machine, policy, now_ms)?,
            None => None,
        };
        match posted {
            Some(p) if now_ms < p.expires_ms => found.push(p),
            _ => {
                orch_store::index::remove(store, OPEN, &run)
                    .await
                    .map_err(RunError::Store)?;
            }
        }
    }
    found.sort_by(|a, b| b.asked_ms.cmp(&a.asked_ms).then_with(|| a.id.cmp(&b.id)));
    Ok(found)
}

/// The posted question of the run stored under `run` (open or settled, as it stands at
/// `now_ms`), if it is `id`.
pub async fn posted_question<S: SessionStore + ?Sized>(
    store: &S,
    machine: &DynMachine,
    policy: &Policy,
    run: &str,
    id: &str,
    now_ms: u64,
) -> Result<Option<Posted>, RunError> {
    let Some(record) = load(store, run).await? else {
        return Ok(None);
    };
    Ok(standing(&record, machine, policy, now_ms)?.filter(|p| p.id == id))
}

/// [`answer`] for the run stored under `run` in `store`, with compare-and-set. With a
/// buffered auditor (`Auditor::buffered`), the buffer holds the records of the attempt
/// that was written, for the host to relay to its log.
pub async fn answer_key<S: SessionStore + ?Sized>(
    store: &S,
    machine: &DynMachine,
    policy: &Policy,
    run: &str,
    given: Answer<'_>,
) -> Result<Result<Posted, NotAnswered>, RunError> {
    let (outcome, _) = crate::modify(store, run, None, |record| {
        // An attempt may be retried: a buffered decision log keeps only the last one's.
        if let Some(auditor) = policy.auditor() {
            auditor.take_buffered();
        }
        let Some(mut record) = record else {
            return Ok(Change::Keep(Err(NotAnswered::Unknown)));
        };
        let (outcome, write) = answer(&mut record, machine, policy, run, given)?;
        Ok(match write {
            true => Change::Write(record, outcome),
            false => Change::Keep(outcome),
        })
    })
    .await?;
    Ok(outcome)
}
