//! `orch mcp`: the orchestrating MCP gateway (the `orch-mcp` crate) behind a command.

use crate::{with_template, FOUND_ERRORS, OK, USAGE_OR_IO};
use orch_mcp::{Gateway, GatewayError, HttpOptions, Options, Upstream};
use orch_store::{MemoryStore, RedisStore};
use std::ffi::OsString;
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
    #[arg(long, value_name = "URL", requires = "listen")]
    pub(crate) redis: Option<String>,
    /// The Redis key prefix.
    #[arg(long, value_name = "NS", default_value = "orch-mcp")]
    pub(crate) namespace: String,
    /// Forget a session this long after its last change.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub(crate) session_ttl: u64,
    /// A `Host` name HTTP clients may use besides the loopback names (repeatable).
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub(crate) allowed_hosts: Vec<String>,
    /// How long the upstream may take to start and answer the MCP handshake.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) startup_timeout: u64,
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
            eprintln!("error: orch mcp: name the upstream MCP server: `orch mcp {} -- COMMAND [ARGS...]` or `--upstream-url URL`", args.file);
            return USAGE_OR_IO;
        }
        (Some(_), Some(_)) => {
            eprintln!("error: orch mcp: give either COMMAND or --upstream-url, not both");
            return USAGE_OR_IO;
        }
    };
    let mut prepared = None;
    let code = with_template(&args.file, |compiled| {
        let (Some(ir), Some(machine)) = (compiled.ir.as_ref(), compiled.to_machine()) else {
            return FOUND_ERRORS;
        };
        for warning in orch_mcp::message_warnings(ir) {
            eprintln!("warning: {}: {warning}", args.file);
        }
        prepared = Some(machine);
        OK
    });
    let Some(machine) = prepared else {
        return code;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: orch mcp: cannot start the async runtime: {e}");
            return USAGE_OR_IO;
        }
    };
    let served = runtime.block_on(serve(machine, upstream, &args));
    // The upstream child and open connections are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match served {
        Ok(()) => OK,
        Err(e) => {
            eprintln!("error: orch mcp: {e}");
            USAGE_OR_IO
        }
    }
}

async fn serve(
    machine: orch_runtime::dynamic::DynMachine,
    upstream: Upstream,
    args: &Args,
) -> Result<(), GatewayError> {
    let options = Options {
        startup_timeout: Duration::from_secs(args.startup_timeout),
    };
    let ttl = Duration::from_secs(args.session_ttl);
    let Some(addr) = &args.listen else {
        let store = MemoryStore::builder().ttl(ttl).build();
        let gateway = Gateway::start(machine, &upstream, store, &options).await?;
        return gateway.serve_stdio().await;
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| GatewayError::Client(format!("cannot listen on {addr}: {e}")))?;
    let http = HttpOptions {
        allowed_hosts: args.allowed_hosts.clone(),
    };
    let local = listener
        .local_addr()
        .map_err(|e| GatewayError::Client(format!("cannot listen on {addr}: {e}")))?;
    match &args.redis {
        None => {
            let store = MemoryStore::builder().ttl(ttl).build();
            let gateway = Gateway::start(machine, &upstream, store, &options).await?;
            eprintln!("orch mcp: serving http://{local}/mcp (sessions in memory)");
            gateway
                .serve_http(listener, &http, None::<MemoryStore>)
                .await
        }
        Some(url) => {
            let connect = |namespace: String| async move {
                RedisStore::connect(url)
                    .await
                    .map(|s| s.namespace(&namespace).ttl(Some(ttl)))
                    .map_err(|e| GatewayError::Client(format!("cannot use Redis at {url}: {e}")))
            };
            let store = connect(args.namespace.clone()).await?;
            let handshakes = connect(format!("{}:handshake", args.namespace)).await?;
            let gateway = Gateway::start(machine, &upstream, store, &options).await?;
            eprintln!(
                "orch mcp: serving http://{local}/mcp (sessions in Redis at {url}, namespace `{}`)",
                args.namespace
            );
            gateway.serve_http(listener, &http, Some(handshakes)).await
        }
    }
}
