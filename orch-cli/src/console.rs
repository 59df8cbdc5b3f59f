//! `orch console`: the console served alone, over the store the gateways keep their runs
//! in (Redis, Redis Cluster) or over Restate's durable runs; and what every console
//! shows besides the runs, made from the command line — each template's report (diagram,
//! diagnostics, `orch verify` findings) and the decision log to check.

use crate::approvals::WhoArgs;
use crate::{compile_file_as, Pipeline, OK, USAGE_OR_IO};
use orch_approvals::report::{DecisionLog, Finding, StepBox, TemplateReport};
use orch_approvals::Approvals;
use orch_codegen::diagnostic::{self, SourceText};
use orch_codegen::verify::report::{self, Kind};
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
    #[command(flatten)]
    pub(crate) who: WhoArgs,
}

/// The decision log a console shows.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct LogArgs {
    /// Show this decision log, checked on each look (chain, anchor, signatures).
    #[arg(long, value_name = "FILE")]
    pub(crate) decision_log: Option<String>,
    /// A public key its checkpoints must be signed with (repeatable; `orch audit
    /// keygen` writes them).
    #[arg(long, value_name = "FILE", requires = "decision_log")]
    pub(crate) public_key: Vec<String>,
}

/// The report of the template in `path` for the console's pages: compiled and verified
/// as `orch verify` does with its default bounds.
pub(crate) fn template_report(path: &str) -> Result<TemplateReport, String> {
    let options = crate::verify::options(
        false,
        None,
        20_000,
        orch_codegen::verify::explore::DEFAULT_WORK,
    );
    let (source, compiled) =
        compile_file_as(path, &Pipeline::Verify(options)).map_err(|e| e.to_string())?;
    let text = SourceText::new(&source);
    let Some(ir) = compiled.ir.as_ref() else {
        return Err(format!("{path} has errors: run `orch check {path}`"));
    };
    let machine = compiled
        .to_machine()
        .ok_or_else(|| format!("{path}: the template could not be loaded"))?;
    let steps = (0..ir.steps.len())
        .map(|i| {
            let step = &ir.steps[i];
            let label = crate::graph::condition_label(ir, i);
            StepBox {
                name: step.name.clone(),
                default: ir.default_step == Some(i),
                entered_when: (!label.is_empty()).then_some(label),
                sequence: step
                    .sequence
                    .iter()
                    .map(|group| crate::graph::group_label(ir, group))
                    .collect(),
                mark: crate::graph::mark(ir, &compiled.diagnostics, i).map(str::to_owned),
            }
        })
        .collect();
    let findings = match compiled.verification() {
        Some(Ok(v)) => report::findings(&v.exploration, &v.properties)
            .into_iter()
            .filter(|f| f.kind != Kind::Summary)
            .map(finding)
            .collect(),
        Some(Err(e)) => return Err(format!("{path}: {e:?}")),
        None => Vec::new(),
    };
    Ok(TemplateReport {
        name: machine.name().to_owned(),
        file: path.to_owned(),
        fingerprint: format!("{:016x}", machine.fingerprint()),
        steps,
        diagnostics: compiled
            .diagnostics
            .iter()
            .map(|d| diagnostic::one_line(d, path, &text))
            .collect(),
        findings,
    })
}

/// A finding of `orch verify` as the console shows it.
fn finding(f: report::Finding) -> Finding {
    let (answer, bad) = match (f.kind, f.answer) {
        (_, None) => ("unknown (the search stopped at its bounds)", true),
        (Kind::Step, Some(true)) => ("reachable", false),
        (Kind::Step, Some(false)) => ("unreachable", true),
        (Kind::Sequence, Some(true)) => ("completes", false),
        (Kind::Sequence, Some(false)) => ("never completes", true),
        (Kind::Property, Some(true)) => ("holds", false),
        (Kind::Property, Some(false)) => ("violated", true),
        (_, Some(true)) => ("found", true),
        (_, Some(false)) => ("not found", false),
    };
    let witness = f
        .witness
        .iter()
        .flatten()
        .map(|e| crate::verify::step_json(e).to_string())
        .collect();
    Finding {
        kind: f.kind.as_str().to_owned(),
        subject: f.name.or(f.step).unwrap_or_default(),
        answer: answer.to_owned(),
        bad,
        detail: f.message.or(f.reason),
        witness,
    }
}

/// The decision log the flags name: `path`, checked with `keys` (public key files).
pub(crate) fn decision_log(path: &str, keys: &[String]) -> Result<DecisionLog, String> {
    use orch_agent::audit::sign::{PublicKey, PublicKeys};
    let keys = keys
        .iter()
        .map(|p| PublicKey::read(std::path::Path::new(p)).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let keys: Option<Arc<dyn orch_agent::audit::CheckpointKeys + Send + Sync>> =
        (!keys.is_empty()).then(|| Arc::new(PublicKeys(keys)) as _);
    Ok(DecisionLog {
        path: path.into(),
        anchor: orch_agent::audit::Anchor::default(),
        keys,
    })
}

/// What a gateway's console shows besides the runs: its template's report, and the
/// decision log it writes.
pub(crate) fn gateway_pages(
    template: &str,
    audit: &crate::audit_log::AuditArgs,
) -> Result<crate::approvals::Pages, String> {
    Ok(crate::approvals::Pages {
        templates: vec![template_report(template)?],
        log: gateway_log(audit)?,
    })
}

/// A gateway's decision log for its console: the file it writes, checked with the
/// public half of its signing key.
fn gateway_log(audit: &crate::audit_log::AuditArgs) -> Result<Option<DecisionLog>, String> {
    use orch_agent::audit::sign::{PublicKeys, SigningKey};
    let Some(path) = &audit.audit_log else {
        return Ok(None);
    };
    let mut log = decision_log(path, &[])?;
    if let Some(key) = &audit.audit_key {
        let key = SigningKey::read(std::path::Path::new(key)).map_err(|e| e.to_string())?;
        log.keys = Some(Arc::new(PublicKeys(vec![key.public_key()])));
    }
    Ok(Some(log))
}

/// The webhook the flags name, for announcing Restate's new questions (a gateway
/// announces its own as it asks them).
fn webhook(who: &WhoArgs) -> Result<Option<orch_approvals::Webhook>, String> {
    let secret = std::env::var("ORCH_WEBHOOK_SECRET").ok();
    who.webhook
        .as_deref()
        .map(|url| orch_approvals::Webhook::new(url, secret.as_deref()))
        .transpose()
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
    let reports = args
        .template
        .iter()
        .map(|path| template_report(path))
        .collect::<Result<Vec<_>, _>>()?;
    let log = match &args.log.decision_log {
        Some(path) => Some(decision_log(path, &args.log.public_key)?),
        None => None,
    };
    let desk: Arc<dyn orch_approvals::Desk> = match (&args.restate_admin, &args.restate_ingress) {
        (Some(admin), Some(ingress)) => {
            let desk = Arc::new(orch_approvals::restate::RestateDesk::new(admin, ingress)?);
            if let Some(webhook) = webhook(&args.who)? {
                tokio::spawn(crate::approvals::announce_new(Arc::clone(&desk), webhook));
            }
            desk
        }
        _ => {
            let [path] = &args.template[..] else {
                return Err("the runs of a store follow one template: give --template once".into());
            };
            let machine = crate::compile_file(path)
                .map_err(|e| e.to_string())?
                .1
                .to_machine()
                .ok_or_else(|| format!("{path}: the template could not be loaded"))?;
            let namespace = args.namespace.as_deref().unwrap_or_default();
            let Some((connected, what)) =
                crate::serving::connect_redis(args.redis.as_deref(), &args.redis_cluster).await
            else {
                return Err("give the gateways' store: --redis or --redis-cluster".into());
            };
            let store = connected
                .map(|s| s.namespace(namespace))
                .map_err(|e| format!("cannot use {what}: {e}"))?;
            Arc::new(orch_approvals::store::StoreDesk::new(store, machine))
        }
    };
    let mut served = crate::approvals::bind(&args.listen, &args.who, None).await?;
    served.pages = crate::approvals::Pages {
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
