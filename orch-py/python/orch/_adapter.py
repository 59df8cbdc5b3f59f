"""What every framework adapter shares: the session, what ran, the user's message, and
the tool a model call must be forced to."""

from __future__ import annotations

import asyncio
from typing import Optional

from ._orch import Session


def _gated(session: Session, tool: str, arguments: str) -> bool:
    """Does this exact call wait for a human's answer (a gated tool, no verdict on it)?
    An approval a framework hands over is orch's to apply only then; the framework's own
    approvals of tools orch does not gate are not orch's business."""
    refusal = session.check_call(tool, arguments)
    return refusal is not None and refusal.kind == "needs_approval"


class Workflow:
    """One workflow run (an :class:`orch.Session`) as an adapter drives it."""

    session: Session
    #: The tools that ran, in order (what the session recorded).
    executed: list[str]

    def _turns(self) -> asyncio.Lock:
        """The lock that admits, runs and records one call of the run at a time, made
        for the running event loop (an asyncio lock is bound to the loop it first waits
        in, and a run may span several ``asyncio.run`` calls: pause, then resume)."""
        loop = asyncio.get_running_loop()
        held = getattr(self, "_turn_lock", None)
        if held is None or held[0] is not loop:
            held = (loop, asyncio.Lock())
            self._turn_lock = held
        return held[1]

    def on_user_message(self, text: str) -> None:
        """Tells the session about the user's message (message conditions)."""
        self.session.on_user_message(text)

    def forced_tool(self) -> Optional[str]:
        """The tool the next model call must call: the one a sequence expects, when it is
        the only tool allowed now — and no human's question or rejection is held (the
        model must then be free to answer). The rule is orch's own
        (:attr:`orch.Session.forced_tool`), the same on every surface."""
        return self.session.forced_tool
