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
  the state the previous one left.

Refusals and reminders count against the agent's retry budgets (``retries``): give a
misbehaving model room to correct itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelRetry

from . import Session

__all__ = ["Orchestrated"]


@dataclass
class Orchestrated(AbstractCapability[Any]):
    """One workflow run (an :class:`orch.Session`) as a Pydantic AI capability."""

    session: Session
    #: The tools that ran, in order (what the session recorded).
    executed: list[str] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    def on_user_message(self, text: str) -> None:
        """Tells the session about the user's message (message conditions)."""
        self.session.on_user_message(text)

    def forced_tool(self) -> Optional[str]:
        """The tool the next model request must call: the one a sequence expects, when it
        is the only tool allowed now."""
        allowed = self.session.allowed()
        if len(allowed) == 1 and self.session.expected is not None:
            return allowed[0]
        return None

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
            raise ModelRetry(
                f"The workflow requires calling `{forced}` now; call it instead of answering."
            )
        return response

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        async with self._lock:
            refusal = self.session.check(call.tool_name)
            if refusal is not None:
                raise ModelRetry(refusal.message)
            result = await handler(args)
            self.session.record(call.tool_name)
            self.executed.append(call.tool_name)
            return result
