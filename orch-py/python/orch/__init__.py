"""orch: compiled workflows for LLM agents.

A template (AgentDock's ``template.json``: steps, conditions, sequences, allowed and
denied tools) is compiled once, with every mistake reported at its line and column; a
session then says which tools may run now, refuses the others with the reason, and
records what ran. The engine is orch's Rust engine: the same decisions, the same words
and the same snapshot bytes as the Rust crates.

>>> import orch
>>> machine = orch.compile('''{"name": "desk", "tools": ["search", "answer"],
...   "steps": [{"name": "Desk", "isDefault": true, "sequence": ["search", "answer"]}]}''')
>>> session = machine.session()
>>> session.allowed()
['search']
>>> print(session.check("answer"))
error: `answer` was not run: the sequence of step `Desk` expects `search` at position 0. Allowed now: search.
>>> session.record("search")
'advanced'

Adapters for agent frameworks live in submodules: ``orch.agents`` (the OpenAI Agents
SDK), ``orch.pydantic_ai`` and ``orch.langgraph``.
"""

from ._orch import (
    REFUSAL_KINDS,
    Answered,
    Begin,
    Diagnostic,
    Machine,
    Refusal,
    Session,
    SnapshotError,
    TemplateError,
    __version__,
    compile,
    load,
    reminder,
    result_kind,
)
from ._types import (
    Action,
    AnswerOutcome,
    Finding,
    FindingKind,
    LostRule,
    Mode,
    Outcome,
    RefusalKind,
    ResultKind,
    Severity,
    Verdict,
    WitnessEvent,
)

__all__ = [
    "REFUSAL_KINDS",
    "Action",
    "AnswerOutcome",
    "Answered",
    "Begin",
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
    "Diagnostic",
    "Machine",
    "Refusal",
    "Session",
    "SnapshotError",
    "TemplateError",
    "__version__",
    "compile",
    "load",
    "reminder",
    "result_kind",
]
