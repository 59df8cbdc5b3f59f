//! What a host gives the approvals API and the console: the open questions of its runs,
//! answering one, and its runs ([`Desk`]). `orch mcp` and `orch policy` implement it over
//! their store with `orch_run::approvals` and `orch_run::runs`, each with its own
//! template and decision log; [`crate::store::StoreDesk`] does for a store alone (`orch
//! console`), [`crate::restate::RestateDesk`] for durable runs on Restate.

use crate::webhook::{Event, Webhook};
use orch_run::approvals::{Answer, NotAnswered, Posted, OPEN};
use orch_run::runs::{RunRow, RunView};
use orch_store::SessionStore;
use std::future::Future;
use std::pin::Pin;

/// A future a [`Desk`] returns.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The questions of a host's runs, for the approvals API. Errors are the host's failures
/// (a store that cannot be reached, a record that cannot be read), in words; the API
/// answers them with 503.
pub trait Desk: Send + Sync + 'static {
    /// The questions of every run, newest first: the open ones, and the answered or
    /// closed ones until their expiry.
    fn questions(&self) -> Pending<'_, Vec<Posted>>;
    /// Applies `answer` to the question posted in `run`: the question as it now stands,
    /// or why the answer applied to nothing.
    fn answer<'a>(
        &'a self,
        run: &'a str,
        answer: Answer<'a>,
    ) -> Pending<'a, Result<Posted, NotAnswered>>;
    /// Every run the host can see, in the order of their ids (the console's runs page
    /// filters and pages them).
    fn runs(&self) -> Pending<'_, Vec<RunRow>>;
    /// The run `id` in full (`None`: no such run).
    fn run<'a>(&'a self, id: &'a str) -> Pending<'a, Option<RunView>>;
}

/// What a host does once it posted `posted` in run `run` (the record written): names the
/// run in the index of open questions ([`OPEN`]), then tells `webhook`. A store failure
/// is said to the host: the question is in the run's record, only the list misses it
/// (the webhook is told all the same).
pub async fn announce<S: SessionStore + ?Sized>(
    store: &S,
    run: &str,
    posted: &Posted,
    webhook: Option<&Webhook>,
) -> Result<(), orch_store::StoreError> {
    let listed = orch_store::index::add(store, OPEN, run).await.map(|_| ());
    if let Some(webhook) = webhook {
        webhook.announce(Event::Asked, posted);
    }
    listed
}
