//! A `tools/call`'s response phase: recorded when the tool ran, released when it did
//! not, the lease dropped either way.

use super::prelude::*;
use super::reading::call_token;
use super::state::Engine;

impl<S: SessionStore + 'static> Engine<S> {
    /// The response phase of a `tools/call`: records the call when its result says it
    /// ran ([`protocol::classify`]: a complete, well-formed, successful result), and drops
    /// its lease either way. A result that is not a tool result is also refused.
    pub(super) async fn finish_call(&self, response: &McpResponse) -> Result<(), CheckError> {
        let run = self.run_of(response.metadata_context.as_ref())?;
        let result: Value = serde_json::from_slice(&response.mcp_response)
            .map_err(|e| Invalid::ResultNotJson(e.to_string()))?;
        let ran = protocol::classify(&result);
        let token = call_token(response.metadata_context.as_ref())?;
        let outcome = match ran {
            ToolResult::Ran => run::Ended::Ran,
            ToolResult::NotRun(_) => run::Ended::NotRun,
        };
        // The decision records of the attempt that is written.
        let mut records = Vec::new();
        let (settled, kept) = self
            .modify(&run, |record| {
                records.clear();
                let Some(mut record) = record else {
                    let gone = if token.is_some() {
                        run::Settled::Lapsed
                    } else {
                        run::Settled::NoCall
                    };
                    return Ok(Change::Keep((gone, None)));
                };
                let held_tool = record.lease.as_ref().map(|l| l.tool.clone());
                let policy = self.policy_for(&run, held_tool.as_deref().unwrap_or(""));
                // The session as this instance admitted it, while the stored snapshot is
                // still the one it was admitted at: no second restore.
                let kept = token.and_then(|t| self.take_admitted(t));
                let restore = |snapshot: Option<&[u8]>| match self.attached_at(kept, snapshot) {
                    Some(session) => Ok(session),
                    None => self.restore(snapshot, &policy),
                };
                // What rules on arguments read of the result, for a tool they read.
                let values = held_tool
                    .as_deref()
                    .filter(|tool| self.machine.reads_results_of(tool))
                    .and_then(|_| protocol::result_values(&result));
                let ((settled, write), session) = run::settle(
                    &mut record,
                    &self.machine,
                    &policy,
                    restore,
                    token,
                    outcome,
                    values.as_deref(),
                    false,
                )?;
                if let Some(auditor) = policy.auditor() {
                    records = auditor.take_buffered();
                }
                // The session the call was recorded into, at the snapshot written: kept
                // for the run's next call once the write is done.
                let kept = session.map(|s| (record.snapshot.clone(), s.detach()));
                Ok(match write {
                    true => Change::Write(record, (settled, kept)),
                    false => Change::Keep((settled, None)),
                })
            })
            .await?;
        if let Some((snapshot, session)) = kept {
            self.keep_settled(&run, snapshot, session);
        }
        if let Some(audit) = &self.options.audit {
            audit.relay(records);
        }
        if let ToolResult::NotRun(protocol::NotRun::Malformed(why)) = &ran {
            // Not recorded, and the client is not handed something that is not a result.
            return Err(Invalid::NotAToolResult(why.to_string()).into());
        }
        match settled {
            run::Settled::Recorded { .. } | run::Settled::Released | run::Settled::Held => Ok(()),
            // A result that says the tool did not run needs no account: pass it.
            _ if ran != ToolResult::Ran => Ok(()),
            run::Settled::Lapsed => Err(CheckError::Lapsed {
                lease_secs: self.options.lease.as_secs_f64(),
            }),
            run::Settled::NoCall => Err(CheckError::NoCall),
        }
    }
}
