//! What every console shows besides the runs, made from the command line: each
//! template's report (diagram, diagnostics, `orch verify` findings) and the decision log
//! to check ([`Pages`]).

use crate::{compile_file_as, Pipeline};
use orch_approvals::report::{DecisionLog, Finding, StepBox, TemplateReport};
use orch_codegen::diagnostic::{self, SourceText};
use orch_codegen::verify::report::{self, Kind};
use orch_runtime::dynamic::DynMachine;
use std::sync::Arc;

/// What a console shows besides the runs.
#[derive(Default)]
pub(crate) struct Pages {
    /// The templates' reports.
    pub(crate) templates: Vec<TemplateReport>,
    /// The decision log.
    pub(crate) log: Option<DecisionLog>,
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
    /// The head an auditor anchored (as `orch audit verify --expect-head`): the log must
    /// still lead to it.
    #[arg(long, value_name = "HASH", requires = "decision_log")]
    pub(crate) expect_head: Option<String>,
    /// How many records the log had when it was anchored (as `orch audit verify
    /// --expect-count`): it must have at least as many.
    #[arg(long, value_name = "N", requires = "decision_log")]
    pub(crate) expect_count: Option<u64>,
}

impl LogArgs {
    /// The decision log the flags name, if any.
    pub(crate) fn log(&self) -> Result<Option<DecisionLog>, String> {
        let Some(path) = &self.decision_log else {
            return Ok(None);
        };
        let mut log = decision_log(path, &self.public_key)?;
        log.anchor = orch_agent::audit::Anchor {
            head: self
                .expect_head
                .as_ref()
                .map(|h| h.trim().to_ascii_lowercase()),
            count: self.expect_count,
        };
        Ok(Some(log))
    }
}

/// The report of the template in `path` for the console's pages, compiled and verified
/// as `orch verify` does with its default bounds, and the machine it compiled to.
pub(crate) fn template_report(path: &str) -> Result<(TemplateReport, DynMachine), String> {
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
        // The console still serves the template's other pages: the page says why.
        Some(Err(e)) => vec![Finding {
            kind: "verify".to_owned(),
            subject: path.to_owned(),
            answer: "could not run".to_owned(),
            bad: true,
            detail: Some(format!("{e:?}")),
            witness: Vec::new(),
        }],
        None => Vec::new(),
    };
    let report = TemplateReport {
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
    };
    Ok((report, machine))
}

/// A finding of `orch verify` as the console shows it.
fn finding(f: report::Finding) -> Finding {
    let (answer, bad) = match (f.kind, f.answer) {
        // These are findings by being there: the witness shows how.
        (Kind::Trap, _) => ("traps the run: once active, only `reset` leaves it", false),
        (Kind::Blocked, _) => (
            "a reachable state waits on tools the host does not have",
            true,
        ),
        (Kind::NoTools, _) => ("a reachable state allows no tool at all", true),
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
) -> Result<Pages, String> {
    Ok(Pages {
        templates: vec![template_report(template)?.0],
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
