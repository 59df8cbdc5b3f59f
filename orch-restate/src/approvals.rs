//! `OrchApprovals`: the questions a run waits on, and their answers.

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

/// State: the questions pending.
const PENDING: &str = "pending";

/// A question a run waits on: a gated call, put to a human.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The question's ticket (`orch-q1:…`): what [`Resolve`] names it by.
    pub ticket: String,
    /// The Restate awakeable the run waits on (resolvable with Restate's own API:
    /// `POST /restate/awakeables/<id>/resolve` with a [`Resolution`]).
    pub awakeable: String,
    /// The tool called.
    pub tool: String,
    /// Its exact arguments.
    pub arguments: String,
    /// The step the run was in.
    pub step: Option<String>,
    /// What the model was told.
    pub reason: String,
    /// Where the call's values were seen, one line each (the template's `from` and
    /// `trust`); empty when it remembers nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<String>,
    /// When it stops being answerable (ms since the Unix epoch): a later answer applies
    /// to nothing.
    pub expires_ms: u64,
    /// The template's name (`agentId`), for an approver's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// When it was asked (ms since the Unix epoch, the journaled time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_ms: Option<u64>,
}

/// A human's answer, as the waiting run receives it. It names the question it answers
/// (`ticket`): the run applies it only to that question, so an answer meant for another
/// question — another run's, one asked since, one planted — applies to nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// The ticket of the question answered ([`Pending::ticket`]). Required: an answer
    /// that names no question (or another) is refused as stale and nothing runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// Approve (the call runs, once) or reject (the rejection is recorded).
    pub approved: bool,
    /// Why, for the decision log and the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who answered, when the answer came through an authenticated API (kept in
    /// Restate's journal with the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// An answer to the question with `ticket`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolve {
    /// The question's ticket, from [`Pending::ticket`].
    pub ticket: String,
    /// Approve or reject.
    pub approved: bool,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who answers (an approver's identity, for the journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// What [`Resolve`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The answer reached the waiting run. `false`: nothing happened, and `why` says
    /// why.
    pub resolved: bool,
    /// Why an answer was not taken: `not_pending` (answered already, or never asked in
    /// this run), `expired` (the question expired first: it is closed, and the call was
    /// refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Resolved {
    fn not(why: &str) -> Resolved {
        Resolved {
            resolved: false,
            why: Some(why.to_owned()),
        }
    }
}

/// The questions of one run (the same key as its `OrchRun`).
pub struct OrchApprovals;

/// The handlers, and the client the macro generates (`OrchApprovalsClient`: a method per
/// handler, documented on the handler).
mod handlers {
    #![allow(missing_docs)]
    use super::*;

    #[restate_sdk::object]
    impl OrchApprovals {
        /// A run waits on `pending` (sent by `OrchRun::call`). Internal: not reachable
        /// from Restate's ingress ([`crate::Runs::endpoint`] binds it private).
        #[handler]
        async fn ask(&self, ctx: ObjectContext<'_>, pending: Json<Pending>) -> HandlerResult<()> {
            let mut all: Vec<Pending> = ctx
                .get::<Json<Vec<Pending>>>(PENDING)
                .await?
                .map(|j| j.0)
                .unwrap_or_default();
            if !all.iter().any(|p| p.awakeable == pending.0.awakeable) {
                all.push(pending.0);
            }
            ctx.set(PENDING, Json(all));
            Ok(())
        }

        /// The run stopped waiting on the awakeable `awakeable` (answered through this
        /// object or through Restate's awakeable API, dismissed, or expired). Internal:
        /// not reachable from Restate's ingress.
        #[handler]
        async fn done(&self, ctx: ObjectContext<'_>, awakeable: Json<String>) -> HandlerResult<()> {
            let mut all: Vec<Pending> = ctx
                .get::<Json<Vec<Pending>>>(PENDING)
                .await?
                .map(|j| j.0)
                .unwrap_or_default();
            all.retain(|p| p.awakeable != awakeable.0);
            if all.is_empty() {
                ctx.clear(PENDING);
            } else {
                ctx.set(PENDING, Json(all));
            }
            Ok(())
        }

        /// Answers the question with `ticket`, once, before it expires: a second answer,
        /// one for a question not pending, or a late one does nothing and says why.
        #[handler]
        async fn resolve(
            &self,
            ctx: ObjectContext<'_>,
            answer: Json<Resolve>,
        ) -> HandlerResult<Json<Resolved>> {
            let Json(answer) = answer;
            let mut all: Vec<Pending> = ctx
                .get::<Json<Vec<Pending>>>(PENDING)
                .await?
                .map(|j| j.0)
                .unwrap_or_default();
            let Some(at) = all.iter().position(|p| p.ticket == answer.ticket) else {
                return Ok(Json(Resolved::not("not_pending")));
            };
            let now = ctx
                .run(|| async { Ok(orch_agent::protocol::now_ms()) })
                .name("now")
                .await?;
            let pending = all.remove(at);
            if all.is_empty() {
                ctx.clear(PENDING);
            } else {
                ctx.set(PENDING, Json(all));
            }
            if now >= pending.expires_ms {
                // The waiting run closes it at its expiry; the answer applies to nothing.
                return Ok(Json(Resolved::not("expired")));
            }
            ctx.resolve_awakeable(
                &pending.awakeable,
                Json(Resolution {
                    ticket: Some(pending.ticket),
                    approved: answer.approved,
                    reason: answer.reason,
                    by: answer.by,
                }),
            );
            Ok(Json(Resolved {
                resolved: true,
                why: None,
            }))
        }

        /// The questions pending, oldest first.
        #[handler]
        async fn pending(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<Vec<Pending>>> {
            Ok(Json(
                ctx.get::<Json<Vec<Pending>>>(PENDING)
                    .await?
                    .map(|j| j.0)
                    .unwrap_or_default(),
            ))
        }
    }
}

pub use handlers::OrchApprovalsClient;
