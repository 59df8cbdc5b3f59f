//! `orch mcp`: the orchestrating MCP gateway (the `orch-mcp` crate) behind a command.

use crate::{with_template_as, Pipeline, FOUND_ERRORS, OK, USAGE_OR_IO};
use orch_mcp::{Gateway, GatewayError, HttpOptions, Jwks, JwtOptions, Options, Upstream};
use orch_store::MemoryStore;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

/// The command line of `orch mcp`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The template file.
    pub(crate) file: String,
    /// Serve Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8080), one
    /// orchestration session per MCP session, instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<String>,
    /// The upstream MCP server speaks Streamable HTTP at this URL (instead of COMMAND).
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub(crate) upstream_url: Option<String>,
    /// Keep sessions in Redis (with --listen), so that several gateway instances
    /// behind a load balancer share them.
    #[arg(
        long,
        value_name = "URL",
        requires = "listen",
        conflicts_with = "redis_cluster"
    )]
    pub(crate) redis: Option<String>,
    /// Keep sessions in a Redis Cluster (with --listen): a seed node's URL
    /// (repeatable).
    #[arg(long, value_name = "URL", requires = "listen")]
    pub(crate) redis_cluster: Vec<String>,
    /// The Redis key prefix.
    #[arg(long, value_name = "NS", default_value = "orch-mcp")]
    pub(crate) namespace: String,
    /// A session ends after this long without a request (HTTP; a stdio session lasts
    /// as long as the process).
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub(crate) session_ttl: u64,
    /// The longest life of a workflow run started with POST /runs (a request may ask
    /// for less); a run also ends when revoked, or after --session-ttl without a
    /// request.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub(crate) run_ttl: u64,
    /// A `Host` name HTTP clients may use besides the loopback names (repeatable).
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub(crate) allowed_hosts: Vec<String>,
    /// A browser `Origin` accepted besides the loopback ones, e.g.
    /// https://app.example.com (repeatable).
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub(crate) allowed_origins: Vec<String>,
    /// Require `Authorization: Bearer <token>` on every HTTP request, the token read
    /// from this file (surrounding whitespace ignored). The environment variable
    /// ORCH_MCP_TOKEN is the other way to give it.
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub(crate) auth_token_file: Option<String>,
    /// Serve a non-loopback address without a bearer token (anyone who reaches the
    /// port can drive the upstream's tools).
    #[arg(long, requires = "listen")]
    pub(crate) insecure_no_auth: bool,
    /// MCP 2026-07-28 requests without a run credential all belong to one run of this
    /// gateway (shared by instances on one store), as the one run of `orch mcp` over
    /// stdio: for a gateway with one user. Not with an operator token or JWTs.
    #[arg(long, requires = "listen")]
    pub(crate) anonymous_run: bool,
    /// Accept JWTs from an identity provider as run credentials, checked against its
    /// JSON Web Key Set: a file, or its jwks_uri (http or https). Needs --jwt-issuer and
    /// --jwt-audience.
    #[arg(
        long,
        value_name = "FILE|URL",
        requires_all = ["listen", "jwt_issuer", "jwt_audience"]
    )]
    pub(crate) jwt_jwks: Option<String>,
    /// The `iss` every JWT must carry.
    #[arg(long, value_name = "ISSUER", requires = "jwt_jwks")]
    pub(crate) jwt_issuer: Option<String>,
    /// An `aud` every JWT must carry (this gateway's name at the provider).
    #[arg(long, value_name = "AUDIENCE", requires = "jwt_jwks")]
    pub(crate) jwt_audience: Option<String>,
    /// The JWT claim whose value names the run.
    #[arg(
        long,
        value_name = "CLAIM",
        default_value = "sub",
        requires = "jwt_jwks"
    )]
    pub(crate) jwt_run_claim: String,
    /// How long the upstream may take to start and answer the MCP handshake.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) startup_timeout: u64,
    /// How long any request to the upstream may take (a tool call, a re-fetch of its
    /// tools); a call past it is answered with an error, cancelled and not recorded.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub(crate) call_timeout: u64,
    /// Client requests handled at once; one more is refused at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub(crate) max_in_flight: usize,
    /// `enforce` (the default) refuses what the template refuses and asks what it gates;
    /// `observe` judges and records every call the same way but refuses and asks
    /// nothing: every call runs, every tool is listed, and the decision log (records
    /// with `"mode":"observe"`) says what orch would have done (docs/rollout.md).
    #[arg(long, value_name = "MODE", default_value = "enforce", value_parser = crate::serving::parse_mode)]
    pub(crate) mode: orch_agent::Mode,
    #[command(flatten)]
    pub(crate) audit: crate::audit_log::AuditArgs,
    #[command(flatten)]
    pub(crate) approvals: crate::approvals::ServeArgs,
    /// With --approvals: how long a gated call waits for an approver's answer before it
    /// is refused with the question's id (0: refused at once; the retry after an
    /// approval runs once).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub(crate) approval_wait: u64,
    /// Export a server span per `tools/call` (in the caller's trace when its `_meta`
    /// carries a `traceparent`, which is passed on upstream) and the decision counter
    /// over OTLP/HTTP to the collector at this base URL, e.g. http://127.0.0.1:4318
    /// (docs/audit.md).
    #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub(crate) otlp_endpoint: Option<String>,
    /// Sessions held at once (HTTP); a new one beyond it is refused with 503.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub(crate) max_sessions: usize,
    /// HTTP connections open at once; one more is closed at once.
    #[arg(long, value_name = "N", default_value_t = 1_024)]
    pub(crate) max_connections: usize,
    /// How long an HTTP client may take to send a request's headers.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub(crate) header_timeout: u64,
    /// How long an HTTP client may take to send a request's body.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) body_timeout: u64,
    /// The upstream MCP server's command and arguments, after `--`. It inherits
    /// this process's environment.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
}

/// Runs the gateway: 1 when the template has errors (nothing is started), 2 when the
/// upstream cannot be started or goes away, or the address cannot be served; 0 when
/// the stdio client hangs up.
pub(crate) fn run(args: Args) -> u8 {
    let upstream = match (&args.upstream_url, args.command.split_first()) {
        (Some(url), None) => Upstream::Url(url.clone()),
        (None, Some((program, rest))) => Upstream::Command {
            program: program.clone(),
            args: rest.to_vec(),
        },
        (None, None) => {
            orch_runtime::eprintln_printable!("error: orch mcp: name the upstream MCP server: `orch mcp {} -- COMMAND [ARGS...]` or `--upstream-url URL`", args.file);
            return USAGE_OR_IO;
        }
        (Some(_), Some(_)) => {
            orch_runtime::eprintln_printable!(
                "error: orch mcp: give either COMMAND or --upstream-url, not both"
            );
            return USAGE_OR_IO;
        }
    };
    let mut prepared = None;
    // Compiled for the gateway: its checks warn about what never happens through it
    // (W009: message conditions and resets), printed with the other warnings.
    let pipeline = Pipeline::Check(orch_codegen::CheckOptions {
        surface: orch_codegen::Surface::McpGateway,
        ..Default::default()
    });
    let code = with_template_as(&args.file, &pipeline, |_, compiled| {
        let Some(machine) = compiled.to_machine() else {
            return FOUND_ERRORS;
        };
        prepared = Some(machine);
        OK
    });
    let Some(machine) = prepared else {
        return code;
    };
    // Spans go out while the guard lives (flushed when it drops, at the end).
    let (_otel, runtime) =
        match crate::serving::start("orch mcp", "orch-mcp", args.otlp_endpoint.as_deref()) {
            Ok(started) => started,
            Err(code) => return code,
        };
    // Ctrl-C or SIGTERM ends the gateway cleanly: dropping `serve` writes the decision
    // log's last checkpoint.
    let served = runtime.block_on(async {
        tokio::select! {
            served = serve(machine, upstream, &args) => served,
            () = crate::serving::shutdown() => Ok(()),
        }
    });
    // The upstream child and open connections are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match served {
        Ok(()) => OK,
        Err(e) => {
            orch_runtime::eprintln_printable!("error: orch mcp: {e}");
            USAGE_OR_IO
        }
    }
}

/// The bearer token from `--auth-token-file` or `ORCH_MCP_TOKEN`, if any.
fn bearer_token(args: &Args) -> Result<Option<String>, GatewayError> {
    let (token, from) = match &args.auth_token_file {
        Some(file) => match std::fs::read_to_string(file) {
            Ok(text) => (text, format!("the token file {file}")),
            Err(e) => {
                return Err(GatewayError::Options(format!(
                    "cannot read the token file {file}: {e}"
                )))
            }
        },
        None => match std::env::var("ORCH_MCP_TOKEN") {
            Ok(text) => (text, "ORCH_MCP_TOKEN".to_owned()),
            Err(_) => return Ok(None),
        },
    };
    let token = token.trim();
    if token.len() < 16 || token.chars().any(|c| !c.is_ascii_graphic()) {
        return Err(GatewayError::Options(format!(
            "{from} must hold a token of at least 16 printable ASCII characters without spaces"
        )));
    }
    Ok(Some(token.to_owned()))
}

async fn serve(
    machine: orch_runtime::dynamic::DynMachine,
    upstream: Upstream,
    args: &Args,
) -> Result<(), GatewayError> {
    let audit = crate::audit_log::open(&args.audit, "orch-mcp").map_err(GatewayError::Options)?;
    let _last_checkpoint = crate::audit_log::CheckpointAtExit(audit.clone());
    let bearer_token = match &args.listen {
        Some(_) => bearer_token(args)?,
        None => None,
    };
    // The approvals API (an agent's own token may never answer).
    let who = &args.approvals;
    let approvals = crate::approvals::setup(who, bearer_token.as_deref(), &args.file, &args.audit)
        .await
        .map_err(GatewayError::Options)?;
    let posting = approvals.as_ref().map(|served| orch_mcp::Posting {
        wait: Duration::from_secs(args.approval_wait),
        webhook: served.webhook.clone(),
    });
    let options = Options {
        startup_timeout: Duration::from_secs(args.startup_timeout),
        call_timeout: Duration::from_secs(args.call_timeout.max(1)),
        max_in_flight: args.max_in_flight.max(1),
        audit,
        approvals: posting,
        mode: args.mode,
    };
    let ttl = Duration::from_secs(args.session_ttl.max(1));
    let Some(addr) = &args.listen else {
        // One client for the life of the process: its session never expires.
        let store = MemoryStore::builder().no_ttl().build();
        let gateway = Gateway::start(machine, &upstream, store, &options).await?;
        serve_approvals(&gateway, approvals);
        return gateway.serve_stdio().await;
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| GatewayError::Listen {
            addr: addr.clone(),
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|source| GatewayError::Listen {
            addr: addr.clone(),
            source,
        })?;
    let jwt = args.jwt_jwks.as_ref().map(|jwks| JwtOptions {
        jwks: if jwks.starts_with("http://") || jwks.starts_with("https://") {
            Jwks::Url(jwks.clone())
        } else {
            Jwks::File(jwks.into())
        },
        issuer: args.jwt_issuer.clone().unwrap_or_default(),
        audience: args.jwt_audience.clone().unwrap_or_default(),
        run_claim: args.jwt_run_claim.clone(),
    });
    let authenticated = bearer_token.is_some() || jwt.is_some();
    if args.anonymous_run && authenticated {
        return Err(GatewayError::Options(
            "--anonymous-run is for a gateway without authentication: with an operator token or JWTs every run has a credential".into(),
        ));
    }
    if !local.ip().is_loopback() && !authenticated && !args.insecure_no_auth {
        return Err(GatewayError::Options(format!(
            "refusing to serve {local} without authentication: anyone who reaches it could drive the upstream's tools. \
             Give a token with --auth-token-file FILE or ORCH_MCP_TOKEN (or take JWTs with --jwt-jwks), listen on a loopback address, \
             or pass --insecure-no-auth if something in front of the gateway authenticates clients"
        )));
    }
    let http = HttpOptions {
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        bearer_token,
        max_sessions: args.max_sessions.max(1),
        max_connections: args.max_connections.max(1),
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        body_timeout: Duration::from_secs(args.body_timeout.max(1)),
        session_ttl: ttl,
        run_ttl: Duration::from_secs(args.run_ttl.max(1)),
        jwt,
        anonymous_run: args.anonymous_run,
    };
    let auth = match (http.bearer_token.is_some(), http.jwt.is_some()) {
        (true, true) => ", bearer token or JWT required",
        (true, false) => ", bearer token required",
        (false, true) => ", JWT required",
        (false, false) => "",
    };
    match crate::serving::connect_redis(args.redis.as_deref(), &args.redis_cluster).await {
        None => {
            // The gateway caps the sessions itself (`--max-sessions`): the store never
            // evicts one.
            let store = MemoryStore::builder()
                .ttl(ttl)
                .max_sessions(usize::MAX)
                .build();
            let gateway = Gateway::start(machine, &upstream, store, &options).await?;
            serve_approvals(&gateway, approvals);
            orch_runtime::eprintln_printable!(
                "orch mcp: serving http://{local}/mcp (sessions in memory{auth})"
            );
            gateway.serve_http(listener, &http).await
        }
        Some((connected, what)) => {
            let store = connected
                .map(|s| s.namespace(&args.namespace).ttl(Some(ttl)))
                .map_err(|e| GatewayError::Options(format!("cannot use {what}: {e}")))?;
            let gateway = Gateway::start(machine, &upstream, store, &options).await?;
            // Instances sharing the store relay to each other what the balancer sent to
            // the wrong one (a client's answer, a notification for a stream held
            // elsewhere), on the store's server.
            let bus = connect_bus(args.redis.as_deref(), &args.redis_cluster, &args.namespace)
                .await
                .map_err(|e| GatewayError::Options(format!("cannot use {what}: {e}")))?;
            gateway.join_instances(std::sync::Arc::new(bus)).await?;
            serve_approvals(&gateway, approvals);
            orch_runtime::eprintln_printable!(
                "orch mcp: serving http://{local}/mcp (sessions in {what}, namespace `{}`{auth})",
                args.namespace
            );
            gateway.serve_http(listener, &http).await
        }
    }
}

/// Serves the approvals API over `gateway`'s runs, when the flags asked for it.
fn serve_approvals<S: orch_store::SessionStore + 'static>(
    gateway: &Gateway<S>,
    approvals: Option<crate::approvals::Served>,
) {
    if let Some(served) = approvals {
        let api = gateway.approvals(Arc::clone(&served.approvers));
        let (listener, console) = served.console(api);
        crate::approvals::spawn(listener, console);
    }
}

/// The bus of the instances sharing the Redis store `--redis URL` or `--redis-cluster
/// URL...` name (on a cluster, through the first node that answers: a message published
/// on one node reaches every node's subscribers), channel `<namespace>:bus`.
async fn connect_bus(
    url: Option<&str>,
    cluster: &[String],
    namespace: &str,
) -> Result<orch_store::RedisBus, orch_store::StoreError> {
    let channel = format!("{namespace}:bus");
    let mut last = None;
    for url in url.into_iter().chain(cluster.iter().map(String::as_str)) {
        match orch_store::RedisBus::connect(url, &channel).await {
            Ok(bus) => return Ok(bus),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| orch_store::StoreError::backend("no Redis server named")))
}
