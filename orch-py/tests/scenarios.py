"""The scripted scenarios every framework adapter is tested on (the Rust adapters pass
the same ones), and the templates they run under."""

import pathlib

from orch.testing import call, calls

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "agents"
COGNITIVE = EXAMPLES / "cognitive-reasoner" / "template.json"
REFUND = EXAMPLES / "refund-desk" / "template.json"

#: The cognitive reasoner's tools.
NAMES = ["search", "think", "reflect", "compare", "critique", "brainstorm", "debate"]

#: A misbehaving research turn: a call out of order, text while `search` is forced, a
#: call the sequence does not expect, an unknown tool, the sequence, a tool the step does
#: not allow, the answer.
MISBEHAVING = [
    call("think", '{"input": "too early"}'),
    "I think the answer is obvious.",
    call("debate", "{}"),
    call("teleport", "{}"),
    call("search", '{"input": "AI jobs"}'),
    call("think", '{"input": "analysis"}'),
    call("reflect", '{"input": "summary"}'),
    call("debate", '{"input": "jobs"}'),
    "AI changes jobs: see the analysis.",
]
MISBEHAVING_QUESTION = "Research the impact of AI on jobs"
MISBEHAVING_ANSWER = "AI changes jobs: see the analysis."

#: Bad JSON arguments, then two calls in one turn twice (the second of each out of order).
SEVERAL_CALLS = [
    call("search", "{not json"),
    calls(("search", '{"input": "a"}'), ("reflect", '{"input": "b"}')),
    calls(("think", '{"input": "c"}'), ("think", '{"input": "d"}')),
    call("reflect", '{"input": "e"}'),
    "done",
]
SEVERAL_CALLS_QUESTION = "Research the moons of Jupiter"

#: The refund desk: a lookup, the gated refund, the confirmation.
REFUND_APPROVED = [
    call("lookup_order", '{"order": 7}'),
    call("issue_refund", '{"order": 7}'),
    call("send_email", '{"order": 7}'),
    "Refunded order 7.",
]
REFUND_DENIED = [
    call("lookup_order", '{"order": 8}'),
    call("issue_refund", '{"order": 8}'),
    "I could not refund it.",
]


def research_tool(name: str, executed: list):
    """The cognitive reasoner's tool `name` as a plain function that logs when it runs
    (each framework wraps it its own way)."""

    def tool(input: str = "") -> str:
        executed.append(name)
        return f"{name}({input})"

    tool.__name__ = name
    tool.__doc__ = f"The {name} tool."
    return tool


def refund_tool(name: str, executed: list):
    """The refund desk's tool `name` as a plain function that logs when it runs."""

    def tool(order: int = 0) -> str:
        executed.append(name)
        return f"{name}({order})"

    tool.__name__ = name
    tool.__doc__ = f"The {name} tool."
    return tool
