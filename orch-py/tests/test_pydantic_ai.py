"""The Pydantic AI adapter (``orch.pydantic_ai``) against the real framework (pinned by
``cargo xtask test``) and a scripted OpenAI-compatible server: the misbehaving-model
scenarios — a call out of order, text while a tool is forced, a call the sequence does
not expect, an unknown tool, a tool the step does not allow, bad JSON arguments, several
calls in one turn — and nothing disallowed executes."""

import asyncio
import json

import pytest

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import orch
from orch.pydantic_ai import Orchestrated

from orch.testing import ScriptedOpenAI
from scenarios import (
    COGNITIVE,
    MISBEHAVING,
    NAMES,
    REFUND,
    REFUND_APPROVED,
    REFUND_DENIED,
    SEVERAL_CALLS,
    refund_tool,
    research_tool,
)

TEMPLATE = COGNITIVE


def run_turn(fake: ScriptedOpenAI, message: str):
    executed: list = []
    workflow = Orchestrated(orch.load(TEMPLATE).session())
    model = OpenAIChatModel("fake", provider=OpenAIProvider(base_url=fake.base_url, api_key="not-a-key"))
    agent = Agent(model, capabilities=[workflow], retries={"tools": 5, "output": 3})

    for name in NAMES:
        agent.tool_plain(research_tool(name, executed))
    workflow.on_user_message(message)
    result = asyncio.run(agent.run(message))
    return workflow, executed, result


def messages_text(request: dict) -> str:
    return json.dumps(request.get("messages", []))


def test_a_misbehaving_model_cannot_break_the_sequence():
    script = MISBEHAVING
    with ScriptedOpenAI(script) as fake:
        workflow, executed, result = run_turn(fake, "Research the impact of AI on jobs")
    assert result.output == "AI changes jobs: see the analysis."
    assert executed == ["search", "think", "reflect"]
    assert workflow.executed == ["search", "think", "reflect"]
    assert workflow.session.sequence_index == 3
    assert fake.offered(0) == ["search"]
    # Forced: the one expected tool offered, and a call required (Pydantic AI sends a
    # one-tool `tool_choice` list as "required" when that tool is all it offers).
    forced = [
        fake.offered(i)[0] if fake.tool_choice(i) in ("required", *fake.offered(i)) and len(fake.offered(i)) == 1 else None
        for i in range(7)
    ]
    assert forced == ["search"] * 5 + ["think", "reflect"]
    assert fake.offered(7) == ["search", "think", "reflect"]
    last = messages_text(fake.requests[8])
    # The reminder while `search` was forced, and no disallowed call ran.
    assert "requires calling `search` now" in messages_text(fake.requests[2])
    assert "search(AI jobs)" in last and "think(analysis)" in last and "reflect(summary)" in last
    assert "too early" not in "".join(executed)


def test_bad_arguments_and_several_calls_in_one_turn():
    script = SEVERAL_CALLS
    with ScriptedOpenAI(script) as fake:
        workflow, executed, result = run_turn(fake, "Research the moons of Jupiter")
    assert result.output == "done"
    assert executed == ["search", "think", "reflect"], executed
    last = messages_text(fake.requests[-1])
    assert "`think` was not run" in last, last
    assert workflow.session.sequence_index == 3



def refund_desk(fake: ScriptedOpenAI):
    from pydantic_ai import DeferredToolRequests

    executed: list = []
    workflow = Orchestrated(orch.load(REFUND).session())
    model = OpenAIChatModel("fake", provider=OpenAIProvider(base_url=fake.base_url, api_key="not-a-key"))
    agent = Agent(
        model, capabilities=[workflow], retries={"tools": 5, "output": 3}, output_type=[str, DeferredToolRequests]
    )

    for name in ["lookup_order", "issue_refund", "send_email"]:
        agent.tool_plain(refund_tool(name, executed))
    return workflow, agent, executed


def test_a_gated_call_is_deferred_to_a_human_and_runs_once_approved():
    from pydantic_ai import DeferredToolRequests, DeferredToolResults

    script = REFUND_APPROVED
    with ScriptedOpenAI(script) as fake:
        workflow, agent, executed = refund_desk(fake)
        message = "Please refund order 7"
        workflow.on_user_message(message)
        paused = asyncio.run(agent.run(message))
        assert isinstance(paused.output, DeferredToolRequests)
        assert [c.tool_name for c in paused.output.approvals] == ["issue_refund"]
        assert executed == ["lookup_order"]
        assert workflow.session.approval[1] == "pending"
        call_id = paused.output.approvals[0].tool_call_id
        done = asyncio.run(
            agent.run(
                message_history=paused.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals={call_id: True}),
            )
        )
    assert done.output == "Refunded order 7."
    assert executed == ["lookup_order", "issue_refund", "send_email"]
    assert workflow.session.sequence_index == 3


def test_a_denied_call_never_runs():
    from pydantic_ai import DeferredToolResults

    script = REFUND_DENIED
    with ScriptedOpenAI(script) as fake:
        workflow, agent, executed = refund_desk(fake)
        message = "Please refund order 8"
        workflow.on_user_message(message)
        paused = asyncio.run(agent.run(message))
        call_id = paused.output.approvals[0].tool_call_id
        done = asyncio.run(
            agent.run(
                message_history=paused.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals={call_id: False}),
            )
        )
    assert done.output == "I could not refund it."
    assert executed == ["lookup_order"]


@pytest.mark.parametrize("restored", [False, True])
def test_an_approval_given_again_runs_nothing_twice(restored: bool):
    """The approved run repeated (a retried request, a second tab) — on the same workflow,
    or on one whose session was restored from its snapshot between each step (a server
    that keeps only the snapshot): the refund ran once."""
    from pydantic_ai import DeferredToolResults

    script = REFUND_APPROVED + ["(repeated)"]
    with ScriptedOpenAI(script) as fake:
        workflow, agent, executed = refund_desk(fake)
        message = "Please refund order 7"
        workflow.on_user_message(message)
        paused = asyncio.run(agent.run(message))
        call_id = paused.output.approvals[0].tool_call_id
        approvals = DeferredToolResults(approvals={call_id: True})
        machine = workflow.session.machine
        for _ in range(2):
            if restored:
                workflow.session = machine.restore(workflow.session.snapshot())
            asyncio.run(agent.run(message_history=paused.all_messages(), deferred_tool_results=approvals))
            assert executed == ["lookup_order", "issue_refund", "send_email"], executed
        told = messages_text(fake.requests[-1])
    assert "`issue_refund` was not run" in told, told
