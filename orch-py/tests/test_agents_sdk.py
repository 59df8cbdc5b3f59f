"""The OpenAI Agents SDK adapter (``orch.agents``) against the real SDK (pinned by
``cargo xtask test``) and a scripted OpenAI-compatible server: the misbehaving-model
scenarios the Rust adapters pass — a call out of order, text while a tool is forced, a
call the sequence does not expect, an unknown tool, a tool the step does not allow, bad
JSON arguments, several calls in one turn — and nothing disallowed executes."""

import asyncio

import pytest
import json

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

import orch
from orch.agents import Orchestration

from orch.testing import ScriptedOpenAI
from scenarios import (
    COGNITIVE,
    MISBEHAVING,
    REFUND,
    REFUND_APPROVED,
    REFUND_DENIED,
    SEVERAL_CALLS,
    NAMES,
    refund_tool,
    research_tool,
)

set_tracing_disabled(True)

TEMPLATE = COGNITIVE


def research_tools(executed: list):
    """The cognitive reasoner's tools, logging what actually ran."""

    return [function_tool(research_tool(n, executed), name_override=n) for n in NAMES]


def run_turn(fake: ScriptedOpenAI, message: str):
    executed: list = []
    run = Orchestration(orch.load(TEMPLATE).session())
    model = OpenAIChatCompletionsModel(
        model="fake", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="not-a-key")
    )
    agent = run.agent(Agent(name="reasoner", instructions="Think.", tools=research_tools(executed), model=model))
    run.on_user_message(message)
    result = asyncio.run(Runner.run(agent, message, run_config=run.run_config(), max_turns=20))
    return run, executed, result


def test_a_misbehaving_model_cannot_break_the_sequence():
    script = MISBEHAVING
    with ScriptedOpenAI(script) as fake:
        run, executed, result = run_turn(fake, "Research the impact of AI on jobs")
    assert result.final_output == "AI changes jobs: see the analysis."
    # Nothing disallowed ran; the sequence completed within the turn.
    assert executed == ["search", "think", "reflect"]
    assert run.executed == ["search", "think", "reflect"]
    assert run.session.sequence_index == 3
    # Every model call offered only the allowed tools and forced the expected one.
    assert fake.offered(0) == ["search"]
    assert [fake.tool_choice(i) for i in range(7)] == ["search"] * 5 + ["think", "reflect"]
    assert fake.offered(7) == ["search", "think", "reflect"]
    assert fake.tool_choice(7) in (None, "auto")
    # The text answer while `search` was forced was met with the reminder.
    assert "requires calling `search` now" in str(fake.requests[2]["messages"])
    # The model was told why, in orch's words.
    results = fake.tool_results(8)
    assert results[0].startswith(
        "error: `think` was not run: the sequence of step `ResearchMode` expects `search` at position 0."
    ), results
    assert "`debate` was not run" in results[1], results
    assert results[2].startswith("error: there is no tool `teleport`. Allowed now: search."), results
    assert results[3] == "search(AI jobs)", results
    assert "`debate` was not run: not allowed in step `ResearchMode`" in results[6], results


def test_bad_arguments_and_several_calls_in_one_turn():
    script = SEVERAL_CALLS
    with ScriptedOpenAI(script) as fake:
        run, executed, result = run_turn(fake, "Research the moons of Jupiter")
    assert result.final_output == "done"
    assert executed == ["search", "think", "reflect"], executed
    results = fake.tool_results(4)
    assert results[0].startswith("error: `search` was not run: its arguments are not JSON"), results
    assert results[1] == "search(a)"
    assert "`reflect` was not run" in results[2], results
    assert results[3] == "think(c)"
    assert "`think` was not run" in results[4], results
    assert results[5] == "reflect(e)"
    assert run.session.sequence_index == 3



def refund_desk(fake: ScriptedOpenAI, session=None, executed=None):
    executed = [] if executed is None else executed

    run = Orchestration(session if session is not None else orch.load(REFUND).session())
    model = OpenAIChatCompletionsModel(
        model="fake", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="not-a-key")
    )
    tools = [function_tool(refund_tool(n, executed), name_override=n) for n in ["lookup_order", "issue_refund", "send_email"]]
    agent = run.agent(Agent(name="desk", instructions="Help.", tools=tools, model=model))
    return run, agent, executed


def test_a_gated_call_waits_for_a_human_and_runs_once_approved():
    script = REFUND_APPROVED
    with ScriptedOpenAI(script) as fake:
        run, agent, executed = refund_desk(fake)
        message = "Please refund order 7"
        run.on_user_message(message)
        paused = asyncio.run(Runner.run(agent, message, run_config=run.run_config()))
        # The refund waits for a human: nothing of it ran.
        assert executed == ["lookup_order"]
        assert [i.name for i in paused.interruptions] == ["issue_refund"]
        state = paused.to_state()
        state.approve(paused.interruptions[0])
        done = asyncio.run(Runner.run(agent, state, run_config=run.run_config()))
    assert done.final_output == "Refunded order 7."
    assert executed == ["lookup_order", "issue_refund", "send_email"]
    assert run.session.sequence_index == 3
    # The approval was consumed by the one call it approved.
    assert run.session.approval is None


@pytest.mark.parametrize("restored", [False, True])
def test_a_run_state_resumed_twice_runs_the_approved_call_once(restored: bool):
    """The approved state resumed twice (a retried request, a second worker) — by the
    same orchestration, or by one restored from the snapshot saved after the first
    resume: the refund ran once."""
    script = REFUND_APPROVED + ["(again)"]
    with ScriptedOpenAI(script) as fake:
        run, agent, executed = refund_desk(fake)
        message = "Please refund order 7"
        run.on_user_message(message)
        paused = asyncio.run(Runner.run(agent, message, run_config=run.run_config()))
        state = paused.to_state()
        state.approve(paused.interruptions[0])
        saved = state.to_json()
        asyncio.run(Runner.run(agent, state, run_config=run.run_config()))
        assert executed == ["lookup_order", "issue_refund", "send_email"]
        if restored:
            run, agent, _ = refund_desk(fake, run.session.machine.restore(run.session.snapshot()), executed)
        again = asyncio.run(type(state).from_json(agent, saved))
        asyncio.run(Runner.run(agent, again, run_config=run.run_config()))
    assert executed == ["lookup_order", "issue_refund", "send_email"], executed


def test_a_rejected_call_never_runs():
    script = REFUND_DENIED
    with ScriptedOpenAI(script) as fake:
        run, agent, executed = refund_desk(fake)
        message = "Please refund order 8"
        run.on_user_message(message)
        paused = asyncio.run(Runner.run(agent, message, run_config=run.run_config()))
        state = paused.to_state()
        state.reject(paused.interruptions[0], rejection_message="Not this one.")
        done = asyncio.run(Runner.run(agent, state, run_config=run.run_config()))
    assert done.final_output == "I could not refund it."
    assert executed == ["lookup_order"]
    assert "Not this one." in json.dumps(fake.requests[-1]["messages"])


def test_one_orchestration_serves_runs_in_several_event_loops():
    # Several calls at once (the lock is waited on), then another asyncio.run.
    with ScriptedOpenAI(SEVERAL_CALLS + SEVERAL_CALLS) as fake:
        executed: list = []
        run = Orchestration(orch.load(TEMPLATE).session())
        model = OpenAIChatCompletionsModel(
            model="fake", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="not-a-key")
        )
        agent = run.agent(Agent(name="reasoner", instructions="Think.", tools=research_tools(executed), model=model))
        for _ in range(2):
            run.on_user_message("Research the moons of Jupiter")
            result = asyncio.run(Runner.run(agent, "Research", run_config=run.run_config()))
            assert result.final_output == "done"
    # The first turn followed the sequence; in the second the completed step leaves the
    # tools free. What matters: the second event loop was served (no lock bound to the
    # first one).
    assert executed[:3] == ["search", "think", "reflect"]
    assert len(executed) > 3


def test_observe_mode_runs_every_call_the_model_makes():
    """The adapter on a machine loaded in observe mode: every tool is offered and none is
    forced, so the misbehaving model's early ``think`` (refused in enforce mode) runs, and
    its text answer ends the turn (in enforce mode it is reminded that ``search`` is
    forced)."""
    with ScriptedOpenAI(MISBEHAVING) as fake:
        executed: list = []
        run = Orchestration(orch.load(TEMPLATE, mode="observe").session())
        model = OpenAIChatCompletionsModel(
            model="fake", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="not-a-key")
        )
        agent = run.agent(Agent(name="reasoner", instructions="Think.", tools=research_tools(executed), model=model))
        run.on_user_message(MISBEHAVING_QUESTION_OBSERVED)
        result = asyncio.run(
            Runner.run(agent, MISBEHAVING_QUESTION_OBSERVED, run_config=run.run_config(), max_turns=20)
        )
    assert run.session.mode == "observe"
    assert executed == ["think"], executed
    assert result.final_output == "I think the answer is obvious."


MISBEHAVING_QUESTION_OBSERVED = "Research the impact of AI on jobs"
