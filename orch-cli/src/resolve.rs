//! `orch resolve`: an operator's answer for a workflow run held on a lost result
//! (`lostResults`, semantics §15), written into the store the gateways share.

use crate::serving::connect_redis;
use crate::{with_template, FOUND_ERRORS, OK, USAGE_OR_IO};
use orch_run::{resolve_key, Resolution};

/// The command line of `orch resolve`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["ran", "not_run"])))]
#[command(group(clap::ArgGroup::new("store").required(true).args(["redis", "redis_cluster"])))]
pub(crate) struct Args {
    /// The template file the gateways run.
    pub(crate) file: String,
    /// The run's key in the store: `run:NAME` for `orch policy` (NAME: the run the
    /// gateway's metadata names), the session or run key `orch mcp` printed when it held
    /// the run.
    pub(crate) key: String,
    /// The held call ran: record it, and the run goes on after it.
    #[arg(long)]
    pub(crate) ran: bool,
    /// The held call did not run: drop it, and the run goes on from before it.
    #[arg(long)]
    pub(crate) not_run: bool,
    /// The gateways' Redis.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Option<String>,
    /// The gateways' Redis Cluster: a seed node's URL (repeatable).
    #[arg(long, value_name = "URL")]
    pub(crate) redis_cluster: Vec<String>,
    /// The gateways' Redis key prefix (`orch-policy` for `orch policy`, `orch-mcp` for
    /// `orch mcp`, unless they were given another).
    #[arg(long, value_name = "NS", default_value = "orch-policy")]
    pub(crate) namespace: String,
}

/// Runs `orch resolve`: exit 0 when the run was held and is resolved now, 1 when it is
/// not held (nothing changed), 2 on usage, store or template errors.
pub(crate) fn run(args: Args) -> u8 {
    let mut machine = None;
    let code = with_template(&args.file, |compiled| match compiled.to_machine() {
        Some(m) => {
            machine = Some(m);
            OK
        }
        None => FOUND_ERRORS,
    });
    let Some(machine) = machine else {
        return code;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: orch resolve: cannot start the runtime: {e}");
            return USAGE_OR_IO;
        }
    };
    let resolution = match args.ran {
        true => Resolution::Ran,
        false => Resolution::NotRun,
    };
    runtime.block_on(async {
        let Some((connected, what)) =
            connect_redis(args.redis.as_deref(), &args.redis_cluster).await
        else {
            eprintln!("error: orch resolve: name the gateways' store (--redis or --redis-cluster)");
            return USAGE_OR_IO;
        };
        let store = match connected {
            Ok(store) => store.namespace(&args.namespace),
            Err(e) => {
                eprintln!("error: orch resolve: cannot use {what}: {e}");
                return USAGE_OR_IO;
            }
        };
        match resolve_key(&store, &args.key, &machine, resolution).await {
            Ok(Some(tool)) => {
                let said = match resolution {
                    Resolution::Ran => "recorded as run",
                    Resolution::NotRun => "dropped as not run",
                };
                println!(
                    "{}: the held call of `{tool}` was {said}; the run goes on",
                    args.key
                );
                OK
            }
            Ok(None) => {
                println!(
                    "{}: the run is not held (or not stored): nothing changed",
                    args.key
                );
                FOUND_ERRORS
            }
            Err(e) => {
                eprintln!("error: orch resolve: {}: {e}", args.key);
                USAGE_OR_IO
            }
        }
    })
}
