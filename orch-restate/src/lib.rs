//! Durable orch runs on [Restate](https://restate.dev): a run survives crashes of the
//! process that serves it and of the server, and waits hours or days for a human.
//!
//! - A **run** is the virtual object `OrchRun`, keyed by the run's id. Its state is the
//!   orch session (the snapshot bytes, by names, which carry the template's
//!   fingerprint). Its handlers: `call` judges a tool call with the run protocol, refuses with orch's
//!   reason, and runs an allowed call inside Restate's journaled `ctx.run`, recording it
//!   only when its result says it ran; `message` applies a user message; `list` and
//!   `status` read the run. Calls of one run are serial (an exclusive handler); runs are
//!   independent.
//! - The **agent loop** (`OrchAgent`, [`Runs::agent`]): a turn's model calls and tool
//!   calls are journaled — a turn cut short by a crash goes on where it stopped, without
//!   calling the model or a tool again for what completed.
//! - A **gated call** suspends durably with its question: the run holds the question, an
//!   awakeable waits for the human, and `OrchApprovals` (a virtual object with the same
//!   key) lists what is pending and resolves it — `resolve` with the question's ticket,
//!   or Restate's own `POST /restate/awakeables/<id>/resolve`. Approve runs that exact
//!   call once; reject records the rejection; a second resolution does nothing.
//!
//! ```no_run
//! use orch_restate::{Runs, ToolCall, ToolError};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let template = r#"{"name": "desk", "tools": ["lookup", "refund"],
//!   "orchestration": {"steps": [{"name": "Desk", "isDefault": true,
//!     "sequence": ["lookup", "refund"]}], "approve": ["refund"]}}"#;
//! let machine = orch_codegen::compile_json(template, None)
//!     .to_machine()
//!     .ok_or("the template does not compile")?;
//! let runs = Runs::new().template(machine, |call: ToolCall| async move {
//!     // Pass `call.idempotency_key` on to anything with effects: a retry after a crash
//!     // carries the same key.
//!     Ok::<_, ToolError>(json!({"content": [{"type": "text", "text": format!("did {}", call.tool)}]}))
//! });
//! runs.serve("127.0.0.1:9080".parse()?).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Register the endpoint with the server (`restate deployments register
//! http://127.0.0.1:9080`, or `POST /deployments` on its admin port) and call
//! `POST <ingress>/OrchRun/<run>/call` with `{"tool": "lookup", "arguments": {...}}`.
//! docs/restate.md says what is guaranteed exactly once and what at least once.

#![deny(missing_docs)]

mod agent;
mod approvals;
mod run;
mod serve;

pub use serve::serve_endpoint;

pub use agent::{ModelTurn, OrchAgent, OrchAgentClient, TurnCall, TurnReply};
pub use approvals::{OrchApprovals, OrchApprovalsClient, Pending, Resolution, Resolve, Resolved};
pub use run::{CallReply, CallRequest, Ended, OrchRun, OrchRunClient, Status};

use orch_agent::Policy;
use orch_runtime::DynMachine;
use restate_sdk::prelude::{Endpoint, HandlerOptions, IntoServiceDefinition, ServiceOptions};
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// One tool call to run: what a [`Tools`] implementation gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The run's key (`OrchRun`'s object key).
    pub run: String,
    /// The tool.
    pub tool: String,
    /// The arguments as the caller wrote them (a JSON text, byte for byte).
    pub arguments: String,
    /// The same for every attempt of this call (a retry after a crash or a failure
    /// carries it again) and different for every other call: pass it on to anything
    /// with effects so that the effect happens once.
    pub idempotency_key: String,
}

/// A tool that could not be run this time (a network failure, a service down): the
/// attempt is retried (up to [`Runs::tool_attempts`]). A tool that ran and failed
/// answers with a result instead (`{"content": [...], "isError": true}`): not retried,
/// not recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError(pub String);

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

impl ToolError {
    /// A failure saying `why`.
    pub fn new(why: impl Into<String>) -> Self {
        ToolError(why.into())
    }
}

/// What running a tool returns: its result (an MCP `CallToolResult`: `{"content":
/// [...]}`, `"isError": true` when the tool failed), or why it could not be run now.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// Runs a template's tools. Implemented for every `Fn(ToolCall) -> impl Future<Output =
/// Result<Value, ToolError>>`. Only a complete, successful result counts as the tool
/// having run (`orch_agent::protocol::classify`).
pub trait Tools: Send + Sync + 'static {
    /// Runs `call`.
    fn call(&self, call: ToolCall) -> ToolFuture;
}

impl<F, Fut> Tools for F
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn call(&self, call: ToolCall) -> ToolFuture {
        Box::pin(self(call))
    }
}

/// A template the service serves, with the tools it runs.
pub(crate) struct Template {
    pub(crate) machine: Arc<DynMachine>,
    pub(crate) policy: Policy,
    pub(crate) tools: Arc<dyn Tools>,
}

/// The templates a Restate endpoint serves runs of, and how: build with
/// [`Runs::template`], then [`Runs::endpoint`] (to bind more services yourself) or
/// [`Runs::serve`].
///
/// A run's key picks its template: `<template name>:<id>` for a template of that name;
/// any other key, when the service has exactly one template, is a run of that one.
pub struct Runs {
    pub(crate) templates: BTreeMap<String, Template>,
    pub(crate) agents: BTreeMap<String, agent::Agent>,
    pub(crate) question_ttl: Duration,
    pub(crate) tool_attempts: u32,
    /// `OrchApprovals/pending` and `/resolve` are private to Restate's services too.
    pub(crate) private_approvals: bool,
    /// Restate request-identity keys the endpoint checks every request against.
    pub(crate) identity_keys: Vec<String>,
}

impl Default for Runs {
    fn default() -> Self {
        Runs::new()
    }
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("templates", &self.templates.keys().collect::<Vec<_>>())
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("question_ttl", &self.question_ttl)
            .field("tool_attempts", &self.tool_attempts)
            .field("private_approvals", &self.private_approvals)
            .field("identity_keys", &self.identity_keys.len())
            .finish()
    }
}

impl Runs {
    /// No templates yet; questions answerable for 24 hours; a tool attempted up to 3
    /// times.
    pub fn new() -> Self {
        Runs {
            templates: BTreeMap::new(),
            agents: BTreeMap::new(),
            question_ttl: orch_agent::protocol::DEFAULT_QUESTION_TTL,
            tool_attempts: 3,
            private_approvals: false,
            identity_keys: Vec::new(),
        }
    }

    /// Serves runs of `machine` (under its template name), its tools run by `tools`.
    /// A second template of the same name replaces the first.
    pub fn template(self, machine: DynMachine, tools: impl Tools) -> Self {
        self.template_in(machine, tools, orch_agent::Mode::Enforce)
    }

    /// [`Runs::template`] in `mode`: with [`orch_agent::Mode::Observe`] every call of
    /// the template's runs is judged and recorded as in enforce mode, and runs — nothing
    /// is refused, nothing asked (docs/rollout.md). `status` says the mode.
    pub fn template_in(
        mut self,
        machine: DynMachine,
        tools: impl Tools,
        mode: orch_agent::Mode,
    ) -> Self {
        let policy = Policy::new(machine.tools().iter().cloned()).in_mode(mode);
        self.templates.insert(
            machine.name().to_owned(),
            Template {
                machine: Arc::new(machine),
                policy,
                tools: Arc::new(tools),
            },
        );
        self
    }

    /// How long a question put to a human stays answerable (default 24 hours). An answer
    /// that comes later is refused as stale and nothing runs.
    pub fn question_ttl(mut self, ttl: Duration) -> Self {
        self.question_ttl = ttl;
        self
    }

    /// How many times a tool that could not be run ([`ToolError`]) is attempted before
    /// the call counts as not run (default 3; at least 1).
    pub fn tool_attempts(mut self, attempts: u32) -> Self {
        self.tool_attempts = attempts.max(1);
        self
    }

    /// Makes `OrchApprovals/<run>/pending` and `/resolve` private too (default: they are
    /// reachable on Restate's ingress, so anyone who reaches the ingress can answer a
    /// question — an agent allowed to call `OrchRun` included). Private, they are
    /// answered only by a service of yours bound to the same Restate server — one that
    /// authenticates the approver (bearer tokens, your SSO) and calls them with
    /// [`OrchApprovalsClient`]. docs/restate.md shows one.
    pub fn private_approvals(mut self, private: bool) -> Self {
        self.private_approvals = private;
        self
    }

    /// Accepts only requests that Restate signed with the private key of this public key
    /// (`publickeyv1_…`, Restate's request identity: `request-identity-private-key-pem-file`
    /// in the server's configuration). Without one, whoever reaches the endpoint's port
    /// can invoke its handlers directly, around the server and its ingress rules. `Err`
    /// when the key cannot be read.
    pub fn identity_key(mut self, key: &str) -> Result<Self, String> {
        // Checked now, so that a bad key is said where it is given.
        Endpoint::builder()
            .identity_key(key)
            .map_err(|e| format!("the identity key `{key}` cannot be read: {e:?}"))?;
        self.identity_keys.push(key.to_owned());
        Ok(self)
    }

    /// The Restate endpoint serving `OrchRun` and `OrchApprovals` (and `OrchAgent` when
    /// a template has an agent: [`Runs::agent`]). `OrchApprovals/ask` and `/done` are
    /// internal (called by `OrchRun` only): they are not reachable from Restate's
    /// ingress.
    pub fn endpoint(self) -> Endpoint {
        let with_agent = !self.agents.is_empty();
        let mut approvals = ServiceOptions::new();
        let mut private = vec!["ask", "done"];
        if self.private_approvals {
            private.extend(["pending", "resolve"]);
        }
        for handler in private {
            approvals = approvals.handler(handler, HandlerOptions::new().ingress_private(true));
        }
        let keys = self.identity_keys.clone();
        let builder = keys
            .iter()
            .try_fold(Endpoint::builder(), |b, key| b.identity_key(key));
        let Ok(builder) = builder else {
            // Each key was read when given, so this does not happen; were it to, the
            // endpoint fails closed: it serves nothing rather than serve unchecked.
            return Endpoint::builder().build();
        };
        let runs = Arc::new(self);
        let builder = builder
            .bind(OrchRun::new(Arc::clone(&runs)))
            .bind(OrchApprovals.into_service_definition().options(approvals));
        match with_agent {
            true => builder.bind(OrchAgent { runs }).build(),
            false => builder.build(),
        }
    }

    /// Serves the endpoint over HTTP/2 at `address` until the process is interrupted
    /// (Ctrl-C), with `TCP_NODELAY` on every connection (the SDK's `HttpServer` leaves
    /// Nagle's algorithm on, which stalls a call with two journaled steps by up to
    /// 40 ms). An error if `address` cannot be listened on.
    pub async fn serve(self, address: SocketAddr) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let interrupted = async {
            // Without a signal handler there is nothing to wait for: serve on.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        serve_endpoint(self.endpoint(), listener, interrupted).await;
        Ok(())
    }

    /// The template of the run `key`, and the run's id within it.
    pub(crate) fn template_of(&self, key: &str) -> Result<&Template, String> {
        if let Some((name, _)) = key.split_once(':') {
            if let Some(template) = self.templates.get(name) {
                return Ok(template);
            }
        }
        let mut all = self.templates.values();
        match (all.next(), all.next()) {
            (Some(only), None) => Ok(only),
            (None, _) => Err("this service serves no template".to_owned()),
            _ => Err(format!(
                "the run `{key}` names none of this service's templates: a key is `<template>:<id>`, the templates being {}",
                self.templates
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}
