"""A scripted OpenAI-compatible chat-completions server on a loopback port, for testing
agents offline (orch's adapter tests and examples use it): it answers each request with
the next scripted reply — tool calls or text — and keeps every request body, so a test
can check what each model call offered, forced and was told.

.. code-block:: python

    from orch.testing import ScriptedOpenAI, call

    with ScriptedOpenAI([call("search", '{"q": "moons"}'), "Jupiter has 95 moons."]) as fake:
        client = AsyncOpenAI(base_url=fake.base_url, api_key="unused")
        ...
        fake.offered(0), fake.tool_choice(0), fake.tool_results(1)
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

Reply = Union[str, list[tuple[str, str]]]
"""A scripted reply: text, or the tool calls of one model turn (name, JSON arguments)."""

__all__ = ["Reply", "ScriptedOpenAI", "call", "calls"]


def call(name: str, arguments: str = "{}") -> list[tuple[str, str]]:
    """A reply that calls one tool."""
    return [(name, arguments)]


def calls(*pairs: tuple[str, str]) -> list[tuple[str, str]]:
    """A reply that calls several tools in one turn."""
    return list(pairs)


class ScriptedOpenAI:
    """The server. Use as a context manager; ``base_url`` is what a client needs."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(body)
                n = len(fake.requests)
                reply = fake.replies.pop(0) if fake.replies else "(the script has ended)"
                if isinstance(reply, str):
                    message = {"role": "assistant", "content": reply}
                    finish = "stop"
                else:
                    message = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{n}_{i}",
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }
                            for i, (name, arguments) in enumerate(reply)
                        ],
                    }
                    finish = "tool_calls"
                payload = json.dumps(
                    {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "fake",
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def offered(self, i: int) -> list[str]:
        """The tool names request ``i`` offered."""
        return [t["function"]["name"] for t in self.requests[i].get("tools", [])]

    def tool_choice(self, i: int) -> Any:
        """Request ``i``'s ``tool_choice`` (a tool's name when forced)."""
        choice = self.requests[i].get("tool_choice")
        if isinstance(choice, dict):
            return choice.get("function", {}).get("name")
        return choice

    def tool_results(self, i: int) -> list[str]:
        """The tool results request ``i`` sends back, in order."""
        return [
            m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in self.requests[i].get("messages", [])
            if m.get("role") == "tool"
        ]
