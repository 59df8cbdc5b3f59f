//! `orch policy`: orch as agentgateway's ExtMcp policy server (the `orch-policy` crate)
//! behind a command.

use crate::{with_template_as, Pipeline, FOUND_ERRORS, OK, USAGE_OR_IO};
use orch_policy::{Options, PolicyError, PolicyServer};
use orch_store::MemoryStore;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The command line of `orch policy`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The template file.
    pub(crate) file: String,
    /// Serve the ExtMcp gRPC service at ADDR (e.g. 127.0.0.1:9090; port 0 picks a free
    /// one). The bound address is printed on stdout as `ext-mcp listening on HOST:PORT`.
    #[arg(long, value_name = "ADDR")]
    pub(crate) ext_mcp: String,
    /// Serve a non-loopback address. The service has no authentication of its own:
    /// whoever reaches it can judge calls and report results for any run, so only the
    /// gateway may reach it (a network policy, or a mesh with mutual TLS).
    #[arg(long)]
    pub(crate) allow_remote: bool,
    /// Keep runs in Redis, so that several policy-server instances share them.
    #[arg(long, value_name = "URL", conflicts_with = "redis_cluster")]
    pub(crate) redis: Option<String>,
    /// Keep runs in a Redis Cluster: a seed node's URL (repeatable).
    #[arg(long, value_name = "URL")]
    pub(crate) redis_cluster: Vec<String>,
    /// The Redis key prefix.
    #[arg(long, value_name = "NS", default_value = "orch-policy")]
    pub(crate) namespace: String,
    /// A run is forgotten after this long without a request.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub(crate) run_ttl: u64,
    /// The `metadata_context` key whose value names the run (the gateway fills it from
    /// CEL, e.g. a JWT claim).
    #[arg(long, value_name = "KEY", default_value = "run")]
    pub(crate) run_key: String,
    /// How long an admitted call holds its run: its result must come back within it. A
    /// call whose result never comes (an upstream JSON-RPC error) counts as not run
    /// when it lapses. Set it above the gateway's upstream request timeout.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub(crate) lease: u64,
    /// How long a call waits while another call of its run is in flight, in
    /// milliseconds (keep it below the gateway's 10 s deadline for a check).
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub(crate) busy_wait_ms: u64,
    /// How long a question put to a human about a gated call stays answerable, in
    /// seconds (its `requestState` carries the expiry; a later answer is refused).
    #[arg(long, value_name = "SECONDS", default_value_t = 24 * 60 * 60)]
    pub(crate) question_ttl: u64,
    /// The largest tools/call params accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub(crate) max_params_bytes: usize,
    /// The largest gRPC message decoded, in bytes (tool results, tool lists).
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub(crate) max_message_bytes: usize,
    /// Checks handled at once; one more is answered RESOURCE_EXHAUSTED at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub(crate) max_in_flight: usize,
    /// Connections open at once; one more is closed at once.
    #[arg(long, value_name = "N", default_value_t = 1_024)]
    pub(crate) max_connections: usize,
    /// How long a new connection may take to send its first bytes (the HTTP/2 preface).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub(crate) handshake_timeout: u64,
    /// How long a connection may stay silent before it is closed (the gateway opens a
    /// new one for its next check).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub(crate) idle_timeout: u64,
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
    /// Export a server span per `tools/call` check (in the gateway's trace when its gRPC
    /// request carries W3C `traceparent` metadata) and the decision counter over
    /// OTLP/HTTP to the collector at this base URL, e.g. http://127.0.0.1:4318
    /// (docs/audit.md).
    #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub(crate) otlp_endpoint: Option<String>,
}

/// Runs the policy server: 1 when the template has errors or reads user messages
/// (nothing is started), 2 when the address or the store cannot be used; 0 after
/// Ctrl-C or SIGTERM.
pub(crate) fn run(args: Args) -> u8 {
    let mut prepared = None;
    // Compiled for the policy host: a condition it cannot enforce is an error (E024)
    // at its place, a reset that never fires a warning (W009), both from the checks.
    let pipeline = Pipeline::Check(orch_codegen::CheckOptions {
        surface: orch_codegen::Surface::Policy,
        ..Default::default()
    });
    let code = with_template_as(&args.file, &pipeline, |_, compiled| {
        prepared = Some(compiled.clone());
        OK
    });
    let Some(compiled) = prepared else {
        return code;
    };
    // Spans go out while the guard lives (flushed when it drops, at the end).
    let (_otel, runtime) =
        match crate::serving::start("orch policy", "orch-policy", args.otlp_endpoint.as_deref()) {
            Ok(started) => started,
            Err(code) => return code,
        };
    let served = runtime.block_on(serve(&compiled, &args));
    runtime.shutdown_timeout(Duration::from_secs(1));
    match served {
        Ok(()) => OK,
        Err(e) if e.is_template() => {
            orch_runtime::eprintln_printable!("error: {}: {e}", args.file);
            FOUND_ERRORS
        }
        Err(e) => {
            orch_runtime::eprintln_printable!("error: orch policy: {e}");
            USAGE_OR_IO
        }
    }
}

async fn serve(compiled: &orch_codegen::Compiled, args: &Args) -> Result<(), PolicyError> {
    let audit = crate::audit_log::open(&args.audit, "orch-policy").map_err(PolicyError::Options)?;
    let _last_checkpoint = crate::audit_log::CheckpointAtExit(audit.clone());
    let mut options = Options {
        run_key: args.run_key.clone(),
        lease: Duration::from_secs(args.lease.max(1)),
        busy_wait: Duration::from_millis(args.busy_wait_ms),
        question_ttl: Duration::from_secs(args.question_ttl.max(1)),
        max_params_bytes: args.max_params_bytes,
        max_message_bytes: args.max_message_bytes.max(64 << 10),
        max_in_flight: args.max_in_flight.max(1),
        max_connections: args.max_connections.max(1),
        handshake_timeout: Duration::from_secs(args.handshake_timeout.max(1)),
        idle_timeout: Duration::from_secs(args.idle_timeout.max(1)),
        audit: audit.clone(),
        approvals: None,
        mode: args.mode,
    };
    let approvals = crate::approvals::setup(&args.approvals, None, &args.file, &args.audit)
        .await
        .map_err(PolicyError::Options)?;
    if let Some(served) = &approvals {
        options.approvals = Some(orch_policy::Posting {
            webhook: served.webhook.clone(),
        });
    }
    let addr = &args.ext_mcp;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| PolicyError::Listen {
            addr: addr.clone(),
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|source| PolicyError::Listen {
            addr: addr.clone(),
            source,
        })?;
    if !local.ip().is_loopback() && !args.allow_remote {
        return Err(PolicyError::Options(format!(
            "refusing to serve {local}: the ExtMcp service has no authentication of its own, and whoever reaches it can report tool results for any run. \
             Listen on a loopback address next to the gateway, or pass --allow-remote once a network policy or a mesh with mutual TLS lets only the gateway reach it"
        )));
    }
    let ttl = Duration::from_secs(args.run_ttl.max(1));
    match crate::serving::connect_redis(args.redis.as_deref(), &args.redis_cluster).await {
        None => {
            let store = MemoryStore::builder()
                .ttl(ttl)
                .max_sessions(usize::MAX)
                .build();
            let server = PolicyServer::new(compiled, store, options)?;
            serve_approvals(&server, approvals);
            ready(local, "runs in memory");
            server.serve(listener, crate::serving::shutdown()).await
        }
        Some((connected, what)) => {
            let store = connected
                .map(|s| s.namespace(&args.namespace).ttl(Some(ttl)))
                .map_err(|e| PolicyError::Options(format!("cannot use {what}: {e}")))?;
            let server = PolicyServer::new(compiled, store, options)?;
            serve_approvals(&server, approvals);
            ready(
                local,
                &format!("runs in {what}, namespace `{}`", args.namespace),
            );
            server.serve(listener, crate::serving::shutdown()).await
        }
    }
}

/// Serves the approvals API over `server`'s runs, when the flags asked for it.
fn serve_approvals<S: orch_store::SessionStore + 'static>(
    server: &PolicyServer<S>,
    approvals: Option<crate::approvals::Served>,
) {
    if let Some(served) = approvals {
        let api = server.approvals(Arc::clone(&served.approvers));
        let (listener, console) = served.console(api);
        crate::approvals::spawn(listener, console);
    }
}

/// Says the server is ready: the address on stdout (for scripts and tests), the rest on
/// stderr.
fn ready(local: std::net::SocketAddr, what: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ext-mcp listening on {local}");
    let _ = out.flush();
    orch_runtime::eprintln_printable!(
        "orch policy: serving agentgateway's ExtMcp at {local} ({what})"
    );
}
