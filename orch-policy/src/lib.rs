//! orch as agentgateway's **ExtMcp** policy server (`orch policy`): the gateway asks it
//! about every MCP request before it goes upstream (`CheckRequest`) and about every
//! upstream result on its way back (`CheckResponse`), and orch answers from a workflow
//! run kept in a [`SessionStore`] — in memory, or in Redis / a Redis Cluster shared by
//! several policy-server instances.
//!
//! - **`tools/call`, request phase**: the run (named by the gateway in
//!   `metadata_context`, key `run` by default) is read, the call judged and, when allowed,
//!   admitted *and leased* in one compare-and-set, so that under any concurrency, across
//!   instances, the calls that pass form a serial order the workflow allows. A refusal is
//!   an `AuthorizationError` `PERMISSION_DENIED` with orch's own wording (what is expected
//!   next, what is allowed now) and the same facts as data in `mcp_error`. An admitted
//!   call gets a token back in `McpRequestResult.metadata` (key `orch_call`).
//! - **`tools/call`, response phase**: the call that token names (fed back by the
//!   gateway's `metadata` config; without it, the run's one call in flight) is recorded —
//!   unless the result says `isError: true` — and its lease released. An upstream
//!   JSON-RPC error never reaches this phase: the lease lapses ([`Options::lease`]) and
//!   the call counts as not run.
//! - **`tools/list`, response phase**: the list is filtered to what the run allows now
//!   (`mutated`).
//! - Everything else passes. Malformed requests are `INVALID`; store failures and
//!   overload are answered as errors too (never a gRPC failure, which a gateway set to
//!   fail open would pass), so the server fails closed whatever the gateway's failure
//!   mode.
//!
//! The wire contract is this crate's `proto/ext_mcp.proto` (the same package, service,
//! messages and field numbers as agentgateway v1.4.1's `ext_mcp.proto`), generated with
//! tonic and prost: [`wire`]. See `docs/gateways.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), orch_policy::PolicyError> {
//! use orch_policy::{Options, PolicyServer};
//! let compiled = orch_codegen::compile_json(
//!     r#"{"name": "research", "tools": ["search", "summarize"],
//!         "steps": [{"name": "research", "isDefault": true,
//!                    "sequence": ["search", "summarize"]}]}"#,
//!     None,
//! );
//! let server = PolicyServer::new(&compiled, orch_store::MemoryStore::new(), Options::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(PolicyError::io)?;
//! server.serve(listener, std::future::pending()).await
//! # }
//! # use orch_policy::PolicyError;
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod check_error;
mod engine;
mod service;
mod telemetry;

/// The ExtMcp messages (prost) and the service's client and server (tonic), package
/// `agentgateway.dev.ext_mcp`.
#[allow(missing_docs, clippy::all)]
pub mod wire {
    tonic::include_proto!("agentgateway.dev.ext_mcp");
}

use orch_agent::audit::Auditor;
use orch_codegen::{Compiled, Surface};
use orch_store::SessionStore;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use engine::TOKEN_FIELD;

/// Why a policy server cannot start or stopped serving.
#[derive(Debug)]
#[non_exhaustive]
pub enum PolicyError {
    /// The template has errors (`orch check` lists them).
    TemplateErrors,
    /// The template reads the user's message, which MCP traffic never carries, so these
    /// conditions would never hold: one line each, naming the step and the condition
    /// (E024's messages).
    ReadsUserMessages(Vec<String>),
    /// The options cannot be used (they conflict, or something they name cannot be
    /// used).
    Options(String),
    /// The address cannot be listened on.
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// An I/O error while binding or serving.
    Io(std::io::Error),
    /// The ExtMcp gRPC server failed.
    Serve(Box<dyn std::error::Error + Send + Sync>),
}

impl PolicyError {
    /// An I/O error while binding or serving.
    pub fn io(e: std::io::Error) -> Self {
        PolicyError::Io(e)
    }

    /// Is the template the problem (its errors, or conditions the server cannot
    /// enforce), rather than the options or the network?
    pub fn is_template(&self) -> bool {
        matches!(
            self,
            PolicyError::TemplateErrors | PolicyError::ReadsUserMessages(_)
        )
    }
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::TemplateErrors => {
                f.write_str("the template has errors (run `orch check` on it)")
            }
            PolicyError::ReadsUserMessages(conditions) => write!(
                f,
                "the template reads the user's message, which MCP traffic never carries, so these conditions would never hold: {}. \
                 Switch steps on tool use instead (tool_used, sequence_match), or put orch in the agent itself (orch-agent)",
                conditions.join("; ")
            ),
            PolicyError::Options(why) => f.write_str(why),
            PolicyError::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            PolicyError::Io(e) => e.fmt(f),
            PolicyError::Serve(e) => write!(f, "the ExtMcp gRPC server failed: {e}"),
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PolicyError::Listen { source, .. } | PolicyError::Io(source) => Some(source),
            PolicyError::Serve(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// How a policy server names runs and bounds its work.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `metadata_context` key whose value names the run (default `run`). A request
    /// without it is refused.
    pub run_key: String,
    /// How long an admitted call holds its run (default 60 s): its result must reach the
    /// response phase within it. A call whose response never comes (an upstream
    /// JSON-RPC error, a gateway that died) stops blocking the run when it lapses, and
    /// counts as not run. Set it above the gateway's upstream request timeout.
    pub lease: Duration,
    /// How long a call waits while another call of its run is in flight (default 5 s,
    /// below agentgateway's 10 s deadline for a policy check); then it is refused as
    /// `RESOURCE_EXHAUSTED`.
    pub busy_wait: Duration,
    /// The largest `tools/call` params accepted, in bytes (default 1 MiB); larger ones
    /// are `INVALID`.
    pub max_params_bytes: usize,
    /// The largest gRPC message decoded, in bytes (default 16 MiB): a tool result or a
    /// tool list beyond it fails the check (the gateway then fails closed, its default).
    pub max_message_bytes: usize,
    /// How many checks are handled at once (default 256); one more is answered
    /// `RESOURCE_EXHAUSTED` at once.
    pub max_in_flight: usize,
    /// How many connections are open at once (default 1,024); one more is closed at
    /// once, so a flood of idle connections cannot starve the gateway's own.
    pub max_connections: usize,
    /// How long a new connection may take to send its first bytes (the HTTP/2 preface;
    /// default 10 s) before it is closed.
    pub handshake_timeout: Duration,
    /// How long a connection may stay silent (no bytes either way, HTTP/2 pings
    /// included) before it is closed (default 60 s); a gateway opens a new one for its
    /// next check.
    pub idle_timeout: Duration,
    /// How long a question put to a human about a gated call stays answerable (its
    /// ticket carries the expiry). Default: 24 hours
    /// ([`orch_agent::protocol::DEFAULT_QUESTION_TTL`]).
    pub question_ttl: Duration,
    /// Where to write a decision record of every call judged and every tool recorded
    /// (`orch_agent::audit`); the `run` of a record is the run's store key. Default:
    /// none.
    pub audit: Option<Arc<Auditor>>,
    /// Post questions about gated calls for approvers who are not the agent's user
    /// ([`PolicyServer::approvals`], docs/approvals.md): the run keeps each question for
    /// the approvals API, a retry of the same call before the answer is refused with the
    /// same question (not a new one), and its retry after an approval runs once. Default:
    /// off (a question is only returned to the caller).
    pub approvals: Option<Posting>,
    /// Enforce the template (the default) or only judge and record each call
    /// ([`orch_agent::Mode::Observe`]: every check is allowed, nothing is asked, every
    /// tool is listed, and the decision log says what orch would have done).
    pub mode: orch_agent::Mode,
}

/// How questions are posted for approvers elsewhere ([`Options::approvals`]).
#[derive(Clone, Debug, Default)]
pub struct Posting {
    /// Where each new question and each answer is announced, if anywhere.
    pub webhook: Option<orch_approvals::Webhook>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            run_key: "run".to_owned(),
            lease: Duration::from_secs(60),
            busy_wait: Duration::from_secs(5),
            question_ttl: orch_agent::protocol::DEFAULT_QUESTION_TTL,
            max_params_bytes: 1 << 20,
            max_message_bytes: 16 << 20,
            max_in_flight: 256,
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            audit: None,
            approvals: None,
            mode: orch_agent::Mode::Enforce,
        }
    }
}

/// The policy server: a compiled template, a store of runs, and the options.
/// Cheap to clone (one shared state).
pub struct PolicyServer<S> {
    engine: Arc<engine::Engine<S>>,
}

impl<S> Clone for PolicyServer<S> {
    fn clone(&self) -> Self {
        PolicyServer {
            engine: Arc::clone(&self.engine),
        }
    }
}

impl<S: SessionStore + 'static> PolicyServer<S> {
    /// A server for `compiled` keeping runs in `store`. Refused when the template has
    /// errors, or has conditions that read the user's message: MCP traffic carries none,
    /// so they would never hold. Compile it for this host
    /// (`CheckOptions { surface: Surface::Policy, .. }`) to have those conditions reported as
    /// E024 at their places with the other diagnostics; a template compiled for another
    /// surface is checked for them here.
    pub fn new(compiled: &Compiled, store: S, options: Options) -> Result<Self, PolicyError> {
        let (Some(ir), Some(machine)) = (compiled.ir.as_ref(), compiled.to_machine()) else {
            return Err(PolicyError::TemplateErrors);
        };
        if compiled.options().surface != Surface::Policy {
            let reading: Vec<String> = orch_codegen::surface_lints(ir, Surface::Policy)
                .into_iter()
                .filter(|d| d.is_error())
                .map(|d| d.message)
                .collect();
            if !reading.is_empty() {
                return Err(PolicyError::ReadsUserMessages(reading));
            }
        }
        Ok(PolicyServer {
            engine: Arc::new(engine::Engine::new(machine, store, options)),
        })
    }

    /// Answers agentgateway's `CheckRequest` (with no trace context: the gRPC service
    /// passes the gateway's on).
    pub async fn check_request(&self, request: wire::McpRequest) -> wire::McpRequestResult {
        self.engine
            .check_request(request, &telemetry::Parent::default())
            .await
    }

    /// Answers agentgateway's `CheckResponse`.
    pub async fn check_response(&self, response: wire::McpResponse) -> wire::McpResponseResult {
        self.engine.check_response(response).await
    }

    /// Serves the ExtMcp gRPC service on `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), PolicyError> {
        service::serve(self, listener, shutdown).await
    }

    /// The approvals API over this server's runs (serve it with
    /// [`orch_approvals::serve`]), for the callers `approvers` lets in. Questions are
    /// posted for it only with [`Options::approvals`] set.
    pub fn approvals(
        &self,
        approvers: Arc<orch_approvals::Approvers>,
    ) -> orch_approvals::Approvals {
        let webhook = self
            .engine
            .options
            .approvals
            .as_ref()
            .and_then(|a| a.webhook.clone());
        let desk: Arc<dyn orch_approvals::Desk> = self.engine.clone();
        orch_approvals::Approvals::new(desk, approvers, webhook)
    }

    /// The options the server runs with.
    pub fn options(&self) -> &Options {
        &self.engine.options
    }
}

/// An operator's answer for the workflow run `run` (the name the gateway's
/// `metadata_context` gave it) held on a lost result (`lostResults`, semantics §15): the
/// held call ran, or it did not. `Ok(Some(tool))`: the held call's tool;
/// `Ok(None)`: the run is not held. `machine`: the template the server runs.
pub async fn resolve<S: SessionStore + ?Sized>(
    store: &S,
    machine: &orch_runtime::dynamic::DynMachine,
    run: &str,
    resolution: orch_run::Resolution,
) -> Result<Option<String>, orch_run::RunError> {
    orch_run::resolve_key(store, &engine::run_key(run), machine, resolution).await
}
