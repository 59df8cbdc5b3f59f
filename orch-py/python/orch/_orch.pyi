"""Type stubs of the native module ``orch._orch`` (re-exported by ``orch``)."""

import os
from typing import Final, Optional, Union, final

from ._types import Action, AnswerOutcome, Finding, LostRule, Mode, Outcome, RefusalKind, ResultKind, Severity, Verdict

__all__ = [
    "compile",
    "load",
    "result_kind",
    "reminder",
    "Machine",
    "Session",
    "Refusal",
    "Begin",
    "Answered",
    "Diagnostic",
    "TemplateError",
    "SnapshotError",
    "REFUSAL_KINDS",
    "__version__",
]

__version__: Final[str]
REFUSAL_KINDS: Final[list[RefusalKind]]
"""Every ``Refusal.kind``: ``not_allowed``, ``out_of_sequence``, ``broken_rule``, ``unknown_tool``,
``unavailable``, ``needs_approval``, ``rejected``, ``stale_answer``, ``busy``, ``outcome_unknown``,
``already_ran``."""

class TemplateError(ValueError):
    """A template with errors."""

    diagnostics: list[Diagnostic]
    """Every diagnostic (errors and warnings), in source order."""

class SnapshotError(ValueError):
    """Snapshot bytes that cannot be restored."""

@final
class Diagnostic:
    """One finding of the compiler."""

    code: str
    """The stable code, e.g. ``E003``."""
    name: str
    """The code's name, e.g. ``unknown_tool``."""
    severity: Severity
    """``error`` or ``warning``."""
    message: str
    line: Optional[int]
    """1-based line of the offending value (``None`` when it is not at one place)."""
    column: Optional[int]
    """1-based column, in characters."""
    end_line: Optional[int]
    end_column: Optional[int]
    help: Optional[str]
    """How to fix it, when known."""
    rendered: str
    """As ``orch check`` prints it (rustc style)."""

@final
class Refusal:
    """Why a tool may not run now."""

    tool: str
    kind: RefusalKind
    """One of ``REFUSAL_KINDS``."""
    message: str
    """The words orch sends a model everywhere: what is expected next, what is allowed now."""
    rule: Optional[str]
    """The rule on arguments that refused the call (``broken_rule``), by name; else ``None``."""

@final
class Begin:
    """What ``Session.begin`` came to."""

    action: Action
    """``run`` (run it, then ``finish`` it), ``refused``, ``ask`` (put the question to a human),
    or ``again`` (the same call delivered again: not run again)."""
    refusal: Optional[Refusal]
    """What the model is told when the call does not run (``None`` for ``run``)."""
    question: Optional[str]
    """The question's identity (16 hex digits), for ``ask``."""

@final
class Answered:
    """What ``Session.answer_call`` came to."""

    outcome: AnswerOutcome
    """``applied``, or why it applied to nothing: ``repeated``, ``late``, ``foreign``, ``unknown``."""
    refusal: Optional[Refusal]
    """What a call delivered on this answer is told (``None`` when it applied)."""

@final
class Machine:
    """A compiled template."""

    @property
    def name(self) -> str: ...
    @property
    def fingerprint(self) -> str:
        """16 hex digits; snapshots carry it."""
    @property
    def tools(self) -> list[str]: ...
    @property
    def steps(self) -> list[str]: ...
    @property
    def has_gates(self) -> bool:
        """Does the template gate any tool behind a human's approval (``approve``)?"""
    @property
    def mode(self) -> Mode:
        """``"enforce"``, or ``"observe"``: its sessions refuse and ask nothing."""
    @property
    def warnings(self) -> list[Diagnostic]: ...
    def lost_rule(self, tool: str) -> LostRule:
        """What a lost result of a call of ``tool`` means (``lostResults``): ``"retry"``, ``"ran"`` or ``"hold"`` (the default)."""
    def session(self, available: Optional[list[str]] = None) -> Session:
        """A fresh session; ``available``: the host's tools (default: every declared tool)."""
    def restore(self, snapshot: bytes, available: Optional[list[str]] = None) -> Session:
        """A session restored from ``Session.snapshot()`` bytes (or the Rust crates')."""
    def verify(
        self,
        max_states: int = 1_000_000,
        available: Optional[list[str]] = None,
        permissive: bool = False,
    ) -> list[Finding]:
        """Every reachable state explored: one dict per finding, as ``orch verify --format json``."""

@final
class Session:
    """One conversation's workflow state."""

    def allowed(self) -> list[str]:
        """The tools that may run now."""
    def check(self, tool: str) -> Optional[Refusal]:
        """``None`` when ``tool`` may run now, else why not."""
    @property
    def budgets(self) -> dict[str, str]:
        """Each budget's total now, by name, as a decimal string (budgets holding nothing left out)."""
    def check_call(
        self, tool: str, arguments: str = "{}", now_ms: Optional[int] = None
    ) -> Optional[Refusal]:
        """``check`` for this exact call (arguments as JSON text): a gated tool passes on a held approval of it.
        ``now_ms``: the host's clock (ms since the Unix epoch), which budgets with a window judge by."""
    def admit(
        self, tool: str, arguments: str = "{}", now_ms: Optional[int] = None
    ) -> Optional[Refusal]:
        """Admits this exact call before it runs, consuming an approval it passes on and charging budgets."""
    def ask(self, tool: str, arguments: str = "{}") -> str:
        """This exact call was put to a human: the session holds the question. Returns
        the question's identity (16 hex digits), which ``answer`` needs."""
    def answer(self, tool: str, arguments: str, question: str, approved: bool) -> bool:
        """A human's answer to the question ``question`` (what ``ask`` returned) about this
        exact call: applied only while the session holds that very question, once;
        ``False`` when nothing changed (answered already, an event since, another
        question asked since)."""
    def begin(
        self,
        call_id: str,
        tool: str,
        arguments: str = "{}",
        ask: bool = True,
        now_ms: Optional[int] = None,
    ) -> Begin:
        """The run host: the call ``call_id`` is about to run: run it, refuse it, ask about it
        (a question bound to the call's id), or — delivered again — never run it twice.
        ``ask=False``: a call that needs approval is refused and nothing is asked.
        ``now_ms``: the host's clock (ms since the Unix epoch; default: this machine's)."""
    def answer_call(
        self,
        call_id: str,
        tool: str,
        arguments: str,
        approved: bool,
        now_ms: Optional[int] = None,
    ) -> Answered:
        """The run host: a human's answer about the call ``call_id`` (as it was shown): applied
        once, to the question ``begin`` asked about that very call, before it expires.
        ``now_ms``: the host's clock, as for ``begin``."""
    def finish(self, call_id: str, tool: str, ran: bool = True, result: Optional[str] = None) -> str:
        """The run host: the admitted call ended. The record's outcome word when recorded,
        ``not_run``, or ``not_admitted``."""
    def malformed_arguments(self, tool: str, why: str) -> Refusal:
        """The refusal of a call whose arguments are not JSON, in orch's words."""
    def no_such_tool(self, tool: str) -> Refusal:
        """The refusal of a call of a tool the host does not have, in orch's words."""
    def shared_id(self, tool: str, call_id: str) -> Refusal:
        """The refusal of a call whose id another call of the same response has too."""
    def set_question_ttl(self, seconds: float) -> None:
        """How long a question ``begin`` asks stays answerable (24 hours unless set)."""
    def approve(self, tool: str, arguments: str = "{}") -> None:
        """A human approved this exact call: ``admit`` lets it through once."""
    def reject(self, tool: str, arguments: str = "{}") -> None:
        """A human rejected this exact call: it is refused as ``rejected`` until the next event."""
    @property
    def approval(self) -> Optional[tuple[str, Verdict]]:
        """The held verdict: (call digest in hex, ``pending`` | ``approved`` | ``rejected``)."""
    def record(self, tool: str, result: Optional[str] = None) -> Outcome:
        """Records that ``tool`` ran: ``advanced``, ``completed``, ``free``, ``out_of_sequence`` or ``not_allowed``.

        ``result``: what it returned (JSON text), for rules on arguments that read values from it."""
    def on_user_message(self, text: str) -> None: ...
    def set_available(self, tools: list[str]) -> None:
        """The host's tools (names the template does not declare are foreign tools)."""
    def reset(self) -> None: ...
    @property
    def step(self) -> Optional[str]: ...
    @property
    def sequence_index(self) -> int: ...
    @property
    def expected(self) -> Optional[list[str]]: ...
    @property
    def forced_tool(self) -> Optional[str]:
        """The tool the next model call must call, if any (orch's one rule: the tool an
        unfinished sequence expects when it is the only one allowed, while no human's
        question or rejection is held)."""
    @property
    def mode(self) -> Mode:
        """Its machine's mode: in ``"observe"`` every call is judged and runs."""
    @property
    def blocked_on(self) -> Optional[list[str]]: ...
    @property
    def history(self) -> list[Optional[str]]: ...
    def origins(self, tool: str, arguments: str = "{}") -> list[str]:
        """Where the values of this call were seen, one line each, for the human asked."""
    @property
    def forgotten(self) -> int:
        """How many remembered values the session forgot to make room for newer ones."""
    @property
    def machine(self) -> Machine: ...
    def snapshot(self) -> bytes:
        """The binary snapshot format of the Rust crates."""

def compile(
    template: str, /, *, prove_properties: bool = True, mode: Mode = "enforce"
) -> Machine:
    """Compiles a template's JSON text; raises ``TemplateError`` with every diagnostic.

    With ``prove_properties=False`` a violated safety property is not an error (E023):
    ``Machine.verify()`` reports it with its witness, as ``orch verify`` does.
    ``mode="observe"``: its sessions judge every call as in ``"enforce"`` mode and
    refuse and ask nothing (docs/rollout.md)."""

def load(
    path: Union[str, os.PathLike[str]], /, *, prove_properties: bool = True, mode: Mode = "enforce"
) -> Machine:
    """Reads and compiles a template file, as ``compile``."""

def reminder(tool: str) -> str:
    """What a model is told when it answered with text while ``tool`` is forced."""
def result_kind(result: str) -> ResultKind:
    """What a tool result (JSON text, an MCP ``CallToolResult``) says about the call:
    ``ran`` when it completed successfully, else why not — ``error``,
    ``input_required``, ``task``, ``other`` or ``malformed`` (orch's one rule: only a
    call that ran is recorded)."""
