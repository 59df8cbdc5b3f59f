//! `orch console`: the console served alone, over the store the gateways keep their runs
//! in (Redis, Redis Cluster) or over Restate's durable runs.

use crate::approvals::WhoArgs;
use crate::console::{template_report, LogArgs, Pages};
use crate::{OK, USAGE_OR_IO};
use orch_approvals::Approvals;
use std::sync::Arc;

/// The command line of `orch console`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("runs").required(true).args(["redis", "redis_cluster", "restate_admin"])))]
pub(crate) struct Args {
    /// Serve the console (and the approvals API) at ADDR (port 0 picks a free one; the
    /// bound address is printed on stdout as `approvals listening on HOST:PORT`).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: String,
    /// The template the runs follow (repeatable for Restate, whose runs name theirs;
    /// once for a store: the template its gateways serve).
    #[arg(long, value_name = "FILE", required = true)]
    pub(crate) template: Vec<String>,
    /// The mode the template's gateways run in (`--mode` of `orch mcp`/`orch policy`),
    /// for a store: each run's page says it, and shows the tools those gateways allow.
    #[arg(long, value_name = "MODE", default_value = "enforce", value_parser = crate::serving::parse_mode)]
    pub(crate) mode: orch_agent::Mode,
    /// The gateways' Redis.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Option<String>,
    /// The gateways' Redis Cluster: a seed node's URL (repeatable).
    #[arg(long, value_name = "URL")]
    pub(crate) redis_cluster: Vec<String>,
    /// The gateways' Redis key prefix (`orch-mcp` for `orch mcp`, `orch-policy` for
    /// `orch policy`, unless they were given another).
    #[arg(long, value_name = "NS", required_unless_present = "restate_admin")]
    pub(crate) namespace: Option<String>,
    /// Restate's admin API, e.g. http://127.0.0.1:9070 (durable runs, with
    /// --restate-ingress).
    #[arg(long, value_name = "URL", requires = "restate_ingress")]
    pub(crate) restate_admin: Option<String>,
    /// Restate's ingress, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL", requires = "restate_admin")]
    pub(crate) restate_ingress: Option<String>,
    #[command(flatten)]
    pub(crate) log: LogArgs,
    /// The console's own decision log of the answers given through it (`--audit-log`,
    /// with `--audit-chain`, `--audit-key`: as the gateways take them). Give it a file of
    /// its own, not a gateway's.
    #[command(flatten)]
    pub(crate) audit: crate::audit_log::AuditArgs,
    #[command(flatten)]
    pub(crate) who: WhoArgs,
}

/// Runs `orch console` until Ctrl-C or SIGTERM: 0 after a clean stop, 2 when it cannot
/// start (a template with errors, a store or key that cannot be read, an address in use).
pub(crate) fn run(args: &Args) -> u8 {
    let (_otel, runtime) = match crate::serving::start("orch console", "orch-console", None) {
        Ok(started) => started,
        Err(code) => return code,
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => OK,
        Err(why) => {
            orch_runtime::eprintln_printable!("error: orch console: {why}");
            USAGE_OR_IO
        }
    }
}

async fn serve(args: &Args) -> Result<(), String> {
    let (reports, mut machines): (Vec<_>, Vec<_>) = args
        .template
        .iter()
        .map(|path| template_report(path))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();
    let log = args.log.log()?;
    if args.audit.audit_log.is_some() && args.audit.audit_log == args.log.decision_log {
        return Err("--audit-log is the console's own log: give it another file than --decision-log, a gateway's".into());
    }
    let audit =
        crate::audit_log::CheckpointAtExit(crate::audit_log::open(&args.audit, "orch-console")?);
    if audit.0.is_some() && args.restate_admin.is_some() {
        return Err("--audit-log records the answers given to a store's runs; Restate's journal keeps those given to its runs".into());
    }
    let desk: Arc<dyn orch_approvals::Desk> = match (&args.restate_admin, &args.restate_ingress) {
        (Some(admin), Some(ingress)) => {
            let desk = Arc::new(orch_approvals::restate::RestateDesk::new(admin, ingress)?);
            if let Some(webhook) = args.who.webhook()? {
                tokio::spawn(crate::approvals::announce_new(Arc::clone(&desk), webhook));
            }
            desk
        }
        _ => {
            let (Some(machine), 1) = (machines.pop(), args.template.len()) else {
                return Err("the runs of a store follow one template: give --template once".into());
            };
            let namespace = args.namespace.as_deref().unwrap_or_default();
            let Some((connected, what)) =
                crate::serving::connect_redis(args.redis.as_deref(), &args.redis_cluster).await
            else {
                return Err("give the gateways' store: --redis or --redis-cluster".into());
            };
            let store = connected
                .map(|s| s.namespace(namespace))
                .map_err(|e| format!("cannot use {what}: {e}"))?;
            let mut desk = orch_approvals::store::StoreDesk::new(store, machine).in_mode(args.mode);
            if let Some(audit) = audit.0.clone() {
                desk = desk.audited(audit);
            }
            Arc::new(desk)
        }
    };
    let mut served = crate::approvals::bind(&args.listen, &args.who, None).await?;
    served.pages = Pages {
        templates: reports,
        log,
    };
    let local = served.local;
    let api = Approvals::new(desk, Arc::clone(&served.approvers), served.webhook.clone());
    let (listener, console) = served.console(api);
    orch_runtime::eprintln_printable!(
        "orch console: serving the console at http://{local}/console"
    );
    orch_approvals::serve(listener, console, crate::serving::shutdown())
        .await
        .map_err(|e| format!("the console stopped: {e}"))
}
