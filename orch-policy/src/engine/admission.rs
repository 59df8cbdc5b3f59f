//! A `tools/call`'s request phase: the call read, judged against the run and leased in
//! one compare-and-set, or waiting for the call in flight; refused in orch's words.

use super::approvals;
use super::prelude::*;
use super::reading::{read_call, Call};
use super::state::{Engine, MAX_WAIT_PAUSE};
use orch_run::approvals::Posted;

/// What one look at a run decided for a call.
pub(super) enum Admission {
    /// Admitted: the lease with this token was written, with this snapshot; the session
    /// as admitted.
    Reserved(u64, Option<Vec<u8>>, DetachedSession),
    /// Refused by the workflow; the question posted for approvers by this look, if any.
    Refused(CheckError, Option<Posted>),
    /// Another call of the run is in flight: its tool.
    Busy(String),
}

impl<S: SessionStore + 'static> Engine<S> {
    /// The request phase of a `tools/call`.
    /// The run a `tools/call` check names and the call it carries.
    pub(super) fn read_request(&self, request: &McpRequest) -> Result<(String, Call), CheckError> {
        let run = self.run_of(request.metadata_context.as_ref())?;
        let params = request
            .mcp_request
            .as_deref()
            .ok_or_else(|| CheckError::from(Invalid::NoParams))?;
        Ok((run, read_call(params, self.options.max_params_bytes)?))
    }

    pub(super) async fn admit(&self, run: &str, call: Call) -> Result<Admitted, CheckError> {
        let policy = self.policy_for(run, &call.tool);
        let ttl = self.options.question_ttl;
        let ask = match self.options.approvals.is_some() {
            // Approvers elsewhere answer the question the run holds: a retry before
            // their answer is not a new question.
            true => Gate::AskOnce { run, ttl },
            false => Gate::Ask { run, ttl },
        };
        let Some(gate) = elicitation::gate(run, call.answer, ask) else {
            return Err(CheckError::Dismissed {
                tool: call.tool.clone(),
            });
        };
        // An answer that applies to no question the run holds is refused as it is: the
        // host never asks again on it (the next copy of the same answer would answer
        // that new question, and run the call a second time).
        match self.reserve(run, &policy, &call, gate).await? {
            Admission::Reserved(token, snapshot, session) => {
                self.keep_admitted(token, snapshot, session);
                Ok(Admitted::Call {
                    token,
                    mutated: call.stripped,
                })
            }
            Admission::Refused(error, posted) => {
                if let Some(posted) = posted {
                    self.announce(run, &posted).await;
                }
                Err(error)
            }
            Admission::Busy(_) => unreachable_busy(&call.tool),
        }
    }

    /// Reserves `run` for `call`, waiting (at most [`Options::busy_wait`]) while another
    /// call of the run is in flight, then looking again: the second call is judged
    /// against the state the first one left.
    pub(super) async fn reserve(
        &self,
        run: &str,
        policy: &Policy,
        call: &Call,
        gate: Gate<'_>,
    ) -> Result<Admission, CheckError> {
        let wait = run::BusyWait {
            limit: self.options.busy_wait,
            first_pause: Duration::from_micros(500),
            max_pause: MAX_WAIT_PAUSE,
            jitter: Duration::from_micros(500),
        };
        let look = || async {
            Ok::<_, CheckError>(match self.try_reserve(run, policy, call, gate).await? {
                Admission::Busy(other) => run::Look::Busy(other),
                decided => run::Look::Decided(decided),
            })
        };
        match run::reserve(wait, look, std::future::pending()).await? {
            run::Reserved::Decided(admission) => Ok(admission),
            // Nothing cancels the wait here (the gateway's request is its own).
            run::Reserved::Cancelled => Err(CheckError::BusyAfterWait {
                tool: call.tool.clone(),
            }),
            run::Reserved::Busy { other } => {
                let reason = run::busy_reason(&call.tool, &other, wait.limit);
                let data = policy.refusal_data::<DynSession<'_>>(
                    &call.tool,
                    RefusalKind::Busy.as_str(),
                    &reason,
                    None,
                );
                Err(CheckError::Busy { reason, data })
            }
        }
    }

    /// One look at `run` for `call`: refuse it, find the run busy, or admit it and write
    /// its lease in the same compare-and-set.
    pub(super) async fn try_reserve(
        &self,
        run: &str,
        policy: &Policy,
        call: &Call,
        gate: Gate<'_>,
    ) -> Result<Admission, CheckError> {
        // One clock reading per request (a retried compare-and-set judges at the same
        // time): budgets with a window judge by it.
        let now = orch_agent::protocol::now_ms();
        let tried = self
            .modify(run, |record| {
                if let Some(auditor) = policy.auditor() {
                    auditor.take_buffered();
                }
                let mut record = record.unwrap_or_default();
                let (admission, mut write) = run::admit(
                    &mut record,
                    &self.machine,
                    policy,
                    |snapshot| self.session_at(run, snapshot, policy),
                    &call.tool,
                    &orch_runtime::Call::new(call.digest, &call.arguments).at(now),
                    gate,
                    self.options.lease,
                    // ExtMCP names no delivery: each request phase is judged.
                    None,
                )?;
                let admission = match admission {
                    run::Admission::Admitted { token, session } => {
                        Admission::Reserved(token, record.snapshot.clone(), session.detach())
                    }
                    run::Admission::Busy(tool) => Admission::Busy(tool),
                    run::Admission::Refused {
                        refusal,
                        question,
                        session,
                    } => {
                        let posted =
                            self.post(&mut record, &refusal, question.as_ref(), call, now)?;
                        write |= posted.as_ref().is_some_and(|(_, new)| *new);
                        let asked = question.as_ref().map(|q| (call, q));
                        let mut error = refused(policy, &session, refusal, asked);
                        if let (Some((posted, _)), CheckError::Refused { reason, data }) =
                            (&posted, &mut error)
                        {
                            approvals::tell_waiting(reason, data, posted);
                        }
                        Admission::Refused(error, posted.filter(|(_, new)| *new).map(|(p, _)| p))
                    }
                };
                Ok(match write {
                    true => Change::Write(record, admission),
                    false => Change::Keep(admission),
                })
            })
            .await;
        if tried.is_ok() {
            self.log_attempt(policy);
        }
        tried
    }
}

/// What the request phase of a call decided when it lets it go.
pub(super) enum Admitted {
    /// Not judged (not a `tools/call`).
    Pass,
    /// Admitted under a lease; `mutated`: the params to send instead (orch's approval
    /// answer taken out).
    Call {
        token: u64,
        mutated: Option<Vec<u8>>,
    },
}

/// A call that found its run busy is refused by [`Engine::reserve`] before it returns.
pub(super) fn unreachable_busy(tool: &str) -> Result<Admitted, CheckError> {
    Err(CheckError::BusyAfterWait {
        tool: tool.to_owned(),
    })
}

/// The refusal of a call, as the gateway sends it to the client: orch's wording as the
/// reason, and the same facts as the JSON-RPC error's data (what `orch mcp` puts in a
/// refused call's `structuredContent`), with the question for the human when the call
/// waits for an approval.
pub(super) fn refused(
    policy: &Policy,
    session: &DynSession<'_>,
    refusal: Refusal,
    asked: Option<(&Call, &Question)>,
) -> CheckError {
    let mut data = policy.workflow_refusal_data(&refusal, Some(session));
    let reason = refusal.reason;
    if let Some((call, question)) = asked {
        let state = elicitation::request_state(question);
        data["approval"] = json!({
            "tool": call.tool,
            "step": question.step,
            "digest": call.digest.to_string(),
            "pending": true,
            "requestState": state,
            "expiresMs": question.expires_ms,
            "origins": question.origins,
            "inputRequests": {
                INPUT_KEY: {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": elicitation::question_text_with_origins(&call.tool, &call.arguments, question.step.as_deref(), &question.origins),
                        "requestedSchema": elicitation::form_schema(),
                    }
                }
            },
        });
    }
    CheckError::Refused { reason, data }
}

/// A failure of the run protocol, as the gateway gets it: the check fails closed.
pub(super) fn failed(run: &str, error: RunError) -> CheckError {
    CheckError::Fault {
        run: run.to_owned(),
        error,
    }
}
