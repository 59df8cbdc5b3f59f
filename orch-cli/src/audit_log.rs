//! The decision log options `orch mcp` and `orch policy` share (docs/audit.md): where the
//! log goes, whether it is chained, and the key that signs its checkpoints.

use orch_agent::audit::sign::SigningKey;
use orch_agent::audit::{last_link, Auditor, JsonLines};
use std::sync::Arc;
use std::time::Duration;

/// `--audit-log`, `--audit-chain`, `--audit-key`, `--checkpoint-every`,
/// `--checkpoint-interval`.
#[derive(clap::Args, Debug)]
pub(crate) struct AuditArgs {
    /// Append a decision record of every call judged, every tool recorded and every
    /// approval question and answer to this file, as JSON lines (docs/audit.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<String>,
    /// Chain the decision records (each carries its hash and the previous one's), so
    /// `orch audit verify` can tell the log is untampered; an existing chained log is
    /// continued.
    #[arg(long, requires = "audit_log")]
    pub(crate) audit_chain: bool,
    /// Sign checkpoints into the chained log with this Ed25519 private key (PKCS#8 PEM,
    /// `orch audit keygen`): someone who can write the file but has not the key cannot
    /// rebuild the chain unnoticed. Implies --audit-chain.
    #[arg(long, value_name = "FILE", requires = "audit_log")]
    pub(crate) audit_key: Option<String>,
    /// A signed checkpoint after this many records.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1_000,
        requires = "audit_key"
    )]
    pub(crate) checkpoint_every: u64,
    /// A signed checkpoint at least this often while records are written (and one at
    /// shutdown).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60,
        requires = "audit_key"
    )]
    pub(crate) checkpoint_interval: u64,
}

/// The decision log the options name, written as `program`, continuing the chain of an
/// existing chained log; with a key, a thread writes the timed checkpoints for as long
/// as the auditor lives. `None` without `--audit-log`.
pub(crate) fn open(args: &AuditArgs, program: &str) -> Result<Option<Arc<Auditor>>, String> {
    let Some(path) = args.audit_log.as_deref() else {
        return Ok(None);
    };
    let key = match &args.audit_key {
        Some(key) => Some(SigningKey::read(std::path::Path::new(key)).map_err(|e| e.to_string())?),
        None => None,
    };
    let sink =
        JsonLines::append(path).map_err(|e| format!("cannot open the decision log {path}: {e}"))?;
    let mut auditor = Auditor::new(sink, program);
    let interval = Duration::from_secs(args.checkpoint_interval.max(1));
    if args.audit_chain || key.is_some() {
        auditor = auditor.chained();
        let existing = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(last) = existing.lines().rev().find(|l| !l.trim().is_empty()) {
            let (seq, hash) = last_link(last).ok_or_else(|| {
                format!("the decision log {path} does not end with a decision record or a checkpoint: give another file")
            })?;
            auditor = auditor.continuing_after(seq, hash);
        }
    }
    if let Some(key) = key {
        auditor = auditor.signed(Arc::new(key), args.checkpoint_every, interval);
    }
    let auditor = Arc::new(auditor);
    if args.audit_key.is_some() {
        let weak = Arc::downgrade(&auditor);
        std::thread::spawn(move || loop {
            std::thread::sleep(interval.min(Duration::from_secs(1)));
            match weak.upgrade() {
                Some(auditor) => auditor.checkpoint_if_due(),
                None => return,
            }
        });
    }
    Ok(Some(auditor))
}

/// Writes the last checkpoint when the gateway stops (the auditor itself may outlive
/// the serving loop in tasks still winding down).
pub(crate) struct CheckpointAtExit(pub(crate) Option<Arc<Auditor>>);

impl Drop for CheckpointAtExit {
    fn drop(&mut self) {
        if let Some(auditor) = &self.0 {
            auditor.checkpoint();
        }
    }
}
