"""Per-turn cost of orch's Python package against a pure-Python implementation of
AgentDock's orchestration logic, on the same workload (docs/python.md).

The pure-Python side follows AgentDock's `OrchestrationManager`, `StepSequencer` and
`OrchestrationStateManager` as its documentation describes them: the state of a session
lives in a storage provider (here an in-memory one that, like AgentDock's, hands out and
takes back copies of the state object), `getAllowedTools` finds the active step (first
step whose conditions all hold, else the default), then filters the host's tool names by
the step's sequence or its allowed/denied lists; `processToolUsage` adds the tool to the
recently used tools and advances the sequence. Message conditions (`message_contains`,
`message_regex`) and sequence groups, which AgentDock documents but does not implement,
are implemented here so that both sides do the same work on the same template.

The workload is the cognitive reasoner (examples/agents/cognitive-reasoner): each turn is
a user message (cycling through six requests that select six modes) and three tool calls,
each preceded by the allowed-tools query the host makes before a model call and followed
by recording it. Run with a release build of the package installed:

    cd orch-py && maturin build --release --out ../target/wheels && pip install ../target/wheels/orch-*.whl
    python orch-py/bench/agentdock_compare.py
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
import sys
import time

import orch

TEMPLATE = (
    pathlib.Path(__file__).resolve().parents[2]
    / "examples"
    / "agents"
    / "cognitive-reasoner"
    / "template.json"
)

MESSAGES = [
    "Research how many moons Jupiter has",
    "Critique this plan and give your opinion",
    "Compare Rust and Go for network services",
    "How can I solve this scheduling problem?",
    "Let's brainstorm names for the product",
    "Debate whether remote work is better",
]


class MemoryStorage:
    """AgentDock's storage provider contract, in memory: get and set copies (as a store
    that serializes does); with `copies=False`, the state objects themselves (the
    cheapest any storage could be)."""

    def __init__(self, copies: bool = True) -> None:
        self._data: dict[str, dict] = {}
        self._copy = copy.deepcopy if copies else (lambda v: v)

    def get(self, key: str):
        value = self._data.get(key)
        return self._copy(value) if value is not None else None

    def set(self, key: str, value: dict) -> None:
        self._data[key] = self._copy(value)


class StateManager:
    """`OrchestrationStateManager`: per-session state through the storage."""

    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage

    def get_or_create(self, session_id: str) -> dict:
        state = self.storage.get(f"orchestration:{session_id}")
        if state is None:
            state = {"activeStep": None, "sequenceIndex": 0, "recentlyUsedTools": []}
            self.storage.set(f"orchestration:{session_id}", state)
        return state

    def update(self, session_id: str, updates: dict) -> dict:
        state = self.get_or_create(session_id)
        state.update(updates)
        self.storage.set(f"orchestration:{session_id}", state)
        return state

    def add_used_tool(self, session_id: str, tool: str) -> None:
        state = self.get_or_create(session_id)
        recent = [tool] + [t for t in state["recentlyUsedTools"] if t != tool]
        self.update(session_id, {"recentlyUsedTools": recent[:10]})


class Sequencer:
    """`StepSequencer`."""

    def __init__(self, states: StateManager) -> None:
        self.states = states

    @staticmethod
    def _position(step: dict, index: int):
        sequence = step.get("sequence") or []
        if index >= len(sequence):
            return None
        entry = sequence[index]
        return entry if isinstance(entry, list) else [entry]

    def filter_tools(self, step: dict, session_id: str, all_tools: list[str]) -> list[str]:
        state = self.states.get_or_create(session_id)
        expected = self._position(step, state["sequenceIndex"])
        if expected is None:
            return all_tools
        return [t for t in all_tools if t in expected]

    def process_tool(self, step: dict, session_id: str, tool: str) -> bool:
        self.states.add_used_tool(session_id, tool)
        state = self.states.get_or_create(session_id)
        expected = self._position(step, state["sequenceIndex"])
        if expected is not None and tool in expected:
            self.states.update(session_id, {"sequenceIndex": state["sequenceIndex"] + 1})
            return True
        return False


class OrchestrationManager:
    """`OrchestrationManager`: the active step, allowed tools, tool usage."""

    def __init__(self, storage: MemoryStorage) -> None:
        self.states = StateManager(storage)
        self.sequencer = Sequencer(self.states)
        self._regexes: dict[str, re.Pattern] = {}

    def _holds(self, condition: dict, step: dict, state: dict, message: str) -> bool:
        kind, value = condition.get("type"), condition.get("value")
        if kind == "tool_used":
            return value in state["recentlyUsedTools"]
        if kind == "sequence_match":
            sequence = step.get("sequence") or []
            recent = list(reversed(state["recentlyUsedTools"]))[-len(sequence):]
            return len(recent) == len(sequence) and all(
                t in (e if isinstance(e, list) else [e]) for t, e in zip(recent, sequence)
            )
        if kind == "message_contains":
            return value.lower() in message.lower()
        if kind == "message_regex":
            pattern = self._regexes.get(value)
            if pattern is None:
                pattern = self._regexes[value] = re.compile(value)
            return pattern.search(message) is not None
        return False

    def get_active_step(self, config: dict, messages: list[str], session_id: str):
        state = self.states.get_or_create(session_id)
        message = messages[-1] if messages else ""
        steps = config.get("steps", [])
        chosen = None
        for step in steps:
            conditions = step.get("conditions") or []
            if step.get("isDefault") or not conditions:
                continue
            if all(self._holds(c, step, state, message) for c in conditions):
                chosen = step
                break
        if chosen is None:
            current = state.get("activeStep")
            chosen = next((s for s in steps if s["name"] == current), None)
        if chosen is None:
            chosen = next((s for s in steps if s.get("isDefault")), None)
        if chosen is not None and chosen["name"] != state.get("activeStep"):
            self.states.update(session_id, {"activeStep": chosen["name"], "sequenceIndex": 0})
        return chosen

    def get_allowed_tools(self, config, messages, session_id, all_tools):
        step = self.get_active_step(config, messages, session_id)
        if step is None:
            return all_tools
        if step.get("sequence"):
            return self.sequencer.filter_tools(step, session_id, all_tools)
        available = step.get("availableTools") or {}
        if available.get("allowed"):
            return [t for t in all_tools if t in available["allowed"]]
        if available.get("denied"):
            return [t for t in all_tools if t not in available["denied"]]
        return all_tools

    def process_tool_usage(self, config, messages, session_id, tool):
        step = self.get_active_step(config, messages, session_id)
        if step is None or not step.get("sequence"):
            self.states.add_used_tool(session_id, tool)
            return
        self.sequencer.process_tool(step, session_id, tool)
        self.get_active_step(config, messages, session_id)


def agentdock_turns(turns: int, copies: bool = True) -> tuple[float, list[list[str]]]:
    config = json.loads(TEMPLATE.read_text())["orchestration"]
    tools = json.loads(TEMPLATE.read_text())["tools"]
    manager = OrchestrationManager(MemoryStorage(copies))
    offered = []
    start = time.perf_counter()
    for turn in range(turns):
        messages = [MESSAGES[turn % len(MESSAGES)]]
        for _ in range(3):
            allowed = manager.get_allowed_tools(config, messages, "s", tools)
            tool = allowed[0]
            manager.process_tool_usage(config, messages, "s", tool)
            if turn < len(MESSAGES):
                offered.append(allowed)
    return (time.perf_counter() - start) / turns, offered


def orch_turns(turns: int) -> tuple[float, list[list[str]]]:
    """The workload on a session of orch's package."""
    return _turns(orch.load(TEMPLATE).session(), turns)


def _turns(session, turns: int) -> tuple[float, list[list[str]]]:
    """`turns` turns on `session`: the user message, then three times the allowed tools,
    a check of the first and its record; the time per turn, and the tools offered at
    each model call of the first six turns."""
    offered = []
    start = time.perf_counter()
    for turn in range(turns):
        session.on_user_message(MESSAGES[turn % len(MESSAGES)])
        for _ in range(3):
            allowed = session.allowed()
            tool = allowed[0]
            if session.check(tool) is None:
                session.record(tool)
            if turn < len(MESSAGES):
                offered.append(allowed)
    return (time.perf_counter() - start) / turns, offered


class _NoOps:
    """A session whose methods are C builtins that do next to nothing: `_turns` run on
    it costs what the interpreter needs for the workload's own calls and bookkeeping —
    the floor under any Python package's figure."""

    def __init__(self) -> None:
        self.on_user_message = len
        self.allowed = ["search", "think"].copy
        self.check = {}.get
        self.record = set().add


def floor_turns(turns: int) -> tuple[float, list[list[str]]]:
    """The same loop on `_NoOps`: ten calls of C functions per turn."""
    return _turns(_NoOps(), turns)


def best_of(f, turns: int, runs: int = 5) -> tuple[float, list[list[str]]]:
    results = [f(turns) for _ in range(runs)]
    return min(r[0] for r in results), results[0][1]


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    agentdock, agentdock_offered = best_of(agentdock_turns, turns)
    shared, _ = best_of(lambda n: agentdock_turns(n, copies=False), turns)
    native, orch_offered = best_of(orch_turns, turns)
    floor, _ = best_of(floor_turns, turns)
    print(f"workload: the cognitive reasoner, {turns} turns of a message and 3 tool calls (best of 5)")
    print(f"pure-Python AgentDock logic, storage copies  : {agentdock * 1e6:8.2f} µs per turn ({agentdock / native:.0f}x orch)")
    print(f"pure-Python AgentDock logic, no copies       : {shared * 1e6:8.2f} µs per turn ({shared / native:.0f}x orch)")
    print(f"orch (Python package)                        : {native * 1e6:8.2f} µs per turn")
    print(f"the same loop on no-op C functions (floor)   : {floor * 1e6:8.2f} µs per turn ({(native - floor) * 1e6:.2f} µs of it orch's)")
    same = sum(a == b for a, b in zip(agentdock_offered, orch_offered))
    print(f"offered tools agree on {same} of {len(orch_offered)} model calls of the first {len(MESSAGES)} turns")


if __name__ == "__main__":
    main()
