"""orch for the OpenAI Agents SDK (``openai-agents``): an agent whose model sees only the
tools the workflow allows now, is forced to call the one a sequence expects, and whose
tool calls are judged before they run.

.. code-block:: python

    from agents import Agent, Runner
    from orch.agents import Orchestration

    run = Orchestration(orch.load("template.json").session())
    agent = run.agent(Agent(name="researcher", tools=[search, think], model=model))
    run.on_user_message("research X")
    result = await Runner.run(agent, "research X", run_config=run.run_config())

What the orchestration does to the agent (a copy; the original is untouched):

- **per-step tools**: each function tool's ``is_enabled`` also asks the session, so a
  model call offers only the tools allowed now;
- **forced choice**: when a sequence expects exactly one tool, the model call's
  ``tool_choice`` names it; a model that answers with text anyway is asked once more,
  with a reminder that the workflow requires that tool now;
- **refusals**: a call is judged before it runs — out of order, not allowed in the step,
  a tool the step hides, an unknown tool, arguments that are not JSON — and refused with
  orch's words as the tool's result, so the model is told and can correct itself;
  nothing refused runs;
- **recording**: a call that ran is recorded, which advances sequences and steps. Calls
  of one run are admitted, run and recorded one at a time, so several calls in one model
  turn are each judged against the state the previous one left;
- **approvals**: a call of a tool the template gates (``approve``) asks the SDK for a
  human's approval (``needs_approval``): the run stops with an interruption, and once the
  application approves it (``state.approve(item)``, then ``Runner.run(agent, state)``)
  that exact call runs, once. A rejected call never runs.

The SDK reports a call of a tool the model was not offered as "not found"; the
``RunConfig`` from :meth:`Orchestration.run_config` sends orch's refusal instead.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import uuid
from typing import Any, Optional

from agents import Agent, FunctionTool, ModelSettings, RunConfig
from agents.models.interface import Model

from . import Session, reminder
from ._adapter import Workflow, _gated

__all__ = ["Orchestration", "OrchestratedModel"]

#: How often a model that answers with text while a tool is forced is asked again.
REMINDERS = 1


class Orchestration(Workflow):
    """One workflow run (an :class:`orch.Session`) applied to Agents SDK agents."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.executed: list[str] = []

    def agent(self, agent: Agent) -> Agent:
        """A copy of ``agent`` under the orchestration: its function tools gated and
        guarded, its model forced when one tool is expected (the model must be a
        :class:`agents.models.interface.Model` instance)."""
        if not isinstance(agent.model, Model):
            raise TypeError(
                "orch.agents: give the agent a Model instance (e.g. OpenAIChatCompletionsModel), "
                "not a model name, so the orchestration can force the expected tool"
            )
        tools = [self._tool(t) if isinstance(t, FunctionTool) else t for t in agent.tools]
        return agent.clone(tools=tools, model=OrchestratedModel(agent.model, self))

    def run_config(self, base: Optional[RunConfig] = None) -> RunConfig:
        """A ``RunConfig`` whose answer to a call of a tool the model was not offered
        (hidden now, or unknown) is orch's refusal, sent to the model."""
        base = base or RunConfig()

        def formatter(args: Any) -> Optional[str]:
            if getattr(args, "kind", None) != "tool_not_found":
                return None
            refusal = self.session.check(args.tool_name)
            if refusal is not None:
                return refusal.message
            return None

        return dataclasses.replace(
            base, tool_not_found_behavior="return_error_to_model", tool_error_formatter=formatter
        )

    def _tool(self, tool: FunctionTool) -> FunctionTool:
        name = tool.name
        original_enabled = tool.is_enabled
        original_needs_approval = tool.needs_approval
        original_invoke = tool.on_invoke_tool

        async def is_enabled(ctx: Any, agent: Any) -> bool:
            enabled = await _resolve(original_enabled, ctx, agent)
            return bool(enabled) and name in self.session.allowed()

        async def needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
            arguments = json.dumps(params)
            if _gated(self.session, name, arguments):
                # The session holds a question bound to this call's id; the SDK pauses
                # the run for a human (a call already asked about is not asked again).
                self.session.begin(call_id, name, arguments)
                return True
            return bool(await _resolve(original_needs_approval, ctx, params, call_id))

        async def on_invoke_tool(ctx: Any, arguments: str) -> Any:
            arguments = arguments if arguments.strip() else "{}"
            try:
                json.loads(arguments)
            except ValueError as e:
                return self.session.malformed_arguments(name, str(e)).message
            # A call without an id of the SDK's is a call of its own.
            call_id = getattr(ctx, "tool_call_id", None) or f"orch-{uuid.uuid4().hex}"
            async with self._turns():
                if _gated(self.session, name, arguments):
                    # The SDK runs a call it sent for approval only once a human approved
                    # it: the answer applies once, to the question about this very call
                    # (a run state resumed twice finds it answered: nothing runs twice).
                    answered = self.session.answer_call(call_id, name, arguments, True)
                    if answered.refusal is not None:
                        return answered.refusal.message
                # The SDK asks (``needs_approval``) before it invokes: nothing is asked here.
                begun = self.session.begin(call_id, name, arguments, ask=False)
                if begun.refusal is not None:
                    return begun.refusal.message
                try:
                    result = await original_invoke(ctx, arguments)
                except BaseException:
                    self.session.finish(call_id, name, False)
                    raise
                self.session.finish(call_id, name)
                self.executed.append(name)
                return result

        if not self.session.machine.has_gates:
            # The SDK asks for manual approval of arguments a callable policy cannot
            # inspect (invalid JSON): keep its own policy when the template gates nothing.
            return dataclasses.replace(tool, is_enabled=is_enabled, on_invoke_tool=on_invoke_tool)
        return dataclasses.replace(
            tool, is_enabled=is_enabled, needs_approval=needs_approval, on_invoke_tool=on_invoke_tool
        )


async def _resolve(value: Any, *args: Any) -> Any:
    """A bool, or what a (possibly async) callable returns for ``args``."""
    if callable(value):
        value = value(*args)
        if inspect.isawaitable(value):
            value = await value
    return value


class OrchestratedModel(Model):
    """A model whose calls are forced to the tool a sequence expects (``tool_choice``),
    and asked once more when it answers with text while a tool is forced."""

    def __init__(self, inner: Model, orchestration: Orchestration) -> None:
        self.inner = inner
        self.orchestration = orchestration

    def _settings(self, settings: ModelSettings) -> tuple[ModelSettings, Optional[str]]:
        forced = self.orchestration.forced_tool()
        if forced is None:
            return settings, None
        return dataclasses.replace(settings, tool_choice=forced), forced

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, *args, **kwargs):  # type: ignore[override]
        settings, forced = self._settings(model_settings)
        response = await self.inner.get_response(
            system_instructions, input, settings, tools, output_schema, handoffs, tracing, *args, **kwargs
        )
        for _ in range(REMINDERS):
            if forced is None or _calls_a_tool(response):
                break
            told = {
                "role": "user",
                "content": reminder(forced),
            }
            items = [input] if isinstance(input, str) else list(input)
            if isinstance(input, str):
                items = [{"role": "user", "content": input}]
            items = items + [_as_input(item) for item in response.output] + [told]
            response = await self.inner.get_response(
                system_instructions, items, settings, tools, output_schema, handoffs, tracing, *args, **kwargs
            )
        return response

    def stream_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, *args, **kwargs):  # type: ignore[override]
        settings, _ = self._settings(model_settings)
        return self.inner.stream_response(
            system_instructions, input, settings, tools, output_schema, handoffs, tracing, *args, **kwargs
        )

    async def close(self) -> None:
        await self.inner.close()


def _calls_a_tool(response: Any) -> bool:
    return any(getattr(item, "type", None) == "function_call" for item in response.output)


def _as_input(item: Any) -> Any:
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if dump is not None else item
