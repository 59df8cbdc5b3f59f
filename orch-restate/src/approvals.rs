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
    /// When it stops being answerable (ms since the Unix epoch): a later answer applies
    /// to nothing.
    pub expires_ms: u64,
}

/// A human's answer, as the waiting run receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// Approve (the call runs, once) or reject (the rejection is recorded).
    pub approved: bool,
    /// Why, for the decision log and the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
}

/// What [`Resolve`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The answer reached the waiting run. `false`: no question with that ticket is
    /// pending (answered already, or never asked): nothing happened.
    pub resolved: bool,
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
        /// A run waits on `pending` (sent by `OrchRun::call`).
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
        /// object or through Restate's awakeable API, or dismissed).
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

        /// Answers the question with `ticket`, once: a second answer (or one for a question
        /// not pending) does nothing and says so.
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
                return Ok(Json(Resolved { resolved: false }));
            };
            let pending = all.remove(at);
            if all.is_empty() {
                ctx.clear(PENDING);
            } else {
                ctx.set(PENDING, Json(all));
            }
            ctx.resolve_awakeable(
                &pending.awakeable,
                Json(Resolution {
                    approved: answer.approved,
                    reason: answer.reason,
                }),
            );
            Ok(Json(Resolved { resolved: true }))
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
