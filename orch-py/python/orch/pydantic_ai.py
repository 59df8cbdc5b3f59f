"""orch for Pydantic AI: a capability that shows the model only the tools the workflow
allows now, forces the one a sequence expects, judges every call before it runs and
records it after.

.. code-block:: python

    from pydantic_ai import Agent
    from orch.pydantic_ai import Orchestrated

    workflow = Orchestrated(orch.load("template.json").session())
    agent = Agent(model, tools=[search, think, reflect], capabilities=[workflow],
                  retries={"tools": 5, "output": 3})
    workflow.on_user_message(question)
    result = await agent.run(question)

- **per-step tools** (``prepare_tools``): each model request offers only the tools the
  session allows now (Pydantic AI then refuses any other call itself, without running
  it, and tells the model which tools are available);
- **forced choice** (``tool_choice``, per step): when a sequence expects exactly one tool,
  the request names it; a model that answers with text anyway is told, through
  ``ModelRetry``, that the workflow requires that tool now;
- **refusals** (``ModelRetry``, before the tool runs): a call the workflow does not allow
  now is refused with orch's words, so the model can correct itself; nothing refused
  runs;
- **recording**: a call that ran is recorded. Calls of one run are judged, run and
  recorded one at a time, so several calls in one model turn are each judged against
  the state the previous one left;
- **approvals** (deferred tools): a call of a tool the template gates raises
  ``ApprovalRequired``, so the run ends with ``DeferredToolRequests`` (give the agent
  ``output_type=[str, DeferredToolRequests]``) and the session holds a question bound to
  that call's id; the next run with ``DeferredToolResults(approvals={call_id: True})``
  runs that exact call once, a denied one never runs, and the same approval given again
  (the run repeated, a retried request) runs nothing: the call ran already.

Every call's life — judged, asked, answered, run, recorded, delivered again — is orch's
run host (``Session.begin``, ``answer_call``, ``finish``); this module only maps Pydantic
AI's objects onto it.

Refusals and reminders count against the agent's retry budgets (``retries``): give a
misbehaving model room to correct itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry

from . import Session, reminder
from ._adapter import Workflow, _gated

__all__ = ["Orchestrated"]


@dataclass
class Orchestrated(Workflow, AbstractCapability[Any]):
    """One workflow run (an :class:`orch.Session`) as a Pydantic AI capability."""

    session: Session
    executed: list[str] = field(default_factory=list)

    async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
        allowed = set(self.session.allowed())
        return [d for d in tool_defs if d.name in allowed]

    def get_model_settings(self) -> Any:
        def settings(ctx: Any) -> dict[str, Any]:
            forced = self.forced_tool()
            return {"tool_choice": [forced]} if forced is not None else {}

        return settings

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
        forced = self.forced_tool()
        if forced is not None and not response.tool_calls:
            raise ModelRetry(reminder(forced))
        return response

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        name = call.tool_name
        arguments = json.dumps(call.args_as_dict())
        call_id = call.tool_call_id
        async with self._turns():
            if getattr(ctx, "tool_call_approved", False) and _gated(self.session, name, arguments):
                # The human's answer, as the next run carries it: it applies once, to the
                # question the session asked about this very call (a replayed run finds
                # it answered, and nothing runs twice).
                answered = self.session.answer_call(call_id, name, arguments, True)
                if answered.refusal is not None:
                    raise ModelRetry(answered.refusal.message)
            begun = self.session.begin(call_id, name, arguments)
            if begun.action == "ask":
                # A human decides: the run ends with this call deferred.
                raise ApprovalRequired(metadata={"orch": begun.refusal.message, "question": begun.question})
            if begun.refusal is not None:
                raise ModelRetry(begun.refusal.message)
            try:
                result = await handler(args)
            except BaseException:
                self.session.finish(call_id, name, False)
                raise
            self.session.finish(call_id, name)
            self.executed.append(name)
            return result
