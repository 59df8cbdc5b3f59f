"""orch for LangGraph: the model node binds only the tools the workflow allows now (and
forces the one a sequence expects), and the tools node judges every call before it runs.

.. code-block:: python

    from langchain_openai import ChatOpenAI
    from orch.langgraph import Orchestration

    workflow = Orchestration(orch.load("template.json").session(), tools=[search, think, reflect])
    graph = workflow.graph(ChatOpenAI(model="gpt-4.1"))
    workflow.on_user_message(question)
    state = graph.invoke({"messages": [("user", question)]})

The graph is the usual tool-calling loop (``MessagesState``: a model node, a tools node,
and back), built from three pieces a hand-made graph can use too:

- :meth:`Orchestration.call_model` — a node that binds the tools the session allows now
  to the model, with ``tool_choice`` naming the one a sequence expects when it is the only
  one allowed;
- :meth:`Orchestration.tools_node` — a node that runs the last message's tool calls one
  at a time, each judged before it runs (refused with orch's words as its
  ``ToolMessage``: out of order, not allowed in the step, unknown, malformed arguments)
  and recorded after it ran; nothing refused runs. A call of a tool the template gates
  (``approve``) **pauses the graph** with LangGraph's ``interrupt``, whose value says
  what the human is asked (``tool``, ``arguments``, ``step``, ``question``, ``message``);
  resume it with ``Command(resume={"approve": True})`` (or ``False``, with an optional
  ``"reason"``): approved, that exact call runs once; rejected, it never runs and the
  model is told. Interrupts need a checkpointer (``graph(model, checkpointer=...)``; an
  in-memory one by default when the template gates tools);
- :meth:`Orchestration.route` — the edge after the model: to the tools while it calls
  them; back to the model once with a reminder when it answers with text while a tool is
  forced; else to the end.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from . import Session, reminder
from ._adapter import Workflow

# What every reminder starts with: orch's own wording (``orch.reminder``).
_REMINDER_PREFIX = reminder("").split("``")[0]

__all__ = ["Orchestration", "REMINDERS"]

#: How often a model that answers with text while a tool is forced is reminded, per turn.
REMINDERS = 1



class Orchestration(Workflow):
    """One workflow run (an :class:`orch.Session`) over a set of LangChain tools."""

    def __init__(self, session: Session, tools: Sequence[Any]) -> None:
        self.session = session
        self.tools = {t.name: t for t in tools}
        self.executed: list[str] = []

    def bound(self, model: Any) -> Any:
        """``model`` with the tools allowed now bound (and the expected one forced)."""
        allowed = [self.tools[n] for n in self.session.allowed() if n in self.tools]
        if not allowed:
            return model
        forced = self.forced_tool()
        if forced is not None and forced in self.tools:
            return model.bind_tools(allowed, tool_choice=forced)
        return model.bind_tools(allowed)

    def call_model(self, model: Any):
        """The model node."""

        def node(state: MessagesState) -> dict:
            return {"messages": [self.bound(model).invoke(state["messages"])]}

        return node

    def tools_node(self, state: MessagesState) -> dict:
        """The tools node: the last message's tool calls, one at a time."""
        last = state["messages"][-1]
        out: list[ToolMessage] = []
        for bad in getattr(last, "invalid_tool_calls", None) or []:
            name = bad.get("name") or "(no name)"
            out.append(
                ToolMessage(
                    content=self.session.malformed_arguments(name, bad.get("error") or "unparsable").message,
                    tool_call_id=bad.get("id") or "",
                    name=name,
                    status="error",
                )
            )
        ran = False
        for call in getattr(last, "tool_calls", None) or []:
            name, call_id = call["name"], call["id"]
            arguments = json.dumps(call["args"])
            if name not in self.tools:
                text = self.session.no_such_tool(name).message
                out.append(ToolMessage(content=text, tool_call_id=call_id, name=name, status="error"))
                continue
            begun = self.session.begin(call_id, name, arguments)
            waiting = begun.action == "ask" or (
                begun.action == "again" and begun.refusal is not None and begun.refusal.kind == "needs_approval"
            )
            refusal = begun.refusal
            if waiting and refusal is not None:
                if ran:
                    # A resumed node runs again from the top: pausing after a call ran would
                    # run that call twice. The model is told to call it again; the next
                    # round asks before anything runs.
                    text = f"{refusal.message} It was not put to the human because another call of the same step ran first; call it again on its own."
                    out.append(ToolMessage(content=text, tool_call_id=call_id, name=name, status="error"))
                    continue
                refusal = self._approval(name, arguments, call, begun)
            if refusal is not None:
                out.append(ToolMessage(content=refusal.message, tool_call_id=call_id, name=name, status="error"))
                continue
            try:
                result = self.tools[name].invoke(call["args"])
            except BaseException:
                self.session.finish(call_id, name, False)
                raise
            self.session.finish(call_id, name)
            self.executed.append(name)
            ran = True
            out.append(ToolMessage(content=str(result), tool_call_id=call_id, name=name))
        return {"messages": out}

    def _approval(self, name: str, arguments: str, call: dict, begun: Any) -> Any:
        """Pauses on a gated call until a human answers (LangGraph's ``interrupt``), then
        applies the answer to the question the session holds about this very call (the
        run host, ``Session.answer_call``): the refusal that stands, or ``None`` when the
        call may run (once)."""
        call_id = call["id"]
        answer = interrupt(
            {
                "tool": name,
                "arguments": call["args"],
                "step": self.session.step,
                "question": begun.question,
                "message": begun.refusal.message,
            }
        )
        approved = answer is True or (isinstance(answer, dict) and answer.get("approve") is True)
        answered = self.session.answer_call(call_id, name, arguments, approved)
        if answered.refusal is not None:
            return answered.refusal
        refused = self.session.begin(call_id, name, arguments).refusal
        if refused is not None and not approved and isinstance(answer, dict) and answer.get("reason"):
            return _Refused(refused.kind, f"{refused.message} The human said: {answer['reason']}")
        return refused

    def route(self, state: MessagesState) -> str:
        """After the model: ``"tools"``, ``"remind"`` or the end."""
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
            return "tools"
        forced = self.forced_tool()
        if forced is not None and self._reminders_this_turn(state) < REMINDERS:
            return "remind"
        return END

    def remind(self, state: MessagesState) -> dict:
        """Tells the model that the workflow requires the forced tool now."""
        forced = self.forced_tool()
        return {"messages": [HumanMessage(content=reminder(forced or ""))]}

    @staticmethod
    def _reminders_this_turn(state: MessagesState) -> int:
        count = 0
        for message in reversed(state["messages"]):
            if isinstance(message, HumanMessage):
                if str(message.content).startswith(_REMINDER_PREFIX):
                    count += 1
                else:
                    break
        return count

    def graph(self, model: Any, checkpointer: Any = None) -> Any:
        """The tool-calling loop under the orchestration, compiled with ``checkpointer``.
        A template that gates tools needs one (a gated call pauses the graph with
        ``interrupt``): an in-memory one by default, and then each ``invoke`` names its
        thread (``{"configurable": {"thread_id": ...}}``)."""
        builder = StateGraph(MessagesState)
        builder.add_node("model", self.call_model(model))
        builder.add_node("tools", self.tools_node)
        builder.add_node("remind", self.remind)
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", self.route, {"tools": "tools", "remind": "remind", END: END})
        builder.add_edge("tools", "model")
        builder.add_edge("remind", "model")
        if checkpointer is None and self.session.machine.has_gates:
            checkpointer = InMemorySaver()
        return builder.compile(checkpointer=checkpointer)


class _Refused:
    """A rejection with the human's reason added, shaped as :class:`orch.Refusal`."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message
