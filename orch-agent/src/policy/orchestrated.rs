//! What a policy needs of a session ([`Orchestrated`]), for typed sessions and run-time
//! ones alike.

use super::refusal::{Refusal, RefusalKind};
use orch_runtime::dynamic::DynSession;
use orch_runtime::{
    Approval, Call, CallDigest, Machine, QuestionId, Refusal as EngineRefusal, Session, StepEnum,
    ToolEnum,
};

/// A session the [`Policy`](crate::Policy) can drive by tool names: a typed [`Session`]
/// (generated code) or a run-time [`DynSession`] (a template loaded at run time, as `orch
/// mcp` does). The rules of [`Policy`](crate::Policy) are written once, over this trait.
pub trait Orchestrated {
    /// Sets the session's available tools from the host's tool names (names the
    /// template does not declare are foreign tools, judged by its patterns).
    fn set_host_tools(&mut self, host_tools: &[String]);
    /// May the tool `name` run now? `Err` says why not.
    fn check_tool(&self, name: &str) -> Result<(), Refusal>;
    /// The names among `host_tools` that may run now, in their order, gated ones (which
    /// need a human's approval of the call, semantics §13) included, as `allowed()` lists
    /// them. The default asks [`check_tool`](Orchestrated::check_tool) name by name.
    fn allowed_among(&self, host_tools: &[String]) -> Vec<String> {
        host_tools
            .iter()
            .filter(|name| match self.check_tool(name) {
                Ok(()) => true,
                Err(d) => d.kind == RefusalKind::NeedsApproval,
            })
            .cloned()
            .collect()
    }
    /// Admits this exact call of `name` (semantics §13, §16): as
    /// [`check_tool`](Orchestrated::check_tool), then the rules on its arguments (a
    /// broken one refuses it, a conditional `approve` that holds gates it); a gated call
    /// passes on a held approval of the call, which this consumes, and is refused as
    /// rejected on a held rejection of it.
    fn admit_call(&mut self, name: &str, call: &Call<'_>) -> Result<(), Refusal>;
    /// [`admit_call`](Orchestrated::admit_call) without admitting: nothing is consumed.
    fn check_call(&self, name: &str, call: &Call<'_>) -> Result<(), Refusal>;
    /// Does a rule on arguments apply to a call of `name` now (in the active step)?
    fn argument_rules_apply(&self, name: &str) -> bool;
    /// The verdict on a call the session holds (semantics §13), if any.
    fn approval(&self) -> Option<Approval>;
    /// Holds the question `question`, "may this exact call run?", put to a human
    /// (semantics §13).
    fn ask_approval(&mut self, call: CallDigest, question: QuestionId);
    /// Applies a human's answer to the question `question` held about `call`: `false`,
    /// changing nothing, when the session no longer holds it (an event since, another
    /// question, or answered).
    fn answer_approval(&mut self, call: CallDigest, question: QuestionId, approved: bool) -> bool;
    /// Closes the question `question` about `call` without an answer (it expired):
    /// `false`, changing nothing, when the session no longer holds it.
    fn dismiss_question(&mut self, call: CallDigest, question: QuestionId) -> bool;
    /// A call of `name` that ran without being admitted (observe mode): stored as
    /// admitting it would store it, nothing judged.
    fn ran_call(&mut self, name: &str, call: &Call<'_>);
    /// Records that the tool `name` ran: the outcome's name (`advanced`, `completed`,
    /// `free`, `out_of_sequence`, `not_allowed`).
    fn record_tool(&mut self, name: &str) -> &'static str;
    /// [`record_tool`](Orchestrated::record_tool), remembering the values rules on
    /// arguments read from what it returned (semantics §16).
    fn record_tool_result(&mut self, name: &str, result: &str) -> &'static str;
    /// Does a rule on arguments read the results of `name`?
    fn reads_results_of(&self, name: &str) -> bool;
    /// The active step's name.
    fn step_name(&self) -> Option<&str>;
    /// The tools the active step's unfinished sequence accepts next, if any.
    fn expected_tools(&self) -> Option<Vec<&str>>;
    /// The position in the active step's sequence.
    fn sequence_index(&self) -> usize;
    /// The glob of the active step's `denied` list that refuses `name`, if one does.
    fn deny_pattern(&self, name: &str) -> Option<&str>;
    /// The compiled template's fingerprint.
    fn fingerprint(&self) -> u64;
    /// A new user message (semantics §5).
    fn user_message(&mut self, text: &str);
    /// Back to a fresh session (semantics §5 "reset").
    fn reset_session(&mut self);
    /// Where the values of a call of `name` with `arguments` were seen, one line each,
    /// for the human asked about it (semantics §16). The default knows nothing.
    fn origins(&self, name: &str, arguments: &str) -> Vec<String> {
        let _ = (name, arguments);
        Vec::new()
    }
    /// How many remembered values the session forgot to make room for newer ones
    /// (semantics §16). The default knows none.
    fn forgotten(&self) -> u32 {
        0
    }
    /// Each budget's total now, by name, as a decimal (semantics §17); budgets that hold
    /// nothing left out. The default knows none.
    fn budget_totals(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Does admitting a call of `name` change what the session remembers (its arguments,
    /// a budget's clock and charges; semantics §16, §17)? The default: no.
    fn admit_changes_memory(&self, name: &str) -> bool {
        let _ = name;
        false
    }
    /// Does refusing a call change the session (a budget counts refusals; semantics
    /// §17)? The default: no.
    fn refusal_changes_memory(&self) -> bool {
        false
    }
}

impl<M: Machine> Orchestrated for Session<M> {
    fn set_host_tools(&mut self, host_tools: &[String]) {
        self.set_available(
            M::Tool::ALL
                .iter()
                .copied()
                .filter(|t| host_tools.iter().any(|h| h == t.name())),
        );
    }

    fn check_tool(&self, name: &str) -> Result<(), Refusal> {
        self.check_name(name)
            .map_err(|r| Refusal::of_engine(name, &r))
    }

    /// The allowed set is computed once, then each name is a bit test.
    fn allowed_among(&self, host_tools: &[String]) -> Vec<String> {
        self.filter_names(host_tools.iter().map(String::as_str))
            .map(str::to_owned)
            .collect()
    }

    fn admit_call(&mut self, name: &str, call: &Call<'_>) -> Result<(), Refusal> {
        self.admit_call_name(name, call)
            .map_err(|r| typed_refusal(self, name, &r, call))
    }

    fn check_call(&self, name: &str, call: &Call<'_>) -> Result<(), Refusal> {
        self.check_call_name(name, call)
            .map_err(|r| typed_refusal(self, name, &r, call))
    }

    fn argument_rules_apply(&self, name: &str) -> bool {
        let rules = M::tables().rules;
        !(rules.is_empty() && rules.budgets.is_empty())
            && M::Tool::from_name(name).is_some_and(|t| {
                let step = self.step().map_or(u16::MAX, |s| s.index() as u16);
                rules.reads_arguments(t.index(), step)
            })
    }

    fn origins(&self, name: &str, arguments: &str) -> Vec<String> {
        M::Tool::from_name(name).map_or_else(Vec::new, |t| Session::origins(self, t, arguments))
    }

    fn forgotten(&self) -> u32 {
        Session::forgotten(self)
    }

    fn admit_changes_memory(&self, name: &str) -> bool {
        M::Tool::from_name(name).is_some_and(|t| Session::admit_changes_memory(self, t))
    }

    fn refusal_changes_memory(&self) -> bool {
        Session::refusal_changes_memory(self)
    }

    fn budget_totals(&self) -> Vec<(String, String)> {
        Session::budget_totals(self)
            .into_iter()
            .map(|(name, total)| (name.to_owned(), total))
            .collect()
    }

    fn approval(&self) -> Option<Approval> {
        Self::approval(self)
    }

    fn ask_approval(&mut self, call: CallDigest, question: QuestionId) {
        self.ask(call, question);
    }

    fn answer_approval(&mut self, call: CallDigest, question: QuestionId, approved: bool) -> bool {
        self.answer(call, question, approved)
    }

    fn dismiss_question(&mut self, call: CallDigest, question: QuestionId) -> bool {
        self.dismiss(call, question)
    }

    fn ran_call(&mut self, name: &str, call: &Call<'_>) {
        self.ran_call_name(name, call);
    }

    fn record_tool(&mut self, name: &str) -> &'static str {
        self.record_name(name).as_str()
    }

    fn record_tool_result(&mut self, name: &str, result: &str) -> &'static str {
        self.record_result_name(name, result).as_str()
    }

    fn reads_results_of(&self, name: &str) -> bool {
        let rules = M::tables().rules;
        M::Tool::from_name(name)
            .is_some_and(|t| rules.sources.iter().any(|s| s.tool as usize == t.index()))
    }

    fn step_name(&self) -> Option<&str> {
        self.step().map(|s| s.name())
    }

    fn expected_tools(&self) -> Option<Vec<&str>> {
        self.expected().map(|set| set.names().collect())
    }

    fn sequence_index(&self) -> usize {
        Session::sequence_index(self)
    }

    fn deny_pattern(&self, name: &str) -> Option<&str> {
        Session::deny_pattern(self, name)
    }

    fn fingerprint(&self) -> u64 {
        M::tables().fingerprint
    }

    fn user_message(&mut self, text: &str) {
        self.on_user_message(text);
    }

    fn reset_session(&mut self) {
        self.reset();
    }
}

impl Orchestrated for DynSession<'_> {
    fn set_host_tools(&mut self, host_tools: &[String]) {
        self.set_available(host_tools.iter().map(String::as_str));
    }

    fn check_tool(&self, name: &str) -> Result<(), Refusal> {
        self.check(name).map_err(|r| Refusal::of_engine(name, &r))
    }

    fn admit_call(&mut self, name: &str, call: &Call<'_>) -> Result<(), Refusal> {
        DynSession::admit_call(self, name, call).map_err(|r| dyn_refusal(self, name, &r, call))
    }

    fn check_call(&self, name: &str, call: &Call<'_>) -> Result<(), Refusal> {
        DynSession::check_call(self, name, call).map_err(|r| dyn_refusal(self, name, &r, call))
    }

    fn argument_rules_apply(&self, name: &str) -> bool {
        DynSession::argument_rules_apply(self, name)
    }

    fn origins(&self, name: &str, arguments: &str) -> Vec<String> {
        DynSession::origins(self, name, arguments)
    }

    fn forgotten(&self) -> u32 {
        DynSession::forgotten(self)
    }

    fn admit_changes_memory(&self, name: &str) -> bool {
        DynSession::admit_changes_memory(self, name)
    }

    fn refusal_changes_memory(&self) -> bool {
        DynSession::refusal_changes_memory(self)
    }

    fn budget_totals(&self) -> Vec<(String, String)> {
        DynSession::budget_totals(self)
            .into_iter()
            .map(|(name, total)| (name.to_owned(), total))
            .collect()
    }

    fn approval(&self) -> Option<Approval> {
        Self::approval(self)
    }

    fn ask_approval(&mut self, call: CallDigest, question: QuestionId) {
        self.ask(call, question);
    }

    fn answer_approval(&mut self, call: CallDigest, question: QuestionId, approved: bool) -> bool {
        self.answer(call, question, approved)
    }

    fn dismiss_question(&mut self, call: CallDigest, question: QuestionId) -> bool {
        self.dismiss(call, question)
    }

    fn ran_call(&mut self, name: &str, call: &Call<'_>) {
        DynSession::ran_call(self, name, call);
    }

    fn record_tool(&mut self, name: &str) -> &'static str {
        self.record(name).as_str()
    }

    fn record_tool_result(&mut self, name: &str, result: &str) -> &'static str {
        self.record_result(name, result).as_str()
    }

    fn reads_results_of(&self, name: &str) -> bool {
        DynSession::reads_results_of(self, name)
    }

    fn step_name(&self) -> Option<&str> {
        self.step()
    }

    fn expected_tools(&self) -> Option<Vec<&str>> {
        self.expected()
    }

    fn sequence_index(&self) -> usize {
        DynSession::sequence_index(self)
    }

    fn deny_pattern(&self, name: &str) -> Option<&str> {
        DynSession::deny_pattern(self, name)
    }

    fn fingerprint(&self) -> u64 {
        self.machine().fingerprint()
    }

    fn user_message(&mut self, text: &str) {
        self.on_user_message(text);
    }

    fn reset_session(&mut self) {
        self.reset();
    }
}

/// A typed session's refusal of `tool`, a broken rule put in words with the call's
/// arguments.
fn typed_refusal<M: Machine>(
    session: &Session<M>,
    tool: &str,
    refusal: &EngineRefusal<M::Step, orch_runtime::ToolSet<M::Tool>>,
    call: &Call<'_>,
) -> Refusal {
    match refusal {
        EngineRefusal::BrokenRule { step, broken } => Refusal::broken(
            tool,
            step.map(|s| s.name()),
            session.rule_name(broken.rule),
            &session.explain_broken(broken, call.arguments),
        ),
        other => Refusal::of_engine(tool, other),
    }
}

/// A run-time session's refusal of `tool`, a broken rule put in words with the call's
/// arguments.
fn dyn_refusal(
    session: &DynSession<'_>,
    tool: &str,
    refusal: &EngineRefusal<&str, Vec<&str>>,
    call: &Call<'_>,
) -> Refusal {
    match refusal {
        EngineRefusal::BrokenRule { step, broken } => Refusal::broken(
            tool,
            *step,
            session.rule_name(broken.rule),
            &session.explain_broken(broken, call.arguments),
        ),
        other => Refusal::of_engine(tool, other),
    }
}
