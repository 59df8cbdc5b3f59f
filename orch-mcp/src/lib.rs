//! An orchestrating MCP gateway: it sits between an MCP client (an editor, a desktop
//! app, an agent framework in any language) and a real MCP server, and enforces an orch
//! template on the way.
//!
//! - `tools/list` returns the upstream's tools that the session's orchestration allows
//!   now (upstream tools the template does not declare are foreign tools, judged by its
//!   patterns);
//! - a `tools/call` the orchestration does not allow now is answered with a tool result
//!   whose `isError` is true and whose text says why and what is allowed or expected
//!   next; it never reaches the upstream;
//! - an allowed call is forwarded; when the upstream answers with a result that is not
//!   an error, the tool is recorded (an `isError` result or a JSON-RPC error is not: the
//!   tool did not do its job, and the model may call it again);
//! - when the allowed tools change, the client gets `notifications/tools/list_changed`;
//! - prompts, resources, completion and logging pass through unchanged.
//!
//! One workflow run per credential or MCP session: over Streamable HTTP, the run a
//! bearer token names (minted by `POST /runs`; the only key clients on MCP 2026-07-28,
//! which has no sessions, can have) or else the `Mcp-Session-Id` of a client on a
//! handshake revision; over stdio, the connection. Each is kept as one record
//! (handshake, workflow state, the call in flight) in any [`orch_store::SessionStore`]
//! (a Redis store lets several gateway instances share them). Clients and the upstream
//! may each speak 2026-07-28 or a handshake revision. A call is admitted and its session leased in one
//! compare-and-set before it is forwarded, so a refused call never reaches the upstream,
//! across tasks and instances alike; every upstream request has a time limit
//! ([`Options::call_timeout`]), and the HTTP side caps sessions, requests and connections
//! and cuts off slow clients ([`HttpOptions`]). The `orch mcp` command of the `orch` CLI
//! is a thin face over this crate; see `docs/mcp.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), orch_mcp::GatewayError> {
//! use orch_mcp::{Gateway, Options, Upstream};
//! let compiled = orch_codegen::compile_json(
//!     r#"{"name": "research", "tools": ["search", "summarize"],
//!         "steps": [{"name": "research", "isDefault": true,
//!                    "sequence": ["search", "summarize"]}]}"#,
//!     None,
//! );
//! let machine = compiled.to_machine().expect("a valid template");
//! let upstream = Upstream::Command { program: "my-mcp-server".into(), args: vec![] };
//! let gateway = Gateway::start(machine, &upstream, orch_store::MemoryStore::new(), &Options::default()).await?;
//! gateway.serve_stdio().await
//! # }
//! ```

#![deny(missing_docs)]

mod approval;
mod child;
mod error;
mod framing;
mod handler;
mod http;
mod instances;
mod jwt;
mod pooled;
mod runs;
mod telemetry;
mod unfinished;
mod upstream;

pub use instances::{Bus, BusError, BusFuture};
pub use jwt::{Jwks, JwtOptions};
pub use upstream::Upstream;

/// The store key of the one run of [`HttpOptions::anonymous_run`].
pub const ANONYMOUS_RUN: &str = "anon:run";

use handler::{Downstream, Shared};
use orch_runtime::dynamic::DynMachine;
use orch_store::SessionStore;
use rmcp::model::{InitializeResult, ServerCapabilities, ServerPeerInfo, ToolsCapability};
use rmcp::service::{QuitReason, RunningServiceCancellationToken};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use upstream::Relay;

/// What went wrong with a gateway. `orch mcp` exits with status 2 on any of them.
#[derive(Debug)]
#[non_exhaustive]
pub enum GatewayError {
    /// The upstream MCP server could not be started or reached, failed its handshake,
    /// or could not list its tools at start.
    UpstreamStart(String),
    /// The upstream MCP server went away while the gateway was serving.
    UpstreamGone(String),
    /// The MCP client's handshake failed (stdio): the MCP SDK's error.
    ClientHandshake(Box<dyn std::error::Error + Send + Sync>),
    /// The options cannot be used: they conflict, or a file or key set they name cannot
    /// be read.
    Options(String),
    /// The address cannot be listened on.
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Serving HTTP failed.
    Serve(std::io::Error),
    /// The other instances of the gateway could not be reached: the bus's error.
    Instances(instances::BusError),
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayError::UpstreamStart(why)
            | GatewayError::UpstreamGone(why)
            | GatewayError::Options(why) => f.write_str(why),
            GatewayError::ClientHandshake(why) => {
                write!(f, "the MCP client's handshake failed: {why}")
            }
            GatewayError::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            GatewayError::Serve(e) => write!(f, "cannot serve HTTP: {e}"),
            GatewayError::Instances(why) => {
                write!(f, "cannot reach the other gateway instances: {why}")
            }
        }
    }
}

impl std::error::Error for GatewayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GatewayError::Listen { source, .. } | GatewayError::Serve(source) => Some(source),
            GatewayError::ClientHandshake(source) | GatewayError::Instances(source) => {
                Some(source.as_ref())
            }
            GatewayError::UpstreamStart(_)
            | GatewayError::UpstreamGone(_)
            | GatewayError::Options(_) => None,
        }
    }
}

/// How the gateway starts and bounds its work (for stdio and HTTP alike).
#[derive(Clone, Debug)]
pub struct Options {
    /// How long the upstream may take to start and answer the MCP handshake (default
    /// 30 s): at the gateway's start, and for each HTTP session's own upstream connection.
    pub startup_timeout: Duration,
    /// How long any request to the upstream may take: a tool call, a re-fetch of its
    /// tool list, a forwarded prompt or resource request (default 120 s). A tool call
    /// that runs out of time is answered with an error, cancelled upstream, recorded
    /// nowhere, and its session is free again.
    pub call_timeout: Duration,
    /// How many client requests the gateway handles at once (default 256); one more is
    /// answered with a JSON-RPC error (-32000) at once.
    pub max_in_flight: usize,
    /// Where to write a decision record of every call the gateway judges, every tool it
    /// records and every approval question and answer (`orch_agent::audit`); the `run`
    /// of a record is the run's (or session's) store key. Default: none.
    pub audit: Option<Arc<orch_agent::audit::Auditor>>,
    /// Put questions about gated calls to approvers who are not the agent's user
    /// ([`Gateway::approvals`], docs/approvals.md) instead of the client's human.
    /// Default: off (the client is asked, when it can be).
    pub approvals: Option<Posting>,
    /// Enforce the template (the default) or only judge and record each call
    /// ([`orch_agent::Mode::Observe`]: every call is forwarded, nothing is asked, every
    /// upstream tool is listed, and the decision log says what orch would have done).
    pub mode: orch_agent::Mode,
}

/// How questions are put to approvers elsewhere ([`Options::approvals`]): the run keeps
/// each question for the approvals API, the call waits for the answer at most `wait`,
/// then is refused with the question's id (its retry before the answer is refused with
/// the same question; after an approval it runs once).
#[derive(Clone, Debug)]
pub struct Posting {
    /// How long a gated call waits for an approver's answer before it is refused with
    /// the question's id (`Duration::ZERO`: refused at once).
    pub wait: Duration,
    /// Where each new question and each answer is announced, if anywhere.
    pub webhook: Option<orch_approvals::Webhook>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            startup_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(120),
            max_in_flight: 256,
            audit: None,
            approvals: None,
            mode: orch_agent::Mode::Enforce,
        }
    }
}

/// The bounds the gateway's request handling keeps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) call_timeout: Duration,
    /// How long a session's own upstream connection may take to start and complete its
    /// handshake (the upstream's start, as at the gateway's own start).
    pub(crate) startup_timeout: Duration,
    pub(crate) max_in_flight: usize,
    /// How long a question put to a human stays answerable.
    pub(crate) question_ttl: Duration,
    /// Whether the gateway enforces its decisions or only records them.
    pub(crate) mode: orch_agent::Mode,
}

/// How the gateway serves Streamable HTTP.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// `Host` values accepted besides the loopback names (`localhost`, `127.0.0.1`,
    /// `::1`), which protect a local server from DNS rebinding: add the names clients
    /// use to reach a public deployment.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides the loopback ones (`http://localhost`,
    /// `http://127.0.0.1`, `http://[::1]`, any port), e.g. `https://app.example.com`.
    /// A request with any other `Origin` header is refused with 403; requests without
    /// one (every non-browser client) are not affected.
    pub allowed_origins: Vec<String>,
    /// When set, every request must carry `Authorization: Bearer <token>` (401
    /// otherwise).
    pub bearer_token: Option<String>,
    /// How many sessions the gateway holds at once (default 10,000): an `initialize`
    /// beyond it is refused with 503 and `Retry-After`, never by evicting a session.
    /// Counted as this instance's session workers, and the sessions in the store when
    /// the store can count them (in memory).
    pub max_sessions: usize,
    /// How many connections are open at once (default 1,024); one more is closed at
    /// once.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (default 10 s).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body (default 30 s; 408 after).
    pub body_timeout: Duration,
    /// The session TTL the store was built with (default 24 hours). The MCP SDK's
    /// in-memory worker of a session is let go after half of it with none of the
    /// session's requests open (at most five minutes; a request still being answered,
    /// however long it takes, keeps it); the session itself lives in the store, and the
    /// next request restores it. Only the store's TTL ends a session.
    pub session_ttl: Duration,
    /// The longest life of a run minted by `POST /runs` (default 24 hours; a request
    /// may ask for less). A run also ends when it is revoked, or idle for the store's
    /// TTL.
    pub run_ttl: Duration,
    /// When set, a bearer JWT from this identity provider is a run credential too: the
    /// run is named by one of its claims. Like the bearer token, it makes
    /// authentication required.
    pub jwt: Option<JwtOptions>,
    /// MCP 2026-07-28 requests that present no run credential all belong to one run
    /// (kept under [`ANONYMOUS_RUN`] in the store, so instances sharing it share the
    /// run), as the one run over stdio — for a gateway with one user. Refused with an
    /// operator token or JWTs.
    pub anonymous_run: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            bearer_token: None,
            max_sessions: 10_000,
            max_connections: 1_024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            session_ttl: Duration::from_secs(86_400),
            run_ttl: Duration::from_secs(86_400),
            jwt: None,
            anonymous_run: false,
        }
    }
}

/// A gateway connected to its upstream, ready to serve clients.
pub struct Gateway<S> {
    shared: Arc<Shared<S>>,
    gone: watch::Receiver<Option<String>>,
    upstream_ct: RunningServiceCancellationToken,
    /// Stops the task that re-fetches the upstream's tools when the gateway is dropped.
    _refresher: tokio_util::sync::DropGuard,
}

impl<S: SessionStore + 'static> Gateway<S> {
    /// Starts (or reaches) the upstream MCP server, completes its handshake within
    /// [`Options::startup_timeout`], and reads its tool list. Sessions are kept in
    /// `store`.
    pub async fn start(
        machine: DynMachine,
        upstream: &Upstream,
        store: S,
        options: &Options,
    ) -> Result<Self, GatewayError> {
        let relay = Arc::new(Relay::default());
        let running =
            upstream::connect(upstream, Arc::clone(&relay), options.startup_timeout).await?;
        Self::started(
            machine,
            running,
            upstream.to_string(),
            Some(upstream.clone()),
            relay,
            store,
            options,
        )
        .await
    }

    /// [`Gateway::start`] with an upstream already at the other end of `transport` (an
    /// in-process server, a socket): `what` names it in errors. There is one connection,
    /// so every client session shares it: what the upstream says that is not about one
    /// request (a log line, a resource update) reaches a client only while that
    /// client's request is the only one in flight ([`Gateway::start`] opens a
    /// connection per session instead).
    pub async fn start_on<T, E, A>(
        machine: DynMachine,
        transport: T,
        what: &str,
        store: S,
        options: &Options,
    ) -> Result<Self, GatewayError>
    where
        T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let relay = Arc::new(Relay::default());
        let running =
            upstream::connect_on(transport, what, Arc::clone(&relay), options.startup_timeout)
                .await?;
        Self::started(
            machine,
            running,
            what.to_owned(),
            None,
            relay,
            store,
            options,
        )
        .await
    }

    async fn started(
        machine: DynMachine,
        running: upstream::Running,
        what: String,
        reconnect: Option<Upstream>,
        relay: Arc<Relay>,
        store: S,
        options: &Options,
    ) -> Result<Self, GatewayError> {
        let upstream = what.clone();
        let peer = running.peer().clone();
        let upstream_info = peer.peer_info().map(|info| (*info).clone());
        let upstream_ct = running.cancellation_token();
        let link = upstream::Link {
            peer: peer.clone(),
            gone: relay.upstream_gone.clone(),
            routes: Arc::clone(&running.service().routes),
            kept: None,
        };
        let (gone_tx, gone) = watch::channel(None);
        let gone_tx = Arc::new(gone_tx);
        let ended = Arc::clone(&gone_tx);
        // Fires when the upstream goes away, so that requests in flight are answered at
        // once instead of waiting for the MCP SDK to give up on them.
        let gone_token = relay.upstream_gone.clone();
        tokio::spawn(async move {
            let _fire = gone_token.drop_guard();
            let reason = match running.waiting().await {
                Ok(QuitReason::Cancelled) => return,
                Ok(_) => format!("the upstream MCP server {what} closed the connection"),
                Err(e) => format!("the upstream MCP server {what} failed: {e}"),
            };
            let _ = gone_tx.send(Some(reason));
        });
        // Fail now, not at the first client request, if the upstream cannot list tools.
        let limit = options.startup_timeout;
        let tools = match tokio::time::timeout(limit, peer.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                return Err(GatewayError::UpstreamStart(format!(
                    "the upstream MCP server {upstream} cannot list its tools: {}",
                    handler::upstream_error(e, "tools/list", limit).message
                )))
            }
            Err(_) => {
                return Err(GatewayError::UpstreamStart(format!(
                    "the upstream MCP server {upstream} did not list its tools within {} s",
                    limit.as_secs_f64()
                )))
            }
        };
        let info = gateway_info(upstream_info);
        let limits = Limits {
            call_timeout: options.call_timeout,
            startup_timeout: options.startup_timeout,
            max_in_flight: options.max_in_flight,
            question_ttl: orch_agent::protocol::DEFAULT_QUESTION_TTL,
            mode: options.mode,
        };
        let shared = Arc::new(Shared::new(
            machine,
            store,
            link,
            reconnect,
            ended,
            info,
            Arc::clone(&relay),
            limits,
            tools,
            options.audit.clone(),
            options.approvals.clone(),
        ));
        // Re-fetch the upstream's tools when it says they changed: one task, so a
        // re-fetch that hangs (bounded by the call timeout) blocks no request.
        let weak = Arc::downgrade(&shared);
        let refresher = tokio_util::sync::CancellationToken::new();
        let stop = refresher.clone();
        if upstream::is_modern(&shared.upstream.peer) {
            tokio::spawn(upstream::listen_upstream(
                shared.upstream.peer.clone(),
                Arc::clone(&relay),
                refresher.clone(),
            ));
        }
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = relay.upstream_tools_changed.notified() => {}
                    () = stop.cancelled() => return,
                }
                let Some(shared) = weak.upgrade() else { return };
                shared.refresh_tools().await;
            }
        });
        Ok(Gateway {
            shared,
            gone,
            upstream_ct,
            _refresher: refresher.drop_guard(),
        })
    }

    /// Serves one client over this process's standard input and output (see
    /// [`Gateway::serve_io`]).
    pub async fn serve_stdio(self) -> Result<(), GatewayError> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client, one JSON-RPC message per line, over `input` and `output`.
    /// Returns `Ok` when the client hangs up, an error when the upstream goes away
    /// (tool calls in flight are answered with an error first) or the handshake fails.
    pub async fn serve_io<R, W>(mut self, input: R, output: W) -> Result<(), GatewayError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (ours, sdk) = tokio::io::duplex(1 << 16);
        let pump = tokio::spawn(framing::pump(input, output, ours));
        let downstream = Downstream::new(
            Arc::clone(&self.shared),
            Some(format!("stdio-{}", std::process::id())),
        );
        let outcome = tokio::select! {
            served = rmcp::serve_server(downstream, sdk) => match served {
                Err(e) => Err(GatewayError::ClientHandshake(Box::new(e))),
                Ok(running) => {
                    let ct = running.cancellation_token();
                    tokio::select! {
                        _ = running.waiting() => Ok(()),
                        reason = upstream_gone(&mut self.gone) => {
                            self.drain().await;
                            ct.cancel();
                            Err(GatewayError::UpstreamGone(reason))
                        }
                    }
                }
            },
            reason = upstream_gone(&mut self.gone) => Err(GatewayError::UpstreamGone(reason)),
        };
        self.upstream_ct.cancel();
        // Let the replies already written reach the client.
        let _ = tokio::time::timeout(Duration::from_secs(2), pump).await;
        outcome
    }

    /// The approvals API over this gateway's runs (serve it with
    /// [`orch_approvals::serve`]), for the callers `approvers` lets in. Questions are
    /// posted for it only with [`Options::approvals`] set.
    pub fn approvals(
        &self,
        approvers: Arc<orch_approvals::Approvers>,
    ) -> orch_approvals::Approvals {
        let webhook = self.shared.posting.as_ref().and_then(|p| p.webhook.clone());
        let desk: Arc<dyn orch_approvals::Desk> = self.shared.clone();
        orch_approvals::Approvals::new(desk, approvers, webhook)
    }

    /// Joins the other instances of this gateway that share its store (behind a load
    /// balancer) through `bus`: a client's answer to a question the upstream asked, and
    /// a notification for a session's standalone stream, reach the instance that waits
    /// for it or holds that stream, wherever the balancer sent them. Without a bus an
    /// instance serves what reaches it (right for one instance). The subscription is
    /// made before this returns.
    pub async fn join_instances(&self, bus: Arc<dyn Bus>) -> Result<(), GatewayError> {
        self.shared
            .relay
            .instances
            .join(bus)
            .await
            .map_err(GatewayError::Instances)
    }

    /// Serves Streamable HTTP at `/mcp` on `listener`, one orchestration session per
    /// MCP session, each kept (handshake, workflow state, call in flight) in the
    /// gateway's store: another gateway instance on the same store (Redis) serves the
    /// same sessions. Returns an error when the upstream goes away.
    pub async fn serve_http(
        mut self,
        listener: tokio::net::TcpListener,
        options: &HttpOptions,
    ) -> Result<(), GatewayError> {
        let mut config = StreamableHttpServerConfig::default();
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        hosts.extend(options.allowed_hosts.iter().cloned());
        let mut origins: Vec<String> = [
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
            "https://[::1]:*",
        ]
        .map(String::from)
        .into();
        origins.extend(options.allowed_origins.iter().cloned());
        config = config
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(http::MAX_BODY);
        config.session_store = Some(Arc::new(http::Handshakes(Arc::clone(&self.shared))));
        let ct = config.cancellation_token.clone();
        // The gateway lets idle workers go itself ([`http::let_idle_go`]): the SDK's own
        // timer counts messages only, and closed the stream of a request still being
        // answered when it took longer than the timer.
        let mut session_config = SessionConfig::default();
        session_config.keep_alive = None;
        let mut manager = LocalSessionManager::default();
        manager.session_config = session_config;
        let manager = Arc::new(manager);
        let shared = Arc::clone(&self.shared);
        let service = StreamableHttpService::new(
            move || Ok(Downstream::new(Arc::clone(&shared), None)),
            Arc::clone(&manager),
            config,
        );
        if options.anonymous_run && (options.bearer_token.is_some() || options.jwt.is_some()) {
            return Err(GatewayError::Options(
                "an anonymous run is for a gateway without authentication: with an operator token or JWTs every run has a credential".into(),
            ));
        }
        let jwt = match &options.jwt {
            Some(jwt) => Some(jwt::JwtVerifier::load(jwt.clone()).await?),
            None => None,
        };
        let guarded = Arc::new(http::Guarded {
            shared: Arc::clone(&self.shared),
            manager,
            options: options.clone(),
            jwt,
            restoring: Arc::default(),
            activity: http::Activity::new(worker_idle(options.session_ttl)),
        });
        tokio::spawn(http::let_idle_go(
            Arc::clone(&guarded.activity),
            Arc::downgrade(&guarded.manager),
        ));
        let app = axum::Router::new().nest_service("/mcp", service).layer(
            axum::middleware::from_fn_with_state(guarded, http::guard::<S>),
        );
        let mut gone = self.gone.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<String>();
        let served = http::serve(
            listener,
            app,
            options.max_connections,
            options.header_timeout,
            async move {
                let reason = upstream_gone(&mut gone).await;
                let _ = stop_tx.send(reason);
            },
        )
        .await;
        self.drain().await;
        ct.cancel();
        self.upstream_ct.cancel();
        match (served, stop_rx.await) {
            (_, Ok(reason)) => Err(GatewayError::UpstreamGone(reason)),
            (Err(e), _) => Err(GatewayError::Serve(e)),
            (Ok(()), Err(_)) => Ok(()),
        }
    }

    /// Waits (at most ten seconds) for the tool calls in flight to be answered: each is
    /// woken when the upstream goes away, but on a loaded machine the answer may take a
    /// moment to be written.
    async fn drain(&mut self) {
        for _ in 0..500 {
            if self.shared.in_flight.load(Ordering::SeqCst) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How long an idle session's worker stays in memory — none of the session's requests
/// open for that long: half the session TTL, at most five minutes, at least one second.
/// The session outlives its worker (it is restored from the store at its next request).
fn worker_idle(session_ttl: Duration) -> Duration {
    (session_ttl / 2).clamp(Duration::from_secs(1), Duration::from_secs(300))
}

/// Resolves when the upstream has gone away, with the reason.
async fn upstream_gone(gone: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(reason) = gone.borrow_and_update().clone() {
            return reason;
        }
        if gone.changed().await.is_err() {
            // The watcher ended without a reason: the gateway itself stopped it.
            std::future::pending::<()>().await;
        }
    }
}

/// What the gateway advertises: the upstream's identity, instructions and capabilities
/// for prompts, resources, completion and logging, and tools with `listChanged` (the
/// allowed tools change as the workflow advances).
fn gateway_info(upstream: Option<ServerPeerInfo>) -> InitializeResult {
    let mut info = InitializeResult::default();
    let mut tools = ToolsCapability::default();
    tools.list_changed = Some(true);
    let mut capabilities = ServerCapabilities::default();
    if let Some(up) = upstream {
        capabilities.prompts = up.capabilities.prompts;
        capabilities.resources = up.capabilities.resources;
        capabilities.completions = up.capabilities.completions;
        capabilities.logging = up.capabilities.logging;
        if let Some(server_info) = up.server_info {
            info.server_info = server_info;
        }
        info.instructions = up.instructions;
    }
    capabilities.tools = Some(tools);
    info.capabilities = capabilities;
    info
}
