"""The LangGraph adapter (``orch.langgraph``) against the real framework (pinned by
``cargo xtask test``), LangChain's OpenAI chat model and a scripted OpenAI-compatible
server: the misbehaving-model scenarios, and nothing disallowed executes."""

import json

from langchain_core.tools import tool as make_tool
from langchain_openai import ChatOpenAI

import orch
from orch.langgraph import Orchestration

from orch.testing import ScriptedOpenAI
from scenarios import (
    COGNITIVE,
    MISBEHAVING,
    NAMES,
    SEVERAL_CALLS,
    research_tool,
)

TEMPLATE = COGNITIVE


def run_turn(fake: ScriptedOpenAI, message: str):
    executed: list = []

    tools = [make_tool(research_tool(n, executed)) for n in NAMES]
    workflow = Orchestration(orch.load(TEMPLATE).session(), tools=tools)
    model = ChatOpenAI(model="fake", base_url=fake.base_url, api_key="not-a-key", max_retries=0)
    graph = workflow.graph(model)
    workflow.on_user_message(message)
    state = graph.invoke({"messages": [("user", message)]}, {"recursion_limit": 50})
    return workflow, executed, state


def tool_results(state) -> list[str]:
    return [m.content for m in state["messages"] if m.type == "tool"]


def test_a_misbehaving_model_cannot_break_the_sequence():
    script = MISBEHAVING
    with ScriptedOpenAI(script) as fake:
        workflow, executed, state = run_turn(fake, "Research the impact of AI on jobs")
    assert state["messages"][-1].content == "AI changes jobs: see the analysis."
    assert executed == ["search", "think", "reflect"]
    assert workflow.executed == ["search", "think", "reflect"]
    assert workflow.session.sequence_index == 3
    assert fake.offered(0) == ["search"]
    assert [fake.tool_choice(i) for i in range(7)] == ["search"] * 5 + ["think", "reflect"]
    assert fake.offered(7) == ["search", "think", "reflect"]
    assert "requires calling `search` now" in json.dumps(fake.requests[2]["messages"])
    results = tool_results(state)
    assert results[0].startswith(
        "error: `think` was not run: the sequence of step `ResearchMode` expects `search` at position 0."
    ), results
    assert results[1].startswith("error: `debate` was not run"), results
    assert results[2].startswith("error: there is no tool `teleport`"), results
    assert results[3:6] == ["search(AI jobs)", "think(analysis)", "reflect(summary)"]
    assert results[6].startswith("error: `debate` was not run: not allowed in step `ResearchMode`"), results


def test_bad_arguments_and_several_calls_in_one_turn():
    script = SEVERAL_CALLS
    with ScriptedOpenAI(script) as fake:
        workflow, executed, state = run_turn(fake, "Research the moons of Jupiter")
    assert state["messages"][-1].content == "done"
    assert executed == ["search", "think", "reflect"], executed
    results = tool_results(state)
    assert results[0].startswith("error: `search` was not run: its arguments are not JSON"), results
    assert results[1] == "search(a)"
    assert results[2].startswith("error: `reflect` was not run"), results
    assert results[3] == "think(c)"
    assert results[4].startswith("error: `think` was not run"), results
    assert results[5] == "reflect(e)"


def refund_graph(fake: ScriptedOpenAI):
    from scenarios import REFUND, refund_tool

    executed: list = []
    tools = [make_tool(refund_tool(n, executed)) for n in ["lookup_order", "issue_refund", "send_email"]]
    workflow = Orchestration(orch.load(REFUND).session(), tools=tools)
    model = ChatOpenAI(model="fake", base_url=fake.base_url, api_key="not-a-key", max_retries=0)
    return workflow, workflow.graph(model), executed


def test_a_gated_call_pauses_with_interrupt_and_runs_once_approved():
    from langgraph.types import Command
    from scenarios import REFUND_APPROVED

    config = {"configurable": {"thread_id": "refund-7"}, "recursion_limit": 50}
    with ScriptedOpenAI(REFUND_APPROVED) as fake:
        workflow, graph, executed = refund_graph(fake)
        message = "Please refund order 7"
        workflow.on_user_message(message)
        paused = graph.invoke({"messages": [("user", message)]}, config)
        interrupts = paused["__interrupt__"]
        assert len(interrupts) == 1
        asked = interrupts[0].value
        assert asked["tool"] == "issue_refund" and asked["arguments"] == {"order": 7}
        assert asked["step"] == "Refund" and len(asked["question"]) == 16
        assert executed == ["lookup_order"], "nothing runs before the answer"
        assert workflow.session.approval[1] == "pending"
        done = graph.invoke(Command(resume={"approve": True}), config)
    assert done["messages"][-1].content == "Refunded order 7."
    assert executed == ["lookup_order", "issue_refund", "send_email"]
    assert workflow.session.sequence_index == 3


def test_a_paused_call_resumed_twice_runs_once():
    """The same interrupt resumed again from its checkpoint (a retried request, time
    travel): the refund ran once, and the replay is told it was answered already."""
    from langgraph.types import Command
    from scenarios import REFUND_APPROVED

    config = {"configurable": {"thread_id": "refund-twice"}, "recursion_limit": 50}
    with ScriptedOpenAI(REFUND_APPROVED + ["(again)"]) as fake:
        workflow, graph, executed = refund_graph(fake)
        message = "Please refund order 7"
        workflow.on_user_message(message)
        graph.invoke({"messages": [("user", message)]}, config)
        paused = next(s for s in graph.get_state_history(config) if any(t.interrupts for t in s.tasks))
        graph.invoke(Command(resume={"approve": True}), config)
        assert executed == ["lookup_order", "issue_refund", "send_email"]
        replayed = graph.invoke(Command(resume={"approve": True}), paused.config)
    assert executed == ["lookup_order", "issue_refund", "send_email"], executed
    assert "`issue_refund` was not run" in tool_results(replayed)[-1], tool_results(replayed)


def test_a_rejected_call_never_runs_and_the_model_hears_the_reason():
    from langgraph.types import Command
    from scenarios import REFUND_DENIED

    config = {"configurable": {"thread_id": "refund-8"}, "recursion_limit": 50}
    with ScriptedOpenAI(REFUND_DENIED) as fake:
        workflow, graph, executed = refund_graph(fake)
        message = "Please refund order 8"
        workflow.on_user_message(message)
        paused = graph.invoke({"messages": [("user", message)]}, config)
        assert paused["__interrupt__"][0].value["tool"] == "issue_refund"
        done = graph.invoke(Command(resume={"approve": False, "reason": "not eligible"}), config)
    assert done["messages"][-1].content == "I could not refund it."
    assert executed == ["lookup_order"]
    results = tool_results(done)
    assert "rejected" in results[-1] and "not eligible" in results[-1], results
    assert workflow.session.approval[1] == "rejected"
