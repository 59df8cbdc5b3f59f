//! A session driven by tool names (`Session`): allowed tools, checks, records, the run
//! host's calls, approvals and snapshots.

use crate::compile::small;
use crate::fast;
use crate::kinds::{refusal, Action, AnswerOutcome, Answered, Begin, Outcome, Refusal, Verdict};
use napi::bindgen_prelude::{Env, Result, Uint8ArraySlice};
use napi_derive::napi;
use orch_agent::hosted::HostedSession;
use orch_agent::run_host;
use std::cell::RefCell;
use std::rc::Rc;

/// The verdict a session holds on one exact call.
#[napi(object)]
pub struct Approval {
    /// The call's SHA-256 digest (tool and arguments), in hex.
    pub digest: String,
    /// What a human said, or that the question is open.
    pub verdict: Verdict,
}

/// One conversation's workflow state. One per conversation; calls on it are
/// synchronous, so a JavaScript host serialises them by construction (the AI SDK adapter
/// also keeps one tool call of a session at a time).
#[napi]
pub struct Session {
    pub(crate) hosted: Rc<RefCell<HostedSession>>,
    /// Its number in this thread's table of sessions (`fast.rs`); `-1` when it has none.
    pub(crate) handle: f64,
}

impl Drop for Session {
    fn drop(&mut self) {
        fast::unregister(self.handle);
    }
}

/// Names as owned strings.
fn owned(names: Option<Vec<&str>>) -> Option<Vec<String>> {
    names.map(|n| n.into_iter().map(str::to_owned).collect())
}

/// The words of a call's arguments (`{}` when none are given).
fn args(arguments: &Option<String>) -> &str {
    arguments.as_deref().unwrap_or("{}")
}

#[napi]
impl Session {
    /// The tools that may run now, in declaration order (then allowed foreign tools).
    #[napi]
    pub fn allowed(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.hosted
            .borrow_mut()
            .for_each_allowed(|_, name| out.push(name.to_owned()));
        out
    }

    /// `null` when `tool` may run now, else the refusal.
    #[napi]
    pub fn check(&self, tool: String) -> Option<Refusal> {
        self.hosted.borrow().check(&tool).map(refusal)
    }

    /// `check` for this exact call (`args`: its arguments as JSON text, default `{}`):
    /// a gated tool passes on a human's approval of this call held by the session, and
    /// is refused as `rejected` on a held rejection. Changes nothing. `nowMs`: the host's
    /// clock (milliseconds since the Unix epoch; default: this machine's), which budgets
    /// with a window judge by.
    #[napi]
    pub fn check_call(
        &self,
        tool: String,
        args: Option<String>,
        now_ms: Option<f64>,
    ) -> Option<Refusal> {
        self.hosted
            .borrow()
            .check_call_at(&tool, self::args(&args), clock(now_ms))
            .map(refusal)
    }

    /// Admits this exact call before the host runs it: `checkCall`, but an approval it
    /// passes on is consumed (one approval, one call) and budgets charge it. `null` when
    /// it may run. `nowMs`: as in `checkCall`.
    #[napi]
    pub fn admit(
        &mut self,
        tool: String,
        args: Option<String>,
        now_ms: Option<f64>,
    ) -> Option<Refusal> {
        self.hosted
            .borrow_mut()
            .admit_at(&tool, self::args(&args), clock(now_ms))
            .map(refusal)
    }

    /// This exact call was put to a human: the session holds the question (until the
    /// next event), and the call still needs an approval. Returns the question's identity
    /// (16 hex digits), which `answer` needs.
    #[napi]
    pub fn ask(&mut self, tool: String, args: Option<String>) -> String {
        self.hosted
            .borrow_mut()
            .ask(&tool, self::args(&args))
            .to_string()
    }

    /// A human's answer to the question `question` (what `ask` returned) about this exact
    /// call: applied only while the session holds that very question, once. `false`:
    /// nothing changed (answered already, an event since, another question asked).
    #[napi]
    pub fn answer(&mut self, tool: String, args: String, question: String, approved: bool) -> bool {
        let id = (question.len() == 16)
            .then(|| u64::from_str_radix(&question, 16).ok())
            .flatten();
        match id {
            Some(id) => {
                let question = orch_runtime::QuestionId::new(id);
                self.hosted
                    .borrow_mut()
                    .answer(&tool, &args, question, approved)
            }
            None => false,
        }
    }

    /// What a model is told when it answered with text while `tool` is forced: the one
    /// wording every surface sends (the module's `reminder`).
    #[napi]
    pub fn reminder(&self, tool: String) -> String {
        orch_agent::Policy::forced_reminder(&tool)
    }

    /// The run host: the call `callId` of `tool` with `args` (JSON text, default `{}`)
    /// is about to run. `run`: run it, then `finish` it; `refused`; `ask`: the session
    /// holds a question bound to this call's id, to put to a human (their answer goes to
    /// `answerCall`); `again`: the same call delivered again, never run twice. `ask`
    /// (default `true`) `false`: a call that needs a human's approval is refused as
    /// `needs_approval` and nothing is asked (for a framework that asks elsewhere).
    /// `nowMs`: the host's clock (milliseconds since the Unix epoch; default: this
    /// machine's), for the question's expiry.
    #[napi]
    pub fn begin(
        &mut self,
        call_id: String,
        tool: String,
        args: Option<String>,
        ask: Option<bool>,
        now_ms: Option<f64>,
    ) -> Begin {
        let now = clock(now_ms);
        let on_gate = match ask {
            Some(false) => run_host::OnGate::Refuse,
            _ => run_host::OnGate::Ask,
        };
        let begun =
            self.hosted
                .borrow_mut()
                .begin(&call_id, &tool, self::args(&args), on_gate, now);
        let action = match begun {
            run_host::Begin::Run => Action::Run,
            run_host::Begin::Refused(_) => Action::Refused,
            run_host::Begin::Ask { .. } => Action::Ask,
            run_host::Begin::Again(_) => Action::Again,
        };
        Begin {
            action,
            refusal: begun.refusal().cloned().map(refusal),
            question: begun.question().map(|q| q.to_string()),
        }
    }

    /// The run host: a human's answer about the call `callId` (`tool` with `args`, as
    /// it was shown): applied once, to the question `begin` asked about that very call,
    /// before it expires, while the run still holds it; any other answer changes nothing
    /// and says why.
    /// `nowMs`: the host's clock, as for `begin`.
    #[napi]
    pub fn answer_call(
        &mut self,
        call_id: String,
        tool: String,
        args: String,
        approved: bool,
        now_ms: Option<f64>,
    ) -> Answered {
        let now = clock(now_ms);
        let answered = self
            .hosted
            .borrow_mut()
            .answer_call(&call_id, &tool, &args, approved, now);
        let outcome = match answered {
            run_host::Answered::Applied { .. } => AnswerOutcome::Applied,
            run_host::Answered::Repeated(_) => AnswerOutcome::Repeated,
            run_host::Answered::Late(_) => AnswerOutcome::Late,
            run_host::Answered::Foreign(_) => AnswerOutcome::Foreign,
            run_host::Answered::Unknown(_) => AnswerOutcome::Unknown,
        };
        Answered {
            outcome,
            refusal: answered.refusal().cloned().map(refusal),
        }
    }

    /// The run host: the call `callId` that `begin` admitted ended. `ran` (default
    /// `true`): the tool returned rather than failed; `result`: what it returned (JSON
    /// text; a result in MCP's shape is read by orch's one rule). The record's outcome
    /// word when recorded, `not_run`, or `not_admitted`.
    #[napi]
    pub fn finish(
        &mut self,
        call_id: String,
        tool: String,
        ran: Option<bool>,
        result: Option<String>,
    ) -> String {
        let finished = self.hosted.borrow_mut().finish(
            &call_id,
            &tool,
            ran.unwrap_or(true),
            result.as_deref(),
        );
        match finished {
            run_host::Finished::Recorded(word) => word,
            run_host::Finished::NotRun(_) => "not_run",
            run_host::Finished::NotAdmitted => "not_admitted",
        }
        .to_owned()
    }

    /// The refusal of a call whose arguments are not JSON (`why`: the parser's words),
    /// in orch's words.
    #[napi]
    pub fn malformed_arguments(&self, tool: String, why: String) -> Refusal {
        refusal(self.hosted.borrow().malformed_arguments(&tool, &why))
    }

    /// The refusal of a call of a tool the host does not have, in orch's words.
    #[napi]
    pub fn no_such_tool(&self, tool: String) -> Refusal {
        refusal(self.hosted.borrow().no_such_tool(&tool))
    }

    /// The refusal of a call whose id another call of the same model response has too.
    #[napi]
    pub fn shared_id(&self, tool: String, call_id: String) -> Refusal {
        refusal(self.hosted.borrow().shared_id(&tool, &call_id))
    }

    /// The refusal of a call whose answer applies to no question the run holds
    /// (`stale_answer`), in orch's words: for an adapter that knows an answer predates
    /// the question it would match.
    #[napi]
    pub fn stale_answer(&self, tool: String) -> Refusal {
        refusal(self.hosted.borrow().stale_answer(&tool))
    }

    /// How long a question `begin` asks stays answerable, in seconds (24 hours unless
    /// set).
    #[napi]
    pub fn set_question_ttl(&mut self, seconds: f64) -> napi::Result<()> {
        let ttl = std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|e| napi::Error::from_reason(format!("questionTtl: {e}")))?;
        self.hosted.borrow_mut().set_question_ttl(ttl);
        Ok(())
    }

    /// A human approved this exact call: the session holds the approval (until the next
    /// event), and `admit` lets the call through once.
    #[napi]
    pub fn approve(&mut self, tool: String, args: Option<String>) {
        self.hosted.borrow_mut().approve(&tool, self::args(&args));
    }

    /// A human rejected this exact call: the session holds the rejection, and the call
    /// is refused as `rejected` until the next event.
    #[napi]
    pub fn reject(&mut self, tool: String, args: Option<String>) {
        self.hosted.borrow_mut().reject(&tool, self::args(&args));
    }

    /// The verdict the session holds on a call, if any.
    #[napi(getter)]
    pub fn approval(&self) -> Option<Approval> {
        self.hosted.borrow().session().approval().map(|a| Approval {
            digest: a.call.to_string(),
            verdict: match a.verdict {
                orch_runtime::Verdict::Pending => Verdict::Pending,
                orch_runtime::Verdict::Approved => Verdict::Approved,
                orch_runtime::Verdict::Rejected => Verdict::Rejected,
            },
        })
    }

    /// Records that `tool` ran: the outcome. `result`: what it returned (its JSON
    /// text), for rules on arguments that read values from it (semantics §16).
    #[napi]
    pub fn record(&mut self, tool: String, result: Option<String>) -> Outcome {
        use orch_runtime::dynamic::DynOutcome as O;
        let outcome = match result {
            Some(result) => self
                .hosted
                .borrow_mut()
                .record_result_outcome(&tool, &result),
            None => self.hosted.borrow_mut().record_outcome(&tool),
        };
        match outcome {
            O::Advanced { .. } => Outcome::Advanced,
            O::Completed => Outcome::Completed,
            O::Free => Outcome::Free,
            O::OutOfSequence { .. } => Outcome::OutOfSequence,
            O::NotAllowed => Outcome::NotAllowed,
        }
    }

    /// A user message: message conditions and sequence resets are evaluated.
    #[napi]
    pub fn on_user_message(&mut self, text: String) {
        self.hosted.borrow_mut().on_user_message(&text);
    }

    /// The host's tools (names the template does not declare are foreign tools).
    #[napi]
    pub fn set_available(&mut self, tools: Vec<String>) {
        self.hosted.borrow_mut().set_available(tools);
    }

    /// Back to a fresh session's state (the host's tools are kept).
    #[napi]
    pub fn reset(&mut self) {
        self.hosted.borrow_mut().reset();
    }

    /// The active step, if any.
    #[napi(getter)]
    pub fn step(&self) -> Option<String> {
        self.hosted.borrow().session().step().map(str::to_owned)
    }

    /// The position in the active step's sequence.
    #[napi(getter)]
    pub fn sequence_index(&self) -> u32 {
        small(self.hosted.borrow().session().sequence_index())
    }

    /// The tools the active step's unfinished sequence accepts next, if any.
    #[napi(getter)]
    pub fn expected(&self) -> Option<Vec<String>> {
        owned(self.hosted.borrow().session().expected())
    }

    /// The tool the next model call must call, if any: the one an unfinished sequence
    /// expects when it is the only tool allowed, and no human's question or rejection is
    /// held (the rule every orch host follows).
    #[napi(getter)]
    pub fn forced_tool(&self) -> Option<String> {
        self.hosted.borrow().forced_tool()
    }

    /// `'enforce'`, or `'observe'` (its machine's mode): every call is judged as in
    /// enforce mode, and none is refused or asked about.
    #[napi(getter)]
    pub fn mode(&self) -> crate::kinds::Mode {
        crate::kinds::Mode::of(self.hosted.borrow().mode())
    }

    /// The tools the sequence waits for when the host has none of them, if so.
    #[napi(getter)]
    pub fn blocked_on(&self) -> Option<Vec<String>> {
        owned(self.hosted.borrow().session().blocked_on())
    }

    /// The tools recorded, most recent last (`null` for a slot before the first).
    #[napi(getter)]
    pub fn history(&self) -> Vec<Option<String>> {
        self.hosted
            .borrow()
            .session()
            .history()
            .into_iter()
            .map(|t| t.map(str::to_owned))
            .collect()
    }

    /// Where the values of a call of `tool` with `args` (JSON text) were seen, one line
    /// each, to show the human asked about it ("`/iban` "GB33…": seen only in untrusted
    /// results of `read_file`; not in the user's messages"). Empty when the template
    /// remembers nothing.
    #[napi]
    pub fn origins(&self, tool: String, args: Option<String>) -> Vec<String> {
        self.hosted
            .borrow()
            .session()
            .origins(&tool, args.as_deref().unwrap_or("{}"))
    }

    /// How many remembered values the session forgot to make room for newer ones (the
    /// template's `rememberedValues` is its bound).
    #[napi(getter)]
    pub fn forgotten(&self) -> u32 {
        self.hosted.borrow().session().forgotten()
    }

    /// Each budget's total now (at the newest time given), by name, as a decimal string;
    /// budgets that hold nothing are left out.
    #[napi(getter)]
    pub fn budgets(&self) -> std::collections::HashMap<String, String> {
        self.hosted
            .borrow()
            .session()
            .budget_totals()
            .into_iter()
            .map(|(name, total)| (name.to_owned(), total))
            .collect()
    }

    /// Internal (`main.cjs`): the session's number in this thread's table of sessions,
    /// which the package's fast path (`__orch*` functions) takes.
    #[napi(getter, js_name = "__handle")]
    pub fn handle(&self) -> f64 {
        self.handle
    }

    /// The session as bytes: the binary snapshot format of the Rust crates.
    #[napi]
    pub fn snapshot<'env>(&self, env: &'env Env) -> Result<Uint8ArraySlice<'env>> {
        // Copied into memory JavaScript owns: cheaper than handing over the Rust
        // buffer as an external one (which V8 tracks with a finaliser).
        Uint8ArraySlice::copy_from(env, self.hosted.borrow().snapshot())
    }
}

/// The host's clock as given (milliseconds since the Unix epoch; a number that is not a
/// finite non-negative one is taken as 0), else this machine's.
fn clock(now_ms: Option<f64>) -> u64 {
    match now_ms {
        Some(ms) if ms.is_finite() && ms > 0.0 => ms as u64,
        Some(_) => 0,
        None => orch_agent::protocol::now_ms(),
    }
}
