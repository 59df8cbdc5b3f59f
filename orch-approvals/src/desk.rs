//! What a host gives the approvals API: the open questions of its runs, and answering
//! one ([`Desk`]). `orch mcp` and `orch policy` implement it over their store with
//! `orch_run::approvals`, each with its own template and decision log.

use orch_run::approvals::{Answer, NotAnswered, Posted};
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
}
