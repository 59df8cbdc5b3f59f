//! `orch audit keygen`, `orch audit verify`, `orch replay` and `orch check-trace`: the
//! commands that read decision logs and transcripts (docs/audit.md).

use super::*;

/// A decision log's text: a file, or standard input for `-`.
pub(crate) fn read_log(path: &str) -> Result<String, String> {
    let mut text = String::new();
    let read = if path == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map(|_| text)
        .map_err(|e| format!("cannot read the decision log `{path}`: {e}"))
}

/// `orch audit keygen PREFIX`: PREFIX.key (private, 0600) and PREFIX.pub.
pub(crate) fn audit_keygen_cmd(prefix: &str) -> u8 {
    use orch_agent::audit::sign::SigningKey;
    let made = SigningKey::generate().map_err(|e| e.to_string()).and_then(|key| {
        let private = key.to_pem().map_err(|e| e.to_string())?;
        let public = key.public_key().to_pem().map_err(|e| e.to_string())?;
        let (key_path, pub_path) = (format!("{prefix}.key"), format!("{prefix}.pub"));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options
            .open(&key_path)
            .and_then(|mut f| f.write_all(private.as_bytes()))
            .map_err(|e| format!("cannot write {key_path}: {e}"))?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&pub_path)
            .and_then(|mut f| f.write_all(public.as_bytes()))
            .map_err(|e| format!("cannot write {pub_path}: {e}"))?;
        Ok(format!(
            "wrote {key_path} (private: give it to the gateways' --audit-key, keep it secret) and {pub_path} (public: for orch audit verify --public-key); key id {}\n",
            key.public_key().id()
        ))
    });
    match made {
        Ok(text) => print_out(&printable_lines(&text)),
        Err(e) => {
            eprintln!("error: {}", printable(&e));
            USAGE_OR_IO
        }
    }
}

pub(crate) fn audit_verify_cmd(
    path: &str,
    anchor: &orch_agent::audit::Anchor,
    public_keys: &[String],
    format: Format,
) -> u8 {
    use orch_agent::audit::sign::{PublicKey, PublicKeys};
    let log = match read_log(path) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("error: {}", printable(&e));
            return USAGE_OR_IO;
        }
    };
    let keys = match public_keys
        .iter()
        .map(|p| PublicKey::read(Path::new(p)))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(keys) => PublicKeys(keys),
        Err(e) => {
            eprintln!("error: {}", printable(&e.to_string()));
            return USAGE_OR_IO;
        }
    };
    let checked: Option<&dyn orch_agent::audit::CheckpointKeys> =
        (!keys.0.is_empty()).then_some(&keys);
    let anchored = anchor.head.is_some() || anchor.count.is_some();
    let (text, code) = match (
        orch_agent::audit::verify_signed(&log, anchor, checked),
        format,
    ) {
        (Ok(v), Format::Human) => {
            let head = v.head.as_deref().unwrap_or("none (no records)");
            let also = if anchored {
                ", and it holds what was anchored"
            } else {
                ""
            };
            let mut text = format!(
                "{}: {} records, the chain holds{also}\nhead: {head}\n",
                printable(path),
                v.records
            );
            if v.signed {
                text.push_str(&format!(
                    "checkpoints: {}, every signature verifies\n",
                    v.checkpoints
                ));
                if let Some(from) = v.unanchored_from {
                    text.push_str(&format!(
                        "warning: {} records after the last checkpoint (from line {from}) are unanchored: no signature covers them yet\n",
                        v.unanchored
                    ));
                }
            } else if v.checkpoints > 0 {
                text.push_str(&format!(
                    "checkpoints: {} (signatures not checked: give --public-key)\n",
                    v.checkpoints
                ));
            }
            (text, OK)
        }
        (Ok(v), Format::Json) => (
            format!(
                "{}\n",
                serde_json::json!({"log": path, "intact": true, "records": v.records, "head": v.head,
                    "checkpoints": v.checkpoints, "signed": v.signed, "unanchored": v.unanchored,
                    "unanchored_from": v.unanchored_from})
            ),
            OK,
        ),
        (Err(b), Format::Human) => (
            format!(
                "error: {}: {}\n",
                printable(path),
                printable(&b.to_string())
            ),
            FOUND_ERRORS,
        ),
        (Err(b), Format::Json) => (
            format!(
                "{}\n",
                serde_json::json!({"log": path, "intact": false, "line": b.line, "why": b.why})
            ),
            FOUND_ERRORS,
        ),
    };
    match print_out(&text) {
        OK => code,
        failed => failed,
    }
}

pub(crate) fn replay_cmd(file: &str, path: &str, format: Format) -> u8 {
    let log = match read_log(path) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE_OR_IO;
        }
    };
    with_template_as(file, &LEAVE_PROPERTIES, |_, compiled| {
        let Some(machine) = compiled.to_machine() else {
            eprintln!("error: {file}: the template could not be loaded");
            return FOUND_ERRORS;
        };
        let (text, code) = match (orch_agent::audit::replay(&machine, &log), format) {
            (Ok(r), Format::Human) => (
                format!(
                    "{path}: {} records of {} run(s) re-derived exactly from their events\n",
                    r.records, r.runs
                ),
                OK,
            ),
            (Ok(r), Format::Json) => (
                format!(
                    "{}\n",
                    serde_json::json!({"log": path, "follows": true, "records": r.records, "runs": r.runs})
                ),
                OK,
            ),
            (Err(d), Format::Human) => (
                format!(
                    "error: {}: {}\n",
                    printable(path),
                    printable(&d.to_string())
                ),
                FOUND_ERRORS,
            ),
            (Err(d), Format::Json) => (
                format!(
                    "{}\n",
                    serde_json::json!({"log": path, "follows": false, "line": d.line, "seq": d.seq,
                        "field": d.field, "logged": d.logged, "derived": d.derived})
                ),
                FOUND_ERRORS,
            ),
        };
        match print_out(&text) {
            OK => code,
            failed => failed,
        }
    })
}

pub(crate) fn check_trace_cmd(file: &str, path: &str, format: Format) -> u8 {
    let text = match read_log(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: {}", e.replace("decision log", "trace"));
            return USAGE_OR_IO;
        }
    };
    let (trace_format, events) = match orch_cli::trace::parse(&text) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: {}: {}", printable(path), printable(&e.to_string()));
            return USAGE_OR_IO;
        }
    };
    with_template_as(file, &LEAVE_PROPERTIES, |_, compiled| {
        let (Some(machine), Some(ir)) = (compiled.to_machine(), compiled.ir.as_ref()) else {
            eprintln!("error: {file}: the template could not be loaded");
            return FOUND_ERRORS;
        };
        let (mut report, ok) =
            orch_cli::trace::grade(&machine, &ir.properties, trace_format, &events);
        report["trace"] = serde_json::json!(path);
        let text = match format {
            Format::Human => orch_cli::trace::human(path, &report),
            Format::Json => format!("{report}\n"),
        };
        match print_out(&text) {
            OK if ok => OK,
            OK => FOUND_ERRORS,
            failed => failed,
        }
    })
}
