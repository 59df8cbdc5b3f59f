"""The kinds orch's answers come in, as types: every word a ``Refusal``, a recorded
outcome, a verdict, a tool result or a verification finding can be (checked against the
native module by mypy's stubtest in the test command)."""

from __future__ import annotations

from typing import Literal, Optional, TypedDict

__all__ = [
    "Action",
    "AnswerOutcome",
    "Finding",
    "FindingKind",
    "LostRule",
    "Mode",
    "Outcome",
    "RefusalKind",
    "ResultKind",
    "Severity",
    "Verdict",
    "WitnessEvent",
]

RefusalKind = Literal[
    "not_allowed",
    "out_of_sequence",
    "broken_rule",
    "unknown_tool",
    "unavailable",
    "needs_approval",
    "rejected",
    "stale_answer",
    "busy",
    "outcome_unknown",
    "already_ran",
]
"""Why a call is refused (``orch_agent::RefusalKind``)."""

Action = Literal["run", "refused", "ask", "again"]
"""What ``Session.begin`` came to (the run host)."""

AnswerOutcome = Literal["applied", "repeated", "late", "foreign", "unknown"]
"""What ``Session.answer_call`` came to: applied, or why it applied to nothing."""

Outcome = Literal["advanced", "completed", "free", "out_of_sequence", "not_allowed"]
"""What recording a tool did."""

Verdict = Literal["pending", "approved", "rejected"]
"""Where a human stands on a call."""

LostRule = Literal["retry", "hold", "ran"]
"""What a call whose result never came means (``lostResults``; ``hold`` is the default)."""

Mode = Literal["enforce", "observe"]
"""Whether a machine's sessions enforce its decisions or only judge and record them."""

Severity = Literal["error", "warning"]

ResultKind = Literal["ran", "error", "input_required", "task", "other", "malformed"]
"""What a tool result says about the call: ``ran``, or why it did not."""

FindingKind = Literal["step", "sequence", "trap", "blocked", "no_tools", "property", "summary"]

class WitnessEvent(TypedDict, total=False):
    """One event of a witness, as ``orch simulate`` reads it (one key; a tool event may
    carry ``at``, its time in ms, when the model let every budget window pass)."""

    available: list[str]
    message: str
    tool: str
    at: int
    approve: str
    reset: bool

class Finding(TypedDict, total=False):
    """One finding of ``Machine.verify``, as ``orch verify --format json`` prints it."""

    kind: FindingKind
    step: str
    name: str
    reachable: Optional[bool]
    completes: Optional[bool]
    holds: Optional[bool]
    witness: list[WitnessEvent]
    reason: str
    message: str
    states: int
    complete: bool

