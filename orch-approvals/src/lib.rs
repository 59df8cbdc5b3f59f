//! Approvals where the approver is, for **orch**: the questions about gated tool calls
//! of every run — the run, the step, the tool, the exact arguments, where their values
//! came from, who asked, when it expires — listed and answered over authenticated HTTP,
//! once, by someone who is not the agent's user (finance approving a refund, hours later,
//! from another device).
//!
//! - [`api`]: the HTTP API (`/v1/approvals`), over a host's [`Desk`], and the console's
//!   approvals page (`/console`: server-rendered, no script, CSRF-safe forms);
//! - [`auth`]: who may view and answer (operator tokens, JWTs with a role claim);
//! - [`webhook`]: each new question and each answer announced as JSON;
//! - [`client`]: the API from the other side (what `orch approvals` uses);
//! - [`jwt`]: bearer JWTs verified against an identity provider's key set;
//! - [`restate`]: the questions and runs of durable runs on Restate, as a [`Desk`];
//! - [`store`]: a store's runs with no gateway in front (`orch console`), as a [`Desk`];
//! - [`report`]: what the console shows besides the runs (templates, the decision log).
//!
//! The same address serves the runs as JSON (`/v1/runs`, `/v1/runs/{id}`) and the
//! console's pages (`/console`).
//!
//! The questions themselves live with their runs (`orch_run::approvals`): answering one
//! is one compare-and-set of the run's record, and only the question the run still holds
//! takes an answer.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod client;
mod console;
pub mod desk;
mod form;
pub mod jwt;
mod listing;
pub mod report;
pub mod restate;
mod runs_api;
mod state;
pub mod store;
pub mod webhook;

pub use auth::{Approvers, Identity, JwtRoles, Role};
pub use desk::Desk;
pub use state::Approvals;
pub use webhook::Webhook;

/// The largest request body the API and the console take, in bytes.
const MAX_BODY_BYTES: usize = 16 * 1024;

impl Approvals {
    /// The API's routes (`/v1/approvals...`) and the console's (`/console...`), to serve
    /// alone ([`serve`]) or beside a host's own.
    pub fn router(self) -> axum::Router {
        api::routes(self.clone())
            .merge(runs_api::routes(self.clone()))
            .merge(console::routes(self))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
    }
}

/// Serves `approvals` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    approvals: Approvals,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, approvals.router())
        .with_graceful_shutdown(shutdown)
        .await
}
