"""A research agent under the cognitive reasoner's workflow, in the framework you pick:
the OpenAI Agents SDK, Pydantic AI or LangGraph (docs/python.md).

    python orch-py/examples/research_agent.py agents      # or pydantic-ai, langgraph

With OPENAI_API_KEY set (and OPENAI_BASE_URL for any OpenAI-compatible server,
ORCH_MODEL for the model) it asks a real model; without, it runs offline against
`orch.testing.ScriptedOpenAI`, scripted as a model that misbehaves: it calls a tool out
of order and an unknown one before following the sequence. Either way it prints what the
model was offered and what ran; nothing the workflow refuses runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import sys

import orch
from orch.testing import ScriptedOpenAI, call

TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "agents" / "cognitive-reasoner" / "template.json"
QUESTION = "Research how many moons Jupiter has"
SCRIPT = [
    call("reflect", '{"input": "too early"}'),
    call("teleport", "{}"),
    call("search", '{"input": "moons of Jupiter"}'),
    call("think", '{"input": "95 confirmed moons"}'),
    call("reflect", '{"input": "the count keeps growing"}'),
    "Jupiter has 95 confirmed moons, and the count keeps growing.",
]
NAMES = ["search", "think", "reflect", "compare", "critique", "brainstorm", "debate"]


def tool_body(name: str):
    def run(input: str = "") -> str:
        print(f"  ran {name}({input})")
        return f"{name} done: {input}"

    run.__name__ = name
    run.__doc__ = f"The {name} cognitive tool."
    return run


def with_agents_sdk(base_url: str, api_key: str, model_name: str) -> str:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    from orch.agents import Orchestration

    set_tracing_disabled(True)
    run = Orchestration(orch.load(TEMPLATE).session())
    model = OpenAIChatCompletionsModel(model=model_name, openai_client=AsyncOpenAI(base_url=base_url, api_key=api_key))
    tools = [function_tool(tool_body(n), name_override=n) for n in NAMES]
    agent = run.agent(Agent(name="reasoner", instructions="Use the tools.", tools=tools, model=model))
    run.on_user_message(QUESTION)
    return asyncio.run(Runner.run(agent, QUESTION, run_config=run.run_config())).final_output


def with_pydantic_ai(base_url: str, api_key: str, model_name: str) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from orch.pydantic_ai import Orchestrated

    workflow = Orchestrated(orch.load(TEMPLATE).session())
    model = OpenAIChatModel(model_name, provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    agent = Agent(model, capabilities=[workflow], retries={"tools": 5, "output": 3})
    for name in NAMES:
        agent.tool_plain(tool_body(name))
    workflow.on_user_message(QUESTION)
    return asyncio.run(agent.run(QUESTION)).output


def with_langgraph(base_url: str, api_key: str, model_name: str) -> str:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from orch.langgraph import Orchestration

    workflow = Orchestration(orch.load(TEMPLATE).session(), tools=[tool(tool_body(n)) for n in NAMES])
    graph = workflow.graph(ChatOpenAI(model=model_name, base_url=base_url, api_key=api_key))
    workflow.on_user_message(QUESTION)
    return graph.invoke({"messages": [("user", QUESTION)]})["messages"][-1].content


FRAMEWORKS = {"agents": with_agents_sdk, "pydantic-ai": with_pydantic_ai, "langgraph": with_langgraph}


def main() -> None:
    framework = sys.argv[1] if len(sys.argv) > 1 else "agents"
    if framework not in FRAMEWORKS:
        sys.exit(f"usage: research_agent.py [{'|'.join(FRAMEWORKS)}]")
    api_key = os.environ.get("OPENAI_API_KEY")
    scripted = api_key is None
    with ScriptedOpenAI(SCRIPT) if scripted else contextlib.nullcontext() as fake:
        base_url = fake.base_url if scripted else os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        model = "scripted" if scripted else os.environ.get("ORCH_MODEL", "gpt-4.1-mini")
        print(f"{framework}: {'a scripted model that misbehaves' if scripted else model}")
        answer = FRAMEWORKS[framework](base_url, api_key or "unused", model)
        if scripted:
            for i, request in enumerate(fake.requests):
                print(f"  model call {i}: offered {fake.offered(i)}, forced {fake.tool_choice(i)}")
    print(f"answer: {answer}")


if __name__ == "__main__":
    main()
